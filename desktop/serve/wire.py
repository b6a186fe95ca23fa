"""OpenAI's chat-completions wire format, both ways: a client's JSON body into a
``ChatRequest`` for an agent, and the agent's events back out as a completion or as SSE chunks.

Only what the server speaks is read; anything else in the body is ignored, as OpenAI-compatible
servers do. A body that cannot be served raises ``ApiError`` (status 400) with a message that
names the field, never a traceback. A user message may carry images as OpenAI's ``image_url``
content parts, as base64 data URLs only: the server never fetches an address.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
import unicodedata
from dataclasses import KW_ONLY, dataclass, replace
from typing import Any

from desktop.llm.events import ToolCall
from desktop.llm.provider import ChatMessage, ChatRequest, ImagePart, Sampling, ToolSpec
from desktop.store.agents import Agent


@dataclass(eq=False)
class ApiError(Exception):
    """A request the server refuses, in OpenAI's error shape: ``status``, ``message`` for the
    client's developer, ``type`` and ``code`` as OpenAI names them; ``retry_after`` (seconds)
    for 429 and 503."""

    status: int
    message: str
    _: KW_ONLY
    type: str = "invalid_request_error"  # OpenAI's field name
    code: str | None = None
    param: str | None = None
    retry_after: int | None = None

    def __str__(self) -> str:
        return self.message

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def slug(name: str) -> str:
    """An agent's model id: its name in lower case ASCII, words joined by '-' ("Coder (fast)"
    -> "coder-fast"). Stable while the name is; a name with no such letters gets "agent"."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+(?:[._][a-z0-9]+)*", ascii_name.lower())
    return "-".join(words) or "agent"


def model_ids(agents: list[Agent]) -> dict[str, Agent]:
    """Each agent's model id: its slug; where two agents' names give one slug, each of them
    the slug and its id ("coder-2"), and should that be another agent's slug, its id once
    more. Every id names one agent, the same across runs while the names are."""
    bases = [(slug(a.name), a) for a in sorted(agents, key=lambda a: a.id or 0)]
    count: dict[str, int] = {}
    for base, _agent in bases:
        count[base] = count.get(base, 0) + 1
    ids = {base: agent for base, agent in bases if count[base] == 1}
    for base, agent in bases:
        if count[base] == 1:
            continue
        candidate = f"{base}-{agent.id}"
        while candidate in ids:
            candidate = f"{candidate}-{agent.id}"
        ids[candidate] = agent
    return ids


def model_entry(model_id: str, agent: Agent, created: int) -> dict[str, Any]:
    """One ``/v1/models`` entry: OpenAI's four fields, then what the agent is (``simi``)."""
    return {
        "id": model_id,
        "object": "model",
        "created": created,
        "owned_by": "simi",
        "simi": {
            "agent": agent.name,
            "provider": agent.kind,
            "model": agent.model or (agent.model_path or ""),
            "local": agent.is_local,
        },
    }


@dataclass(frozen=True, slots=True)
class ClientAsk:
    """What a client's body asks for, checked: the model id, the messages, its sampling
    wishes, the tools it runs, and how it wants the reply."""

    model: str
    messages: tuple[ChatMessage, ...]
    temperature: float | None
    top_p: float | None
    max_tokens: int | None
    seed: int | None
    stop: tuple[str, ...]
    tools: tuple[ToolSpec, ...]
    tool_choice: str  # "auto" or "none"
    stream: bool
    include_usage: bool


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


def _number(body: dict[str, Any], name: str, kind: type, low: float, high: float) -> Any:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(f"'{name}' must be a number.", name)
    if kind is int and not float(value).is_integer():
        raise _bad(f"'{name}' must be a whole number.", name)
    if not low <= value <= high:
        raise _bad(f"'{name}' must be between {low:g} and {high:g}.", name)
    return kind(value)


def _content_of(content: Any, where: str, role: str) -> tuple[str, tuple[ImagePart, ...]]:
    """A message's text and images: a string, or a list of parts whose text parts are joined
    and whose ``image_url`` parts (a user message's) are data URLs."""
    if content is None:
        return "", ()
    if isinstance(content, str):
        return content, ()
    if isinstance(content, list):
        texts: list[str] = []
        images: list[ImagePart] = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or "type" not in part:
                raise _bad(f"Each part of {where}.content must be an object with a 'type'.")
            field = f"{where}.content[{j}]"
            if part["type"] == "image_url":
                if role != "user":
                    raise _bad(f"{field}: only user messages may carry images.", field)
                images.append(_image(part.get("image_url"), f"{field}.image_url"))
            elif part["type"] == "text":
                texts.append(str(part.get("text", "")))
            else:
                raise _bad(
                    f"{where}.content has a '{part['type']}' part: SIMI Multi's server takes "
                    "text and images (image_url) only for now.",
                    f"{where}.content",
                )
        return "".join(texts), tuple(images)
    raise _bad(f"{where}.content must be a string or a list of parts.", f"{where}.content")


