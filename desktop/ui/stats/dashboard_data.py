"""What the Stats page asks the store and how it writes the answers (no widgets here).

``DashboardQuery`` is the page's filter (a date range, the agents a person picked, the chart's
metric); ``load`` answers it on a worker thread with two questions to SQLite (the per-agent
summary of the range, the chosen agents' calls for the chart) and returns a ``Snapshot``.
``summary_cells`` turns one summary dict into the table's words: units written out, cost as
"local", "—" (no price known) or "$0.42 + 3 unpriced" (an unknown price never counts as $0).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from desktop.chat.format import date_text
from desktop.store.stats import StatsFilter, StatsStore
from desktop.ui.stats.chart_axes import Point, count_text, ms_text, points_of, tok_s_text, usd_text

SERIES_LIMIT = 2000
DEFAULT_AGENTS = 5  # picked for the chart and the bars until a person picks others


@dataclass(frozen=True, slots=True)
class DateRange:
    key: str
    label: str
    days: int | None  # None: all time (or custom dates)


RANGES: tuple[DateRange, ...] = (
    DateRange("24h", "Last 24 hours", 1),
    DateRange("7d", "Last 7 days", 7),
    DateRange("30d", "Last 30 days", 30),
    DateRange("90d", "Last 90 days", 90),
    DateRange("all", "All time", None),
    DateRange("custom", "Custom dates", None),
)

ERROR_WORDS = {
    "auth": "key refused",
    "rate_limited": "rate limited",
    "context_too_long": "prompt too long for the context",
    "model_not_found": "model not found",
    "unavailable": "service unreachable",
    "stalled": "stalled mid-reply",
    "bad_response": "unreadable answer",
    "local_model": "local model failed",
    "secrets_unavailable": "key store locked",
    "unknown": "other",
}


FROM_TO = "%d %b %Y %H:%M"


def _utc_iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


def range_bounds(
    key: str,
    now: datetime,
    custom: tuple[date, date] | None = None,
) -> tuple[str | None, str | None]:
    """(since, until) as stored timestamps (UTC) for a range; custom dates are local days,
    both included (until is the start of the day after ``custom[1]``)."""
    if key == "custom" and custom is not None:
        start, end = custom
        if end < start:
            start, end = end, start
        since = datetime.combine(start, time()).astimezone()
        until = datetime.combine(end + timedelta(days=1), time()).astimezone()
        return _utc_iso(since), _utc_iso(until)
    days = next((r.days for r in RANGES if r.key == key), None)
    if days is None:
        return None, None
    # whole minutes, so the same range asked twice within a minute is the same question
    since = now.replace(second=0, microsecond=0) - timedelta(days=days)
    return _utc_iso(since), None


def range_words(since: str | None, until: str | None) -> str:
    """'between 1 Nov 2026 and 30 Nov 2026' in local dates, for an empty state."""

    def day(text: str) -> str:
        d = datetime.fromisoformat(text).astimezone()
        return date_text(d, "%-d %b %Y")

    if since and until:
        last = datetime.fromisoformat(until).astimezone() - timedelta(milliseconds=1)
        return f"between {day(since)} and {date_text(last, '%-d %b %Y')}"
    if since:
        d = datetime.fromisoformat(since).astimezone()
        return f"since {date_text(d, '%-d %b %Y, %H:%M')}"
    if until:
        return f"before {day(until)}"
    return "at all"


@dataclass(frozen=True, slots=True)
class DashboardQuery:
    since: str | None
    until: str | None
    picked: tuple[str, ...] | None  # None: the busiest agents of the range
    metric: str
    # who made the calls (``StatsFilter``): 'app', 'api' or None (both); API key names
    source: str | None = None
    clients: tuple[str, ...] = ()

    def stats_filter(self, agents: tuple[str, ...] = ()) -> StatsFilter:
        return StatsFilter(agents, self.since, self.until, source=self.source, clients=self.clients)


@dataclass(slots=True)
class Snapshot:
    """What the page shows: every agent of the range (for the picker) and the chosen ones."""

    query: DashboardQuery
    agents: list[dict[str, Any]]  # summary of every agent with calls in the range
    chosen: tuple[str, ...]
    series: list[dict[str, Any]] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)  # the series, parsed for the chart
    any_calls: bool = True  # False: no call was ever recorded
    last_id: int | None = None
    # the key names API calls were made with; None: no call ever came through the API server
    api_clients: tuple[str, ...] | None = None

    @property
    def chosen_rows(self) -> list[dict[str, Any]]:
        names = {n.casefold() for n in self.chosen}
        return [r for r in self.agents if str(r["agent"]).casefold() in names]

    @property
    def series_capped(self) -> bool:
        return len(self.series) >= SERIES_LIMIT


def latest_id(stats: StatsStore) -> int | None:
    rows = stats.rows(limit=1)
    return int(rows[0]["id"]) if rows else None


def load(stats: StatsStore, query: DashboardQuery, cached: Snapshot | None = None) -> Snapshot:
    """Answer ``query`` (on a worker thread). ``cached``: the last answer; its summary is
    reused when only the agents or the metric changed and no call was recorded since."""
    last = latest_id(stats)

    def scope(q: DashboardQuery) -> tuple[object, ...]:
        return q.since, q.until, q.source, q.clients

    same_range = cached is not None and scope(cached.query) == scope(query)
    if same_range and cached is not None and cached.last_id == last:
        agents, clients = cached.agents, cached.api_clients
    else:
        agents = stats.summary(query.stats_filter())
        names = stats.api_clients()
        clients = tuple(names) if names is not None else None
    if query.picked is None:
        chosen = tuple(str(r["agent"]) for r in agents[:DEFAULT_AGENTS])
    else:
        present = {str(r["agent"]).casefold(): str(r["agent"]) for r in agents}
        chosen = tuple(present[n.casefold()] for n in query.picked if n.casefold() in present)
    series: list[dict[str, Any]] = []
    if chosen:
        series = stats.series(query.stats_filter(chosen), query.metric, SERIES_LIMIT)
    return Snapshot(
        query,
        agents,
        chosen,
        series,
        points_of(series),
        any_calls=last is not None,
        last_id=last,
        api_clients=clients,
    )


# the table -------------------------------------------------------------------------------------
# (header, its tooltip); a long header on two lines so the table fits a narrow window
COLUMNS: tuple[tuple[str, str], ...] = (
    ("Agent", "The agent's name; its colour in the charts."),
    ("Calls", "Replies asked for in the date range (finished, stopped or failed)."),
    ("Errors", "Calls that failed, and their share of all calls. Hover for the reasons."),
    ("TTFT\np50 / p95", "Time to first token: from Send until the first word arrived. p50: "
     "half the calls were quicker (a typical call); p95: 95 in 100 were quicker (the slow "
     "calls you notice)."),
    ("Decode\np50 / p95", "Decode speed: tokens per second while the reply streamed. p50: a "
     "typical call; p95: only 1 call in 20 was faster."),
    ("Prefill\np50", "Prompt reading (prefill) speed, tokens per second, for a typical call. "
     "Local models measure it; for remote ones the server reports it or it is estimated "
     "from the time to first token (a lower bound). — : not known."),
    ("Tokens\nin / out", "Prompt tokens sent / tokens generated (reasoning included), summed "
     "over the calls."),
    ("Cached", "Share of the prompt tokens that came from a cache (cheaper and quicker)."),
    ("Cost", "Summed price of the calls. “local” costs nothing; “—” means no price is known; "
     "“+ N unpriced” counts calls whose price is unknown, never as $0."),
)  # fmt: skip
# Shown only when an agent in the table used tools (issue 18), before Cost: the table of a
# person without tools is unchanged.
TOOL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("Tool\ncalls", "Tools the agent's model calls asked for. A reply that used tools is "
     "several model calls (each counted in Calls): one asks, the tool runs, the next reads "
     "its result."),
    ("Tool\ntime", "How long those tools ran, summed (not the time waiting for your "
     "approval)."),
)  # fmt: skip


def uses_tools(rows: list[dict[str, Any]]) -> bool:
    return any(row.get("tool_calls") for row in rows)


def table_columns(tools: bool) -> tuple[tuple[str, str], ...]:
    """The table's columns: ``COLUMNS``, with ``TOOL_COLUMNS`` before Cost when ``tools``."""
    return (*COLUMNS[:-1], *TOOL_COLUMNS, COLUMNS[-1]) if tools else COLUMNS


