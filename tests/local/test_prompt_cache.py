"""Evaluated prompts reused: a conversation returned to after another restores its state from
the memory cache, a long system prompt's state is saved to disk and restored after a restart,
and a saved state that does not match (any key part) or is damaged is never used."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from desktop.llm.events import TextDelta, Timing, Usage
from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
from desktop.local import prompt_cache
from desktop.local.engine import LocalEngine
from desktop.local.loading import LoadParams
from desktop.local.prompt_cache import SavedStates, state_key
from tests.helpers import gguf_files

pytestmark = pytest.mark.slow

SYSTEM = "You are a careful assistant who answers in plain words and checks each fact. " * 40
STORY = "The lighthouse keeper climbed the stairs each night and watched the dark sea. " * 22


class _Never:
    def is_set(self) -> bool:
        return False


def _ask(engine, params, messages, max_tokens=8):
    request = ChatRequest(
        "m",
        tuple(messages),
        Sampling(max_tokens=max_tokens, temperature=0.0, seed=1),
        cache_owner="7",
    )
    text, usage, timing = "", None, Timing()
    for event in engine.generate(params, request, _Never()):
        if isinstance(event, TextDelta):
            text += event.text
        elif isinstance(event, Usage):
            usage = event
        elif isinstance(event, Timing) and event.reported_by:
            timing = event
    engine.remember()  # as the worker does once the reply is sent
    return text, usage, timing


def _params(**changes) -> LoadParams:
    return LoadParams(
        **{"model_path": str(gguf_files.starter()), "n_ctx": 2048, "n_threads": 2, **changes}
    )


def test_returning_to_a_conversation_restores_it_from_memory_and_answers_the_same() -> None:
    params = _params()
    a1 = [ChatMessage("user", STORY + " What did he watch?")]
    b1 = [ChatMessage("user", "Name three rivers in Europe and say where each one flows.")]
    engine = LocalEngine()
    try:
        reply, first, _ = _ask(engine, params, a1)
        assert first.cache_source is None and first.cached_tokens == 0
        _ask(engine, params, b1)  # another conversation: the live context is now B
        a2 = [*a1, ChatMessage("assistant", reply), ChatMessage("user", "And then?")]
        back, usage, timing = _ask(engine, params, a2)
        assert usage.cache_source == "memory"
        assert usage.cached_tokens >= first.prompt_tokens - 1  # A's whole prompt, not again
        assert timing.cache_restore_ms is not None and timing.cache_restore_ms >= 0
        assert len(engine.reuse.memory) == 1  # A, now with its second turn (B is too short)
    finally:
        engine.unload()
    assert back.strip()


def test_a_restored_state_predicts_what_a_fresh_evaluation_predicts() -> None:
    """The state put back is the prompt's: the next token's logits match evaluating the whole
    prompt from nothing (up to batch-split rounding), after another prompt was in between."""
    import llama_cpp
    import numpy as np

    def last_logits(llm):
        ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).copy()

    path = str(gguf_files.starter())
    llm = llama_cpp.Llama(path, n_ctx=256, n_threads=2, verbose=False)
    fresh = llama_cpp.Llama(path, n_ctx=256, n_threads=2, verbose=False)
    try:
        tokens = llm.tokenize(STORY[:240].encode())
        llm.eval(tokens)
        state = prompt_cache.capture(llm)
        llm.eval(llm.tokenize(b" Rivers, seas and mountains.", add_bos=False))
        assert prompt_cache.restore(llm, tokens, state) and llm.n_tokens == len(tokens)
        nxt = llm.tokenize(b" And", add_bos=False)
        llm.eval(nxt)
        fresh.eval(tokens + nxt)
        a, b = last_logits(llm), last_logits(fresh)
        assert a.argmax() == b.argmax() and np.abs(a - b).max() < 1.0
        assert not prompt_cache.restore(llm, tokens, b"\0" * 64)  # garbage is refused
        assert llm.n_tokens == 0
    finally:
        llm.close()
        fresh.close()


def test_the_memory_budget_bounds_the_cache_and_zero_turns_it_off() -> None:
    params = _params()
    engine = LocalEngine()
    try:
        engine.reuse.configure(None, 0, None)  # Off
        _ask(engine, params, [ChatMessage("user", STORY)])
        _ask(engine, params, [ChatMessage("user", "Hello there.")])
        assert len(engine.reuse.memory) == 0
        *_, usage = _ask(engine, params, [ChatMessage("user", STORY + " Again?")])[:2]
        assert usage.cache_source != "memory"
        engine.reuse.configure(None, 1, None)  # 1 MB: one state of this size does not fit
        _ask(engine, params, [ChatMessage("user", STORY + " More?")])
        assert engine.reuse.memory.size <= 1024 * 1024
    finally:
        engine.unload()


def _system_request(system: str = SYSTEM):
    return [ChatMessage("system", system), ChatMessage("user", "Say hello.")]


SHORT_SYSTEM = "You are a careful assistant who answers in plain words. " * 8


@pytest.fixture
def short_prompts_saved(monkeypatch):
    """A threshold of 64 tokens instead of 512, so the invalidation cases evaluate short
    system prompts (the rule is the same; only the length it applies from differs)."""
    from desktop.local import engine, reuse

    monkeypatch.setattr(engine, "SAVE_MIN_TOKENS", 64)
    monkeypatch.setattr(reuse, "SAVE_MIN_TOKENS", 64)


def test_a_long_system_prompt_is_saved_and_restored_after_a_restart(tmp_path: Path) -> None:
    params = _params()
    folder = tmp_path / "states"
    first = LocalEngine()
    first.reuse.configure(str(folder), None, 64)
    try:
        cold_reply, usage, _ = _ask(first, params, _system_request())
    finally:
        first.unload()
    [saved] = list(folder.glob("*.kv"))
    assert usage.cache_source is None
    restarted = LocalEngine()  # a new worker process after a restart: nothing in memory
    restarted.reuse.configure(str(folder), None, 64)
    try:
        reply, usage, timing = _ask(restarted, params, _system_request())
    finally:
        restarted.unload()
    assert usage.cache_source == "saved" and usage.cached_tokens >= prompt_cache.SAVE_MIN_TOKENS
    assert timing.cache_restore_ms is not None
    assert reply.strip() and cold_reply.strip()
    assert SavedStates(folder, 1 << 30).forget("7") == 1 and not saved.exists()


def test_a_state_saved_with_other_load_parameters_is_not_used(
    tmp_path, short_prompts_saved
) -> None:
    folder = tmp_path / "states"
    changes = ({}, {"n_ctx": 1024}, {"flash_attn": True}, {"kv_type": "q8_0", "flash_attn": True})
    for n, change in enumerate(changes, start=1):
        engine = LocalEngine()
        engine.reuse.configure(str(folder), None, 64)
        try:
            _, usage, _ = _ask(engine, _params(**change), _system_request(SHORT_SYSTEM), 1)
        finally:
            engine.unload()
        assert usage.cache_source is None, change  # evaluated again, not restored
        assert len(list(folder.glob("*.kv"))) == n  # and saved under its own key


def test_every_key_part_changes_the_file_and_a_mismatched_header_is_refused(tmp_path) -> None:
    parts = {
        "model": "/m/a.gguf",
        "size": 10,
        "mtime_ns": 5,
        "n_ctx": 2048,
        "kv_type": "f16",
        "flash_attn": False,
        "llama_cpp": "0.3.36 CPU",
    }
    tokens = [1, 2, 3]
    base = state_key(parts, tokens)
    changed = {
        "model": "/m/b.gguf",
        "size": 11,
        "mtime_ns": 6,
        "n_ctx": 4096,
        "kv_type": "q8_0",
        "flash_attn": True,
        "llama_cpp": "0.3.37 CUDA",
    }
    for key, value in changed.items():
        assert state_key({**parts, key: value}, tokens) != base, key
    assert state_key(parts, [1, 2, 4]) != base


def test_a_damaged_or_foreign_saved_state_is_removed_with_a_log_line_and_the_reply_comes(
    tmp_path, caplog, short_prompts_saved
) -> None:
    model = tmp_path / "starter-copy.gguf"  # its own file: the last step changes its date
    shutil.copyfile(gguf_files.starter(), model)
    params = _params(model_path=str(model))
    folder = tmp_path / "states"
    engine = LocalEngine()
    engine.reuse.configure(str(folder), None, 64)
    try:
        good, *_ = _ask(engine, params, _system_request(SHORT_SYSTEM), max_tokens=4)
    finally:
        engine.unload()
    [path] = list(folder.glob("*.kv"))
    for damage in ("truncate", "garbage", "model_changed"):
        if damage == "truncate":
            path.write_bytes(path.read_bytes()[:-1000])
        elif damage == "garbage":
            path.write_bytes(b"SIMIKV1\n" + os.urandom(4000))
        else:  # the model file changed since (its identity is part of the key): a miss
            st = model.stat()
            os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 2 * 10**9))
        engine = LocalEngine()
        engine.reuse.configure(str(folder), None, 64)
        caplog.clear()
        try:
            with caplog.at_level(logging.WARNING, logger="simi.local.cache"):
                reply, usage, _ = _ask(engine, params, _system_request(SHORT_SYSTEM), max_tokens=4)
        finally:
            engine.unload()
        assert reply == good
        assert usage.cache_source is None  # nothing restored
        if damage != "model_changed":
            assert "removed the saved prompt state" in caplog.text
            [path] = list(folder.glob("*.kv"))  # saved again, whole
        else:  # saved under the changed model's key beside the old one
            [path] = [p for p in folder.glob("*.kv") if p != path]


def _generate(*requests: ChatRequest) -> list[tuple]:
    return [("generate", n, _params(), r) for n, r in enumerate(requests, 1)]


def _worker_messages(*sent: tuple, idle_s: float = 3.0) -> list:
    """Run a real worker process with every message of ``sent`` queued in its pipe at once
    (each one is waiting when the one before it ends), and return what it said until
    ``idle_s`` after the last request's "done"."""
    import multiprocessing

    from desktop.local.worker import worker_main

    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=True)
    process = ctx.Process(
        target=worker_main, args=(child, ctx.RawValue("b", 0), ctx.RawValue("i", 0)), daemon=True
    )
    process.start()
    child.close()
    messages: list = []
    try:
        for message in sent:
            parent.send(message)
        last = max(m[1] for m in sent if m[0] == "generate")
        while not any(m[:2] == ("done", last) for m in messages):
            assert parent.poll(120), messages[-5:]
            messages.append(parent.recv())
            assert messages[-1][0] != "error", messages[-1]
        while parent.poll(idle_s):
            messages.append(parent.recv())
    finally:
        parent.send(("shutdown",))
        process.join(10)
    return messages


