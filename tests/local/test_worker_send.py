"""A long conversation sent to a worker that reads nothing yet (still starting) never holds the
event loop: the pipe fills (~200 KB) and the client's sender thread waits, not the loop (the GUI
thread under qasync). Order, cancel and a worker dying mid-send behave as before.

The worker is held "still starting" with SIGSTOP right after it is spawned: it reads nothing,
as while it imports llama.cpp, only for as long as the test wants. A safety timer resumes it
in any case, so a client that did block the loop fails the test instead of hanging it. No
model is loaded: the request names a file that does not exist, and the worker's answer (that
file's error) shows the whole request arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from desktop.llm.errors import LocalModelError
from desktop.llm.provider import ChatMessage, ChatRequest
from desktop.local import client as client_module
from desktop.local.client import WorkerClient
from desktop.local.loading import LoadParams

TICK_S = 0.005
STALL_S = 0.8  # how long the worker reads nothing while the request is sent
SAFETY_S = 4.0  # the worker is resumed by then whatever the loop does


def long_request(total_chars: int = 1_000_000) -> ChatRequest:
    """~1 MB of conversation: 100 turns of 10,000 characters."""
    text = "x" * (total_chars // 100)
    turns = [
        ChatMessage("user" if i % 2 == 0 else "assistant", f"turn {i}: {text}") for i in range(100)
    ]
    return ChatRequest(model="absent", messages=tuple(turns))


class Ticker:
    """A task that sleeps TICK_S and records by how much each sleep overran: the loop's lag."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(TICK_S)
            self.lags.append(time.perf_counter() - started - TICK_S)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    def p99(self) -> float:
        ordered = sorted(self.lags)
        return ordered[max(0, -(-len(ordered) * 99 // 100) - 1)]


async def stalled_worker(client: WorkerClient) -> tuple[int, threading.Timer]:
    """Start the worker and stop it at once (it reads nothing); a timer resumes it at
    SAFETY_S whatever happens on the loop."""
    assert await client.prestart()
    pid = client.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    safety = threading.Timer(SAFETY_S, _signal, (pid, signal.SIGCONT))
    safety.daemon = True
    safety.start()
    return pid, safety


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


async def drain(events: AsyncIterator[Any]) -> None:
    async for _event in events:
        pass


@dataclass
class StalledSend:
    client: WorkerClient
    pid: int  # the stopped worker's
    ticker: Ticker  # the loop's lag meanwhile
    reply: asyncio.Future[None]  # the 1 MB request, its stream read to the end


@contextlib.asynccontextmanager
async def sending_to_a_stalled_worker(params: LoadParams) -> AsyncIterator[StalledSend]:
    """A ~1 MB request on its way to a worker stopped as it started (the pipe fills), the
    loop's lag measured meanwhile; the ticker, the safety timer and the worker are stopped
    after."""
    client = WorkerClient()
    pid, safety = await stalled_worker(client)
    ticker = Ticker()
    ticker.start()
    try:
        reply = asyncio.ensure_future(drain(client.stream(params, long_request())))
        yield StalledSend(client, pid, ticker, reply)
    finally:
        await ticker.stop()
        safety.cancel()
        client.kill()


def run(main: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(main(), timeout=30))


def pending(client: WorkerClient) -> int:
    """Messages the client has not yet wholly written to its worker's pipe."""
    sender = getattr(client, "_sender", None)
    return sender.pending if sender is not None else 0


def sender_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("simi-worker-sender")]


def test_a_1mb_conversation_to_a_starting_worker_never_holds_the_loop(tmp_path: Path) -> None:
    missing = tmp_path / "absent.gguf"
    params = LoadParams(str(missing))

    async def main() -> tuple[Ticker, int, int, LocalModelError]:
        async with sending_to_a_stalled_worker(params) as sending:
            await asyncio.sleep(STALL_S)
            ticks_while_stalled = len(sending.ticker.lags)
            still_sending = pending(sending.client)  # the pipe is full: not all of it is in
            _signal(sending.pid, signal.SIGCONT)  # the worker reads on: the request gets through
            with pytest.raises(LocalModelError) as info:
                await sending.reply
        return sending.ticker, ticks_while_stalled, still_sending, info.value

    ticker, ticks_while_stalled, still_sending, error = run(main)
    # the loop ticked on while the pipe was full (0 or 1 ticks when the send blocks it)
    assert ticks_while_stalled >= STALL_S / TICK_S / 4, ticks_while_stalled
    assert ticker.p99() < 0.050, f"p99 loop lag {ticker.p99() * 1000:.0f} ms"
    assert still_sending >= 1  # the test's premise: the request did not fit in the pipe
    # the worker read the whole request and answered it: the file it names does not exist
    assert str(missing) in error.user_message and "does not exist" in error.user_message


def test_a_worker_dying_mid_send_is_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    """Killed while the request is half-written: resent once to a fresh worker (as for a
    worker that died before it took a request); that one dies too before taking it: the
    death is the request's error. The sender threads end with their workers."""
    params = LoadParams(str(tmp_path / "absent.gguf"))

    async def main() -> tuple[Ticker, LocalModelError, float, int]:
        started = time.perf_counter()
        async with sending_to_a_stalled_worker(params) as sending:
            client, first = sending.client, sending.pid
            await asyncio.sleep(0.3)
            still_sending = pending(client)
            _signal(first, signal.SIGKILL)
            while client.pid in (first, None):  # the request goes to a fresh worker
                await asyncio.sleep(0.002)
            second = client.pid
            assert second is not None
            _signal(second, signal.SIGKILL)  # before it could take it (it is still starting)
            with pytest.raises(LocalModelError) as info:
                await sending.reply
        return sending.ticker, info.value, time.perf_counter() - started, still_sending

    ticker, error, took, still_sending = run(main)
    assert ticker.p99() < 0.050, f"p99 loop lag {ticker.p99() * 1000:.0f} ms"
    assert still_sending >= 1  # killed mid-send
    assert "stopped unexpectedly (signal 9)" in error.user_message
    assert took < 10
    deadline = time.monotonic() + 5
    while sender_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not sender_threads()


def test_cancel_while_the_request_is_being_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stop pressed while the pipe is full: the worker cannot hear the cancel, so it is killed
    after the grace period; the next request gets a fresh worker and its own answer."""
    monkeypatch.setattr(client_module, "CANCEL_GRACE_S", 0.4)
    missing = tmp_path / "absent.gguf"
    params = LoadParams(str(missing))

    async def main() -> tuple[Ticker, int, LocalModelError]:
        async with sending_to_a_stalled_worker(params) as sending:
            client, first = sending.client, sending.pid
            await asyncio.sleep(0.3)
            sending.reply.cancel()
            with pytest.raises(asyncio.CancelledError):
                await sending.reply
            assert not client.alive and client.state == "unloaded"
            short = ChatRequest(model="absent", messages=(ChatMessage("user", "hi"),))
            with pytest.raises(LocalModelError) as info:
                await drain(client.stream(params, short))
            assert client.pid != first
        return sending.ticker, first, info.value

    ticker, _first, error = run(main)
    assert str(missing) in error.user_message and "does not exist" in error.user_message
    assert ticker.p99() < 0.050, f"p99 loop lag {ticker.p99() * 1000:.0f} ms"
