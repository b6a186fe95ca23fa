"""Where the cached tokens came from, on real calls: the starter model through the llama.cpp
worker, the chat service and SQLite, nothing faked. Returning to a conversation after another
one records "memory" with its restore time; the next turn of the same conversation records
"context"; a long system prompt's state saved on disk is "saved" after a restart; and what the
caches hold is what Settings reads (``LocalRuntime.cache_sizes``), zero after Clear caches."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from desktop.chat.format import cache_text
from desktop.chat.timeline import build_timeline
from desktop.local.starter import STARTER_AGENT_NAME

pytestmark = pytest.mark.slow

STORY = "The lighthouse keeper climbed the stairs each night and watched the dark sea. " * 22
SYSTEM = "You are a careful assistant who answers in plain words and checks each fact. " * 40


def _ask(services: Any, conv_id: int, agent: Any, text: str) -> dict[str, Any]:
    result = asyncio.run(services.chat.run(services.chat.begin(conv_id, agent, text)))
    assert result.error is None, result.error
    row = services.stats.for_message(services.conversations.messages(conv_id)[-1].id)
    assert row is not None
    return row


def _open(simi_home: Any) -> Any:
    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths

    return Services.open(AppPaths.from_env())


def test_switching_back_records_the_memory_cache_and_the_next_turn_the_context(
    services: Any,
) -> None:
    agent = services.agents.by_name(STARTER_AGENT_NAME).with_changes(
        seed=1, temperature=0.0, max_tokens=8
    )
    a = services.conversations.create(agent.id).id
    b = services.conversations.create(agent.id).id
    first = _ask(services, a, agent, STORY + " What did he watch?")
    assert first["cache_source"] is None and first["cache_restore_ms"] is None
    _ask(services, b, agent, "Name three rivers in Europe and say where each one flows.")
    back = _ask(services, a, agent, "And then?")
    assert back["cache_source"] == "memory"
    assert back["cache_restore_ms"] is not None and back["cache_restore_ms"] >= 0
    assert back["cached_tokens"] >= first["prompt_tokens"] - 1
    timeline = build_timeline(back)
    assert timeline.fact("cache").value == cache_text(back)
    assert "restored from the memory cache in" in cache_text(back)
    again = _ask(services, a, agent, "Go on.")
    assert again["cache_source"] == "context" and again["cached_tokens"] > 0
    assert build_timeline(again).segment("restore") is None
    sizes = asyncio.run(services.local.cache_sizes())
    assert sizes.memory_states >= 1 and sizes.memory_bytes > 0


def test_a_long_system_prompt_is_saved_state_after_a_restart_and_clear_removes_it(
    simi_home: Any,
) -> None:
    services = _open(simi_home)
    try:
        starter = services.agents.by_name(STARTER_AGENT_NAME)
        agent = services.agents.update(
            starter.with_changes(system_prompt=SYSTEM, seed=1, temperature=0.0, max_tokens=8)
        )
        first = _ask(services, services.conversations.create(agent.id).id, agent, "Hello?")
        assert first["cache_source"] is None  # read now, and saved
        sizes = asyncio.run(services.local.cache_sizes())
        assert sizes.saved_files == 1 and sizes.saved_bytes > 0
    finally:
        services.close()
    services = _open(simi_home)  # a restart: a fresh worker, nothing in memory
    try:
        agent = services.agents.by_name(STARTER_AGENT_NAME)
        row = _ask(services, services.conversations.create(agent.id).id, agent, "Hi there?")
        assert row["cache_source"] == "saved"
        assert row["cache_restore_ms"] is not None and row["cache_restore_ms"] >= 0
        assert row["cached_tokens"] >= 512
        assert "from the saved system prompt (disk) in" in build_timeline(row).fact("cache").value
        assert build_timeline(row).segment("restore") is not None
        asyncio.run(services.local.clear_caches())  # Settings' Clear caches
        sizes = asyncio.run(services.local.cache_sizes())
        assert (sizes.saved_files, sizes.saved_bytes, sizes.memory_states) == (0, 0, 0)
    finally:
        services.close()
