"""Small helpers shared by the provider tests: run a stream to the end, pick events apart."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from desktop.errors import UserError
from desktop.llm.anthropic import AnthropicProvider
from desktop.llm.events import ReasoningDelta, StreamEvent, TextDelta
from desktop.llm.gemini import GeminiProvider
from desktop.llm.openai_compat import OpenAICompatProvider
from desktop.llm.provider import ChatMessage, ChatRequest, Provider, Sampling
from tests.helpers.fault_server import Recorded, Reply, replay

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

# A system prompt, two questions in a row (sent as one turn), a reply and the next question.
HISTORY = (
    ChatMessage("system", "Be brief."),
    ChatMessage("user", "One"),
    ChatMessage("user", "Two"),
    ChatMessage("assistant", "Ok"),
    ChatMessage("user", "Three"),
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


async def cancel_after_deltas(
    provider: Provider, request: ChatRequest, count: int, *, then_busy: bool = False
) -> int:
    """Consume ``provider.stream(request)`` in a task and cancel that task, as Stop does, once
    ``count`` text deltas have arrived; with ``then_busy`` the consumer first stops reading (busy
    painting), so the cancel lands while the stream is suspended between events. Returns how
    many text deltas the consumer had seen when it was cancelled."""
    seen = 0
    reached = asyncio.Event()

    async def consume() -> None:
        nonlocal seen
        async with contextlib.aclosing(provider.stream(request)) as events:  # type: ignore[type-var]
            async for event in events:
                if isinstance(event, TextDelta):
                    seen += 1
                    if seen >= count:
                        reached.set()
                        if then_busy:
                            await asyncio.Event().wait()

    task = asyncio.create_task(consume())
    await reached.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return seen


def model_pages(kind: str, next_page: str) -> Callable[[Recorded], Reply]:
    """A fault-server handler for a two-page model list: ``{kind}_models_page2.json`` when the
    request path carries ``next_page`` (the provider asked for the second page), page 1 else."""

    def pages(request: Recorded) -> Reply:
        page = 2 if next_page in request.path else 1
        return replay(f"{kind}_models_page{page}.json")

    return pages


async def list_models(provider: Provider) -> list[str]:
    """The provider's model list, closing the provider after."""
    try:
        return await provider.list_models()
    finally:
        await provider.aclose()


def text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def reasoning(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, ReasoningDelta))


def only(events: list[StreamEvent], kind: type[T]) -> T:
    found = [e for e in events if isinstance(e, kind)]
    assert len(found) == 1, f"expected one {kind.__name__}, got {found}"
    return found[0]