def _states_kept(messages: list, after: tuple, before: tuple | None = None) -> list[int]:
    """The number of kept states each "cache_info" between two messages said."""
    start = messages.index(after)
    end = messages.index(before) if before is not None else len(messages)
    return [m[2] for m in messages[start:end] if m[0] == "cache_info"]


def test_a_request_already_waiting_is_not_held_up_by_a_copy_of_the_context() -> None:
    """After a reply the worker copies its context into the memory cache only once nothing
    waits (25-28 ms of TTFT on an H200 for a 600-token context, more on a CPU). The next
    turn of the same conversation, queued behind the reply, needs no copy at all: it goes on
    from the live context, and only its own context is kept, once the worker is idle."""
    a1 = [ChatMessage("user", STORY + " What did he watch?")]
    a2 = [*a1, ChatMessage("assistant", "The sea."), ChatMessage("user", "And then?")]
    sampling = Sampling(max_tokens=8, temperature=0.0, seed=1)
    messages = _worker_messages(
        *_generate(ChatRequest("m", tuple(a1), sampling), ChatRequest("m", tuple(a2), sampling))
    )
    assert _states_kept(messages, ("done", 1), ("accepted", 2)) == [0]  # no copy between
    assert _states_kept(messages, ("accepted", 2), ("done", 2)) == []
    assert _states_kept(messages, ("done", 2)) == [0, 1]  # the reply's, then the idle copy
    usage = [m[2] for m in messages if m[0] == "event" and m[1] == 2 and isinstance(m[2], Usage)]
    assert usage[0].cache_source == "context" and usage[0].cached_tokens > 200


