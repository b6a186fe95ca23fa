"""The worker protocol cannot cross wires: answers and death notices are matched by worker
generation and request id, so a killed worker's last words never fail the next request or
orphan the process that serves it."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal

import pytest

from desktop.llm.errors import LocalModelError
from desktop.llm.events import Finished, TextDelta
from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
from desktop.local.client import WorkerClient
from desktop.local.loading import LoadParams
from tests.helpers import gguf_files

pytestmark = pytest.mark.slow

ROUNDS = 20


def _request(text: str, max_tokens: int) -> ChatRequest:
    return ChatRequest("m", (ChatMessage("user", text),), Sampling(max_tokens=max_tokens, seed=3))


def _live_workers() -> list[multiprocessing.process.BaseProcess]:
    return [p for p in multiprocessing.active_children() if p.name == "simi-llama-worker"]


def _child_pids() -> set[int]:
    """Live (not zombie) spawned children of this process (multiprocessing's resource tracker
    aside), from /proc."""
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) != me or fields[0] == "Z":
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if b"spawn_main" in cmdline:
            found.add(int(entry))
    return found


def test_kill_and_restart_twenty_times_under_load_leaves_one_worker() -> None:
    client = WorkerClient()
    params = LoadParams(str(gguf_files.starter()), n_ctx=512)
    before = _child_pids()
    failures: list[str] = []

    async def drain(request: ChatRequest, on_text=None) -> list:
        events = []
        async for event in client.stream(params, request):
            events.append(event)
            if on_text is not None and isinstance(event, TextDelta):
                on_text()
                on_text = None
        return events

    async def one_round(n: int) -> None:
        killed: list[int] = []
        victim: asyncio.Task | None = None

        def kill_now() -> None:
            killed.append(client.pid)
            os.kill(client.pid, signal.SIGKILL)
            if n % 3 == 0:  # the person also pressed Stop: the kill and the cancel cross
                victim.cancel()

        if n % 3 == 2:  # killed between two replies; the next is sent at once
            await drain(_request("Say hi.", 2))
            kill_now()
        else:  # killed mid-reply; the next request, sent at once, queues behind it
            victim = asyncio.ensure_future(drain(_request("Write a long story.", 400), kill_now))
            await asyncio.sleep(0)
        follower = asyncio.ensure_future(drain(_request("Say hi.", 4)))
        if victim is not None:
            try:
                await victim
                failures.append(f"round {n}: the killed request finished")
            except (LocalModelError, asyncio.CancelledError):
                pass
        try:
            events = await follower
        except LocalModelError as exc:
            failures.append(f"round {n}: the next request failed: {exc.user_message}")
            return
        if not events or events[-1] != Finished("length"):
            failures.append(f"round {n}: the next request ended with {events[-1:]}")
        if killed and client.pid == killed[0]:
            failures.append(f"round {n}: still talking to the killed worker")

    async def main() -> None:
        for n in range(ROUNDS):
            await one_round(n)

    try:
        asyncio.run(main())
        assert failures == []
        assert client.alive
        live = _live_workers()
        assert [p.pid for p in live] == [client.pid]
        assert _child_pids() - before == {client.pid}
        assert client.generation == ROUNDS + 1  # one fresh worker per kill, none extra
    finally:
        client.shutdown()
    assert _live_workers() == []
