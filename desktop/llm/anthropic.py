"""Anthropic Messages API streaming (``POST /v1/messages`` with ``"stream": true``).

The stream is: ``message_start`` (model, input usage) · per content block
``content_block_start`` / ``content_block_delta``\\* / ``content_block_stop`` · ``message_delta``
(stop reason, cumulative output usage) · ``message_stop``; ``ping`` may appear anywhere and an
``error`` event may end the stream early. Thinking blocks (``thinking_delta``) become
``ReasoningDelta``; signature, tool-input and citation deltas carry nothing to show and are
skipped, as are event types added after this was written (Anthropic's versioning policy says
new event types may appear and must be tolerated).

Usage: ``prompt_tokens`` = ``input_tokens`` + ``cache_creation_input_tokens`` +
``cache_read_input_tokens`` (Anthropic's ``input_tokens`` excludes the cached part);
``cached_tokens`` = ``cache_read_input_tokens``; ``output_tokens`` includes thinking.
Not supported by the API and ignored: ``Sampling.seed``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Unpack

from desktop.llm.events import FinishReason, ReasoningDelta, StreamEvent, TextDelta, Usage
from desktop.llm.provider import ChatRequest
from desktop.llm.transport import HostedOptions, HostedProvider, HttpEndpoint, ReplyReader
from desktop.llm.wire import sampling_fields, system_and_turns, whole

DEFAULT_BASE_URL = "https://api.anthropic.com/v1"
API_VERSION = "2023-06-01"
# The Messages API requires max_tokens; 4096 is the largest output every current model accepts.
DEFAULT_MAX_TOKENS = 4096
_STOP: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "stop",
    "pause_turn": "stop",
    "refusal": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
}
# Events that carry text: where it is, and the suffix of its type ("text" starts a block that
# may already hold text, "text_delta" adds to it; likewise "thinking").
_TEXT_EVENTS = {
    "content_block_start": ("content_block", ""),
    "content_block_delta": ("delta", "_delta"),
}


class _Message(ReplyReader):
    """One message's events; whole only once ``message_stop`` arrived."""

    def __init__(self, http: HttpEndpoint, request: ChatRequest) -> None:
        super().__init__(http, request)
        self.counts: dict[str, int] = {}

    def read(self, event: str, data: dict[str, Any]) -> Iterator[StreamEvent]:
        kind = data.get("type") or event
        if kind == "message_start":
            message = data.get("message") or {}
            yield from self.run_info(message.get("model"))
            self._count(message.get("usage"))
        elif kind in _TEXT_EVENTS:
            where, suffix = _TEXT_EVENTS[kind]
            part = data.get(where) or {}
            if part.get("type") == "text" + suffix and part.get("text"):
                yield TextDelta(str(part["text"]))
            elif part.get("type") == "thinking" + suffix and part.get("thinking"):
                yield ReasoningDelta(str(part["thinking"]))
        elif kind == "message_delta":
            reason = (data.get("delta") or {}).get("stop_reason")
            if reason:
                self.reason = _STOP.get(str(reason), "stop")
            self._count(data.get("usage"))
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            error = data.get("error") or {}
            raise self.http.stream_error(error.get("type"), error.get("message"))
        # ping, content_block_stop and newer event types carry nothing to show.

    def _count(self, usage: object) -> None:
        if isinstance(usage, dict):
            self.counts |= {k: v for k, v in usage.items() if whole(v) is not None}

    def complete(self) -> bool:
        return self.done

    def usage(self) -> Usage:
        usage = self.counts
        if not usage:
            return Usage(source="reported")
        input_tokens = usage.get("input_tokens")
        created = usage.get("cache_creation_input_tokens") or 0
        read = usage.get("cache_read_input_tokens")
        prompt = None if input_tokens is None else input_tokens + created + (read or 0)
        return Usage(
            prompt_tokens=prompt,
            cached_tokens=read,
            output_tokens=usage.get("output_tokens"),
            source="reported",
        )


class AnthropicProvider(HostedProvider):
    """Claude models over the Messages API. ``thinking_budget_tokens`` turns on extended
    thinking (shown as reasoning); the budget is added on top of the reply's ``max_tokens``."""

    READER = _Message
    DEFAULT_BASE_URL = DEFAULT_BASE_URL
    DEFAULT_LABEL = "Anthropic"

    def __init__(
        self,
        api_key: str | None,
        *,
        thinking_budget_tokens: int | None = None,
        **options: Unpack[HostedOptions],
    ) -> None:
        super().__init__(api_key, **options)
        self._thinking_budget = thinking_budget_tokens

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def _url(self, request: ChatRequest) -> str:
        return f"{self._http.base_url}/messages"

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        system, turns = system_and_turns(request.messages)
        messages = [{"role": role, "content": "\n\n".join(texts)} for role, texts in turns]
        s = request.sampling
        max_tokens = s.max_tokens or DEFAULT_MAX_TOKENS
        body: dict[str, Any] = {"model": request.model, "messages": messages, "stream": True}
        if system:
            body["system"] = system
        if self._thinking_budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": self._thinking_budget}
            max_tokens += self._thinking_budget
        body["max_tokens"] = max_tokens
        # max_tokens is set above; the API has no seed.
        return body | sampling_fields(s, max_tokens=None, seed=None, stop="stop_sequences")

    async def list_models(self) -> list[str]:
        items = await self._model_items(
            f"{self._http.base_url}/models?limit=1000",
            "data",
            cursor_param="after_id",
            cursor=lambda page: page.get("last_id") if page.get("has_more") else None,
        )
        return sorted({str(m["id"]) for m in items if isinstance(m, dict) and m.get("id")})
