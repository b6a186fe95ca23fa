"""Append-only list of named, idempotent schema steps. Never edit or reorder a shipped step."""

from __future__ import annotations

from collections.abc import Callable

import sqlite_utils


def m001_initial(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS endpoints (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,
            base_url TEXT NOT NULL,
            -- names this endpoint's keyring entry (not a secret). Random, so a key can never
            -- be picked up by another database's endpoint that happens to get the same id.
            key_ref TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            UNIQUE (kind, base_url)
        );
        CREATE TABLE IF NOT EXISTS agents (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE COLLATE NOCASE,
            kind TEXT NOT NULL,
            endpoint_id INTEGER REFERENCES endpoints(id) ON DELETE SET NULL,
            model TEXT NOT NULL DEFAULT '',
            system_prompt TEXT NOT NULL DEFAULT '',
            temperature REAL,
            top_p REAL,
            max_tokens INTEGER,
            seed INTEGER,
            stop TEXT NOT NULL DEFAULT '[]',
            model_path TEXT,
            n_ctx INTEGER,
            n_gpu_layers INTEGER,
            n_threads INTEGER,
            flash_attn INTEGER NOT NULL DEFAULT 0,
            kv_type TEXT,
            sort_order INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS conversations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            title TEXT NOT NULL DEFAULT '',
            agent_id INTEGER REFERENCES agents(id) ON DELETE SET NULL,
            pinned INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS messages (
            -- AUTOINCREMENT: a deleted reply's id is never handed to a new one (UI and stats
            -- key on it).
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL,
            content TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL DEFAULT 'complete',
            error_text TEXT,
            error_kind TEXT,
            agent_id INTEGER REFERENCES agents(id) ON DELETE SET NULL,
            agent_name TEXT,
            model TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages (conversation_id, id);
        CREATE TABLE IF NOT EXISTS inference_stats (
            id INTEGER PRIMARY KEY,
            message_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
            conversation_id INTEGER REFERENCES conversations(id) ON DELETE CASCADE,
            agent_id INTEGER REFERENCES agents(id) ON DELETE SET NULL,
            agent_name TEXT NOT NULL,
            provider_kind TEXT NOT NULL,
            endpoint_host TEXT,
            model_requested TEXT,
            model_reported TEXT,
            started_at TEXT NOT NULL,
            queued_ms REAL,
            connect_ms REAL,
            headers_ms REAL,
            ttft_ms REAL,
            prefill_ms REAL,
            decode_ms REAL,
            total_ms REAL,
            prompt_tokens INTEGER,
            cached_tokens INTEGER,
            prompt_eval_tokens INTEGER,
            output_tokens INTEGER,
            reasoning_tokens INTEGER,
            token_source TEXT,
            prefill_tok_s REAL,
            decode_tok_s REAL,
            finish_reason TEXT,
            error_kind TEXT,
            cost_usd REAL,
            price_source TEXT,
            context_window INTEGER,
            context_fill REAL,
            n_gpu_layers INTEGER,
            n_ctx INTEGER,
            n_threads INTEGER,
            kv_type TEXT,
            flash_attn INTEGER,
            backend TEXT,
            load_ms REAL,
            model_file_size INTEGER,
            quantization TEXT
        );
        CREATE INDEX IF NOT EXISTS stats_by_agent ON inference_stats (agent_id, started_at);
        CREATE INDEX IF NOT EXISTS stats_by_message ON inference_stats (message_id);
        """
    )


def m002_agent_options(db: sqlite_utils.Database) -> None:
    """Per-agent options for remote endpoints (preset, stall timeout, CA bundle) and local
    loading (main GPU, batch size)."""
    columns = {c.name for c in db["agents"].columns}
    for name, sql_type in (
        ("preset", "TEXT"),
        ("stall_timeout_s", "REAL"),
        ("ca_bundle", "TEXT"),
        ("main_gpu", "INTEGER"),
        ("n_batch", "INTEGER"),
    ):
        if name not in columns:
            db.execute(f"ALTER TABLE agents ADD COLUMN {name} {sql_type}")


Migration = tuple[str, Callable[[sqlite_utils.Database], None]]

MIGRATIONS: list[Migration] = [
    ("m001_initial", m001_initial),
    ("m002_agent_options", m002_agent_options),
]
