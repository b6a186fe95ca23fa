"""Parts of a turn's run (``ChatService.run``): one model call streamed, its stats row, and
the context-fit plan for a reply that did not fit."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from desktop.chat.kinds import load_params_for
from desktop.chat.pricing import provider_ref
from desktop.chat.stats_clock import StatsClock
from desktop.errors import UserError
from desktop.llm.events import Finished, ReasoningDelta, RunInfo, TextDelta, ToolCall
from desktop.llm.provider import ChatMessage, ChatRequest
from desktop.local.context import DEFAULT_REPLY_RESERVE, FitPlan, PromptCounter, plan_fit
from desktop.store.agents import Agent
from desktop.store.tool_steps import ToolStep

if TYPE_CHECKING:
    from desktop.chat.price_book import PriceBook
    from desktop.chat.session import ChatService, Turn

log = logging.getLogger("simi.chat")

CHECKPOINT_INTERVAL_S = 1.0
TITLE_LENGTH = 60


@dataclass(frozen=True, slots=True)
class ContextFit:
    """``plan``: turns to drop to fit the current n_ctx; ``raise_n_ctx_to``: a context size
    that holds the whole conversation plus room for the reply."""

    plan: FitPlan
    raise_n_ctx_to: int


def context_fit(
    messages: Sequence[ChatMessage],
    agent: Agent,
    count_tokens: Callable[[list[ChatMessage]], int] | None,
) -> ContextFit:
    n_ctx = agent.n_ctx or 2048
    reserve = min(agent.max_tokens or DEFAULT_REPLY_RESERVE, 1024)
    counter = count_tokens or PromptCounter(load_params_for(agent).model_path)
    try:
        plan = plan_fit(messages, n_ctx, counter, reply_reserve=reserve)
    finally:
        close = getattr(counter, "close", None)
        if callable(close):
            close()
    needed = plan.tokens_before + reserve
    raise_to = -(-needed // 1024) * 1024  # whole KiB-tokens, like the usual presets
    return ContextFit(plan=plan, raise_n_ctx_to=raise_to)


async def stream_call(
    provider: Any,
    request: ChatRequest,
    turn: Turn,
    clock: StatsClock,
    out: tuple[list[str], list[str], list[ToolCall]],
    emit: Callable[[Any], None],
    chat: ChatService,
) -> str:
    """One model call: its events into the clock, the reply's text and thinking, the tool
    calls it asked for (``out``) and ``emit``; returns its finish reason. The text so far is
    stored once a second."""
    parts, thoughts, calls = out
    finish = "error"
    now = chat._clock
    last_checkpoint = now()
    async with contextlib.aclosing(provider.stream(request)) as events:
        async for event in events:
            clock.on_event(event)
            if isinstance(event, RunInfo) and event.notice:
                turn.notice = event.notice
            if isinstance(event, TextDelta | ReasoningDelta):
                (parts if isinstance(event, TextDelta) else thoughts).append(event.text)
                t = now()
                if t - last_checkpoint >= CHECKPOINT_INTERVAL_S:
                    # joined once a second, not per token: cost stays linear
                    chat.conversations.checkpoint(
                        turn.assistant_message_id, "".join(parts), "".join(thoughts)
                    )
                    last_checkpoint = t
            elif isinstance(event, ToolCall):
                calls.append(event)
            elif isinstance(event, Finished):
                finish = event.reason
            emit(event)
    return finish


def call_row(
    turn: Turn,
    clock: StatsClock,
    finish_reason: str,
    steps: Sequence[ToolStep],
    error: UserError | None,
) -> dict[str, Any]:
    """One model call's stats row: the clock's figures, whose call it was, its index in the
    turn and the tools it asked for (how many, how long they ran)."""
    agent = turn.agent
    row = clock.row(finish_reason, error.kind if error else None)
    row.update(
        message_id=turn.assistant_message_id,
        conversation_id=turn.conversation_id,
        agent_id=agent.id,
        agent_name=agent.name,
        provider_kind=agent.kind,
        endpoint_host=urlsplit(agent.base_url).hostname if agent.base_url else None,
        model_requested=agent.model,
        call_index=len(turn.calls) + 1,
    )
    if steps:
        ran = [s.duration_ms for s in steps if s.duration_ms is not None]
        row.update(tool_calls=len(steps), tool_ms=round(sum(ran), 1) if ran else None)
    return row


def title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"


def dataset_prices(agent: Agent) -> bool:
    """Whether the price list can price this agent's calls: a hosted API it knows how to
    name. A server of one's own (llama.cpp, vLLM, Ollama) never is, so its turns neither wait
    for the list to load nor pay for importing it."""
    return provider_ref(agent.kind, agent.base_url) is not None


def log_warm_failure(warming: asyncio.Future[None]) -> None:
    if not warming.cancelled() and warming.exception() is not None:
        log.warning("prices unavailable: costs stay unknown", exc_info=warming.exception())


def warm_prices(prices: PriceBook, agent: Agent) -> asyncio.Future[None] | None:
    """Start warming the price book on a worker thread (None: nothing to warm)."""
    if agent.is_local or prices.ready or not dataset_prices(agent):
        return None
    warming = asyncio.ensure_future(asyncio.to_thread(prices.warm))
    warming.add_done_callback(log_warm_failure)
    return warming
