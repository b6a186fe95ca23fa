"""Fit a conversation into a context window by dropping its oldest turns.

Qt-free and model-agnostic: the caller passes ``count_tokens(messages) -> int`` (for a local
model: the rendered prompt through the model's own tokenizer, ``LocalEngine.count_prompt``).
A *turn* is one user message and the replies that follow it. The system prompt and the newest
turn are never dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from desktop.llm.provider import ChatMessage

DEFAULT_REPLY_RESERVE = 256  # tokens kept free for the answer


@dataclass(frozen=True, slots=True)
class FitPlan:
    """``drop_turns`` oldest turns must go for the rest to fit; ``fits`` False when even the
    newest turn alone (with the system prompt) is too long for ``n_ctx``."""

    drop_turns: int
    tokens_before: int
    tokens_after: int
    n_ctx: int
    turns: int
    fits: bool
    messages_dropped: int = 0


def split_turns(
    messages: Sequence[ChatMessage],
) -> tuple[list[ChatMessage], list[list[ChatMessage]]]:
    """(leading system messages, turns)."""
    system: list[ChatMessage] = []
    turns: list[list[ChatMessage]] = []
    for m in messages:
        if m.role == "system" and not turns:
            system.append(m)
        elif m.role == "user" or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    return system, turns


def without_oldest_turns(messages: Sequence[ChatMessage], drop: int) -> list[ChatMessage]:
    system, turns = split_turns(messages)
    return [*system, *(m for turn in turns[drop:] for m in turn)]


def plan_fit(
    messages: Sequence[ChatMessage],
    n_ctx: int,
    count_tokens: Callable[[list[ChatMessage]], int],
    reply_reserve: int = DEFAULT_REPLY_RESERVE,
) -> FitPlan:
    """How many of the oldest turns to drop so the prompt plus ``reply_reserve`` tokens fit.

    Token counts only shrink as turns go, so a binary search needs ~log2(turns) counts.
    """
    _system, turns = split_turns(messages)
    budget = n_ctx - max(0, reply_reserve)
    before = count_tokens(list(messages))
    if before <= budget:
        return FitPlan(0, before, before, n_ctx, len(turns), True)
    lo, hi = 1, max(len(turns) - 1, 0)  # never drop the newest turn
    best: tuple[int, int] | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        n = count_tokens(without_oldest_turns(messages, mid))
        if n <= budget:
            best = (mid, n)
            hi = mid - 1
        else:
            lo = mid + 1
    if best is None:
        last = len(turns) - 1 if turns else 0
        n = count_tokens(without_oldest_turns(messages, last)) if last else before
        return FitPlan(last, before, n, n_ctx, len(turns), False, _count(turns, last))
    drop, after = best
    return FitPlan(drop, before, after, n_ctx, len(turns), True, _count(turns, drop))


def _count(turns: list[list[ChatMessage]], drop: int) -> int:
    return sum(len(t) for t in turns[:drop])


class PromptCounter:
    """Counts a conversation's prompt tokens exactly as the engine will: the model's own chat
    template (ChatML without one) and its own tokenizer.

    Loads the vocabulary only (``vocab_only=True``: metadata and tokenizer, no weights; a few
    MiB, ~0.1 s), in the calling process, after the header passed ``desktop.local.gguf``'s
    checks. Call it off the GUI thread; it is not thread-safe.
    """

    def __init__(self, model_path: str) -> None:
        self.model_path = model_path
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            import llama_cpp

            from desktop.local.loading import LoadedModel, LoadParams, check_gguf_file

            check_gguf_file(Path(self.model_path))
            llm = llama_cpp.Llama(self.model_path, vocab_only=True, verbose=False)
            self._model = LoadedModel(LoadParams(self.model_path), llm, 0.0)
        return self._model

    def __call__(self, messages: list[ChatMessage]) -> int:
        from desktop.local.engine import count_prompt_tokens

        return count_prompt_tokens(self._load(), tuple(messages))

    def close(self) -> None:
        model, self._model = self._model, None
        if model is not None:
            model.llm.close()
