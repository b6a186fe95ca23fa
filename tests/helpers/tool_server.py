"""Scripted replies that call tools, in each wire protocol's streaming format.

Stands in for OpenAI (and every OpenAI-compatible server), Anthropic and Gemini answering a
request that carried tools: ``tool_reply(kind, ...)`` is a ``FaultServer`` ``Reply`` whose
body streams optional text, then the given calls, exactly as that API streams them (OpenAI:
``delta.tool_calls`` fragments by index, the id and name in the first one; Anthropic:
``tool_use`` blocks with ``input_json_delta`` pieces; Gemini: whole ``functionCall`` parts).
The arguments text of each call is cut into ``pieces`` fragments where the protocol streams
them in pieces; ``cut`` ends the stream in the middle of the last call: "end" closes the body
properly (the server stopped sending), "drop" drops the connection.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.helpers.fault_server import Reply


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: str  # the JSON text the model writes (need not be valid)


def _sse(events: list[tuple[str | None, Any]]) -> list[bytes]:
    chunks = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        head = f"event: {name}\n" if name else ""
        chunks.append(f"{head}data: {text}\n\n".encode())
    return chunks


def _split(text: str, pieces: int) -> list[str]:
    if pieces <= 1 or len(text) < 2:
        return [text]
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def tool_reply(
    kind: str,
    calls: list[Call],
    *,
    text: str = "",
    pieces: int = 1,
    cut: str | None = None,
    finish: str | None = None,
    signature: str | None = None,
) -> Reply:
    """A streamed reply of ``kind`` ("openai", "anthropic", "gemini"). ``finish``: the
    server's own finish reason (its default when None: the word it uses for a tool call)."""
    build = {"openai": _openai, "anthropic": _anthropic, "gemini": _gemini}[kind]
    events = build(calls, text, pieces, cut is not None, finish, signature)
    return Reply(body=_sse(events), after="drop" if cut == "drop" else "end")


def _openai(
    calls: list[Call], text: str, pieces: int, cut: bool, finish: str | None, _sig: str | None
) -> list[tuple[str | None, Any]]:
    def chunk(delta: dict[str, Any], reason: str | None = None) -> tuple[None, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        return None, {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": "gpt-test",
            "choices": [choice],
        }

    events = [chunk({"role": "assistant", "content": None})]
    if text:
        events += [chunk({"content": part}) for part in _split(text, 3)]
    for index, call in enumerate(calls):
        parts = _split(call.arguments, pieces)
        first = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        events.append(chunk({"tool_calls": [first]}))
        if cut and index == len(calls) - 1:
            parts = parts[: max(1, len(parts) // 2)]
        for part in parts:
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            )
    if cut:
        return events
    events.append(chunk({}, finish or ("tool_calls" if calls else "stop")))
    events.append(
        (
            None,
            {
                "id": "c1",
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": {"prompt_tokens": 20, "completion_tokens": 9},
            },
        )
    )
    events.append((None, "[DONE]"))
    return events


def _anthropic(
    calls: list[Call], text: str, pieces: int, cut: bool, finish: str | None, _sig: str | None
) -> list[tuple[str | None, Any]]:
    events: list[tuple[str | None, Any]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-test",
                    "content": [],
                    "usage": {"input_tokens": 30, "output_tokens": 1},
                },
            },
        ),
    ]
    index = 0
    if text:
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        for part in _split(text, 3):
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": part},
                    },
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for n, call in enumerate(calls):
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": {},
                    },
                },
            )
        )
        parts = _split(call.arguments, pieces)
        last = n == len(calls) - 1
        if cut and last:
            parts = parts[: max(1, len(parts) // 2)]
        for part in parts:
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": part},
                    },
                )
            )
        if cut and last:
            return events
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": finish or ("tool_use" if calls else "end_turn")},
                "usage": {"output_tokens": 12},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _gemini(
    calls: list[Call], text: str, _pieces: int, cut: bool, finish: str | None, sig: str | None
) -> list[tuple[str | None, Any]]:
    def frame(parts: list[dict[str, Any]], reason: str | None = None) -> tuple[None, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if reason:
            candidate["finishReason"] = reason
        body: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-test"}
        if reason:
            body["usageMetadata"] = {"promptTokenCount": 25, "candidatesTokenCount": 7}
        return None, body

    events = [frame([{"text": part}]) for part in _split(text, 3)] if text else []
    for n, call in enumerate(calls):
        try:
            args = json.loads(call.arguments)
        except json.JSONDecodeError:
            args = {"raw": call.arguments}
        function: dict[str, Any] = {"name": call.name, "args": args}
        if call.id:
            function["id"] = call.id
        part: dict[str, Any] = {"functionCall": function}
        if sig and n == 0:
            part["thoughtSignature"] = sig
        events.append(frame([part]))
    if cut:
        return events
    events.append(frame([], finish or "STOP"))
    return events
