"""A local model made ready ahead of the first message: the worker started early (llama.cpp
imported without taking priority from anything), the model loaded before Send."""

from __future__ import annotations

import asyncio
import os

import pytest

from desktop.chat.kinds import load_params_for
from desktop.local.catalog import ModelFileError
from desktop.local.loading import LoadParams
from desktop.local.starter import STARTER_AGENT_NAME

pytestmark = pytest.mark.slow


def test_prestart_then_load_then_the_first_reply_pays_neither(services) -> None:
    starter = services.agents.update(
        services.agents.by_name(STARTER_AGENT_NAME).with_changes(max_tokens=8, seed=1)
    )
    runtime = services.local

    async def scenario():
        assert await runtime.prestart()  # the process, no model
        assert runtime.worker.alive and runtime.state == "unloaded"
        assert runtime.loaded_params is None
        pid = runtime.worker.pid
        # its main thread (llama.cpp's compute threads are made by it) kept normal priority
        assert os.getpriority(os.PRIO_PROCESS, pid) == os.getpriority(os.PRIO_PROCESS, 0)
        assert not await runtime.prestart()  # already running: nothing to do

        params = load_params_for(starter)
        assert await runtime.load(params)
        assert runtime.state == "ready" and runtime.loaded_params == params
        assert runtime.worker.pid == pid  # loaded in the worker started ahead

        conv = services.conversations.create(starter.id)
        turn = services.chat.begin(conv.id, starter, "Say hi.")
        return await services.chat.run(turn)

    result = asyncio.run(scenario())
    assert result.status == "complete" and result.text.strip()
    # neither a worker start nor a model load in the first reply's stats
    assert not result.stats.worker_start_ms and not result.stats.load_ms


def test_loading_a_bad_file_says_what_is_wrong_and_leaves_nothing_loaded(
    services, tmp_path
) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 60)

    async def scenario():
        with pytest.raises(ModelFileError) as info:
            await services.local.load(LoadParams(str(bad)))
        return info.value

    error = asyncio.run(scenario())
    assert "broken.gguf" in error.user_message
    assert services.local.loaded_params is None and not services.local.worker.alive
