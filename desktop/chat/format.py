"""Stats records as short text: the message footer, its tooltip, Markdown exports. Qt-free."""

from __future__ import annotations

import math
from typing import Any


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "?"
    if digits == 0:
        return f"{round(float(value)):,}"
    return f"{float(value):,.{digits}f}"


UNKNOWN_COST = "—"


def cost_text(usd: Any, source: str | None = None) -> str:
    """A cost as a person reads it: "$0.0012", "$1.25"; "local" for a local model (free);
    "—" when the price is unknown (never "$0": an unknown cost is not a free one)."""
    if source == "local":
        return "local"
    if usd is None:
        return UNKNOWN_COST
    value = float(usd)
    if value == 0:
        return "$0"
    if 0 < value < 0.0001:  # two significant digits: $0.0000075, not $0.0000
        return f"${value:.{1 - math.floor(math.log10(value))}f}"
    return f"${value:.4f}" if value < 0.01 else f"${value:.2f}"


def row_cost_text(row: dict[str, Any]) -> str:
    """The cost of a stats row (see ``cost_text``)."""
    return cost_text(row.get("cost_usd"), row.get("price_source"))


def stats_line(
    row: dict[str, Any] | None, agent: str | None = None, model: str | None = None
) -> str:
    """ "Agent · model · TTFT 85 ms · 112 tok/s · 32 (0 cached) → 57 tokens · $0.0004 · stop".

    ``agent``/``model`` lead the line when given (the per-message footer).
    """
    parts: list[str] = [p for p in (agent, model) if p]
    if not row:
        return ""
    model = model or row.get("model_reported") or row.get("model_requested")
    if model and model not in parts and agent:
        parts.append(str(model))
    if row.get("ttft_ms") is not None:
        parts.append(f"TTFT {_num(row['ttft_ms'])} ms")
    if row.get("decode_tok_s") is not None:
        parts.append(f"{_num(row['decode_tok_s'])} tok/s")
    prompt, output = row.get("prompt_tokens"), row.get("output_tokens")
    if prompt is not None or output is not None:
        cached = row.get("cached_tokens")
        left = _num(prompt)
        if cached:
            left += f" ({_num(cached)} cached)"
        tokens = f"{left} → {_num(output)} tokens"
        if row.get("token_source") == "counted":
            tokens += " (counted)"
        parts.append(tokens)
    if row.get("cost_usd") is not None or prompt is not None or output is not None:
        parts.append(row_cost_text(row))
    if row.get("finish_reason"):
        parts.append(str(row["finish_reason"]))
    return " · ".join(parts)


def stats_details(row: dict[str, Any] | None) -> str:
    """Every non-empty field of the stats record, one per line."""
    if not row:
        return ""
    lines = [f"{key}: {value}" for key, value in row.items() if value is not None and key != "id"]
    return "\n".join(lines)
