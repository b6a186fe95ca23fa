"""What the three JSON wire protocols share when they build a request or read a count.

OpenAI, Anthropic and Gemini name the same sampling settings differently, all of them carry an
image's bytes as base64 text, and all of them report token counts as JSON numbers that a
careful reader checks (the turns two of them want alternating, with the system prompt apart,
are ``tool_wire.system_and_groups``). Provider JSON itself stays in the provider modules.
"""

from __future__ import annotations

import base64
from typing import Any

from desktop.llm.provider import ImagePart, Sampling


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


def whole(value: object) -> int | None:
    """A token count from provider JSON: an integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def base64_of(image: ImagePart) -> str:
    """An image's bytes as base64 text (standard alphabet, padded), as every wire wants."""
    return base64.b64encode(image.data).decode("ascii")
