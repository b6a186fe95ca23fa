"""The dashboard's questions to ``inference_stats``, answered in SQLite.

Every aggregate is one SQL statement over the rows a ``StatsFilter`` picks (agent names,
compared as SQLite's NOCASE compares them, and a time range), grouped by agent name; Python
only joins the per-agent answers (one dict per agent, never a loop over calls).

Percentiles are nearest-rank: among an agent's non-NULL values of a figure in the filter,
sorted ascending, p50 is the value at rank ceil(0.5·n) and p95 the one at rank ceil(0.95·n)
(ranks from 1). n comes with the summary's scan; the value at a rank is read from the
figure's index (agent, value, time: m006) with ``ORDER BY value LIMIT 1 OFFSET rank - 1``,
which steps over index entries without a sort or a table read, and no value leaves SQLite
but the two picked ones per agent. (Measured on 100,000 calls: ROW_NUMBER() OVER (PARTITION
BY agent ORDER BY value) took ~270 ms per figure even over that index, its sorts and temp
B-trees included; the reads at rank ~10 ms for all 50 agents.)
"""

from __future__ import annotations

import string
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Any

import sqlite_utils

from desktop.store.migrations import PERCENTILE_INDEXES

# What became of a call, from its row: an error kind means it failed (whatever the finish
# reason says), a "cancelled" finish that the person stopped it, anything else that it
# finished on its own.
OUTCOME = (
    "(CASE WHEN error_kind IS NOT NULL OR finish_reason = 'error' THEN 'error' "
    "WHEN finish_reason = 'cancelled' THEN 'cancelled' ELSE 'complete' END)"
)
ERROR_KIND = "COALESCE(error_kind, 'unknown')"

# series(): the figures a chart over time can show (column names; each a stats column).
SERIES_METRICS = (
    "ttft_ms",
    "decode_tok_s",
    "prefill_tok_s",
    "total_ms",
    "output_tokens",
    "cost_usd",
    "retrieval_ms",  # an agent's knowledge search before its calls
)

# summary(): (key prefix, column, key suffix) of each figure given as p50 and p95.
PERCENTILE_FIGURES = (
    ("ttft", "ttft_ms", "ms"),
    ("decode", "decode_tok_s", "tok_s"),
    ("prefill", "prefill_tok_s", "tok_s"),
)

# The keys of one summary() dict, in the order a table or CSV shows them.
SUMMARY_KEYS = (
    "agent",
    "calls",
    "complete",
    "cancelled",
    "errors",
    "error_rate",
    "error_kinds",
    *(f"{name}_p{p}_{unit}" for name, _, unit in PERCENTILE_FIGURES for p in (50, 95)),
    "prompt_tokens",
    "cached_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cached_share",
    "cost_usd",
    "priced_calls",
    "unpriced_calls",
    "local",
    "first_at",
    "last_at",
    "tool_calls",  # tools the agent's model calls asked for (issue 18), summed
    "tool_ms",  # how long those tools ran, summed (None when none ran)
)

# StatsFilter.source: the calls API clients made through the local server, or the app's own
SOURCES = ("api", "app")

DATE_HINT = "expected a date like 2026-11-30 (or a date and time like 2026-11-30T14:00)"


def parse_when(text: str) -> str:
    """An ISO date or date-time as the instant ``started_at`` compares with (UTC, the stored
    form). A date is that day's start in UTC; a time without a zone is taken as UTC. Raises
    ``ValueError`` with words for anything else."""
    raw = text.strip()
    try:
        if len(raw) == 10:
            day = date.fromisoformat(raw)
            moment = datetime(day.year, day.month, day.day, tzinfo=UTC)
        else:
            moment = datetime.fromisoformat(raw.replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        raise ValueError(f"{DATE_HINT}, not “{text}”") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True, slots=True)
