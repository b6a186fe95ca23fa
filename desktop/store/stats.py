"""inference_stats: one row per model call, and per-agent aggregates.

``StatsStore`` is the entry point: ``record`` a call; read rows back for a message; and the
dashboard's questions, each answered in SQLite (``stats_query``): ``summary`` (per agent:
counts, error rate, p50/p95 of TTFT and speeds, tokens, cached share, cost), ``series`` (one
figure per call over time, for a chart) and ``export_rows`` (every column of every call).
``StatsFilter`` picks the calls (agents, since, until). ``rows_to_csv`` / ``rows_to_json``
(``stats_export``) write either list.
"""

from __future__ import annotations

from typing import Any

import sqlite_utils

from desktop.store import stats_query
from desktop.store.migrations import STATS_COLUMNS_M005
from desktop.store.migrations_features import (
    STATS_COLUMNS_M008,
    STATS_COLUMNS_M010,
    STATS_COLUMNS_M012,
    STATS_COLUMNS_M013,
    STATS_COLUMNS_M014,
    STATS_COLUMNS_M015,
)
from desktop.store.stats_export import rows_to_csv, rows_to_json
from desktop.store.stats_query import (
    DATE_HINT,
    ERROR_KIND,
    OUTCOME,
    SERIES_METRICS,
    SUMMARY_KEYS,
    StatsFilter,
    nocase,
    parse_when,
)

__all__ = [
    "DATE_HINT",
    "EVERY_CALL",
    "EXPORT_COLUMNS",
    "SERIES_METRICS",
    "STATS_COLUMNS",
    "SUMMARY_KEYS",
    "StatsFilter",
    "StatsStore",
    "parse_when",
    "rows_to_csv",
    "rows_to_json",
]

STATS_COLUMNS = [
    "message_id",
    "conversation_id",
    "agent_id",
    "agent_name",
    "provider_kind",
    "endpoint_host",
    "model_requested",
    "model_reported",
    "started_at",
    "queued_ms",
    "connect_ms",
    "headers_ms",
    "ttft_ms",
    "prefill_ms",
    "decode_ms",
    "total_ms",
    "prompt_tokens",
    "cached_tokens",
    "prompt_eval_tokens",
    "output_tokens",
    "reasoning_tokens",
    "token_source",
    "prefill_tok_s",
    "decode_tok_s",
    "finish_reason",
    "error_kind",
    "cost_usd",
    "price_source",
    "context_window",
    "context_fill",
    "n_gpu_layers",
    "n_ctx",
    "n_threads",
    "kv_type",
    "flash_attn",
    "backend",
    "load_ms",
    "model_file_size",
    "quantization",
    *(name for name, _ in STATS_COLUMNS_M005),
    "prompt_run_id",  # m007: a prompt-set run's call (no message, no conversation)
    *(name for name, _ in STATS_COLUMNS_M008),  # cache_source, cache_restore_ms
    *(name for name, _ in STATS_COLUMNS_M010),  # call_index, tool_calls, tool_ms
    *(name for name, _ in STATS_COLUMNS_M012),  # device, offloaded_layers, vram_bytes
    *(name for name, _ in STATS_COLUMNS_M013),  # source, api_client
    *(name for name, _ in STATS_COLUMNS_M014),  # image_tokens, image_tokens_estimated, …
    *(name for name, _ in STATS_COLUMNS_M015),  # retrieval_ms, its parts, chunks, tokens
]
EVERY_CALL = StatsFilter()
EXPORT_COLUMNS = ["id", *STATS_COLUMNS]  # the keys of one export_rows() dict, in order


