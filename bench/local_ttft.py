"""Local time to first token: a new window's first message with the worker started ahead and
the model loaded on focus, against a warm message and against no warm start, same prompt.

    .venv/bin/python bench/local_ttft.py [--model FILE] [--runs 3] [--settle 1.5]

Prints one JSON object. Each case runs in a new ``LocalRuntime`` (a new window):

* ``cold``: Send straight away: worker start + llama.cpp import + model load + prefill.
* ``new_window``: what ``desktop.ui.warm_local`` does: ``prestart()`` at first paint, the
  person reads for ``--settle`` seconds, clicks into the message box (``load()``), types for
  0.3 s, Send.
* ``warm``: in the same runtime, another prompt, then the same prompt again (the KV cache holds
  the other prompt, so both pay the same prefill beyond the shared system prompt).

``first_message_ratio`` = new_window / warm TTFT (issue 17 target: <= 1.3). The keys
``switch_back_ratio`` and ``after_restart_ratio`` (prompt-state caches) are not measured yet.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from desktop.llm.events import TextDelta
from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
from desktop.local.loading import LoadParams, default_threads
from desktop.local.provider import LocalRuntime
from desktop.local.starter import starter_model_path

SYSTEM = "You are a helpful assistant. Answer clearly and briefly."
PROMPT = "Explain in two sentences why the sky is blue."
OTHER = "Name three rivers in Europe."


def _request(prompt: str) -> ChatRequest:
    messages = (ChatMessage("system", SYSTEM), ChatMessage("user", prompt))
    return ChatRequest("local", messages, Sampling(max_tokens=4, temperature=0.0, seed=1))


async def _ttft(runtime: LocalRuntime, params: LoadParams, prompt: str) -> float:
    start = time.perf_counter()
    first = None
    async for event in runtime.stream(params, _request(prompt)):
        if first is None and isinstance(event, TextDelta):
            first = time.perf_counter()
    assert first is not None, "no text"
    return (first - start) * 1000


async def _case(params: LoadParams, settle: float) -> dict[str, float]:
    cold_rt = LocalRuntime()
    try:
        cold = await _ttft(cold_rt, params, PROMPT)
    finally:
        await cold_rt.aclose()
    runtime = LocalRuntime()
    try:
        await runtime.prestart()
        await asyncio.sleep(settle)
        await runtime.load(params)
        await asyncio.sleep(0.3)
        new_window = await _ttft(runtime, params, PROMPT)
        await _ttft(runtime, params, OTHER)
        warm = await _ttft(runtime, params, PROMPT)
    finally:
        await runtime.aclose()
    return {"cold": cold, "new_window": new_window, "warm": warm}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--settle", type=float, default=1.5)
    args = parser.parse_args()
    model = args.model or str(starter_model_path())
    params = LoadParams(model, n_ctx=2048, n_threads=default_threads())
    load_before = os.getloadavg()[0]
    runs = [asyncio.run(_case(params, args.settle)) for _ in range(args.runs)]
    med = {k: round(statistics.median(r[k] for r in runs), 1) for k in runs[0]}
    print(
        json.dumps(
            {
                "model": Path(model).name,
                "runs": args.runs,
                "first_message_ratio": {
                    "ratio": round(med["new_window"] / med["warm"], 3),
                    "new_window_ttft_ms": med["new_window"],
                    "warm_ttft_ms": med["warm"],
                },
                "cold_ttft_ms": med["cold"],
                "cold_vs_warm": round(med["cold"] / med["warm"], 2),
                "per_run": [{k: round(v, 1) for k, v in r.items()} for r in runs],
                "load_avg": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
