"""What the three JSON wire protocols share when they build a request or read a count.

OpenAI, Anthropic and Gemini name the same sampling settings differently, two of them take the
system prompt apart from turns that must alternate, and all of them report token counts as
JSON numbers that a careful reader checks. Provider JSON itself stays in the provider modules.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from desktop.llm.provider import ChatMessage, Sampling


def sampling_fields(
    sampling: Sampling,
    *,
    temperature: str | None = "temperature",
    top_p: str | None = "top_p",
    max_tokens: str | None = "max_tokens",
    seed: str | None = "seed",
    stop: str | None = "stop",
) -> dict[str, Any]:
    """The sampling settings a request sets, under the names one API gives them: by default
    their own (OpenAI's), or another name (``top_p="topP"``), or None where the API has no
    such setting (or takes it apart)."""
    pairs = (
        (temperature, sampling.temperature),
        (top_p, sampling.top_p),
        (max_tokens, sampling.max_tokens),
        (seed, sampling.seed),
        (stop, list(sampling.stop) or None),
    )
    return {name: value for name, value in pairs if name and value is not None}


def system_and_turns(
    messages: Iterable[ChatMessage],
) -> tuple[str, list[tuple[str, list[str]]]]:
    """For APIs that take the system prompt apart and want user and assistant to alternate:
    the system messages' text, and the other messages as (role, texts) turns, consecutive
    messages of one role joined into one turn."""
    messages = tuple(messages)
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns: list[tuple[str, list[str]]] = []
    for m in messages:
        if m.role == "system":
            continue
        if turns and turns[-1][0] == m.role:
            turns[-1][1].append(m.content)
        else:
            turns.append((m.role, [m.content]))
    return system, turns


def whole(value: object) -> int | None:
    """A token count from provider JSON: an integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
