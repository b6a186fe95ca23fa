"""Automatic retry with backoff, only while retrying cannot duplicate or lose visible text.

``RetryingProvider`` wraps any Provider. A call is retried when it fails with a *retryable*
``UserError`` (``retries_automatically``: rate limits, server errors, dropped connections)
**before the first TextDelta or ReasoningDelta**; once text has been shown, the error goes to
the caller, which keeps the partial text and offers Retry. A stall (``Stalled``: the server
sent nothing for the stall timeout) and a gateway timeout (HTTP 504) are never retried here:
before the first token the server may be evaluating a long prompt, a retry would start that
over, and three silent attempts would make the person wait three timeouts before hearing
anything. They go to the caller at once, still ``retryable`` (the person's Retry).

Non-delta events (RunInfo, Usage, later Timing) of an attempt are held back until its first
delta (or its end), so the statistics describe the attempt that answered, not one that failed.
The one exception is the Timing that says the response headers arrived: it passes at once, so
the person sees "waiting for the first token" instead of "connecting" (a later attempt's own
Timing replaces it).

Delay before retry n (0-based): ``RateLimited.retry_after`` when the server sent one, otherwise
``base_delay_s * 2**n``; both capped at ``max_delay_s``. A server asking to wait longer than the
cap is not retried: the user sees its "try again in N s" at once instead of a silent hang. No
jitter: a chat app sends few concurrent requests to one endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import cast

from desktop.errors import UserError
from desktop.llm.errors import RateLimited, retries_automatically
from desktop.llm.events import Finished, ReasoningDelta, StreamEvent, TextDelta, Timing
from desktop.llm.provider import ChatRequest, Provider

log = logging.getLogger(__name__)

RetryHook = Callable[[int, float, UserError], None]


class RetryingProvider:
    """A Provider that retries ``stream()`` before the first token; everything else delegates.

    ``on_retry(attempt, delay_s, error)`` is called before each wait (attempt is 1-based: the
    attempt that failed), e.g. to show "Retrying in 2 s…".
    """

    def __init__(
        self,
        inner: Provider,
        attempts: int = 3,
        base_delay_s: float = 1.0,
        *,
        max_delay_s: float = 30.0,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        on_retry: RetryHook | None = None,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.inner = inner
        self._attempts = attempts
        self._base_delay_s = base_delay_s
        self._max_delay_s = max_delay_s
        self._sleep = sleep
        self._on_retry = on_retry

    def delay_for(self, attempt: int, error: UserError) -> float | None:
        """Seconds to wait after failed attempt ``attempt`` (0-based); None: do not retry."""
        if isinstance(error, RateLimited) and error.retry_after is not None:
            if error.retry_after > self._max_delay_s:
                return None
            return error.retry_after
        return min(self._max_delay_s, self._base_delay_s * (2**attempt))

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        for attempt in range(self._attempts):
            held: list[StreamEvent] = []
            shown = False
            try:
                # Every Provider.stream is an async generator; the protocol only promises less.
                inner = cast(AsyncGenerator[StreamEvent, None], self.inner.stream(request))
                async with contextlib.aclosing(inner) as events:
                    async for event in events:
                        if not shown:
                            if isinstance(event, TextDelta | ReasoningDelta | Finished):
                                shown = True
                                for early in held:
                                    yield early
                                held.clear()
                            elif isinstance(event, Timing) and event.headers_ms is not None:
                                yield event  # the server answered: now it is thinking
                            else:
                                held.append(event)
                                continue
                        yield event
                if held:  # a stream that ended without a delta or Finished
                    for early in held:
                        yield early
                return
            except UserError as error:
                last = attempt == self._attempts - 1
                if shown or not retries_automatically(error) or last:
                    raise
                delay = self.delay_for(attempt, error)
                if delay is None:
                    raise
                log.info("retrying after %s (%s) in %.1f s", error.kind, attempt + 1, delay)
                if self._on_retry is not None:
                    self._on_retry(attempt + 1, delay, error)
                await self._sleep(delay)

    async def list_models(self) -> list[str]:
        return await self.inner.list_models()

    async def aclose(self) -> None:
        await self.inner.aclose()
