"""Axis arithmetic for the dashboard's charts (no Qt): readable ticks for values and for time,
and how each metric is written with its unit.

Value ticks are 1, 2 or 5 times a power of ten; time ticks fall on whole minutes, hours, days
or months of the local clock, so a label reads as a person would write the time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from desktop.chat.format import cost_text, date_text

MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0
TIME_STEPS = (
    MINUTE,
    5 * MINUTE,
    15 * MINUTE,
    30 * MINUTE,
    HOUR,
    3 * HOUR,
    6 * HOUR,
    12 * HOUR,
    DAY,
    2 * DAY,
    7 * DAY,
    14 * DAY,
)
MONTH = 30 * DAY  # a step this long or longer falls on the first of a month


def nice_step(span: float, max_ticks: int) -> float:
    """The smallest of 1, 2, 5 × 10^k that cuts ``span`` into at most ``max_ticks`` steps."""
    if span <= 0 or max_ticks < 1:
        return 1.0
    raw = span / max_ticks
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * power >= raw:
            return m * power
    return 10 * power  # pragma: no cover - the loop always returns


def value_ticks(top: float, max_ticks: int = 5) -> tuple[float, list[float]]:
    """(axis maximum, ticks from 0) for values in 0..``top``; the maximum is a tick."""
    if top <= 0 or not math.isfinite(top):
        return 1.0, [0.0, 1.0]
    step = nice_step(top, max_ticks)
    count = max(1, math.ceil(top / step - 1e-9))
    return step * count, [step * i for i in range(count + 1)]


@dataclass(frozen=True, slots=True)
class TimeTick:
    at: float  # seconds since the epoch
    label: str  # the time of day, or the date when the step is a day or more
    date: str  # the date under a time-of-day label where the day changes ("" otherwise)


def time_ticks(start: float, end: float, max_ticks: int) -> list[TimeTick]:
    """Ticks on whole local minutes/hours/days/months between ``start`` and ``end``."""
    if end <= start:
        end = start + MINUTE
    span = end - start
    step = next((s for s in TIME_STEPS if span / s <= max(1, max_ticks)), MONTH)
    ticks: list[TimeTick] = []
    if step >= MONTH:
        months = max(1, math.ceil(span / MONTH / max(1, max_ticks)))
        d = datetime.fromtimestamp(start).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        while d.timestamp() <= end:
            if d.timestamp() >= start:
                ticks.append(TimeTick(d.timestamp(), date_text(d, "%b %Y"), ""))
            month = d.month - 1 + months
            d = d.replace(year=d.year + month // 12, month=month % 12 + 1)
        return ticks
    first = datetime.fromtimestamp(start)
    if step >= DAY:
        d = first.replace(hour=0, minute=0, second=0, microsecond=0)
        if d.timestamp() < start:
            d += timedelta(days=1)
        days = int(step // DAY)
        while d.timestamp() <= end:
            ticks.append(TimeTick(d.timestamp(), date_text(d, "%-d %b"), ""))
            d += timedelta(days=days)
        return ticks
    t = math.ceil(start / step) * step
    if step >= HOUR:  # whole local hours: step from local midnight, not from the epoch
        midnight = first.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
        t = midnight + math.ceil((start - midnight) / step) * step
    last_day = None
    while t <= end:
        d = datetime.fromtimestamp(t)
        day = date_text(d, "%-d %b")
        ticks.append(TimeTick(t, f"{d:%H:%M}", day if day != last_day else ""))
        last_day = day
        t += step
    return ticks


def ms_text(value: float | None) -> str:
    """420 ms, 1.24 s, 12.5 s, 2 min 5 s."""
    if value is None:
        return "—"
    if value < 1000:
        return f"{value:.0f} ms"
    if value < 10_000:
        return f"{value / 1000:.2f} s"
    if value < 120_000:
        return f"{value / 1000:.1f} s"
    minutes, seconds = divmod(round(value / 1000), 60)
    return f"{minutes} min {seconds} s"


def tok_s_text(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f} tok/s" if value < 100 else f"{value:,.0f} tok/s"


def count_text(value: float | None) -> str:
    """1,234 / 45.3k / 1.2M: short enough for a table cell."""
    if value is None:
        return "—"
    v = float(value)
    if abs(v) < 10_000:
        return f"{v:,.0f}"
    if abs(v) < 1_000_000:
        return f"{v / 1000:.1f}k"
    return f"{v / 1_000_000:.2f}M"


def usd_text(value: float | None) -> str:
    return "—" if value is None else cost_text(value)


def ms_tick(value: float) -> str:
    """An axis value: 500 ms, 1 s, 1.5 s (no needless decimals)."""
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:g} s"


def tok_s_tick(value: float) -> str:
    return f"{value:g} tok/s"


def count_tick(value: float) -> str:
    return count_text(value)


def usd_tick(value: float) -> str:
    return "$0" if value == 0 else f"${value:.6f}".rstrip("0").rstrip(".")


@dataclass(frozen=True, slots=True)
class Metric:
    key: str  # the stats column (StatsStore.series' metric)
    label: str  # in the metric chooser and the chart's title
    text: Callable[[float | None], str]  # a value with its unit
    tick: Callable[[float], str]  # an axis value with its unit, as short as it reads
    better: str  # "lower" or "higher": what a person wants of it


METRICS: tuple[Metric, ...] = (
    Metric("ttft_ms", "Time to first token", ms_text, ms_tick, "lower"),
    Metric("decode_tok_s", "Decode speed", tok_s_text, tok_s_tick, "higher"),
    Metric("prefill_tok_s", "Prefill speed", tok_s_text, tok_s_tick, "higher"),
    Metric("total_ms", "Total time", ms_text, ms_tick, "lower"),
    Metric("output_tokens", "Output tokens", count_text, count_tick, "higher"),
    Metric("cost_usd", "Cost per call", usd_text, usd_tick, "lower"),
    Metric("retrieval_ms", "Knowledge search time", ms_text, ms_tick, "lower"),
)


def metric(key: str) -> Metric:
    return next(m for m in METRICS if m.key == key)


@dataclass(frozen=True, slots=True)
class Point:
    """One call on the time chart."""

    agent: str
    at: float  # seconds since the epoch
    value: float
    conversation_id: int | None
    message_id: int | None


def points_of(rows: Sequence[Mapping[str, Any]]) -> list[Point]:
    """Chart points from ``StatsStore.series`` rows (those with a time and a value)."""
    return [
        Point(
            str(r["agent"]),
            datetime.fromisoformat(str(r["started_at"])).timestamp(),
            float(r["value"]),
            r.get("conversation_id"),
            r.get("message_id"),
        )
        for r in rows
        if r.get("value") is not None and r.get("started_at")
    ]
