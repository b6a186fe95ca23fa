"""An idle local model is unloaded when the person asked for it, and reloads on demand."""

from __future__ import annotations

import asyncio

import pytest

from desktop.chat.services import PREF_IDLE_UNLOAD_MIN, Services, idle_unload_seconds
from desktop.local.starter import STARTER_AGENT_NAME
from desktop.settings.paths import AppPaths

pytestmark = pytest.mark.slow


def test_idle_model_is_unloaded_after_the_setting_and_reloads_on_next_message(services):
    services.local.set_idle_unload(0.3)
    agent = services.agents.by_name(STARTER_AGENT_NAME).with_changes(max_tokens=4, seed=1)
    conv = services.conversations.create(agent.id)

    async def scenario():
        first = await services.chat.run(services.chat.begin(conv.id, agent, "Hi"))
        assert first.status == "complete" and services.local.worker.alive
        await asyncio.sleep(0.2)  # not idle long enough yet
        assert services.local.worker.alive
        for _ in range(100):  # then it goes (bounded wait, not a timing assertion)
            await asyncio.sleep(0.1)
            if not services.local.worker.alive:
                break
        assert not services.local.worker.alive and services.local.state == "unloaded"
        again = await services.chat.run(services.chat.begin(conv.id, agent, "Again"))
        assert again.status == "complete" and again.stats["load_ms"] is not None

    asyncio.run(scenario())


def test_without_the_setting_the_model_stays_loaded(services):
    assert services.local.idle_unload_s is None
    agent = services.agents.by_name(STARTER_AGENT_NAME).with_changes(max_tokens=2, seed=1)
    conv = services.conversations.create(agent.id)

    async def scenario():
        await services.chat.run(services.chat.begin(conv.id, agent, "Hi"))
        await asyncio.sleep(0.5)
        assert services.local.worker.alive

    asyncio.run(scenario())


def test_setting_is_read_from_preferences(simi_home):
    first = Services.open(AppPaths.from_env())
    first.prefs.set(PREF_IDLE_UNLOAD_MIN, 15)
    assert idle_unload_seconds(first.prefs) == 900
    first.close()
    again = Services.open(AppPaths.from_env())
    assert again.local.idle_unload_s == 900
    again.close()