MAX_IMAGE_BYTES = 20 * 1024 * 1024
# The image formats all three remote wires (and llama.cpp) take, with how each file starts.
_IMAGE_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),  # then the size, then "WEBP" (checked below)
}
_DATA_URL = re.compile(r"data:(?P<mime>[^;,]*)(?P<params>(?:;[^;,]*)*),(?P<data>.*)", re.S | re.I)


def _image(raw: Any, field: str) -> ImagePart:
    """An ``image_url`` part's image: a base64 data URL of a PNG, JPEG, GIF or WebP image
    of at most 20 MB. The server never fetches an address (a request must not make it reach
    out to the network or the disk), so http(s) URLs are refused."""
    url = raw.get("url") if isinstance(raw, dict) else raw
    if not isinstance(url, str) or not url.strip():
        raise _bad(f"{field} needs a 'url': a data: URL of the image.", field)
    url = url.strip()
    if url[:5].lower() != "data:":
        raise _bad(f"{field} must be a data: URL; SIMI Multi does not fetch addresses.", field)
    match = _DATA_URL.fullmatch(url)
    if match is None:
        raise _bad(f"{field} is not a whole data URL (data:image/png;base64,...).", field)
    mime = match["mime"].strip().lower()
    mime = "image/jpeg" if mime == "image/jpg" else mime
    if not mime.startswith("image/"):
        raise _bad(f"{field} is {mime or 'untyped'} data, not an image.", field)
    if mime not in _IMAGE_MAGIC:
        raise _bad(f"{field} is {mime}: send a PNG, JPEG, GIF or WebP image.", field)
    if "base64" not in (p.strip().lower() for p in match["params"].split(";")):
        raise _bad(f"{field} must be base64 (data:{mime};base64,...).", field)
    text = "".join(match["data"].split())
    if len(text) // 4 * 3 > MAX_IMAGE_BYTES + 2:
        raise _bad(f"{field} is larger than 20 MB, the most an image may be.", field)
    try:
        data = base64.b64decode(text, validate=True)
    except binascii.Error:
        raise _bad(f"{field} is not valid base64.", field) from None
    if len(data) > MAX_IMAGE_BYTES:
        raise _bad(f"{field} is larger than 20 MB, the most an image may be.", field)
    webp = mime != "image/webp" or data[8:12] == b"WEBP"
    if not data.startswith(_IMAGE_MAGIC[mime]) or not webp:
        raise _bad(f"{field} says {mime}, but its data is not such an image.", field)
    return ImagePart(mime, data)