def test_a_waiting_request_for_another_conversation_keeps_the_first_before_replacing_it() -> None:
    """Queued behind a reply, a request for another conversation would replace the live
    context: the first conversation is kept just before, as the idle worker would have, so
    going back to it later restores it from memory."""
    a1 = [ChatMessage("user", STORY + " What did he watch?")]
    b1 = [ChatMessage("user", "Name three rivers in Europe.")]
    a2 = [*a1, ChatMessage("assistant", "The sea."), ChatMessage("user", "And then?")]
    sampling = Sampling(max_tokens=8, temperature=0.0, seed=1)
    messages = _worker_messages(
        *_generate(*(ChatRequest("m", tuple(m), sampling) for m in (a1, b1, a2)))
    )
    assert _states_kept(messages, ("done", 1), ("accepted", 2)) == [0]
    assert _states_kept(messages, ("done", 2), ("accepted", 3)) == [1]  # A, kept before B
    usage = [m[2] for m in messages if m[0] == "event" and m[1] == 3 and isinstance(m[2], Usage)]
    assert usage[0].cache_source == "memory"


def test_clear_caches_between_a_reply_and_the_next_request_keeps_nothing_of_it() -> None:
    """Settings' Clear caches while the last context was not kept yet: the request after it,
    for another conversation, does not keep that context either."""
    a1 = [ChatMessage("user", STORY + " What did he watch?")]
    b1 = [ChatMessage("user", "Name three rivers in Europe.")]
    sampling = Sampling(max_tokens=8, temperature=0.0, seed=1)
    first, second = _generate(*(ChatRequest("m", tuple(m), sampling) for m in (a1, b1)))
    messages = _worker_messages(first, ("cache_clear",), second)
    assert ("cache_info", 0, 0) in messages[messages.index(("done", 1)) :]
    states = _states_kept(messages, ("done", 2))  # after B's reply, and after the idle copy
    assert states and not any(states)  # B is too short to keep; A was cleared, not kept
