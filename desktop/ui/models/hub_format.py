"""Words for the "Find models" tab: sizes as the hub shows them (decimal GB), counts, dates
relative to now ("3 days ago"), a download's line ("1.2 GB of 4.9 GB · 12.3 MB/s · 5 min
left") and the colour of a fit mark. No Qt here."""

from __future__ import annotations

from datetime import UTC, datetime

from desktop.hub.downloads import DownloadProgress

FIT_COLOURS = {  # verdict -> (light, dark)
    "gpu": ("#1f7a3a", "#7bd88f"),
    "ram": ("#1f7a3a", "#7bd88f"),
    "tight": ("#8a5a00", "#f2d68a"),
    "too_big": ("#a3201f", "#ff9e9e"),
    "unknown": ("#6b7280", "#9199a6"),
}


def fit_colour(verdict: str, dark: bool) -> str:
    light, night = FIT_COLOURS.get(verdict, FIT_COLOURS["unknown"])
    return night if dark else light


def size_text(n: float | None) -> str:
    """Bytes in decimal units, as the hub's pages show them: "4.9 GB", "812 MB", "12 kB"."""
    if n is None:
        return "—"
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            value = n / size
            return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{int(n)} B"


def parse_time(iso: str | None) -> datetime | None:
    if not iso:
        return None
    try:
        when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def relative_time(iso: str | None, now: datetime | None = None) -> str:
    """ "just now", "5 minutes ago", "3 days ago", "2 months ago", "4 years ago"; "—" unknown."""
    when = parse_time(iso)
    if when is None:
        return "—"
    seconds = ((now or datetime.now(UTC)) - when).total_seconds()
    if seconds < 60:
        return "just now"
    for unit, size in (
        ("year", 365 * 86400),
        ("month", 30 * 86400),
        ("week", 7 * 86400),
        ("day", 86400),
        ("hour", 3600),
        ("minute", 60),
    ):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'' if n == 1 else 's'} ago"
    return "just now"


def duration_text(seconds: float) -> str:
    """Time left in words: "12 s", "5 min", "1 h 20 min"."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{round(s / 60)} min"
    hours, rest = divmod(s, 3600)
    return f"{hours} h {rest // 60} min" if rest >= 60 else f"{hours} h"


def progress_text(p: DownloadProgress) -> str:
    """The line under a download's bar, for its state."""
    sizes = f"{size_text(p.done)} of {size_text(p.total)}"
    if p.state == "running":
        parts = [sizes]
        if p.speed_bps:
            parts.append(f"{size_text(p.speed_bps)}/s")
        if p.eta_s is not None:
            parts.append(f"{duration_text(p.eta_s)} left")
        return " · ".join(parts)
    if p.state == "queued":
        return f"Starting · {sizes}"
    if p.state == "paused":
        return f"Paused · {sizes}"
    if p.state == "verifying":
        return "Checking the file against the hub's checksum…"
    if p.state == "complete":
        return f"Downloaded · {size_text(p.total)}"
    if p.state == "cancelled":
        return "Cancelled · the partial file was deleted"
    return p.error or "The download failed."


def progress_texts(p: DownloadProgress) -> list[str]:
    """The line, then shorter wordings for a narrow row (the first that fits is shown)."""
    whole = progress_text(p)
    if p.state != "running":
        return [whole]
    pct = f"{p.done * 100 // p.total}%" if p.total > 0 else ""
    left = f" · {duration_text(p.eta_s)} left" if p.eta_s is not None else ""
    return [whole, f"{size_text(p.done)} of {size_text(p.total)}{left}", f"{pct}{left}"]


def percent(p: DownloadProgress) -> int:
    return int(p.done * 1000 / p.total) if p.total > 0 else 0
