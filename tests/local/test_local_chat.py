"""Local turns through the worker process: templates, prompt cache, finish reasons."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from desktop.llm.events import RunInfo
from desktop.local.catalog import read_model_info
from desktop.local.loading import CHATML_TEMPLATE_NOTE
from desktop.local.starter import STARTER_AGENT_NAME
from tests.helpers import gguf_files

pytestmark = pytest.mark.slow


def _run(services, conv_id, agent, text, events=None):
    turn = services.chat.begin(conv_id, agent, text)
    return asyncio.run(
        services.chat.run(turn, on_event=events.append if events is not None else None)
    )


def test_model_without_chat_template_uses_chatml_and_says_so(services, tmp_path: Path) -> None:
    path = gguf_files.rewrite_starter(
        tmp_path / "no-template.gguf", drop_kv=("tokenizer.chat_template",)
    )
    assert read_model_info(path).template_note == "no chat template: using ChatML"
    agent = gguf_files.short_local_agent(services, "NoTmpl", path)
    conv = services.conversations.create(agent.id)
    events: list = []
    result = _run(services, conv.id, agent, "Say hello.", events)
    assert result.status == "complete" and result.text.strip()
    [info] = [e for e in events if isinstance(e, RunInfo)]
    assert info.notice == CHATML_TEMPLATE_NOTE
    assert result.notice == CHATML_TEMPLATE_NOTE  # the turn carries it to the window
    # the starter has a template: no notice
    starter = services.agents.by_name(STARTER_AGENT_NAME).with_changes(max_tokens=2)
    events.clear()
    _run(services, services.conversations.create(starter.id).id, starter, "Hi", events)
    assert [e.notice for e in events if isinstance(e, RunInfo)] == [None]


def test_prompt_cache_is_reused_across_turns_in_the_worker(services) -> None:
    agent = services.agents.by_name(STARTER_AGENT_NAME).with_changes(max_tokens=8, seed=1)
    conv = services.conversations.create(agent.id)
    assert not services.local.worker.alive
    first = _run(services, conv.id, agent, "Hi!").stats
    pid = services.local.worker.pid
    second = _run(services, conv.id, agent, "And again?")
    assert services.local.worker.pid == pid  # same worker process, model kept loaded
    # The first call paid for starting the worker and loading the model; the timeline
    # draws those from these figures. The second paid for neither.
    assert first.worker_start_ms > 0 and first.load_ms > 0
    assert first.timing_source == "llama.cpp" and first.prefill_source == "measured"
    # the context's cells x 30 layers x 3 KV heads x 64 dims x 2 (K and V) x f16 bytes
    assert first.kv_cache_bytes == first.n_ctx * 30 * 3 * 64 * 2 * 2
    stats = second.stats
    assert stats.worker_start_ms is None
    assert stats.cached_tokens > 10 and stats.load_ms is None
    assert stats.prompt_eval_tokens == stats.prompt_tokens - stats.cached_tokens


def test_stop_string_finishes_with_stop(services) -> None:
    agent = services.agents.by_name(STARTER_AGENT_NAME).with_changes(
        max_tokens=64, seed=1, stop=(" ",)
    )
    conv = services.conversations.create(agent.id)
    result = _run(services, conv.id, agent, "Write a sentence about the sea.")
    assert result.stats.finish_reason == "stop" and " " not in result.text.strip()
