"""An idle local model is unloaded when the person asked for it, and reloads on demand."""

from __future__ import annotations

import asyncio

import pytest

from desktop.chat.services import PREF_IDLE_UNLOAD_MIN, Services, idle_unload_seconds
from desktop.local.starter import STARTER_AGENT_NAME
from desktop.settings.paths import AppPaths
from tests.helpers.timers import FakeTimers

pytestmark = pytest.mark.slow


def test_idle_model_is_unloaded_after_the_setting_and_reloads_on_next_message(services):
    timers = FakeTimers()
    services.local.scheduler = timers.call_later
    services.local.set_idle_unload(300)
    agent = services.agents.by_name(STARTER_AGENT_NAME).with_changes(max_tokens=4, seed=1)
    conv = services.conversations.create(agent.id)

    async def settle() -> None:
        task = services.local._unload_task
        if task is not None:
            await task

    async def scenario():
        first = await services.chat.run(services.chat.begin(conv.id, agent, "Hi"))
        assert first.status == "complete" and services.local.worker.alive
        [timer] = timers.pending
        assert timer.when == 300
        timers.advance(299)  # not idle long enough yet
        await settle()
        assert services.local.worker.alive and timers.pending == [timer]
        # A request in between starts the wait over: the old timer can no longer unload.
        second = await services.chat.run(services.chat.begin(conv.id, agent, "More"))
        assert second.status == "complete" and timer.cancelled
        timers.advance(299)  # 598 s in, 299 s after the last reply
        await settle()
        assert services.local.worker.alive
        timers.advance(1)  # 300 s idle: it goes
        await settle()
        assert not services.local.worker.alive and services.local.state == "unloaded"
        again = await services.chat.run(services.chat.begin(conv.id, agent, "Again"))
        assert again.status == "complete" and again.stats.load_ms is not None

    asyncio.run(scenario())


def test_without_the_setting_the_model_stays_loaded(services):
    assert services.local.idle_unload_s is None
    timers = FakeTimers()
    services.local.scheduler = timers.call_later
    agent = services.agents.by_name(STARTER_AGENT_NAME).with_changes(max_tokens=2, seed=1)
    conv = services.conversations.create(agent.id)

    async def scenario():
        await services.chat.run(services.chat.begin(conv.id, agent, "Hi"))
        assert timers.pending == []  # no timer armed at all
        timers.advance(10**6)
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
