"""OpenAI Chat Completions streaming: OpenAI itself and every OpenAI-compatible server.

Groq, OpenRouter, Mistral, DeepSeek, Together, xAI, Ollama, LM Studio, llama.cpp server and vLLM
are *endpoints* of this one kind (see ``desktop.llm.presets``). Besides text it reads reasoning
deltas (``reasoning_content`` / ``reasoning``), ``usage`` (asked for with
``stream_options.include_usage``; cached, reasoning tokens and OpenRouter's ``cost``), and
llama.cpp server ``timings``. Provider JSON never leaves this module.

Token counts when the server sends no usage (llama-cpp-python's ``llama_cpp.server`` does not,
even with ``include_usage``): output tokens are the number of content and reasoning deltas
(llama.cpp-family servers send one token per delta; servers that batch tokens are undercounted),
prompt tokens are the prompt's characters / 4 (a common rule of thumb for English text, off by
tens of percent for code or other languages). Both are marked ``source="counted"``.

Tools (``ChatRequest.tools``) go as ``tools=[{"type": "function", "function": {name,
description, parameters}}]``; an assistant turn that called tools as ``tool_calls`` (its
content null when it wrote no text), a result as a ``role: "tool"`` message with its
``tool_call_id``. A streamed call arrives in ``delta.tool_calls[i]`` fragments: ``index``
says which call, the first fragment has its ``id`` and ``function.name``, ``function.arguments``
comes in pieces; several calls interleave by index (Ollama sends every call of a batch at index
0, told apart by a new id). The whole calls are yielded at the end (``desktop.llm.tool_wire``).

Images (``ChatMessage.images``): the user message's ``content`` becomes a list of parts, its
text as ``{"type": "text"}`` then each image as ``{"type": "image_url", "image_url": {"url":
"data:<mime>;base64,..."}}``; a message without images keeps its plain string. A server whose
model cannot see refuses the request (llama.cpp's server without a projector: HTTP 500 "image
input is not supported"); that is an ``ImagesNotSupported`` (``desktop.llm.http_errors``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Unpack

from desktop.llm.events import (
    FinishReason,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    Timing,
    ToolCall,
    Usage,
)
from desktop.llm.http_errors import unavailable
from desktop.llm.provider import ChatMessage, ChatRequest
from desktop.llm.tool_wire import cut_mid_call, finish_with_calls, new_call_id
from desktop.llm.transport import HttpEndpoint, HttpOptions, HttpProvider, ReplyReader
from desktop.llm.wire import base64_of, sampling_fields

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "content_filter": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "eos": "stop",
}
CHARS_PER_TOKEN = 4


class _ChatCompletion(ReplyReader):
    """``chat.completion.chunk`` objects until ``data: [DONE]``; the usage chunk (and
    llama.cpp's ``timings``) come after the chunk with the finish reason."""

    END_DATA = "[DONE]"
    NOT_UNDERSTOOD = (
        "a message this app does not understand. Check that the endpoint speaks the OpenAI "
        "Chat Completions API."
    )

    def __init__(self, http: HttpEndpoint, request: ChatRequest) -> None:
        super().__init__(http, request)
        self.chunks = 0
        self.deltas = 0
        self.reported_usage: dict[str, Any] | None = None
        self.timings: dict[str, Any] | None = None
        # Calls being written: [id, name, argument pieces], in the order first seen; the
        # stream's index of each call -> its place here.
        self.calls: list[list[Any]] = []
        self.slot_of: dict[int, int] = {}

    def read(self, event: str, chunk: dict[str, Any]) -> Iterator[StreamEvent]:
        self.chunks += 1
        error = chunk.get("error")
        if error:
            if isinstance(error, dict):
                kind = error.get("code") or error.get("type")
                raise self.http.stream_error(str(kind or ""), error.get("message"))
            raise self.http.stream_error(None, str(error))
        yield from self.run_info(chunk.get("model"))
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.deltas += 1
                yield ReasoningDelta(reasoning)
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.deltas += 1
                yield TextDelta(content)
            for fragment in delta.get("tool_calls") or []:
                if isinstance(fragment, dict):
                    self.deltas += 1  # a call's tokens count as output like text
                    self._fragment(fragment)
            if choice.get("finish_reason"):
                self.reason = _FINISH.get(str(choice["finish_reason"]), "stop")
        if isinstance(chunk.get("usage"), dict):
            self.reported_usage = chunk["usage"]
        if isinstance(chunk.get("timings"), dict):
            timings = self.timings = chunk["timings"]
            yield Timing(
                prefill_ms=_num(timings.get("prompt_ms")),
                decode_ms=_num(timings.get("predicted_ms")),
                decode_tokens=_int(timings.get("predicted_n")),
                prompt_eval_tokens=_int(timings.get("prompt_n")),
                reported_by="server",
            )

    def _fragment(self, fragment: dict[str, Any]) -> None:
        """One piece of a streamed call: a new call (a new index, or a new id at an index
        already used, as Ollama sends a batch) or more of the arguments of one."""
        index = fragment.get("index")
        call_id = fragment.get("id")
        if not isinstance(index, int):  # no index: a new call when it has an id, else the last
            index = -1 - len(self.calls) if call_id or not self.calls else -len(self.calls)
        function = fragment.get("function") or {}
        slot = self.slot_of.get(index)
        if slot is None or (call_id and self.calls[slot][0] and call_id != self.calls[slot][0]):
            slot = self.slot_of[index] = len(self.calls)
            self.calls.append(["", "", []])
        call = self.calls[slot]
        if isinstance(call_id, str) and call_id:
            call[0] = call_id
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name:
            call[1] += name if call[1] != name else ""
        pieces = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(pieces, str):
            call[2].append(pieces)
        elif isinstance(pieces, dict):  # a server that sends the arguments as an object
            call[2].append(json.dumps(pieces))

    def complete(self) -> bool:
        return self.done or self.reason is not None

    def finish(self) -> Iterator[StreamEvent]:
        if not self.complete() and self.calls:
            raise cut_mid_call(self.http.where, self.calls[-1][1])
        if not self.complete() and self.chunks == 0:
            # llama_cpp.server answers 200 and then nothing when the prompt overflows n_ctx.
            raise unavailable(
                f"{self.http.where} accepted the request but sent no reply. If the conversation "
                "is long it may not fit the model's context (start a new one); otherwise "
                "press Retry."
            )
        if not self.complete():
            raise self.http.ended_early()
        calls = [
            ToolCall(call_id or new_call_id(), name, "".join(pieces) or "{}")
            for call_id, name, pieces in self.calls
        ]
        self.reason = finish_with_calls(self.http.where, self.reason, calls)
        yield from calls
        yield from super().finish()

    def usage(self) -> Usage:
        usage, timings = self.reported_usage, self.timings
        cache_n = _int(timings.get("cache_n")) if timings else None
        if usage is not None:
            prompt_details = usage.get("prompt_tokens_details") or {}
            output_details = usage.get("completion_tokens_details") or {}
            cached = _int(prompt_details.get("cached_tokens"))
            if cached is None:  # DeepSeek names it differently
                cached = _int(usage.get("prompt_cache_hit_tokens"))
            return Usage(
                prompt_tokens=_int(usage.get("prompt_tokens")),
                cached_tokens=cached if cached is not None else cache_n,
                output_tokens=_int(usage.get("completion_tokens")),
                reasoning_tokens=_int(output_details.get("reasoning_tokens")),
                source="reported",
                cost_usd=_num(usage.get("cost")),
            )
        if timings is not None and _int(timings.get("predicted_n")) is not None:
            prompt_n = _int(timings.get("prompt_n")) or 0
            return Usage(
                prompt_tokens=prompt_n + (cache_n or 0),
                cached_tokens=cache_n,
                output_tokens=_int(timings.get("predicted_n")),
                source="reported",
            )
        prompt_chars = sum(len(m.content) for m in self.request.messages)
        return Usage(
            prompt_tokens=max(1, round(prompt_chars / CHARS_PER_TOKEN)),
            output_tokens=self.deltas,
            source="counted",
        )


class OpenAICompatProvider(HttpProvider):
    """Chat Completions over SSE. ``label`` names the endpoint in every error message."""

    READER = _ChatCompletion

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        label: str = "The server",
        extra_headers: dict[str, str] | None = None,
        **options: Unpack[HttpOptions],
    ) -> None:
        super().__init__(base_url, api_key, label=label, **options)
        self._extra_headers = dict(extra_headers or {})

    def _headers(self) -> dict[str, str]:
        headers = dict(self._extra_headers)
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _url(self, request: ChatRequest) -> str:
        return f"{self._http.base_url}/chat/completions"

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [_message(m) for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters or {"type": "object", "properties": {}},
                    },
                }
                for t in request.tools
            ]
            if request.tool_choice == "none":
                body["tool_choice"] = "none"
        return body | sampling_fields(request.sampling)

    async def list_models(self) -> list[str]:
        items = await self._model_items(f"{self._http.base_url}/models", "data")
        return sorted({str(m["id"]) for m in items if isinstance(m, dict) and m.get("id")})


def _message(m: ChatMessage) -> dict[str, Any]:
    """One message as Chat Completions takes it (text-only ones exactly as before tools)."""
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    if m.role == "assistant" and m.tool_calls:
        return {
            "role": "assistant",
            "content": m.content or None,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in m.tool_calls
            ],
        }
    if m.images:
        return {"role": m.role, "content": _parts(m)}
    return {"role": m.role, "content": m.content}


def _parts(m: ChatMessage) -> list[dict[str, Any]]:
    """A message with images as content parts: its text first (as OpenAI's guide shows it,
    and as OpenRouter recommends), then each image as a data URL (no text part when there
    is no text)."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
    for image in m.images:
        url = f"data:{image.mime};base64,{base64_of(image)}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _int(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
