"""Pure text helpers for the window: stats lines, tooltips, long-text truncation."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

DISPLAY_LIMIT = 20_000


def truncate_for_display(text: str, limit: int = DISPLAY_LIMIT) -> str:
    """The first ``limit`` characters plus a note, so a 1 MB message lays out quickly."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n\n… ({len(text) - limit:,} more characters)"


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "?"
    if digits == 0:
        return f"{round(float(value)):,}"
    return f"{float(value):,.{digits}f}"


def format_stats(row: dict[str, Any] | None) -> str:
    """ "TTFT 85 ms · 112 tok/s · 32 → 57 tokens · stop" from an inference_stats row."""
    if not row:
        return ""
    parts: list[str] = []
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
    if row.get("finish_reason"):
        parts.append(str(row["finish_reason"]))
    return " · ".join(parts)


def stats_tooltip(row: dict[str, Any] | None) -> str:
    """Every non-empty field of the stats record, one per line."""
    if not row:
        return ""
    lines = [f"{key}: {value}" for key, value in row.items() if value is not None and key != "id"]
    return "\n".join(lines)


def relative_time(iso: str | None, now: datetime | None = None) -> str:
    """ "just now", "5 min ago", "3 h ago", "yesterday", "12 Mar"."""
    if not iso:
        return ""
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        return ""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    now = now or datetime.now(UTC)
    seconds = (now - when).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86_400:
        return f"{int(seconds // 3600)} h ago"
    if seconds < 2 * 86_400:
        return "yesterday"
    return when.astimezone().strftime("%d %b").lstrip("0")
