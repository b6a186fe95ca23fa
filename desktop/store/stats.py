"""inference_stats: one row per model call, and per-agent aggregates."""

from __future__ import annotations

import string
from typing import Any

import sqlite_utils

from desktop.store.migrations import STATS_COLUMNS_M005

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
]


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

    def for_message(self, message_id: int) -> dict[str, Any] | None:
        rows = self._rows(
            "SELECT * FROM inference_stats WHERE message_id = ? ORDER BY id DESC LIMIT 1",
            [message_id],
        )
        return rows[0] if rows else None

    def for_messages(self, message_ids: list[int]) -> dict[int, dict[str, Any]]:
        if not message_ids:
            return {}
        marks = ", ".join("?" for _ in message_ids)
        rows = self._rows(
            f"SELECT * FROM inference_stats WHERE message_id IN ({marks}) ORDER BY id",
            list(message_ids),
        )
        return {int(r["message_id"]): r for r in rows}

    def rows(self, agent_name: str | None = None, limit: int = 1000) -> list[dict[str, Any]]:
        where, params = _agent_filter(agent_name)
        return self._rows(
            f"SELECT * FROM inference_stats {where} ORDER BY id DESC LIMIT ?", [*params, limit]
        )

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
            f"SUM(CASE WHEN {_OUTCOME} = 'complete' THEN 1 ELSE 0 END) AS complete, "
            f"SUM(CASE WHEN {_OUTCOME} = 'cancelled' THEN 1 ELSE 0 END) AS cancelled, "
            f"SUM(CASE WHEN {_OUTCOME} = 'error' THEN 1 ELSE 0 END) AS errors, "
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
            f"SELECT agent_name AS agent, {_ERROR_KIND} AS kind, COUNT(*) AS n "
            f"FROM inference_stats {where} {'AND' if where else 'WHERE'} {_OUTCOME} = 'error' "
            "GROUP BY agent_name COLLATE NOCASE, kind ORDER BY n DESC, kind",
            params,
        ):
            kinds.setdefault(_nocase(r["agent"]), {})[str(r["kind"])] = int(r["n"])
        for row in rows:
            row["error_kinds"] = kinds.get(_nocase(row["agent"]), {})
        return rows


# What became of a call, from its row: an error kind means it failed (whatever the finish
# reason says), a "cancelled" finish that the person stopped it, anything else that it
# finished on its own.
_OUTCOME = (
    "(CASE WHEN error_kind IS NOT NULL OR finish_reason = 'error' THEN 'error' "
    "WHEN finish_reason = 'cancelled' THEN 'cancelled' ELSE 'complete' END)"
)
_ERROR_KIND = "COALESCE(error_kind, 'unknown')"
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _nocase(name: object) -> str:
    """A name as SQLite's NOCASE compares it (ASCII letters only), to match groups."""
    return str(name).translate(_ASCII_LOWER)


def _agent_filter(agent_name: str | None) -> tuple[str, list[Any]]:
    """The WHERE clause (and its parameters) for one agent's rows; none for every agent."""
    if agent_name:
        return "WHERE agent_name = ? COLLATE NOCASE", [agent_name]
    return "", []
