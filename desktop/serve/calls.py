"""One API client's call on an agent, between the HTTP handler and the one call path.

``ApiCall`` runs ``chat/one_shot.call_once`` (key, provider, stats clock, price, the stats row
tagged ``source='api'`` and the key's name) in its own task and queues its events for the
handler. The handler first awaits ``first_output``: until the agent produces its first text or
tool call, a failure can still be answered with a proper HTTP status (a local model that cannot
load: 503), and a local model that stays busy past the queue's deadline is given up (503). Then
``events`` hands on the rest. Cancelling (a client that went away) stops the generation
at the next token, and the stats row says "cancelled".
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from desktop.chat.call import CallDeps
from desktop.chat.one_shot import OneShot, call_once
from desktop.chat.stats_clock import StatsClock
from desktop.llm.events import Finished, Queued, ReasoningDelta, StreamEvent, TextDelta, ToolCall
from desktop.llm.provider import ChatRequest
from desktop.serve.wire import ApiError, usage_body
from desktop.store.agents import Agent

log = logging.getLogger("simi.serve")

_END = object()  # the call's task ended (its result says how)
OUTPUT = (TextDelta, ReasoningDelta, ToolCall, Finished)

# A failure before any output, by the UserError's kind: (status, OpenAI type, code).
ERROR_STATUS: dict[str, tuple[int, str, str]] = {
    "local_model": (503, "server_error", "model_not_loaded"),
    "rate_limited": (429, "rate_limit_error", "upstream_rate_limited"),
    "context_too_long": (400, "invalid_request_error", "context_length_exceeded"),
    "auth": (502, "server_error", "upstream_auth_failed"),
    "model_not_found": (502, "server_error", "upstream_model_not_found"),
    "stalled": (504, "server_error", "upstream_timeout"),
    "unavailable": (502, "server_error", "upstream_unavailable"),
    "bad_response": (502, "server_error", "upstream_bad_response"),
    "secrets_unavailable": (503, "server_error", "keyring_locked"),
    # images for an agent that cannot see them (a local model without a projector)
    "attachment": (400, "invalid_request_error", "images_not_supported"),
}


def error_of(result: OneShot) -> ApiError:
    """A failed call as the client's error: the agent's own finished message, the status its
    kind calls for (a server error 500 for what has no status of its own)."""
    kind = result.error_kind or "error"
    status, type_, code = ERROR_STATUS.get(kind, (500, "server_error", kind))
    wait = None
    if status in (429, 503):  # the provider's own wait when it said one, else half a minute
        wait = math.ceil(result.retry_after) if result.retry_after else 30
    return ApiError(
        status,
        result.error_text or "The agent's call failed.",
        type=type_,
        code=code,
        retry_after=wait,
    )


def _outcome(task: asyncio.Task[OneShot]) -> OneShot | None:
    """The call's result; None when it was cancelled before it began, or failed in a bug
    (``call_once`` logs and re-raises those)."""
    if task.cancelled():
        return None
    if task.exception() is not None:
        log.error("an API call failed", exc_info=task.exception())
        return None
    return task.result()


# How an ApiCall's reply is made: given where its events go, where its clock goes and where a
# usage of its own goes (several model calls), the awaitable of its result (``one_call``;
# ``serve/turns.py`` for an agent running its own tools).
Runner = Callable[
    [
        Callable[[StreamEvent], None],
        Callable[[StatsClock], None],
        Callable[[dict[str, Any]], None],
    ],
    Awaitable[OneShot],
]


def one_call(deps: CallDeps, agent: Agent, request: ChatRequest, key_name: str | None) -> Runner:
    """One model call through the one call path, its row tagged as an API client's."""

    def run(
        on_event: Callable[[StreamEvent], None],
        on_clock: Callable[[StatsClock], None],
        _set_usage: Callable[[dict[str, Any]], None],
    ) -> Awaitable[OneShot]:
        return call_once(
            deps,
            agent,
            request,
            on_event=on_event,
            on_clock=on_clock,
            source="api",
            api_client=key_name,
        )

    return run


class ApiCall:
    def __init__(
        self,
        runner: Runner,
        *,
        on_done: Callable[[OneShot | None], None] | None = None,
    ) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self.clock: StatsClock | None = None
        self.waiting = False  # the local pool said every worker is busy
        self.final_usage: dict[str, Any] | None = None  # a runner's own sum (several calls)
        self.task: asyncio.Task[OneShot] = asyncio.ensure_future(
            runner(self._queue.put_nowait, self._take_clock, self._set_usage)
        )
        self.task.add_done_callback(lambda _t: self._queue.put_nowait(_END))
        if on_done is not None:
            self.task.add_done_callback(lambda t: on_done(_outcome(t)))
        self._first: StreamEvent | None = None  # the first output, held by first_output

    def _take_clock(self, clock: StatsClock) -> None:
        self.clock = clock

    def _set_usage(self, usage: dict[str, Any]) -> None:
        self.final_usage = usage

    def cancel(self) -> None:
        self.task.cancel()

    async def first_output(self, deadline: float | None) -> None:
        """Wait for the agent's first output. Raises ``ApiError``: the call failed before it
        (its status), or the local pool kept it waiting past ``deadline`` (503; loop time)."""
        loop = asyncio.get_running_loop()
        while True:
            timeout = None
            if self.waiting and deadline is not None:
                timeout = max(0.0, deadline - loop.time())
            try:
                event = await asyncio.wait_for(self._queue.get(), timeout)
            except TimeoutError:
                self.cancel()
                raise ApiError(
                    503,
                    "Every local model worker stayed busy with other chats. Try again shortly.",
                    type="server_error",
                    code="queue_timeout",
                    retry_after=30,
                ) from None
            if event is _END:
                self._queue.put_nowait(_END)  # events() sees the end too
                result = self.result()
                if result is None:  # cancelled, or a bug (logged by _outcome)
                    raise ApiError(
                        500, "The agent's call ended without a reply.", type="server_error"
                    )
                if result.status == "error":
                    raise error_of(result)
                return
            if isinstance(event, Queued):
                self.waiting = event.waiting
                continue
            if isinstance(event, OUTPUT):
                self._first = event
                return

    async def events(self) -> AsyncIterator[StreamEvent]:
        """The output events from the first on; ends after ``Finished`` or when the call
        ended without one (``result`` then says why)."""
        first, self._first = self._first, None
        if first is not None:
            yield first
            if isinstance(first, Finished):
                return
        while True:
            event = await self._queue.get()
            if event is _END:
                return
            yield event
            if isinstance(event, Finished):
                return

    def result(self) -> OneShot | None:
        """How the call ended, once its task has (None: still running, cancelled, a bug)."""
        return _outcome(self.task) if self.task.done() else None

    def usage(self) -> dict[str, Any]:
        """OpenAI's usage from the call's clock at its end: reported counts, else counted."""
        if self.final_usage is not None:
            return self.final_usage
        clock = self.clock
        if clock is None:
            return usage_body(None, None, None)
        output = clock.usage.output_tokens
        if output is None:
            output = clock.tokens
        return usage_body(clock.usage.prompt_tokens, clock.usage.cached_tokens, output)
