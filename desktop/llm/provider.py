"""The Provider protocol and the request it takes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from desktop.llm.events import StreamEvent, ToolCall

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image in a message, ready for the wire: already oriented, stripped of metadata and
    sized for the agent's provider (``desktop/attach/images.py``). ``data``: the encoded
    file (PNG, JPEG, WebP or GIF, as ``mime`` says). ``width`` 0: not prepared yet (as an API
    client sent it); ``chat/one_shot.py`` prepares it before the call."""

    mime: str
    data: bytes = field(repr=False)
    name: str = ""
    width: int = 0
    height: int = 0


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str
    # An assistant message that called tools (its text may be empty), in the order called.
    tool_calls: tuple[ToolCall, ...] = ()
    # role "tool": the result of the call with this id, from the tool of this name.
    tool_call_id: str | None = None
    name: str | None = None
    # role "tool": the tool failed and ``content`` says how (Anthropic's ``is_error``; the
    # other protocols have no flag and get the text alone).
    is_error: bool = False
    # role "user": images sent with the text (documents are text in ``content`` already,
    # each in its delimited block: ``desktop/attach/documents.py``)
    images: tuple[ImagePart, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool a model may call: its name, what it does, and its arguments' JSON schema."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Sampling:
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str
    messages: tuple[ChatMessage, ...]
    sampling: Sampling = field(default_factory=Sampling)
    # A key that lets a local engine reuse its KV cache between turns of one conversation.
    session_key: str | None = None
    # Whose saved prompt states a local call makes (the agent's id): deleted with the agent.
    cache_owner: str | None = None
    # Tools the model may call (none: a plain chat call, byte for byte as before).
    tools: tuple[ToolSpec, ...] = ()
    # "none": the tools are described (the history holds calls) but the model must answer in
    # text (an agentic turn past its round limit).
    tool_choice: Literal["auto", "none"] = "auto"


class Provider(Protocol):
    """One wire protocol. ``stream`` yields deltas then exactly one ``Finished``; it raises
    ``UserError`` subclasses on failure. Cancelling the consuming task stops the call."""

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]: ...

    async def list_models(self) -> list[str]: ...

    async def aclose(self) -> None: ...
