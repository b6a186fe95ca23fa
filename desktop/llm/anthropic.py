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

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx

from desktop.llm.errors import BadResponse
from desktop.llm.events import (
    Finished,
    FinishReason,
    ReasoningDelta,
    RunInfo,
    StreamEvent,
    TextDelta,
    Timing,
    Usage,
)
from desktop.llm.provider import ChatRequest
from desktop.llm.transport import HttpProvider

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


class AnthropicProvider(HttpProvider):
    """Claude models over the Messages API. ``thinking_budget_tokens`` turns on extended
    thinking (shown as reasoning); the budget is added on top of the reply's ``max_tokens``."""

    def __init__(
        self,
        api_key: str | None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        label: str = "Anthropic",
        stall_timeout_s: float = 60.0,
        client: httpx.AsyncClient | None = None,
        ca_bundle: str | None = None,
        thinking_budget_tokens: int | None = None,
    ) -> None:
        super().__init__(
            base_url,
            api_key,
            label=label,
            stall_timeout_s=stall_timeout_s,
            client=client,
            ca_bundle=ca_bundle,
        )
        self._thinking_budget = thinking_budget_tokens

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        messages: list[dict[str, str]] = []
        for m in request.messages:
            if m.role == "system":
                continue
            if messages and messages[-1]["role"] == m.role:
                messages[-1]["content"] += "\n\n" + m.content
            else:
                messages.append({"role": m.role, "content": m.content})
        s = request.sampling
        max_tokens = s.max_tokens or DEFAULT_MAX_TOKENS
        body: dict[str, Any] = {"model": request.model, "messages": messages, "stream": True}
        if system:
            body["system"] = system
        if self._thinking_budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": self._thinking_budget}
            max_tokens += self._thinking_budget
        body["max_tokens"] = max_tokens
        if s.temperature is not None:
            body["temperature"] = s.temperature
        if s.top_p is not None:
            body["top_p"] = s.top_p
        if s.stop:
            body["stop_sequences"] = list(s.stop)
        return body

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        http = self._http
        usage: dict[str, Any] = {}
        finish: FinishReason | None = None
        stopped = False
        events = http.sse(
            f"{http.base_url}/messages",
            body=self._body(request),
            headers=self._headers(),
            model=request.model,
        )
        async with contextlib.aclosing(events):
            async for item in events:
                if isinstance(item, Timing):
                    yield item
                    continue
                if not item.data.strip():
                    continue
                data = http.decode(item.data)
                if not isinstance(data, dict):
                    raise BadResponse(f"{http.where} sent an event this app does not understand.")
                kind = data.get("type") or item.event
                if kind == "message_start":
                    message = data.get("message") or {}
                    if message.get("model"):
                        yield RunInfo(model_reported=str(message["model"]))
                    usage.update(_known(message.get("usage")))
                elif kind == "content_block_start":
                    block = data.get("content_block") or {}
                    # A block may start with text already in it.
                    if block.get("type") == "text" and block.get("text"):
                        yield TextDelta(str(block["text"]))
                    elif block.get("type") == "thinking" and block.get("thinking"):
                        yield ReasoningDelta(str(block["thinking"]))
                elif kind == "content_block_delta":
                    delta = data.get("delta") or {}
                    if delta.get("type") == "text_delta" and delta.get("text"):
                        yield TextDelta(str(delta["text"]))
                    elif delta.get("type") == "thinking_delta" and delta.get("thinking"):
                        yield ReasoningDelta(str(delta["thinking"]))
                elif kind == "message_delta":
                    reason = (data.get("delta") or {}).get("stop_reason")
                    if reason:
                        finish = _STOP.get(str(reason), "stop")
                    usage.update(_known(data.get("usage")))
                elif kind == "message_stop":
                    stopped = True
                    break
                elif kind == "error":
                    error = data.get("error") or {}
                    raise http.stream_error(error.get("type"), error.get("message"))
                # ping, content_block_stop and newer event types carry nothing to show.
        if not stopped:
            raise http.ended_early()
        yield _usage(usage)
        yield Finished(finish or "stop")

    async def list_models(self) -> list[str]:
        http = self._http
        names: list[str] = []
        after: str | None = None
        for _ in range(20):  # pages of 1000; a guard against a server that never says "done"
            url = f"{http.base_url}/models?limit=1000" + (f"&after_id={after}" if after else "")
            page, items = await self._model_page(url, "data")
            names += [str(m["id"]) for m in items if isinstance(m, dict) and m.get("id")]
            if not page.get("has_more") or not page.get("last_id"):
                break
            after = str(page["last_id"])
        return sorted(set(names))


def _known(usage: object) -> dict[str, Any]:
    if not isinstance(usage, dict):
        return {}
    return {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}


def _usage(usage: dict[str, Any]) -> Usage:
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
