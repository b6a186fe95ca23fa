"""The caches seen from the app: sizes after a reply, Clear empties them, deleting an agent
deletes its saved system-prompt state (real worker process, real files)."""

from __future__ import annotations

import asyncio

import pytest

from desktop.local.starter import STARTER_AGENT_NAME

pytestmark = pytest.mark.slow

SYSTEM = "You are a careful assistant who answers in plain words and checks each fact. " * 40


def test_sizes_clear_and_an_agents_saved_state_goes_with_it(services) -> None:
    starter = services.agents.by_name(STARTER_AGENT_NAME)
    twin = services.agents.clone(starter, "Long prompt")
    agent = services.agents.update(twin.with_changes(system_prompt=SYSTEM, max_tokens=4, seed=1))
    local = services.local
    folder = services.paths.prompt_states_dir

    async def scenario():
        conv = services.conversations.create(agent.id)
        turn = await services.chat.run(services.chat.begin(conv.id, agent, "Say hello."))
        assert turn.status == "complete"
        for _ in range(100):  # the worker says what it keeps once the reply is sent
            sizes = await local.cache_sizes()
            if sizes.memory_states:
                break
            await asyncio.sleep(0.05)
        return sizes

    sizes = asyncio.run(scenario())
    assert sizes.memory_states == 1 and sizes.memory_bytes > 1_000_000
    assert sizes.saved_files == 1 and sizes.saved_bytes > 1_000_000
    assert len(list(folder.glob("*.kv"))) == 1

    asyncio.run(local.clear_caches())
    cleared = asyncio.run(local.cache_sizes())
    assert (cleared.memory_bytes, cleared.saved_files) == (0, 0)

    # saved again by the next reply that evaluates it (after an unload), then deleted with
    # the agent
    async def again():
        await local.unload()
        conv = services.conversations.create(agent.id)
        await services.chat.run(services.chat.begin(conv.id, agent, "Say hello."))

    asyncio.run(again())
    assert len(list(folder.glob("*.kv"))) == 1
    services.agents.delete(agent)
    assert list(folder.glob("*.kv")) == []
