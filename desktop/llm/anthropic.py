"""Anthropic Messages API streaming (``POST /v1/messages`` with ``"stream": true``).

The stream is: ``message_start`` (model, input usage) · per content block
``content_block_start`` / ``content_block_delta``\\* / ``content_block_stop`` · ``message_delta``
(stop reason, cumulative output usage) · ``message_stop``; ``ping`` may appear anywhere and an
``error`` event may end the stream early. Thinking blocks (``thinking_delta``) become
``ReasoningDelta``; signature and citation deltas carry nothing to show and are
skipped, as are event types added after this was written (Anthropic's versioning policy says
new event types may appear and must be tolerated).

Tools (``ChatRequest.tools``) go as ``tools=[{name, description, input_schema}]``. A call is a
``tool_use`` content block: ``content_block_start`` brings its id and name (``input`` empty),
``input_json_delta`` deltas its arguments as pieces of JSON text (``partial_json``), and
``content_block_stop`` ends it; the message then stops with ``stop_reason: "tool_use"``. Calls
are yielded whole at the end (``desktop.llm.tool_wire``). An assistant turn that called tools
is sent back as ``text`` + ``tool_use`` blocks, the results as one user turn of
``tool_result`` blocks (``tool_use_id``, ``content``, ``is_error``), any user text after them.
Not handled yet: extended thinking with tools (the API wants the turn's thinking block, with
its signature, sent back before a ``tool_use``; this reader does not keep it).

Images (``ChatMessage.images``) go as ``image`` blocks with a ``base64`` source
(``media_type``, ``data``), before the message's text block: Anthropic's vision guide says
Claude works best with images before text.

Usage: ``prompt_tokens`` = ``input_tokens`` + ``cache_creation_input_tokens`` +
``cache_read_input_tokens`` (Anthropic's ``input_tokens`` excludes the cached part);
``cached_tokens`` = ``cache_read_input_tokens``; ``output_tokens`` includes thinking.
Not supported by the API and ignored: ``Sampling.seed``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Unpack

from desktop.llm.events import FinishReason, ReasoningDelta, StreamEvent, TextDelta, ToolCall, Usage
from desktop.llm.presets import ANTHROPIC_BASE_URL
from desktop.llm.provider import ChatMessage, ChatRequest
from desktop.llm.tool_wire import (
    arguments_object,
    cut_mid_call,
    finish_with_calls,
    length_mid_call,
    plain,
    system_and_groups,
)
from desktop.llm.transport import HostedOptions, HostedProvider, HttpEndpoint, ReplyReader
from desktop.llm.wire import base64_of, sampling_fields, whole

DEFAULT_BASE_URL = ANTHROPIC_BASE_URL
API_VERSION = "2023-06-01"
# The Messages API requires max_tokens; 4096 is the largest output every current model accepts.
DEFAULT_MAX_TOKENS = 4096
_STOP: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
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
        self.open: dict[int, list[Any]] = {}  # block index -> [id, name, JSON pieces]
        self.calls: list[ToolCall] = []

    def read(self, event: str, data: dict[str, Any]) -> Iterator[StreamEvent]:
        kind = data.get("type") or event
        if kind == "message_start":
            message = data.get("message") or {}
            yield from self.run_info(message.get("model"))
            self._count(message.get("usage"))
        elif kind in _TEXT_EVENTS:
            where, suffix = _TEXT_EVENTS[kind]
            part = data.get(where) or {}
            index = data.get("index")
            if part.get("type") == "tool_use" and isinstance(index, int):
                self.open[index] = [str(part.get("id") or ""), str(part.get("name") or ""), []]
            elif part.get("type") == "input_json_delta" and index in self.open:
                self.open[index][2].append(str(part.get("partial_json") or ""))
            elif part.get("type") == "text" + suffix and part.get("text"):
                yield TextDelta(str(part["text"]))
            elif part.get("type") == "thinking" + suffix and part.get("thinking"):
                yield ReasoningDelta(str(part["thinking"]))
        elif kind == "message_delta":
            reason = (data.get("delta") or {}).get("stop_reason")
            if reason:
                self.reason = _STOP.get(str(reason), "stop")
            self._count(data.get("usage"))
        elif kind == "content_block_stop" and data.get("index") in self.open:
            call_id, name, pieces = self.open.pop(data["index"])
            self.calls.append(ToolCall(call_id, name, "".join(pieces) or "{}"))
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

    def finish(self) -> Iterator[StreamEvent]:
        if self.open:  # a call never closed: cut short, or by the token limit
            name = next(iter(self.open.values()))[1]
            if self.complete() and self.reason == "length":
                raise length_mid_call(self.http.where, name)
            raise cut_mid_call(self.http.where, name)
        if not self.complete():
            raise self.http.ended_early()
        self.reason = finish_with_calls(self.http.where, self.reason, self.calls)
        yield from self.calls
        yield from super().finish()

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
        system, groups = system_and_groups(request.messages)
        messages = [{"role": side, "content": _content(group)} for side, group in groups]
        s = request.sampling
        max_tokens = s.max_tokens or DEFAULT_MAX_TOKENS
        body: dict[str, Any] = {"model": request.model, "messages": messages, "stream": True}
        if system:
            body["system"] = system
        if self._thinking_budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": self._thinking_budget}
            max_tokens += self._thinking_budget
        body["max_tokens"] = max_tokens
        if request.tools:
            body["tools"] = [
                {
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.parameters or {"type": "object", "properties": {}},
                }
                for t in request.tools
            ]
            if request.tool_choice == "none":
                body["tool_choice"] = {"type": "none"}
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


def _content(group: list[ChatMessage]) -> str | list[dict[str, Any]]:
    """One turn's content: text alone as one string (as before tools), else blocks: tool
    results first (the API wants them at the start of the user turn), then per message its
    images, its text, its calls."""
    if plain(group):
        return "\n\n".join(m.content for m in group)
    results: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] = []
    for m in group:
        if m.role == "tool":
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m.tool_call_id or "",
                "content": m.content,
            }
            if m.is_error:
                result["is_error"] = True
            results.append(result)
            continue
        for image in m.images:  # before the text: Anthropic's vision guide asks for that
            source = {"type": "base64", "media_type": image.mime, "data": base64_of(image)}
            blocks.append({"type": "image", "source": source})
        if m.content:
            blocks.append({"type": "text", "text": m.content})
        for call in m.tool_calls:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": arguments_object(call),
                }
            )
    return results + blocks
