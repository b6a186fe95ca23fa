"""Small helpers shared by the provider tests: run a stream to the end, pick events apart."""

from __future__ import annotations

import contextlib
from typing import Any, TypeVar

from desktop.errors import UserError
from desktop.llm.anthropic import AnthropicProvider
from desktop.llm.events import ReasoningDelta, StreamEvent, TextDelta
from desktop.llm.gemini import GeminiProvider
from desktop.llm.openai_compat import OpenAICompatProvider
from desktop.llm.provider import ChatMessage, ChatRequest, Provider, Sampling

T = TypeVar("T")
KINDS = ("openai", "anthropic", "gemini")

REQUEST = ChatRequest(
    model="test-model",
    messages=(
        ChatMessage("system", "Be brief."),
        ChatMessage("user", "Say hi."),
    ),
    sampling=Sampling(max_tokens=16, temperature=0.0),
)


def make(kind: str, base: str, key: str | None = "sk-test-key-0123456789", **kw: Any) -> Provider:
    """A provider of ``kind`` whose base URL is the fault server at ``base`` (no path)."""
    kw.setdefault("label", f"Test {kind}")
    if kind == "openai":
        return OpenAICompatProvider(f"{base}/v1", key, **kw)
    if kind == "anthropic":
        return AnthropicProvider(key, base_url=f"{base}/v1", **kw)
    if kind == "gemini":
        return GeminiProvider(key, base_url=f"{base}/v1beta", **kw)
    raise ValueError(kind)


async def run(
    provider: Provider, request: ChatRequest = REQUEST
) -> tuple[list[StreamEvent], UserError | None]:
    """All events until the end or a UserError (returned, with the events before it)."""
    events: list[StreamEvent] = []
    try:
        async with contextlib.aclosing(provider.stream(request)) as stream:  # type: ignore[type-var]
            async for event in stream:
                events.append(event)
    except UserError as exc:
        return events, exc
    finally:
        await provider.aclose()
    return events, None


def text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def reasoning(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, ReasoningDelta))


def only(events: list[StreamEvent], kind: type[T]) -> T:
    found = [e for e in events if isinstance(e, kind)]
    assert len(found) == 1, f"expected one {kind.__name__}, got {found}"
    return found[0]
