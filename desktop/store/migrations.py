"""Append-only list of named, idempotent schema steps. Never edit or reorder a shipped step.
The steps after m006 live in ``migrations_features.py``.

``db.migrate`` runs each step in its own transaction: a step must not COMMIT, and must not use
statements SQLite refuses inside one (``VACUUM``, ``PRAGMA foreign_keys``, ``journal_mode``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import sqlite_utils

from desktop.store.migrations_features import (
    add_columns,
    m007_compare,
    m008_cache_source,
    m009_mcp_servers,
    m010_tool_steps,
    m011_process_owners,
    m012_where_it_ran,
    m013_api_server,
    m014_attachments,
    m015_knowledge,
)


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
    add_columns(
        db,
        "agents",
        (
            ("preset", "TEXT"),
            ("stall_timeout_s", "REAL"),
            ("ca_bundle", "TEXT"),
            ("main_gpu", "INTEGER"),
            ("n_batch", "INTEGER"),
        ),
    )


def m003_branches_search(db: sqlite_utils.Database) -> None:
    """Message trees (versions and branches), reasoning text, soft delete, full-text search.

    A conversation is a tree: ``messages.parent_id`` is the message a message answers (NULL
    for the first), siblings are versions (regenerated replies, edited questions). Each
    message points at the child on its active branch (``active_child_id``) and the
    conversation at its active first message (``active_root_id``), so the active path is
    one recursive walk over primary keys, and every branch remembers where it was left.
    Existing conversations become one straight branch in id order.
    """
    add_columns(
        db,
        "messages",
        (
            ("parent_id", "INTEGER REFERENCES messages(id) ON DELETE CASCADE"),
            ("active_child_id", "INTEGER REFERENCES messages(id) ON DELETE SET NULL"),
            ("reasoning", "TEXT NOT NULL DEFAULT ''"),
        ),
    )
    add_columns(
        db,
        "conversations",
        (
            ("active_root_id", "INTEGER REFERENCES messages(id) ON DELETE SET NULL"),
            ("deleted_at", "TEXT"),
        ),
    )
    db.executescript(
        """
        -- backfill: each conversation's messages in id order form its one branch
        UPDATE messages SET parent_id = (
            SELECT MAX(p.id) FROM messages p
            WHERE p.conversation_id = messages.conversation_id AND p.id < messages.id
        ) WHERE parent_id IS NULL;
        UPDATE messages SET active_child_id = (
            SELECT MIN(c.id) FROM messages c
            WHERE c.conversation_id = messages.conversation_id AND c.id > messages.id
        ) WHERE active_child_id IS NULL;
        UPDATE conversations SET active_root_id = (
            SELECT MIN(m.id) FROM messages m WHERE m.conversation_id = conversations.id
        ) WHERE active_root_id IS NULL;
        CREATE INDEX IF NOT EXISTS messages_by_parent ON messages (parent_id, id);
        CREATE INDEX IF NOT EXISTS conversations_by_agent ON conversations (agent_id, updated_at);
        CREATE INDEX IF NOT EXISTS conversations_listed
            ON conversations (deleted_at, pinned, updated_at);

        CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
            content, content='messages', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
        END;
        CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content)
                VALUES ('delete', old.id, old.content);
        END;
        CREATE TRIGGER IF NOT EXISTS messages_fts_update AFTER UPDATE OF content ON messages
        BEGIN
            INSERT INTO messages_fts (messages_fts, rowid, content)
                VALUES ('delete', old.id, old.content);
            INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
        END;
        INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
        """
    )


def m004_stats_outlive_messages(db: sqlite_utils.Database) -> None:
    """A call's stats row outlives its message: Retry replaces a failed reply, and the failed
    call must still count (its ``message_id`` becomes NULL; the row keeps its conversation,
    so deleting the conversation still removes it).

    SQLite cannot alter a foreign key, so the table is rebuilt from its own stored definition
    with only that clause changed: every column (and index) it has now is kept.
    """
    row = db.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'inference_stats'"
    ).fetchone()
    cascade = re.compile(
        r"(message_id\s+INTEGER\s+REFERENCES\s+messages\s*\(\s*id\s*\))"
        r"\s+ON\s+DELETE\s+CASCADE",
        re.IGNORECASE,
    )
    if row is None or not cascade.search(row[0]):
        return
    create = cascade.sub(r"\1 ON DELETE SET NULL", row[0], count=1)
    create = re.sub(
        r"^CREATE TABLE\s+\"?inference_stats\"?",
        "CREATE TABLE inference_stats_m004",
        create,
        count=1,
        flags=re.IGNORECASE,
    )
    indexes = [
        r[0]
        for r in db.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'inference_stats' "
            "AND sql IS NOT NULL"
        )
    ]
    columns = ", ".join(f'"{c.name}"' for c in db["inference_stats"].columns)
    db.execute(create)
    db.execute(
        f"INSERT INTO inference_stats_m004 ({columns}) SELECT {columns} FROM inference_stats"
    )
    db.execute("DROP TABLE inference_stats")
    db.execute("ALTER TABLE inference_stats_m004 RENAME TO inference_stats")
    for sql in indexes:
        db.execute(sql)


STATS_COLUMNS_M005 = (
    # local: starting the worker process, when this call had to (a fresh or crashed worker)
    ("worker_start_ms", "REAL"),
    # remote: the TLS handshake, part of connect_ms (which is TCP + TLS)
    ("tls_ms", "REAL"),
    # remote: 1 = went over a kept-alive connection (no connect), 0 = opened one
    ("reused_connection", "INTEGER"),
    # client: first content token received -> last one received
    ("stream_ms", "REAL"),
    # who measured prefill_ms / decode_ms: 'llama.cpp' (our worker's counters), 'server'
    # (the server's own timings, e.g. llama.cpp server), NULL when nobody did
    ("timing_source", "TEXT"),
    # how prefill_tok_s was found: 'measured' (backend counters) or 'estimated' (from TTFT)
    ("prefill_source", "TEXT"),
    # local: the KV cache llama.cpp allocated for this model's context, bytes
    ("kv_cache_bytes", "INTEGER"),
    # the parts of cost_usd: new input tokens, cached input tokens, output (+ reasoning)
    ("cost_input_usd", "REAL"),
    ("cost_cached_usd", "REAL"),
    ("cost_output_usd", "REAL"),
)


def m005_inference_visibility(db: sqlite_utils.Database) -> None:
    """Timeline, cost and dashboard columns; a per-agent price override; indexes the
    dashboard's aggregates use (by agent name, as stats group, and by time)."""
    add_columns(db, "inference_stats", STATS_COLUMNS_M005)
    add_columns(db, "agents", (("price_input_per_m", "REAL"), ("price_output_per_m", "REAL")))
    db.executescript(
        """
        CREATE INDEX IF NOT EXISTS stats_by_agent_name
            ON inference_stats (agent_name COLLATE NOCASE, started_at);
        CREATE INDEX IF NOT EXISTS stats_by_started ON inference_stats (started_at);
        """
    )