def percent_text(share: float | None) -> str:
    if share is None:
        return "—"
    pct = share * 100
    return f"{pct:.0f}%" if pct >= 10 or pct == 0 else f"{pct:.1f}%"


def cost_cell(row: dict[str, Any]) -> str:
    """'local', '—' (nothing priced), '$0.42', or '$0.42 + 3 unpriced'."""
    if row.get("local"):
        return "local"
    unpriced = int(row.get("unpriced_calls") or 0)
    if row.get("cost_usd") is None or not row.get("priced_calls"):
        return "—"
    text = usd_text(float(row["cost_usd"]))
    return f"{text} + {unpriced:,} unpriced" if unpriced else text


def errors_cell(row: dict[str, Any]) -> tuple[str, str]:
    """The errors cell and its tooltip (the reasons in words, and the stopped calls)."""
    calls, errors = int(row["calls"]), int(row["errors"])
    text = "0" if not errors else f"{errors:,} ({percent_text(row.get('error_rate'))})"
    lines = [f"{errors:,} of {calls:,} calls failed."]
    for kind, n in (row.get("error_kinds") or {}).items():
        lines.append(f"  {n:,} × {ERROR_WORDS.get(kind, kind.replace('_', ' '))}")
    cancelled = int(row.get("cancelled") or 0)
    if cancelled:
        lines.append(f"{cancelled:,} stopped before the end (Stop).")
    return text, "\n".join(lines)