class StatsStore:
    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    def record(self, row: dict[str, Any]) -> int:
        unknown = set(row) - set(STATS_COLUMNS)
        if unknown:
            raise ValueError(f"unknown stats fields: {sorted(unknown)}")
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        cur = self._db.execute(
            f"INSERT INTO inference_stats ({cols}) VALUES ({marks})", list(row.values())
        )
        return int(cur.lastrowid or 0)

    def _rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        cur = self._db.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def attach(self, stats_id: int, message_id: int, conversation_id: int) -> None:
        """Give a call made outside a conversation (an API call) the message it became."""
        self._db.execute(
            "UPDATE inference_stats SET message_id = ?, conversation_id = ? WHERE id = ?",
            [message_id, conversation_id, stats_id],
        )

    def api_clients(self) -> list[str] | None:
        """The names of the API keys calls were made with (the dashboard's choice of client);
        None when no call ever came through the API server."""
        cur = self._db.execute(
            "SELECT DISTINCT api_client FROM inference_stats WHERE source IS NOT NULL "
            "ORDER BY api_client COLLATE NOCASE"
        )
        names = [r[0] for r in cur.fetchall()]
        return [str(n) for n in names if n is not None] if names else None

    def by_id(self, stats_id: int) -> dict[str, Any] | None:
        """One call's row (an API call's timeline: it has no message)."""
        rows = self._rows("SELECT * FROM inference_stats WHERE id = ?", [stats_id])
        return rows[0] if rows else None

    def for_message(self, message_id: int) -> dict[str, Any] | None:
        rows = self._rows(
            "SELECT * FROM inference_stats WHERE message_id = ? ORDER BY id DESC LIMIT 1",
            [message_id],
        )
        return rows[0] if rows else None

    def for_messages(self, message_ids: list[int]) -> dict[int, dict[str, Any]]:
        """Each message's last call (``calls_for_messages`` has them all)."""
        return {m: calls[-1] for m, calls in self.calls_for_messages(message_ids).items()}

    def calls_for_messages(self, message_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
        """Every model call of each message, in order (an agentic reply has several, with
        ``call_index`` 1, 2, …; ``for_messages`` gives the last one)."""
        if not message_ids:
            return {}
        marks = ", ".join("?" for _ in message_ids)
        rows = self._rows(
            f"SELECT * FROM inference_stats WHERE message_id IN ({marks}) ORDER BY id",
            list(message_ids),
        )
        out: dict[int, list[dict[str, Any]]] = {}
        for r in rows:
            out.setdefault(int(r["message_id"]), []).append(r)
        return out

    def rows(self, agent_name: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        where, params = _agent_filter(agent_name)
        return self._rows(
            f"SELECT * FROM inference_stats {where} ORDER BY id DESC LIMIT ?", [*params, limit]
        )

    def summary(self, f: StatsFilter = EVERY_CALL) -> list[dict[str, Any]]:
        """Per agent in the filter, most calls first, then by name; keys ``SUMMARY_KEYS``:
        ``calls`` = ``complete`` + ``cancelled`` + ``errors`` (``error_rate`` = errors/calls,
        ``error_kinds`` {kind: n}); ``ttft_p50_ms``/``ttft_p95_ms``, ``decode_p50_tok_s``…,
        ``prefill_p50_tok_s``… (nearest rank over the calls that have the figure, None if
        none); token sums and ``cached_share`` (cached/prompt, None without prompt tokens);
        ``cost_usd`` summed over priced calls only (None if none is priced: an unknown price
        is never 0), ``priced_calls`` / ``unpriced_calls`` (used tokens, price unknown);
        ``local`` (every call local); ``first_at`` / ``last_at``; ``tool_calls`` (tool calls
        its model calls asked for, 0 when none) and ``tool_ms`` (their run time, None when
        none)."""
        return stats_query.summary(self._db, f)

    def series(self, f: StatsFilter, metric: str, limit: int = 2000) -> list[dict[str, Any]]:
        """One figure (``SERIES_METRICS``) of the most recent ``limit`` calls that have it,
        oldest first: dicts of id, agent, started_at, value, message_id, conversation_id."""
        return stats_query.series(self._db, f, metric, limit)

    def export_rows(self, f: StatsFilter = EVERY_CALL) -> list[dict[str, Any]]:
        """Every column (``EXPORT_COLUMNS``) of every call in the filter, oldest first."""
        return stats_query.export_rows(self._db, f, STATS_COLUMNS)

    def per_agent(self, agent_name: str | None = None) -> list[dict[str, Any]]:
        """Aggregates grouped by agent (by name, so history survives renames of others).

        Every call is counted as what it was, once: ``complete`` (finished on its own: stop,
        length, …), ``cancelled`` (stopped by the person) or ``errors`` (failed; by kind in
        ``error_kinds``, e.g. ``{"context_too_long": 1}``); ``calls`` is their sum. Speeds and
        TTFT average the calls that produced them (a failed call has none).
        """
        where, params = _agent_filter(agent_name)
        rows = self._rows(
            f"SELECT agent_name AS agent, COUNT(*) AS calls, "
            f"SUM(CASE WHEN {OUTCOME} = 'complete' THEN 1 ELSE 0 END) AS complete, "
            f"SUM(CASE WHEN {OUTCOME} = 'cancelled' THEN 1 ELSE 0 END) AS cancelled, "
            f"SUM(CASE WHEN {OUTCOME} = 'error' THEN 1 ELSE 0 END) AS errors, "
            "ROUND(AVG(ttft_ms), 1) AS avg_ttft_ms, "
            "ROUND(AVG(decode_tok_s), 2) AS avg_decode_tok_s, "
            "ROUND(AVG(prefill_tok_s), 2) AS avg_prefill_tok_s, "
            "SUM(COALESCE(prompt_tokens, 0)) AS prompt_tokens, "
            "SUM(COALESCE(cached_tokens, 0)) AS cached_tokens, "
            "SUM(COALESCE(output_tokens, 0)) AS output_tokens, "
            "SUM(cost_usd) AS cost_usd, "
            "MAX(started_at) AS last_used_at "
            f"FROM inference_stats {where} GROUP BY agent_name COLLATE NOCASE "
            "ORDER BY calls DESC, agent",
            params,
        )
        kinds: dict[str, dict[str, int]] = {}
        for r in self._rows(
            f"SELECT agent_name AS agent, {ERROR_KIND} AS kind, COUNT(*) AS n "
            f"FROM inference_stats {where} {'AND' if where else 'WHERE'} {OUTCOME} = 'error' "
            "GROUP BY agent_name COLLATE NOCASE, kind ORDER BY n DESC, kind",
            params,
        ):
            kinds.setdefault(nocase(r["agent"]), {})[str(r["kind"])] = int(r["n"])
        for row in rows:
            row["error_kinds"] = kinds.get(nocase(row["agent"]), {})
        return rows


def _agent_filter(agent_name: str | None) -> tuple[str, list[Any]]:
    """The WHERE clause (and its parameters) for one agent's rows; none for every agent."""
    if agent_name:
        return "WHERE agent_name = ? COLLATE NOCASE", [agent_name]
    return "", []