def _tool_calls(raw: Any, where: str) -> tuple[ToolCall, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _bad(f"{where}.tool_calls must be a list.", f"{where}.tool_calls")
    calls = []
    for i, call in enumerate(raw):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise _bad(f"{where}.tool_calls[{i}] needs a function with a name.")
        args = fn.get("arguments", "")
        calls.append(
            ToolCall(
                id=str(call.get("id") or f"call_{i}"),
                name=fn["name"],
                arguments=args if isinstance(args, str) else json.dumps(args),
            )
        )
    return tuple(calls)


ROLES = {"system", "developer", "user", "assistant", "tool"}


def _messages(raw: Any) -> tuple[ChatMessage, ...]:
    if not isinstance(raw, list) or not raw:
        raise _bad("'messages' must be a non-empty list.", "messages")
    out = []
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _bad(f"{where} must be an object.", where)
        role = message.get("role")
        if role not in ROLES:
            raise _bad(f"{where}.role must be one of {', '.join(sorted(ROLES))}.", where)
        text, images = _content_of(message.get("content"), where, role)
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                raise _bad(f"{where} (a tool result) needs a 'tool_call_id'.", where)
            out.append(ChatMessage("tool", text, tool_call_id=call_id, name=message.get("name")))
        elif role == "assistant":
            calls = _tool_calls(message.get("tool_calls"), where)
            out.append(ChatMessage("assistant", text, tool_calls=calls))
        elif role == "user":
            out.append(ChatMessage("user", text, images=images))
        else:
            out.append(ChatMessage("system", text))
    return tuple(out)


def _tools(raw: Any) -> tuple[ToolSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _bad("'tools' must be a list.", "tools")
    specs = []
    for i, tool in enumerate(raw):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or tool.get("type", "function") != "function":
            raise _bad(f"tools[{i}] must be a function tool.", f"tools[{i}]")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise _bad(f"tools[{i}].function needs a name.", f"tools[{i}]")
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(params, dict):
            raise _bad(f"tools[{i}].function.parameters must be a JSON schema object.")
        specs.append(ToolSpec(name, str(fn.get("description") or ""), params))
    return tuple(specs)


def parse_ask(body: Any) -> ClientAsk:
    """A chat-completions body, checked (``ApiError`` 400 naming what is wrong)."""
    if not isinstance(body, dict):
        raise _bad("The body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("'model' is required: one of the ids GET /v1/models lists.", "model")
    n = body.get("n", 1)
    if n not in (1, None):
        raise _bad("'n' must be 1: SIMI Multi's server makes one reply per request.", "n")
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise _bad("'stop' must be a string or a list of strings.", "stop")
    choice = body.get("tool_choice", "auto")
    if choice not in ("auto", "none", None):
        raise _bad(
            "'tool_choice' may be 'auto' or 'none' here; the agent's provider decides "
            "which tool to call.",
            "tool_choice",
        )
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise _bad("'stream_options' must be an object.", "stream_options")
    max_tokens = _number(body, "max_completion_tokens", int, 1, 10_000_000)
    if max_tokens is None:
        max_tokens = _number(body, "max_tokens", int, 1, 10_000_000)
    return ClientAsk(
        model=model,
        messages=_messages(body.get("messages")),
        temperature=_number(body, "temperature", float, 0, 2),
        top_p=_number(body, "top_p", float, 0, 1),
        max_tokens=max_tokens,
        seed=_number(body, "seed", int, -(2**63), 2**63 - 1),
        stop=tuple(stop or ()),
        tools=_tools(body.get("tools")),
        tool_choice=choice or "auto",
        stream=bool(body.get("stream", False)),
        include_usage=bool(options.get("include_usage", False)),
    )


def agent_request(agent: Agent, ask: ClientAsk, *, client_sampling: bool) -> ChatRequest:
    """The request the agent's provider gets: the agent's system prompt first (a client's
    system messages follow it in the same system message: most chat templates take one, at
    the start), the client's conversation, the agent's sampling (a client's temperature,
    top_p and max_tokens only where the agent lets clients choose), the client's tools."""
    system = [agent.system_prompt] if agent.system_prompt.strip() else []
    rest: list[ChatMessage] = []
    for message in ask.messages:
        if message.role == "system" and not rest:
            system.append(message.content)
        else:
            rest.append(message)
    messages = ([ChatMessage("system", "\n\n".join(system))] if system else []) + rest
    sampling = Sampling(
        temperature=agent.temperature,
        top_p=agent.top_p,
        max_tokens=agent.max_tokens,
        seed=agent.seed,
        stop=agent.stop + ask.stop,
    )
    if client_sampling:
        sampling = replace(
            sampling,
            temperature=ask.temperature if ask.temperature is not None else sampling.temperature,
            top_p=ask.top_p if ask.top_p is not None else sampling.top_p,
            max_tokens=ask.max_tokens if ask.max_tokens is not None else sampling.max_tokens,
            seed=ask.seed if ask.seed is not None else sampling.seed,
        )
    return ChatRequest(
        model=agent.model,
        messages=tuple(messages),
        sampling=sampling,
        cache_owner=str(agent.id) if agent.id is not None else None,
        tools=ask.tools,
        tool_choice="none" if ask.tool_choice == "none" else "auto",
    )


def usage_body(prompt: int | None, cached: int | None, output: int | None) -> dict[str, Any]:
    """OpenAI's ``usage``, with ``prompt_tokens_details.cached_tokens``."""
    p, o = prompt or 0, output or 0
    return {
        "prompt_tokens": p,
        "completion_tokens": o,
        "total_tokens": p + o,
        "prompt_tokens_details": {"cached_tokens": cached or 0},
    }


def tool_call_body(call: ToolCall, index: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }
    if index is not None:
        body = {"index": index, **body}
    return body


def finish_of(reason: str) -> str:
    """A finish reason in OpenAI's words ("cancelled" and "error" end as "stop")."""
    return reason if reason in ("stop", "length", "tool_calls") else "stop"


class Completion:
    """The ids and stamps one reply's chunks share."""

    def __init__(self, model_id: str, request_id: str) -> None:
        self.id = f"chatcmpl-{request_id}"
        self.model = model_id
        self.created = int(time.time())
        # a text chunk's frame around its text, rendered once per reply: per token only the
        # text is encoded (``text_frame`` == ``sse(chunk({"content": text}))``)
        head, _, tail = sse(self.chunk({"content": "\x00"})).partition(b'"\\u0000"')
        self._text_head, self._text_tail = head, tail

    def text_frame(self, text: str) -> bytes:
        return self._text_head + json.dumps(text).encode() + self._text_tail

    def chunk(
        self, delta: dict[str, Any], finish: str | None = None, usage: Any = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            body["choices"] = []
            body["usage"] = usage
        return body

    def whole(
        self, text: str, calls: list[ToolCall], finish: str, usage: dict[str, Any]
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [tool_call_body(c) for c in calls]
        elif not text:
            message["content"] = ""
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }


def sse(data: dict[str, Any] | str) -> bytes:
    """One server-sent event: ``data: <json>`` and a blank line."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n".encode()
