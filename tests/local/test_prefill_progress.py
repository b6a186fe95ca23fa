"""A long prefill shows progress: PrefillProgress(evaluated, total) at batch boundaries,
increasing, ending at the whole prompt, and the perf counters still true."""

from __future__ import annotations

import asyncio
import itertools
import threading

import pytest

from desktop.llm.events import PrefillProgress, TextDelta, Timing, Usage
from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
from desktop.local.client import WorkerClient
from desktop.local.engine import LocalEngine
from desktop.local.loading import LoadParams
from tests.helpers import gguf_files

pytestmark = pytest.mark.slow

LONG = "Summarise this. " + " ".join(f"w{i}" for i in range(120))  # ~370 tokens


def _request(text: str = LONG) -> ChatRequest:
    return ChatRequest("m", (ChatMessage("user", text),), Sampling(max_tokens=3, seed=1))


def test_engine_reports_prefill_progress_per_batch() -> None:
    engine = LocalEngine(progress_interval_s=0)  # every batch boundary
    params = LoadParams(str(gguf_files.starter()), n_ctx=1024, n_batch=32)
    events = list(engine.generate(params, _request(), threading.Event()))
    [usage] = [e for e in events if isinstance(e, Usage)]
    [timing] = [e for e in events if isinstance(e, Timing)]
    progress = [e for e in events if isinstance(e, PrefillProgress)]
    total = usage.prompt_tokens
    assert total > 32 * 5
    assert len(progress) >= 5
    assert all(p.total == total for p in progress)
    seen = [p.evaluated for p in progress]
    assert seen == sorted(set(seen)) and seen[-1] == total
    assert all(b - a <= 32 for a, b in itertools.pairwise(seen))
    # progress comes before the reply's text, and the prompt was evaluated once
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert events.index(progress[-1]) < first_text
    assert timing.prompt_eval_tokens == total - usage.cached_tokens
    # a short prompt (one batch) says nothing
    short = list(engine.generate(params, _request("Hi"), threading.Event()))
    assert not [e for e in short if isinstance(e, PrefillProgress)]
    engine.unload()


def test_worker_forwards_prefill_progress() -> None:
    client = WorkerClient()
    params = LoadParams(str(gguf_files.starter()), n_ctx=1024, n_batch=32)

    async def main() -> list:
        return [e async for e in client.stream(params, _request())]

    try:
        events = asyncio.run(main())
    finally:
        client.shutdown()
    [usage] = [e for e in events if isinstance(e, Usage)]
    progress = [e for e in events if isinstance(e, PrefillProgress)]
    assert progress and progress[-1] == PrefillProgress(usage.prompt_tokens, usage.prompt_tokens)
    seen = [p.evaluated for p in progress]
    assert seen == sorted(set(seen))
