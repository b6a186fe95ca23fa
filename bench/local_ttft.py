"""Local time to first token: a new window's first message with the worker started ahead and
the model loaded on focus, against a warm message and against no warm start, same prompt.

    .venv/bin/python bench/local_ttft.py [--model FILE] [--runs 3] [--settle 1.5]

Prints one JSON object. Each case runs in a new ``LocalRuntime`` (a new window):

* ``cold``: Send straight away: worker start + llama.cpp import + model load + prefill.
* ``new_window``: what ``desktop.ui.conversation.warm_local`` does: ``prestart()`` at first
  paint, the
  person reads for ``--settle`` seconds, clicks into the message box (``load()``), types for
  0.3 s, Send.
* ``warm``: in the same runtime, a prompt that shares no prefix, then the same prompt again:
  the same tokens evaluated as the first message, with the worker and the model warm, so the
  ratio is what starting up still costs. ``warm_shared_prefix_ttft_ms`` (reported, not in the
  ratio): the same prompt after one with the same system prompt, whose prefix is then reused.

``first_message_ratio`` = new_window / warm TTFT (issue 17 target: <= 1.3).

``switch_back_ratio``: a ~3,000-token conversation, another conversation, then back to the
first (its next turn): TTFT with the memory cache / TTFT with it off (a cold re-prefill;
target <= 0.25). ``after_restart_ratio``: a ~2,000-token system prompt, first message in a new
worker process (a restart) with the model loaded: TTFT with the saved state / with saving off
(target <= 0.3). ``decode_ratio``: decode tok/s with the caches on / off, medians of
alternating replies in one worker (target >= 0.97).
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


# shares no prefix with SYSTEM after the template's opening (``<|im_start|>system\n``, 3 tokens
# on the starter), which the warm-up after a load also leaves evaluated (engine.warm_up)
OTHER_SYSTEM = "Reply in one short line."


def _request(prompt: str, system: str = SYSTEM) -> ChatRequest:
    messages = (ChatMessage("system", system), ChatMessage("user", prompt))
    return ChatRequest("local", messages, Sampling(max_tokens=4, temperature=0.0, seed=1))


async def _ttft(
    runtime: LocalRuntime, params: LoadParams, prompt: str, system: str = SYSTEM
) -> float:
    start = time.perf_counter()
    first = None
    async for event in runtime.stream(params, _request(prompt, system)):
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
        # warm: the same prompt, the same tokens to evaluate (the prompt in between shares no
        # prefix with it, so nothing of it is cached); warm_shared: after a prompt with the
        # same system prompt, whose prefix llama.cpp then reuses (more than warm start gives)
        await _ttft(runtime, params, OTHER, OTHER_SYSTEM)
        warm = await _ttft(runtime, params, PROMPT)
        await _ttft(runtime, params, OTHER)
        warm_shared = await _ttft(runtime, params, PROMPT)
    finally:
        await runtime.aclose()
    return {"cold": cold, "new_window": new_window, "warm": warm, "warm_shared": warm_shared}


LONG = "The lighthouse keeper climbed the stairs each night and watched the dark sea. "
RULES = "Rule: answer in plain words, check each fact, and say when you are unsure. "


def _messages(*pairs: tuple[str, str]) -> tuple[ChatMessage, ...]:
    return tuple(ChatMessage(role, text) for role, text in pairs)  # type: ignore[arg-type]


async def _timed(runtime: LocalRuntime, params: LoadParams, messages, max_tokens=4):
    request = ChatRequest("local", messages, Sampling(max_tokens=max_tokens, temperature=0.0))
    start = time.perf_counter()
    first, text, timing, usage = None, "", None, None
    async for event in runtime.stream(params, request):
        if isinstance(event, TextDelta):
            first = first or time.perf_counter()
            text += event.text
        elif type(event).__name__ == "Timing" and getattr(event, "reported_by", None):
            timing = event
        elif type(event).__name__ == "Usage":
            usage = event
    assert first is not None
    return (first - start) * 1000, text, timing, usage


async def _switch_back(params: LoadParams, memory_mb: int) -> tuple[float, str | None]:
    runtime = LocalRuntime()
    runtime.set_cache_budgets(memory_mb, 0)
    try:
        x = _messages(("system", SYSTEM), ("user", LONG * 185 + " What did he watch?"))
        _, reply, _, _ = await _timed(runtime, params, x)
        await _timed(runtime, params, _messages(("user", "Name three rivers in Europe.")))
        x2 = (*x, *_messages(("assistant", reply), ("user", "And then?")))
        ttft, _, _, usage = await _timed(runtime, params, x2)
        return ttft, getattr(usage, "cache_source", None)
    finally:
        await runtime.aclose()


async def _after_restart(params: LoadParams, folder: str, saved_mb: int):
    system = RULES * 125
    msgs = _messages(("system", system), ("user", "Say hello."))
    first = LocalRuntime()  # before the restart: evaluates (and saves, when on)
    first.set_cache_folder(folder)
    first.set_cache_budgets(0, saved_mb)
    try:
        await _timed(first, params, msgs)
    finally:
        await first.aclose()
    runtime = LocalRuntime()  # after: a new worker, the model loaded ahead (warm start)
    runtime.set_cache_folder(folder)
    runtime.set_cache_budgets(0, saved_mb)
    try:
        await runtime.load(params)
        ttft, _, _, usage = await _timed(runtime, params, msgs)
        return ttft, getattr(usage, "cache_source", None), getattr(usage, "cached_tokens", None)
    finally:
        await runtime.aclose()


async def _decode(params: LoadParams, rounds: int = 5) -> tuple[list[float], list[float]]:
    """Decode tok/s with the caches on and off, alternating in one worker (the same process
    and model, so only the caches differ), ``rounds`` times each."""
    runtime = LocalRuntime()
    on: list[float] = []
    off: list[float] = []
    try:
        msgs = _messages(("user", "Write a long story about the sea."))
        await _timed(runtime, params, msgs, max_tokens=8)
        for r in range(rounds):  # ABBA: the first reply of a pair runs slower here
            pair = ((1024, on), (0, off)) if r % 2 == 0 else ((0, off), (1024, on))
            for budget, into in pair:
                runtime.set_cache_budgets(budget, 0)
                _, _, timing, _ = await _timed(runtime, params, msgs, max_tokens=96)
                into.append(timing.decode_tokens / (timing.decode_ms / 1000))
        return on, off
    finally:
        await runtime.aclose()


def caches(params: LoadParams, runs: int) -> dict[str, object]:
    import tempfile

    switch = [asyncio.run(_switch_back(params, 1024)) for _ in range(runs)]
    switch_cold = [asyncio.run(_switch_back(params, 0)) for _ in range(runs)]
    restart, restart_cold = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            restart.append(asyncio.run(_after_restart(params, folder, 2048)))
        with tempfile.TemporaryDirectory() as folder:
            restart_cold.append(asyncio.run(_after_restart(params, folder, 0)))
    dec_on, dec_off = asyncio.run(_decode(params, max(6, runs + runs % 2)))
    sw, sc = statistics.median(t for t, _ in switch), statistics.median(t for t, _ in switch_cold)
    rs = statistics.median(t for t, *_ in restart)
    rc = statistics.median(t for t, *_ in restart_cold)
    on, off = statistics.median(dec_on), statistics.median(dec_off)
    return {
        "switch_back_ratio": {
            "ratio": round(sw / sc, 3),
            "switch_back_ttft_ms": round(sw, 1),
            "cold_ttft_ms": round(sc, 1),
            "sources": [src for _, src in switch],
        },
        "after_restart_ratio": {
            "ratio": round(rs / rc, 3),
            "saved_state_ttft_ms": round(rs, 1),
            "cold_ttft_ms": round(rc, 1),
            "sources": [src for _, src, _ in restart],
            "cached_tokens": [n for *_, n in restart],
        },
        "decode_ratio": {
            "ratio": round(on / off, 3),
            "with_caches_tok_s": round(on, 1),
            "without_caches_tok_s": round(off, 1),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--settle", type=float, default=1.5)
    args = parser.parse_args()
    model = args.model or str(starter_model_path())
    load_before = os.getloadavg()[0]
    params = LoadParams(model, n_ctx=4096, n_threads=default_threads())
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
                    "warm_shared_prefix_ttft_ms": med["warm_shared"],
                },
                "cold_ttft_ms": med["cold"],
                "cold_vs_warm": round(med["cold"] / med["warm"], 2),
                **caches(params, args.runs),
                "per_run": [{k: round(v, 1) for k, v in r.items()} for r in runs],
                "load_avg": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
