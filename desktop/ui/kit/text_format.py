"""Pure text helpers for the window: stats lines, tooltips, long-text truncation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from desktop.chat.format import date_text, stats_line, stats_line_variants, stats_tooltip_text

DISPLAY_LIMIT = 20_000  # a message in a plain label (the person's own)
# A reply is a MarkdownView, which lays out what is on screen first and the rest when idle:
# the whole of any reply a model is likely to write is shown (and a longer stream is not cut
# when it ends, see MessageBubble._render).
REPLY_DISPLAY_LIMIT = 400_000


def truncate_for_display(text: str, limit: int = DISPLAY_LIMIT) -> str:
    """The first ``limit`` characters plus a note, so a 1 MB message lays out quickly."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n\n… ({len(text) - limit:,} more characters)"


def format_stats(
    row: dict[str, Any] | None, agent: str | None = None, model: str | None = None
) -> str:
    """ "Agent · model · TTFT 85 ms · 112 tok/s · 32 → 57 tokens" from an inference_stats row
    (the model by its short name, see ``desktop.chat.format.short_model_name``)."""
    return stats_line(row, agent, model)


def footer_lines(
    row: dict[str, Any] | None, agent: str | None = None, model: str | None = None
) -> list[str]:
    """The footer's line, then shorter wordings for a narrow bubble (see
    ``desktop.chat.format.stats_line_variants``)."""
    return stats_line_variants(row, agent, model)


def stats_tooltip(
    row: dict[str, Any] | None, agent: str | None = None, model: str | None = None
) -> str:
    """The whole line with the full model name, then every non-empty field of the record."""
    return stats_tooltip_text(row, agent, model)


def relative_time(iso: str | None, now: datetime | None = None) -> str:
    """ "just now", "5 min ago", "3 h ago", "yesterday", "12 Mar", "12 Mar 2025": hours while
    it is the same local day (or under 6 h), then local calendar days: at 00:30, 23:00 is
    "1 h ago" and a reply from 30 hours back is "1 Dec", not "yesterday"."""
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
    local, today = when.astimezone(), now.astimezone().date()
    if local.date() == today or seconds < 6 * 3600:
        return f"{int(seconds // 3600)} h ago"
    if local.date() == today - timedelta(days=1):
        return "yesterday"
    return date_text(local, "%-d %b" if local.year == today.year else "%-d %b %Y")
