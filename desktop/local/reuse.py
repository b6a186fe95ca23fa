"""Which evaluated prompt a request starts from: the live context, a state from the memory
cache, or a saved system-prompt state (``desktop.local.prompt_cache``). Runs in the worker;
``LocalEngine`` asks ``plan`` before evaluating a prompt and calls ``remember`` after a reply."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from desktop.local.prompt_cache import (
    DEFAULT_PROMPT_CACHE_MB,
    DEFAULT_SAVED_STATES_MB,
    RESTORE_GAIN_TOKENS,
    SAVE_MIN_TOKENS,
    PromptStateCache,
    SavedStates,
    common_prefix,
)

MB = 1024 * 1024


@dataclass(slots=True)
class Plan:
    cached: int  # prompt tokens not evaluated again (what Usage reports)
    source: str | None  # "context" | "memory" | "saved" | None
    restore_ms: float | None = None
    save_upto: int = 0  # evaluate the system prompt up to here and save it (0: nothing to save)
    save_parts: dict[str, Any] | None = None


class PromptReuse:
    def __init__(self) -> None:
        self.memory = PromptStateCache(DEFAULT_PROMPT_CACHE_MB * MB)
        self.saved: SavedStates | None = None
        self._saved_budget = DEFAULT_SAVED_STATES_MB * MB
        self._llm: Any = None  # the model the memory cache's states belong to

    def configure(self, folder: str | None, memory_mb: int | None, saved_mb: int | None) -> None:
        if memory_mb is not None:
            self.memory.budget = max(0, memory_mb) * MB
            while self.memory.size > self.memory.budget and len(self.memory):
                self.memory._states.popitem(last=False)
        if saved_mb is not None:
            self._saved_budget = max(0, saved_mb) * MB
        if folder:
            self.saved = SavedStates(Path(folder), self._saved_budget)
        if self.saved is not None:
            self.saved.budget = self._saved_budget

    def _same_model(self, llm: Any) -> None:
        if llm is not self._llm:  # another model (or a reload): its states mean nothing here
            self.memory.clear()
            self._llm = llm

    def plan(
        self,
        model: Any,
        tokens: Sequence[int],
        system_tokens: Callable[[], list[int] | None],
        build: str,
    ) -> Plan:
        """Restore the best state for ``tokens`` into the model, and say what was reused."""
        llm = model.llm
        self._same_model(llm)
        n_live = int(llm.n_tokens)
        live = common_prefix([int(t) for t in llm.input_ids[:n_live]], tokens)
        last = len(tokens) - 1  # at least one token is evaluated (fresh logits)
        plan = Plan(min(live, last), "context" if live > 0 else None)
        n_best, key = self.memory.best(tokens)
        if key is not None and min(n_best, last) >= plan.cached + RESTORE_GAIN_TOKENS:
            started = time.perf_counter()
            if self.memory.take(key, llm):
                ms = (time.perf_counter() - started) * 1000
                return Plan(min(n_best, last), "memory", round(ms, 2))
        if self.saved is None or self.saved.budget <= 0:
            return plan
        system = system_tokens()
        if system is None:
            return plan
        n_sys = common_prefix(system, tokens)
        if n_sys < SAVE_MIN_TOKENS or n_sys > last or plan.cached >= n_sys:
            return plan
        parts = _parts(model, build)
        started = time.perf_counter()
        if self.saved.load(parts, tokens[:n_sys], llm):
            ms = (time.perf_counter() - started) * 1000
            return Plan(n_sys, "saved", round(ms, 2))
        plan.save_upto, plan.save_parts = n_sys, parts
        return plan

    def save_system(self, plan: Plan, llm: Any, tokens: Sequence[int], owner: str | None) -> None:
        """The live context holds exactly the system prompt's tokens: save it."""
        if self.saved is not None and plan.save_parts is not None:
            self.saved.save(plan.save_parts, tokens[: plan.save_upto], llm, owner)

    def remember(self, llm: Any) -> None:
        self._same_model(llm)
        self.memory.keep(llm)

    def forget_model(self) -> None:
        self.memory.clear()
        self._llm = None


def _parts(model: Any, build: str) -> dict[str, Any]:
    """Everything a saved state's validity depends on besides its tokens."""
    params = model.params
    size, mtime_ns = model.file_stat or (None, None)
    return {
        "model": str(model.path),
        "size": size,
        "mtime_ns": mtime_ns,
        "n_ctx": int(params.n_ctx),
        "kv_type": params.kv_type or "f16",
        "flash_attn": bool(params.flash_attn),
        "llama_cpp": build,
    }
