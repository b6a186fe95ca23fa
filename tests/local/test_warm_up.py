"""Warming a model up after loading it ahead (``LocalEngine.warm_up``) pays what a first reply
would, and changes nothing else: the same seed gives the same reply with and without it, it
leaves only the chat template's opening in the live context (nothing of its throwaway prompt,
nothing in the prompt caches), a warm-up told to stop leaves an empty context, and a request
sent while a model loads ahead waits for that worker instead of starting another."""

from __future__ import annotations

import asyncio

import pytest

from desktop.llm.events import TextDelta, Usage
from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
from desktop.local.engine import LocalEngine, template_opening
from desktop.local.loading import LoadParams
from desktop.local.provider import LocalRuntime
from tests.helpers import gguf_files

pytestmark = pytest.mark.slow

SYSTEM = ChatMessage("system", "You are a helpful assistant. Answer clearly and briefly.")
ASK = ChatMessage("user", "Explain in two sentences why the sky is blue.")
RIVERS = ChatMessage("user", "Name three rivers in Europe.")


class _Never:
    def is_set(self) -> bool:
        return False


def _params() -> LoadParams:
    return LoadParams(str(gguf_files.starter()), n_ctx=1024, n_threads=2)


def _ask(
    engine: LocalEngine, messages: tuple[ChatMessage, ...], temperature: float, seed: int
) -> tuple[str, Usage]:
    request = ChatRequest(
        "m", tuple(messages), Sampling(max_tokens=24, temperature=temperature, seed=seed)
    )
    text, usage = "", None
    for event in engine.generate(_params(), request, _Never()):
        if isinstance(event, TextDelta):
            text += event.text
        elif isinstance(event, Usage):
            usage = event
    engine.remember()
    assert usage is not None
    return text, usage


def _kv_end(engine: LocalEngine) -> int:
    """The last position sequence 0 holds in the KV cache (-1: empty)."""
    import llama_cpp

    assert engine.loaded is not None
    memory = llama_cpp.llama_get_memory(engine.loaded.llm._ctx.ctx)
    return int(llama_cpp.llama_memory_seq_pos_max(memory, 0))


CONVERSATIONS = [
    ((SYSTEM, ASK), 0.0, 1),  # greedy
    ((SYSTEM, ASK), 0.8, 7),  # sampled: the seed decides
    ((RIVERS,), 0.8, 3),  # no system message (the template adds its own)
]


def test_a_warmed_up_model_gives_the_same_replies_as_a_plain_load() -> None:
    warm, plain = LocalEngine(), LocalEngine()
    try:
        warm.preload(_params())
        plain.ensure_loaded(_params())
        for messages, temperature, seed in CONVERSATIONS:
            got, usage = _ask(warm, messages, temperature, seed)
            want, _ = _ask(plain, messages, temperature, seed)
            assert got.strip() and got == want, (messages, temperature)
            if messages[0] is SYSTEM and usage.cached_tokens:
                assert usage.cache_source == "context"  # the template's opening, reused
        # the first reply after the warm-up reused the opening and evaluated only the rest
        warm.unload()
        model = warm.preload(_params())
        _text, usage = _ask(warm, (SYSTEM, ASK), 0.0, 1)
        assert usage.cached_tokens == len(template_opening(model)) > 0
    finally:
        warm.unload()
        plain.unload()


def test_the_warm_up_leaves_only_the_template_opening_behind() -> None:
    engine = LocalEngine()
    try:
        model = engine.preload(_params())
        llm = model.llm
        opening = template_opening(model)
        # ChatML (the starter): BOS is <|im_start|>, then "system" and the line break
        assert llm.detokenize(opening, special=True) == b"<|im_start|>system\n"
        assert llm.n_tokens == len(opening)
        assert [int(t) for t in llm.input_ids[: llm.n_tokens]] == opening
        assert _kv_end(engine) == len(opening) - 1  # nothing of the throwaway prompt
        assert len(engine.reuse.memory) == 0 and engine.reuse.memory.size == 0
        assert engine._abort_cb is None  # llama.cpp no longer calls back into Python
        assert not engine.lock.locked()
    finally:
        engine.unload()


@pytest.mark.parametrize("after", [0, 1, 40])  # before it starts, at once, mid-batch
def test_a_warm_up_told_to_stop_leaves_an_empty_context_and_the_same_reply(after: int) -> None:
    asked = [0]

    def stop() -> bool:
        asked[0] += 1
        return asked[0] > after

    engine, plain = LocalEngine(), LocalEngine()
    try:
        engine.preload(_params(), stop=stop)
        assert asked[0] > after  # it did stop
        assert engine.loaded is not None and engine.loaded.llm.n_tokens == 0
        assert _kv_end(engine) == -1
        assert engine._abort_cb is None
        plain.ensure_loaded(_params())
        messages, temperature, seed = CONVERSATIONS[1]
        assert (
            _ask(engine, messages, temperature, seed)[0]
            == _ask(plain, messages, temperature, seed)[0]
        )
    finally:
        engine.unload()
        plain.unload()


def test_a_request_during_a_load_ahead_waits_for_that_worker() -> None:
    """Send pressed while the composer's load-ahead still runs: the request takes the worker
    that is loading (its warm-up cut short), and no second worker starts for it."""
    params = _params()
    request = ChatRequest("m", (SYSTEM, ASK), Sampling(max_tokens=8, temperature=0.0, seed=1))

    async def scenario():
        runtime = LocalRuntime()
        try:
            await runtime.prestart()
            pid = runtime.worker.pid
            loading = asyncio.ensure_future(runtime.load(params))
            while runtime.worker.loading_ahead is None:  # the load message is on its way
                await asyncio.sleep(0.005)
            text = ""
            async for event in runtime.stream(params, request):
                if isinstance(event, TextDelta):
                    text += event.text
            assert await loading
            return text, len(runtime.workers), runtime.worker.pid == pid
        finally:
            await runtime.aclose()

    text, workers, same = asyncio.run(scenario())
    assert text.strip() and workers == 1 and same