# m006: what the dashboard's summary reads, in the order it groups (agent, time), so it is
# answered from the index alone; SUMMARY_INDEX_COLUMNS is that list (stats_query reads it).
SUMMARY_INDEX_COLUMNS = (
    "started_at",
    "finish_reason",
    "error_kind",
    "provider_kind",
    "price_source",
    "prompt_tokens",
    "cached_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cost_usd",
    "ttft_ms",
    "decode_tok_s",
    "prefill_tok_s",
)
PERCENTILE_INDEXES = (  # (index, figure): each figure's values per agent, in order
    ("stats_ttft", "ttft_ms"),
    ("stats_decode", "decode_tok_s"),
    ("stats_prefill", "prefill_tok_s"),
)


def m006_dashboard_indexes(db: sqlite_utils.Database) -> None:
    """The dashboard over 100,000 calls in well under 300 ms: a covering index for the
    per-agent summary (one index scan, no table reads, no sort), and per figure (TTFT,
    decode and prefill speed) an index of its values per agent in order, from which a
    percentile is read at its rank instead of sorting."""
    db.execute(
        "CREATE INDEX IF NOT EXISTS stats_summary ON inference_stats "
        f"(agent_name COLLATE NOCASE, {', '.join(SUMMARY_INDEX_COLUMNS)})"
    )
    for name, column in PERCENTILE_INDEXES:
        db.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON inference_stats "
            f"(agent_name COLLATE NOCASE, {column}, started_at) WHERE {column} IS NOT NULL"
        )


Migration = tuple[str, Callable[[sqlite_utils.Database], None]]

MIGRATIONS: list[Migration] = [
    ("m001_initial", m001_initial),
    ("m002_agent_options", m002_agent_options),
    ("m003_branches_search", m003_branches_search),
    ("m004_stats_outlive_messages", m004_stats_outlive_messages),
    ("m005_inference_visibility", m005_inference_visibility),
    ("m006_dashboard_indexes", m006_dashboard_indexes),
    ("m007_compare", m007_compare),
    ("m008_cache_source", m008_cache_source),
    ("m009_mcp_servers", m009_mcp_servers),
    ("m010_tool_steps", m010_tool_steps),
    ("m011_process_owners", m011_process_owners),
    ("m012_where_it_ran", m012_where_it_ran),
    ("m013_api_server", m013_api_server),
    ("m014_attachments", m014_attachments),
    ("m015_knowledge", m015_knowledge),
]
