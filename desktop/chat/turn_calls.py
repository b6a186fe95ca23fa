"""Parts of a turn's run (``ChatService.run``): a model call's record as a turn labels it,
the conversation's title, and the context-fit plan for a reply that did not fit. The call
itself is ``chat/call.py``'s, as for every caller."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from desktop.chat.call import ModelCall
from desktop.chat.call_stats import CallStats
from desktop.chat.kinds import load_params_for
from desktop.errors import UserError
from desktop.llm.provider import ChatMessage
from desktop.local.context import DEFAULT_REPLY_RESERVE, FitPlan, PromptCounter, plan_fit
from desktop.store.agents import Agent
from desktop.store.tool_steps import ToolStep

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


def call_stats(
    call: ModelCall,
    finish_reason: str,
    error: UserError | None,
    *,
    message_id: int,
    conversation_id: int,
    call_index: int,
    steps: Sequence[ToolStep],
    source: str | None = None,
    api_client: str | None = None,
) -> CallStats:
    """One model call of a turn's record (``ModelCall.stats``): its reply, its index in the
    turn and the tools it asked for (how many, how long they ran; None when it asked for
    none)."""
    ran = [s.duration_ms for s in steps if s.duration_ms is not None]
    return call.stats(
        finish_reason,
        error,
        message_id=message_id,
        conversation_id=conversation_id,
        call_index=call_index,
        tool_calls=len(steps) if steps else None,
        tool_ms=round(sum(ran), 1) if ran else None,
        source=source,
        api_client=api_client,
    )


def title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"
