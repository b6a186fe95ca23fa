"""The visible queue in front of local models.

Local agents share the app's llama.cpp workers (``local/provider.py``: up to three, as memory
allows) with the window's own chats. An API request for a local agent takes one of ``slots``
places (the pool's most workers) and goes to the pool, which may still wait for a worker
(``Queued``); past those places it waits here, in order, where the Server page shows it. A
request that finds ``limit`` requests already waiting is refused at once (429), and one that
waited ``timeout_s`` is refused then (503): both with ``Retry-After``, the time the calls ahead
of it should take by the recent calls' pace. Remote agents never wait here: each request is
its own HTTP call.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque

from desktop.serve.wire import ApiError


class LocalGate:
    def __init__(self, slots: int, limit: int, timeout_s: float) -> None:
        self.slots = max(1, slots)
        self.limit = max(0, limit)
        self.timeout_s = timeout_s
        self.running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._recent_s: deque[float] = deque(maxlen=20)  # how long recent local calls took

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def retry_after(self, ahead: int | None = None) -> int:
        """Seconds until a place should free up for a request behind ``ahead`` others."""
        ahead = self.waiting if ahead is None else ahead
        pace = sorted(self._recent_s)[len(self._recent_s) // 2] if self._recent_s else 10.0
        return max(1, min(600, math.ceil(pace * (ahead + 1) / self.slots)))

    async def enter(self, deadline: float | None = None) -> float:
        """Take a place for a call (``leave`` gives it back, with the start this returns).
        Raises ``ApiError`` 429 (the queue is full) or 503 (no place within the timeout, or
        by ``deadline`` on the loop's clock)."""
        if self.running >= self.slots or self._waiters:
            if len(self._waiters) >= self.limit:
                raise ApiError(
                    429,
                    f"{self.waiting} requests already wait for SIMI Multi's local models. "
                    "Try again shortly.",
                    type="rate_limit_error",
                    code="queue_full",
                    retry_after=self.retry_after(),
                )
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            loop = asyncio.get_running_loop()
            limit = self.timeout_s if deadline is None else max(0.0, deadline - loop.time())
            try:
                # asyncio.wait, not wait_for: on Python 3.11 wait_for can swallow a
                # cancellation that comes in the same step as the place
                await asyncio.wait({waiter}, timeout=limit)
            except asyncio.CancelledError:
                self._drop(waiter)
                if waiter.done() and not waiter.cancelled():
                    self.leave()  # the place came as the request went: pass it on
                raise
            if not waiter.done():
                self._drop(waiter)
                raise ApiError(
                    503,
                    f"The request waited {self.timeout_s:.0f} s for a local model and none "
                    "was free. Try again shortly.",
                    type="server_error",
                    code="queue_timeout",
                    retry_after=self.retry_after(),
                )
            # a place was handed over by the request that left (``running`` stays)
        else:
            self.running += 1
        return time.monotonic()

    def _drop(self, waiter: asyncio.Future[None]) -> None:
        if waiter in self._waiters:
            self._waiters.remove(waiter)
        waiter.cancel()  # a waiter handed its place already keeps its result

    def leave(self, started: float | None = None) -> None:
        """A call's place frees (``started``: what ``enter`` returned, for the pace): the next
        waiter takes it (``running`` stays), else it goes."""
        if started is not None:
            self._recent_s.append(time.monotonic() - started)
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.running -= 1