def tool_cells(row: dict[str, Any]) -> list[tuple[str, str]]:
    """The tool calls and their time, for ``TOOL_COLUMNS``."""
    n = int(row.get("tool_calls") or 0)
    tool_ms = row.get("tool_ms")
    calls = int(row.get("calls") or 0)
    tip = f"{n:,} tool calls over {calls:,} model calls." if n else "No tool calls."
    return [(f"{n:,}", tip), (ms_text(tool_ms) if n else "—", "")]


def summary_cells(row: dict[str, Any], tools: bool = False) -> list[tuple[str, str]]:
    """One (text, tooltip) per column of ``table_columns(tools)`` for a summary dict."""
    errors, errors_tip = errors_cell(row)
    prompt, cached = int(row.get("prompt_tokens") or 0), int(row.get("cached_tokens") or 0)
    output, reasoning = int(row.get("output_tokens") or 0), int(row.get("reasoning_tokens") or 0)
    unpriced = int(row.get("unpriced_calls") or 0)
    cost_tip = (
        "Local model: no cost."
        if row.get("local")
        else f"{int(row.get('priced_calls') or 0):,} calls priced, {unpriced:,} without a "
        "known price (not counted)."
    )
    first, last = row.get("first_at"), row.get("last_at")
    span = ""
    if first and last:
        a = datetime.fromisoformat(str(first)).astimezone()
        b = datetime.fromisoformat(str(last)).astimezone()
        span = f"Calls from {date_text(a, FROM_TO)} to {date_text(b, FROM_TO)}."
    ttft = f"{ms_text(row.get('ttft_p50_ms'))} / {ms_text(row.get('ttft_p95_ms'))}"
    d50, d95 = row.get("decode_p50_tok_s"), row.get("decode_p95_tok_s")
    decode = "—" if d50 is None else f"{tok_s_text(d50).removesuffix(' tok/s')} / {tok_s_text(d95)}"
    return [
        (str(row["agent"]), span),
        (f"{int(row['calls']):,}", ""),
        (errors, errors_tip),
        (ttft, ""),
        (decode, ""),
        (tok_s_text(row.get("prefill_p50_tok_s")), ""),
        (
            f"{count_text(prompt)} / {count_text(output)}",
            f"{prompt:,} prompt tokens, {cached:,} of them from a cache; {output:,} tokens "
            f"generated, {reasoning:,} of them reasoning.",
        ),
        (percent_text(row.get("cached_share")), ""),
        *(tool_cells(row) if tools else []),
        (cost_cell(row), cost_tip),
    ]


def headline(rows: list[dict[str, Any]]) -> str:
    """The comparison in one or two sentences: who waits longest for the first token, who
    writes fastest. Empty with fewer than two agents to compare."""
    parts: list[str] = []
    timed = [r for r in rows if r.get("ttft_p50_ms")]
    if len(timed) >= 2:
        slow = max(timed, key=lambda r: r["ttft_p50_ms"])
        quick = min(timed, key=lambda r: r["ttft_p50_ms"])
        ratio = slow["ttft_p50_ms"] / quick["ttft_p50_ms"]
        if ratio >= 1.5:
            parts.append(
                f"{slow['agent']} is slowest to start: its first token typically comes after "
                f"{ms_text(slow['ttft_p50_ms'])}, {ratio:.0f}× {quick['agent']}'s "
                f"{ms_text(quick['ttft_p50_ms'])}."
            )
    speeds = [r for r in rows if r.get("decode_p50_tok_s")]
    if len(speeds) >= 2:
        fast = max(speeds, key=lambda r: r["decode_p50_tok_s"])
        slow = min(speeds, key=lambda r: r["decode_p50_tok_s"])
        if fast["decode_p50_tok_s"] >= 1.5 * slow["decode_p50_tok_s"]:
            parts.append(
                f"{fast['agent']} writes fastest ({tok_s_text(fast['decode_p50_tok_s'])}), "
                f"{slow['agent']} slowest ({tok_s_text(slow['decode_p50_tok_s'])})."
            )
    return " ".join(parts)
