"""The dashboard's questions to ``inference_stats``, answered in SQLite.

Every aggregate is one SQL statement over the rows a ``StatsFilter`` picks (agent names,
compared as SQLite's NOCASE compares them, and a time range), grouped by agent name; Python
only joins the per-agent answers (one dict per agent, never a loop over calls).

Percentiles are nearest-rank: among an agent's non-NULL values of a figure in the filter,
sorted ascending, p50 is the value at rank ceil(0.5·n) and p95 the one at rank ceil(0.95·n)
(ranks from 1). A window function numbers the values; no value leaves SQLite but the two
picked ones per agent.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import sqlite_utils

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
)

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
    when the filter is made."""

    agents: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None

    def __post_init__(self) -> None:
        for bound in (self.since, self.until):
            if bound is not None:
                parse_when(bound)
        if isinstance(self.agents, str):  # a lone name, not a tuple of its letters
            object.__setattr__(self, "agents", (self.agents,))

    def where(self, *extra: str) -> tuple[str, list[Any]]:
        """The WHERE clause (with ``extra`` conditions ANDed) and its parameters."""
        parts: list[str] = []
        params: list[Any] = []
        names = [a for a in dict.fromkeys(self.agents) if a]
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


def _totals_sql(where: str) -> str:
    return (
        # agent_name: one of the group's spellings (names differing only in case are one agent)
        "SELECT agent_name AS agent, MAX(started_at) AS last_at, MIN(started_at) AS first_at, "
        "COUNT(*) AS calls, "
        f"TOTAL({OUTCOME} = 'complete') AS complete, "
        f"TOTAL({OUTCOME} = 'cancelled') AS cancelled, "
        f"TOTAL({OUTCOME} = 'error') AS errors, "
        "TOTAL(prompt_tokens) AS prompt_tokens, "
        "TOTAL(cached_tokens) AS cached_tokens, "
        "TOTAL(output_tokens) AS output_tokens, "
        "TOTAL(reasoning_tokens) AS reasoning_tokens, "
        "SUM(CASE WHEN price_source IS NOT NULL THEN cost_usd END) AS cost_usd, "
        "TOTAL(price_source IS NOT NULL) AS priced_calls, "
        "TOTAL(provider_kind = 'local' OR price_source IS 'local') AS local_calls "
        f"FROM inference_stats {where} GROUP BY agent_name COLLATE NOCASE"
    )


def _percentiles_sql(column: str, where: str) -> str:
    # Nearest rank: ceil(0.5 n) = (n + 1) / 2 and ceil(0.95 n) = (95 n + 99) / 100 in
    # integer arithmetic (SQLite's ceil() needs the math extension, not always built in).
    return (
        "SELECT agent, "
        "MAX(CASE WHEN rn = (n + 1) / 2 THEN v END) AS p50, "
        "MAX(CASE WHEN rn = (95 * n + 99) / 100 THEN v END) AS p95 FROM ("
        f"SELECT agent_name AS agent, {column} AS v, "
        "ROW_NUMBER() OVER w AS rn, "
        "COUNT(*) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS n "
        f"FROM inference_stats {where} "
        f"WINDOW w AS (PARTITION BY agent_name COLLATE NOCASE ORDER BY {column})"
        ") WHERE rn = (n + 1) / 2 OR rn = (95 * n + 99) / 100 "
        "GROUP BY agent COLLATE NOCASE"
    )


def summary(db: sqlite_utils.Database, f: StatsFilter) -> list[dict[str, Any]]:
    """One dict per agent (keys: ``SUMMARY_KEYS``), most calls first, then by name."""
    where, params = f.where()
    by_agent: dict[str, dict[str, Any]] = {}
    for r in select(db, _totals_sql(where), params):
        calls = int(r["calls"])
        errors = int(r["errors"])
        prompt = int(r["prompt_tokens"])
        cached = int(r["cached_tokens"])
        priced = int(r["priced_calls"])
        row: dict[str, Any] = dict.fromkeys(SUMMARY_KEYS)
        row |= {
            "agent": r["agent"],
            "calls": calls,
            "complete": int(r["complete"]),
            "cancelled": int(r["cancelled"]),
            "errors": errors,
            "error_rate": errors / calls if calls else 0.0,
            "error_kinds": {},
            "prompt_tokens": prompt,
            "cached_tokens": cached,
            "output_tokens": int(r["output_tokens"]),
            "reasoning_tokens": int(r["reasoning_tokens"]),
            "cached_share": cached / prompt if prompt else None,
            "cost_usd": r["cost_usd"] if priced else None,
            "priced_calls": priced,
            "unpriced_calls": calls - priced,
            "local": int(r["local_calls"]) == calls,
            "first_at": r["first_at"],
            "last_at": r["last_at"],
        }
        by_agent[nocase(r["agent"])] = row
    if not by_agent:
        return []
    for name, column, unit in PERCENTILE_FIGURES:
        where_v, params_v = f.where(f"{column} IS NOT NULL")
        for r in select(db, _percentiles_sql(column, where_v), params_v):
            row = by_agent[nocase(r["agent"])]
            row[f"{name}_p50_{unit}"] = r["p50"]
            row[f"{name}_p95_{unit}"] = r["p95"]
    for agent, kinds in error_kinds(db, f).items():
        by_agent[agent]["error_kinds"] = kinds
    return sorted(by_agent.values(), key=lambda r: (-r["calls"], nocase(r["agent"])))


def error_kinds(db: sqlite_utils.Database, f: StatsFilter) -> dict[str, dict[str, int]]:
    """Failed calls by kind per agent (keyed by ``nocase(agent)``), most frequent first."""
    where, params = f.where(f"{OUTCOME} = 'error'")
    kinds: dict[str, dict[str, int]] = {}
    for r in select(
        db,
        f"SELECT agent_name AS agent, {ERROR_KIND} AS kind, COUNT(*) AS n "
        f"FROM inference_stats {where} "
        "GROUP BY agent_name COLLATE NOCASE, kind ORDER BY n DESC, kind",
        params,
    ):
        kinds.setdefault(nocase(r["agent"]), {})[str(r["kind"])] = int(r["n"])
    return kinds


def series(db: sqlite_utils.Database, f: StatsFilter, metric: str, limit: int) -> list[dict]:
    """The most recent ``limit`` calls with a value of ``metric``, oldest first."""
    if metric not in SERIES_METRICS:
        raise ValueError(f"unknown metric {metric!r}; one of {', '.join(SERIES_METRICS)}")
    where, params = f.where(f"{metric} IS NOT NULL")
    rows = select(
        db,
        "SELECT id, agent_name AS agent, started_at, "
        f"{metric} AS value, message_id, conversation_id "
        f"FROM inference_stats {where} ORDER BY started_at DESC, id DESC LIMIT ?",
        [*params, max(0, int(limit))],
    )
    rows.reverse()
    return rows


def export_rows(
    db: sqlite_utils.Database, f: StatsFilter, columns: list[str]
) -> list[dict[str, Any]]:
    """Every call the filter picks, with ``id`` and ``columns``, oldest first."""
    where, params = f.where()
    cols = ", ".join(["id", *columns])
    return select(db, f"SELECT {cols} FROM inference_stats {where} ORDER BY started_at, id", params)