class StatsFilter:
    """Which calls a question is about.

    ``agents``: agent names (any case); empty = every agent. ``since``: an ISO date or
    date-time, inclusive ('2026-11-01' = from that day's start, UTC). ``until``: exclusive
    ('2026-12-01' = before that day). A bad date raises ``ValueError`` (``DATE_HINT``) here,
    when the filter is made. ``source``: 'api' for the calls API clients made through the
    local server, 'app' for the app's own (window, CLI); None: both. ``clients``: the API
    key names of those calls (any case); empty = every client."""

    agents: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None
    source: str | None = None
    clients: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for bound in (self.since, self.until):
            if bound is not None:
                parse_when(bound)
        if isinstance(self.agents, str):  # a lone name, not a tuple of its letters
            object.__setattr__(self, "agents", (self.agents,))
        if isinstance(self.clients, str):
            object.__setattr__(self, "clients", (self.clients,))
        if self.source not in (None, *SOURCES):
            raise ValueError(f"source: expected one of {', '.join(SOURCES)}")

    def where(self, *extra: str, agents: bool = True) -> tuple[str, list[Any]]:
        """The WHERE clause (with ``extra`` conditions ANDed) and its parameters; with
        ``agents=False`` all but the agents (the time range, the source and clients, and
        ``extra``)."""
        parts: list[str] = []
        params: list[Any] = []
        names = [a for a in dict.fromkeys(self.agents) if a] if agents else []
        if len(names) == 1:
            parts.append("agent_name = ? COLLATE NOCASE")
            params.append(names[0])
        elif names:
            parts.append(f"agent_name COLLATE NOCASE IN ({', '.join('?' for _ in names)})")
            params.extend(names)
        if self.since:
            parts.append("started_at >= ?")
            params.append(parse_when(self.since))
        if self.until:
            parts.append("started_at < ?")
            params.append(parse_when(self.until))
        if self.source == "api":
            parts.append("source = 'api'")
        elif self.source == "app":
            parts.append("source IS NULL")
        clients = [c for c in dict.fromkeys(self.clients) if c]
        if clients:
            parts.append(f"api_client COLLATE NOCASE IN ({', '.join('?' for _ in clients)})")
            params.extend(clients)
        parts.extend(extra)
        return ("WHERE " + " AND ".join(parts)) if parts else "", params


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def nocase(name: object) -> str:
    """A name as SQLite's NOCASE compares it (ASCII letters only), to match groups."""
    return str(name).translate(_ASCII_LOWER)


def select(db: sqlite_utils.Database, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cur = db.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def _totals_sql(where: str, first_last_where: str) -> str:
    # Every column the inner query reads is in the stats_summary index (m006): one scan of it
    # in agent order answers the lot, without a table read or a sort. The first and last
    # call are two index seeks per agent (MIN/MAX over stats_by_agent_name). agent_name:
    # one of the group's spellings (names that differ only in case are one agent).
    counts = ", ".join(f"COUNT({column}) AS n_{column}" for _, column, _ in PERCENTILE_FIGURES)
    totals = (
        "SELECT agent_name AS agent, COUNT(*) AS calls, "
        "TOTAL(prompt_tokens) AS prompt_tokens, "
        "TOTAL(cached_tokens) AS cached_tokens, "
        "TOTAL(output_tokens) AS output_tokens, "
        "TOTAL(reasoning_tokens) AS reasoning_tokens, "
        "SUM(CASE WHEN price_source IS NOT NULL THEN cost_usd END) AS cost_usd, "
        "COUNT(price_source) AS priced_calls, "
        # a call with no token counts (refused, failed before any reply) had nothing to price
        "TOTAL(price_source IS NULL AND (prompt_tokens IS NOT NULL OR output_tokens IS NOT NULL))"
        " AS unpriced_calls, "
        "TOTAL(provider_kind = 'local' OR price_source IS 'local') AS local_calls, "
        f"{counts} "
        f"FROM inference_stats INDEXED BY stats_summary {where} "
        "GROUP BY agent_name COLLATE NOCASE"
    )
    edge = (
        "(SELECT {fn}(started_at) FROM inference_stats INDEXED BY stats_by_agent_name "
        f"{first_last_where})"
    )
    return (
        f"SELECT t.*, {edge.format(fn='MIN')} AS first_at, {edge.format(fn='MAX')} AS last_at "
        f"FROM ({totals}) AS t"
    )


def _outcomes_sql(where: str) -> str:
    # The calls that did not complete, by agent, outcome and error kind (few of all calls;
    # the columns are in stats_summary too). ORDER BY: each agent's most frequent kind first.
    return (
        f"SELECT agent_name AS agent, {OUTCOME} AS outcome, {ERROR_KIND} AS kind, COUNT(*) AS n "
        f"FROM inference_stats INDEXED BY stats_summary {where} "
        "GROUP BY agent_name COLLATE NOCASE, outcome, kind ORDER BY n DESC, kind"
    )


_NOT_COMPLETE = "(error_kind IS NOT NULL OR finish_reason IN ('error', 'cancelled'))"


def _rank_sql(index: str, column: str, where: str, descending: bool) -> str:
    # The stats_ttft / stats_decode / stats_prefill index (m006) holds one agent's values in
    # order: the value at a rank is read by stepping over the ones before it in the index,
    # no sort and no table read; from the top for a high percentile (fewer steps).
    order = "DESC" if descending else "ASC"
    return (
        f"SELECT {column} FROM inference_stats INDEXED BY {index} {where} "
        f"ORDER BY {column} {order} LIMIT 1 OFFSET ?"
    )


def _value(db: sqlite_utils.Database, sql: str, params: list[Any]) -> Any:
    found = db.execute(sql, params).fetchone()
    return found[0] if found else None


def nearest_rank(p_percent: int, n: int) -> int:
    """The 1-based rank of the p-th percentile among n sorted values: ceil(p/100 · n)."""
    return max(1, -(-p_percent * n // 100))


def summary(db: sqlite_utils.Database, f: StatsFilter) -> list[dict[str, Any]]:
    """One dict per agent (keys: ``SUMMARY_KEYS``), most calls first, then by name."""
    where, params = f.where()
    # per agent of the outer query: its time range, then the agent (t.agent)
    edge_where, edge_params = f.where("agent_name = t.agent COLLATE NOCASE", agents=False)
    by_agent: dict[str, dict[str, Any]] = {}
    counts: dict[str, dict[str, int]] = {}
    for r in select(db, _totals_sql(where, edge_where), [*edge_params, *edge_params, *params]):
        calls, prompt, cached = int(r["calls"]), int(r["prompt_tokens"]), int(r["cached_tokens"])
        priced = int(r["priced_calls"])
        row: dict[str, Any] = dict.fromkeys(SUMMARY_KEYS)
        row |= {
            "agent": r["agent"],
            "calls": calls,
            "complete": calls,
            "cancelled": 0,
            "errors": 0,
            "error_rate": 0.0,
            "error_kinds": {},
            "prompt_tokens": prompt,
            "cached_tokens": cached,
            "output_tokens": int(r["output_tokens"]),
            "reasoning_tokens": int(r["reasoning_tokens"]),
            "cached_share": cached / prompt if prompt else None,
            # summed in binary floating point: rounded to a billionth of a dollar
            "cost_usd": round(r["cost_usd"], 9) if priced and r["cost_usd"] is not None else None,
            "priced_calls": priced,
            "unpriced_calls": int(r["unpriced_calls"]),
            "local": int(r["local_calls"]) == calls,
            "first_at": r["first_at"],
            "last_at": r["last_at"],
        }
        key = nocase(r["agent"])
        by_agent[key] = row
        counts[key] = {column: int(r[f"n_{column}"]) for _, column, _ in PERCENTILE_FIGURES}
    if not by_agent:
        return []
    _add_outcomes(db, f, by_agent)
    _add_tools(db, f, by_agent)
    _add_percentiles(db, f, by_agent, counts)
    return sorted(by_agent.values(), key=lambda r: (-r["calls"], nocase(r["agent"])))


def _add_outcomes(
    db: sqlite_utils.Database, f: StatsFilter, by_agent: dict[str, dict[str, Any]]
) -> None:
    """Cancelled and failed calls (by kind) into each agent's row; the rest completed."""
    where, params = f.where(_NOT_COMPLETE)
    for r in select(db, _outcomes_sql(where), params):
        row, n = by_agent[nocase(r["agent"])], int(r["n"])
        row["complete"] -= n
        if r["outcome"] == "cancelled":
            row["cancelled"] += n
        else:
            row["errors"] += n
            row["error_kinds"][str(r["kind"])] = n
    for row in by_agent.values():
        row["error_rate"] = row["errors"] / row["calls"] if row["calls"] else 0.0


# A partial index of the calls that asked for tools (agent, started_at, tool_calls, tool_ms
# WHERE tool_calls IS NOT NULL), when a migration has made it: the tool totals from it alone.
TOOLS_INDEX = "stats_tools"


def _tools_sql(where: str, index: str) -> str:
    return (
        "SELECT agent_name AS agent, TOTAL(tool_calls) AS tool_calls, SUM(tool_ms) AS tool_ms "
        f"FROM inference_stats INDEXED BY {index} {where} "
        "GROUP BY agent_name COLLATE NOCASE"
    )


def _has_index(db: sqlite_utils.Database, name: str) -> bool:
    found = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", [name])
    return found.fetchone() is not None


def _add_tools(
    db: sqlite_utils.Database, f: StatsFilter, by_agent: dict[str, dict[str, Any]]
) -> None:
    """Each agent's tool calls (0 without any) and their run time (None when none ran).

    Only a call that asked for tools has ``tool_calls`` (it ends "tool_calls":
    chat/turn_calls), so without ``TOOLS_INDEX`` the scan of stats_summary (finish_reason is
    in it) reads the table for those calls alone."""
    for row in by_agent.values():
        row["tool_calls"] = 0
    if _has_index(db, TOOLS_INDEX):
        where, params = f.where("tool_calls IS NOT NULL")
        sql = _tools_sql(where, TOOLS_INDEX)
    else:
        where, params = f.where("finish_reason = 'tool_calls'", "tool_calls IS NOT NULL")
        sql = _tools_sql(where, "stats_summary")
    for r in select(db, sql, params):
        row = by_agent[nocase(r["agent"])]
        row["tool_calls"] = int(r["tool_calls"])
        row["tool_ms"] = round(r["tool_ms"], 1) if r["tool_ms"] is not None else None


def _add_percentiles(
    db: sqlite_utils.Database,
    f: StatsFilter,
    by_agent: dict[str, dict[str, Any]],
    counts: dict[str, dict[str, int]],
) -> None:
    """p50 and p95 of each figure into each agent's row: the value at its nearest rank among
    the agent's calls in the filter that have the figure (``counts``: how many)."""
    for (name, column, unit), (index, _) in zip(
        PERCENTILE_FIGURES, PERCENTILE_INDEXES, strict=True
    ):
        # the time range first, then the agent: its parameter follows the range's
        where, range_params = f.where(
            f"{column} IS NOT NULL", "agent_name = ? COLLATE NOCASE", agents=False
        )
        low = _rank_sql(index, column, where, descending=False)
        high = _rank_sql(index, column, where, descending=True)
        for key, row in by_agent.items():
            n = counts[key][column]
            if n:
                given = [*range_params, row["agent"]]
                row[f"{name}_p50_{unit}"] = _value(db, low, [*given, nearest_rank(50, n) - 1])
                row[f"{name}_p95_{unit}"] = _value(db, high, [*given, n - nearest_rank(95, n)])


def series(db: sqlite_utils.Database, f: StatsFilter, metric: str, limit: int) -> list[dict]:
    """The most recent ``limit`` calls with a value of ``metric``, oldest first."""
    if metric not in SERIES_METRICS:
        raise ValueError(f"unknown metric {metric!r}; one of {', '.join(SERIES_METRICS)}")
    limit = max(0, int(limit))
    columns = (
        f"SELECT id, agent_name AS agent, started_at, {metric} AS value, message_id, "
        "conversation_id FROM inference_stats"
    )
    newest_first = "ORDER BY started_at DESC, id DESC LIMIT ?"
    names = list(dict.fromkeys(nocase(a) for a in f.agents if a))
    if not names:  # every agent: newest first along stats_by_started, up to the limit
        where, params = f.where(f"{metric} IS NOT NULL")
        sql = f"{columns} INDEXED BY stats_by_started {where} {newest_first}"
        params.append(limit)
    else:
        # Each agent newest first along its own index (stats_by_agent_name), then the newest
        # of those: no sort of every call of the chosen agents.
        parts, params = [], []
        for name in names:
            where, given = replace(f, agents=(name,)).where(f"{metric} IS NOT NULL")
            parts.append(
                f"SELECT * FROM ({columns} INDEXED BY stats_by_agent_name {where} {newest_first})"
            )
            params += [*given, limit]
        sql = (
            parts[0]
            if len(parts) == 1
            else f"SELECT * FROM ({' UNION ALL '.join(parts)}) {newest_first}"
        )
        if len(parts) > 1:
            params.append(limit)
    rows = select(db, sql, params)
    rows.reverse()
    return rows


def export_rows(
    db: sqlite_utils.Database, f: StatsFilter, columns: list[str]
) -> list[dict[str, Any]]:
    """Every call the filter picks, with ``id`` and ``columns``, oldest first."""
    where, params = f.where()
    cols = ", ".join(["id", *columns])
    return select(db, f"SELECT {cols} FROM inference_stats {where} ORDER BY started_at, id", params)
