"""Schema steps of the features after the core (see ``migrations.py`` for the rules): compare
mode (m007), where cached prompt tokens came from (m008), MCP tool servers (m009), tool steps
(m010), the process that owns each live row (m011), where a local call ran (m012), the local
API server (m013), attachments (m014), knowledge (m015); and ``add_columns``, which the steps
of both files share. Listed, in order, in ``migrations.MIGRATIONS``; never edit or reorder a
shipped step."""

from __future__ import annotations

from collections.abc import Iterable

import sqlite_utils


def add_columns(db: sqlite_utils.Database, table: str, columns: Iterable[tuple[str, str]]) -> None:
    """``ALTER TABLE table ADD COLUMN`` for each (name, SQL type) the table does not have yet
    (a step runs again after a crash, or on a database that has some of them). Shipped steps
    call it: what it does never changes."""
    have = {c.name for c in db[table].columns}
    for name, sql_type in columns:
        if name not in have:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {sql_type}")


def m007_compare(db: sqlite_utils.Database) -> None:
    """Compare mode: sessions of side-by-side columns (each an ordinary conversation), pairwise
    votes, saved agent sets, and prompt-set runs with one row per call (its stats row in
    inference_stats, tagged with the run)."""
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS compare_sessions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            title TEXT NOT NULL DEFAULT '',
            blind INTEGER NOT NULL DEFAULT 0,
            revealed INTEGER NOT NULL DEFAULT 0,  -- a blind session's names were shown
            fair_seed INTEGER,  -- "same seed and temperature for all", or NULL
            fair_temperature REAL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS compare_columns (
            session_id INTEGER NOT NULL REFERENCES compare_sessions(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,  -- left to right, as shown (blind: a shuffled order)
            label TEXT NOT NULL,  -- "A", "B", ... by position
            agent_id INTEGER REFERENCES agents(id) ON DELETE SET NULL,
            agent_name TEXT NOT NULL,  -- kept when the agent is deleted
            conversation_id INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
            PRIMARY KEY (session_id, position)
        );
        CREATE TABLE IF NOT EXISTS compare_votes (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id INTEGER REFERENCES compare_sessions(id) ON DELETE SET NULL,
            prompt TEXT NOT NULL,
            left_agent_id INTEGER REFERENCES agents(id) ON DELETE SET NULL,
            left_agent_name TEXT NOT NULL,
            left_message_id INTEGER,
            right_agent_id INTEGER REFERENCES agents(id) ON DELETE SET NULL,
            right_agent_name TEXT NOT NULL,
            right_message_id INTEGER,
            outcome TEXT NOT NULL CHECK (outcome IN ('left', 'right', 'tie', 'both_bad')),
            blind INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS compare_votes_agents
            ON compare_votes (left_agent_name, right_agent_name);
        CREATE INDEX IF NOT EXISTS compare_votes_by_session ON compare_votes (session_id, id);
        CREATE TABLE IF NOT EXISTS agent_sets (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL UNIQUE COLLATE NOCASE,
            agent_ids TEXT NOT NULL,  -- JSON list, in column order
            created_at TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS prompt_runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            title TEXT NOT NULL DEFAULT '',
            prompts TEXT NOT NULL,  -- JSON list of strings
            agent_ids TEXT NOT NULL,  -- JSON list
            agent_names TEXT NOT NULL,  -- JSON list, parallel to agent_ids
            repeat INTEGER NOT NULL DEFAULT 1,
            status TEXT NOT NULL DEFAULT 'running'
                CHECK (status IN ('running', 'paused', 'cancelled', 'complete', 'interrupted')),
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS prompt_run_calls (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            run_id INTEGER NOT NULL REFERENCES prompt_runs(id) ON DELETE CASCADE,
            prompt_index INTEGER NOT NULL,
            agent_id INTEGER REFERENCES agents(id) ON DELETE SET NULL,
            agent_name TEXT NOT NULL,
            repetition INTEGER NOT NULL,  -- 0 .. repeat-1
            status TEXT NOT NULL CHECK (status IN ('complete', 'error', 'cancelled')),
            error_text TEXT,
            reply TEXT NOT NULL DEFAULT '',
            stats_id INTEGER REFERENCES inference_stats(id) ON DELETE SET NULL,
            created_at TEXT NOT NULL,
            UNIQUE (run_id, prompt_index, agent_name, repetition)
        );
        -- agents.id is no AUTOINCREMENT, so a deleted agent's id can come back as a new agent:
        -- the JSON id lists forget it, as a foreign key would (a set drops it, a run keeps
        -- its place as null beside the name)
        CREATE TRIGGER IF NOT EXISTS agent_sets_forget_agent AFTER DELETE ON agents BEGIN
            UPDATE agent_sets SET agent_ids = (
                SELECT json_group_array(value) FROM (
                    SELECT value FROM json_each(agent_sets.agent_ids)
                    WHERE value IS NOT old.id ORDER BY key
                )
            ) WHERE EXISTS (
                SELECT 1 FROM json_each(agent_sets.agent_ids) WHERE value = old.id
            );
        END;
        CREATE TRIGGER IF NOT EXISTS prompt_runs_forget_agent AFTER DELETE ON agents BEGIN
            UPDATE prompt_runs SET agent_ids = (
                SELECT json_group_array(CASE WHEN value = old.id THEN NULL ELSE value END)
                FROM (SELECT value FROM json_each(prompt_runs.agent_ids) ORDER BY key)
            ) WHERE EXISTS (
                SELECT 1 FROM json_each(prompt_runs.agent_ids) WHERE value = old.id
            );
        END;
        """
    )
    add_columns(db, "inference_stats", [("prompt_run_id", "INTEGER")])


STATS_COLUMNS_M008 = (
    # local: where the cached prompt tokens came from: 'context' (already in the model's
    # context), 'memory' (the worker's prompt-state cache: another conversation's state
    # restored) or 'saved' (a system prompt's state saved on disk); NULL: none, or not local
    ("cache_source", "TEXT"),
    # local: restoring that memory-cached or saved state, before prefill
    ("cache_restore_ms", "REAL"),
)


def m008_cache_source(db: sqlite_utils.Database) -> None:
    """Where a local call's cached prompt tokens came from and how long restoring them took
    (issue 17's prompt-state caches). Rows recorded before keep NULL: not known."""
    add_columns(db, "inference_stats", STATS_COLUMNS_M008)


def m009_mcp_servers(db: sqlite_utils.Database) -> None:
    """Issue 18's tools: MCP servers (``store/tools.py``), which servers and tools each agent may
    use (``agent_tools``; tool '*' = all of a server's tools) and the "always allow this tool for
    this agent" grants (``tool_grants``). No secret is stored here: a secret environment value or
    a bearer key lives in the keyring, under ``secret_key_ref``/``bearer_key_ref``."""
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS mcp_servers (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE COLLATE NOCASE,
            transport TEXT NOT NULL CHECK (transport IN ('stdio', 'http')),
            command TEXT NOT NULL DEFAULT '',
            args TEXT NOT NULL DEFAULT '[]',  -- JSON list
            cwd TEXT,
            env TEXT NOT NULL DEFAULT '{}',  -- JSON object of plain (not secret) values
            secret_env TEXT NOT NULL DEFAULT '[]',  -- JSON list of names; values in the keyring
            url TEXT NOT NULL DEFAULT '',
            bearer_key_ref TEXT,  -- names the keyring entry of the bearer key (not a secret)
            timeout_s REAL NOT NULL DEFAULT 60.0,
            enabled INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS agent_tools (
            agent_id INTEGER NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
            server TEXT NOT NULL COLLATE NOCASE,
            tool TEXT NOT NULL,  -- '*': every tool of the server
            PRIMARY KEY (agent_id, server, tool)
        );
        CREATE TABLE IF NOT EXISTS tool_grants (
            agent_id INTEGER NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
            server TEXT NOT NULL COLLATE NOCASE,
            tool TEXT NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (agent_id, server, tool)
        );
        """
    )


STATS_COLUMNS_M010 = (
    # an agentic turn's model calls, 1, 2, …: each its own row (NULL before m010: one call)
    ("call_index", "INTEGER"),
    # how many tool calls this model call asked for, and how long they ran (after approval)
    ("tool_calls", "INTEGER"),
    ("tool_ms", "REAL"),
)


def m010_tool_steps(db: sqlite_utils.Database) -> None:
    """Issue 18's agentic turns: every tool call a reply made (``store/tool_steps.py``), and on
    each stats row its call index within the turn and the tools it asked for."""
    add_columns(db, "inference_stats", STATS_COLUMNS_M010)
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS tool_steps (
            id INTEGER PRIMARY KEY,
            message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            call_index INTEGER NOT NULL,  -- the model call (1-based) that asked for it
            position INTEGER NOT NULL,  -- order within the turn, from 0
            call_id TEXT NOT NULL,
            server TEXT NOT NULL,
            tool TEXT NOT NULL,
            arguments TEXT NOT NULL DEFAULT '',  -- the model's raw JSON text
            text_offset INTEGER NOT NULL DEFAULT 0,  -- the reply's length when it was asked
            status TEXT NOT NULL,
            approval TEXT NOT NULL DEFAULT '',
            result TEXT NOT NULL DEFAULT '',  -- what went back to the model
            is_error INTEGER NOT NULL DEFAULT 0,
            size INTEGER NOT NULL DEFAULT 0,
            duration_ms REAL,
            truncated INTEGER NOT NULL DEFAULT 0,
            signature TEXT,
            model_name TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS tool_steps_by_message ON tool_steps (message_id, position);
        -- the dashboard's tool totals per agent read only the calls that asked for tools
        CREATE INDEX IF NOT EXISTS stats_tools ON inference_stats
            (agent_name COLLATE NOCASE, started_at, tool_calls, tool_ms)
            WHERE tool_calls IS NOT NULL;
        """
    )


OWNER_COLUMNS_M011 = (
    # (table, column): the ``process_owners`` row of the process that wrote what is live
    ("messages", "owner_id"),  # a reply while it streams
    ("tool_steps", "owner_id"),  # a tool call while it is asked, waits or runs
    ("prompt_runs", "owner_id"),  # a prompt-set run while it runs
    ("conversations", "trashed_by"),  # a deleted conversation while its Undo is offered
)


def m011_process_owners(db: sqlite_utils.Database) -> None:
    """Issue 25: a second process (``simi stats`` beside the window) must not take the first
    one's live work for a crash's leftovers. Each app process is a row of ``process_owners``
    (``store/owners.py``) and stamps the live rows it writes with it; start-up recovery touches
    only rows whose owner is dead, or that have none (written before m011). No foreign key: an
    owner's row goes when its process ends, and what it stamped then reads as "owner gone"."""
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS process_owners (
            id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never handed out twice
            pid INTEGER NOT NULL,
            -- Linux: "<boot id>:<start time in clock ticks>" from /proc (a reused pid has
            -- another); NULL where it cannot be read: the heartbeat tells then
            start_time TEXT,
            started_at TEXT NOT NULL,
            heartbeat_at TEXT NOT NULL
        );
        """
    )
    for table, column in OWNER_COLUMNS_M011:
        # a table a (test's) partial step list left out gets none; a store without an owner
        # never names the column
        if db[table].exists() and column not in db[table].columns_dict:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} INTEGER")


STATS_COLUMNS_M012 = (
    # local, as llama.cpp reported the load (issue 26): the device holding the layers ("CPU",
    # "Vulkan0 · llvmpipe (software)", "CUDA0 · NVIDIA H200"), the layers offloaded of all
    # ("0/31", "31/31") and the bytes of its buffers in GPU memory (weights, KV, compute)
    ("device", "TEXT"),
    ("offloaded_layers", "TEXT"),
    ("vram_bytes", "INTEGER"),
)


def m012_where_it_ran(db: sqlite_utils.Database) -> None:
    """Where a local call ran, from llama.cpp's own load report rather than the n_gpu_layers
    setting (``backend`` has been there since m001). Rows recorded before keep NULL."""
    add_columns(db, "inference_stats", STATS_COLUMNS_M012)


STATS_COLUMNS_M013 = (
    # who asked for the call: NULL for the app's own calls (the window, the CLI), 'api' for a
    # call a client made through the local API server (desktop/serve)
    ("source", "TEXT"),
    # which client: the name of the API key it used (NULL: none, or not an API call); a
    # revoked key's name stays on its calls
    ("api_client", "TEXT"),
)


def m013_api_server(db: sqlite_utils.Database) -> None:
    """The local API server (``desktop/serve``): its keys (only a SHA-256 of each: the key
    itself lives in the OS keyring), which agents it serves and how, and the calls' source."""
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS api_keys (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL UNIQUE COLLATE NOCASE,
            key_hash TEXT NOT NULL UNIQUE,  -- hex SHA-256 of the key
            hint TEXT NOT NULL,  -- the key's first and last characters, to tell keys apart
            agent_ids TEXT,  -- JSON list of the agents it may call; NULL: every served agent
            created_at TEXT NOT NULL,
            last_used_at TEXT
        );
        CREATE TABLE IF NOT EXISTS served_agents (
            agent_id INTEGER PRIMARY KEY REFERENCES agents(id) ON DELETE CASCADE,
            exposed INTEGER NOT NULL DEFAULT 1,  -- listed and callable through the server
            client_sampling INTEGER NOT NULL DEFAULT 0,  -- a client's temperature/max_tokens win
            run_tools INTEGER NOT NULL DEFAULT 0  -- the agent's own MCP tools run for clients
        );
        """
    )
    add_columns(db, "inference_stats", STATS_COLUMNS_M013)
    db.execute(
        "CREATE INDEX IF NOT EXISTS stats_by_source ON inference_stats "
        "(source, api_client, started_at) WHERE source IS NOT NULL"
    )


STATS_COLUMNS_M014 = (
    # of prompt_tokens, those the call's images took: reported by the backend where it says
    # (Gemini), else estimated from the images' sizes (image_tokens_estimated = 1)
    ("image_tokens", "INTEGER"),
    ("image_tokens_estimated", "INTEGER"),
    # local: milliseconds the vision projector took to encode the images (a timeline lane)
    ("image_encode_ms", "REAL"),
)


def m014_attachments(db: sqlite_utils.Database) -> None:
    """Files attached to messages: each stored once under its SHA-256 in the attachments
    folder (``store/attachments.py``), a row per use; a local agent's vision projector; what
    the images of a call cost in tokens and, locally, in time."""
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS attachment_files (
            sha256 TEXT PRIMARY KEY,  -- hex SHA-256 of the bytes: the file's name on disk
            size INTEGER NOT NULL,
            mime TEXT NOT NULL,  -- what the bytes are (sniffed), not what the name says
            kind TEXT NOT NULL,  -- 'image' or 'document'
            created_at TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS message_attachments (
            message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,  -- the order they were attached in
            sha256 TEXT NOT NULL REFERENCES attachment_files(sha256),
            name TEXT NOT NULL,  -- the file's name as the person attached it
            -- a document sent in part ("send the first part": it did not fit the context):
            -- how many characters of its text; NULL: all of it
            text_limit INTEGER,
            PRIMARY KEY (message_id, position)
        );
        CREATE INDEX IF NOT EXISTS message_attachments_by_file ON message_attachments (sha256);
        """
    )
    add_columns(db, "agents", [("mmproj_path", "TEXT")])
    add_columns(db, "inference_stats", STATS_COLUMNS_M014)


STATS_COLUMNS_M015 = (
    # a turn whose agent searches knowledge collections: the search before the call, in ms
    # from Send (its parts: embedding the question, ranking, reading the passages), and what
    # it added to the prompt (passages, and their tokens estimated as characters / 4)
    ("retrieval_ms", "REAL"),
    ("retrieval_embed_ms", "REAL"),
    ("retrieval_search_ms", "REAL"),
    ("retrieval_read_ms", "REAL"),
    ("retrieval_chunks", "INTEGER"),
    ("retrieval_tokens", "INTEGER"),
)


def m015_knowledge(db: sqlite_utils.Database) -> None:
    """Knowledge: collections of folders and files read in place (each one's index is a file
    of its own in the data folder, ``desktop/knowledge``), which agents search which, the
    passages a reply was given (numbered as the model was told to cite them), and the
    search's share of a call's time and prompt."""
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS knowledge_collections (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL UNIQUE COLLATE NOCASE,
            paths TEXT NOT NULL,  -- JSON list of absolute paths: folders and files, read in place
            embedder TEXT,  -- the GGUF embedding model's path; NULL: keyword search (BM25) only
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS agent_knowledge (
            agent_id INTEGER NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
            collection_id INTEGER NOT NULL
                REFERENCES knowledge_collections(id) ON DELETE CASCADE,
            PRIMARY KEY (agent_id, collection_id)
        );
        CREATE TABLE IF NOT EXISTS message_sources (
            message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,  -- the number the model cites it by: [1], [2], ...
            collection TEXT NOT NULL,  -- the collection's name then (kept if it is removed)
            path TEXT NOT NULL,
            start_line INTEGER,
            end_line INTEGER,
            page INTEGER,  -- a PDF's page (lines then count within it); NULL otherwise
            score REAL,
            text TEXT NOT NULL,  -- the passage as the model read it (the file may change)
            PRIMARY KEY (message_id, position)
        );
        """
    )
    add_columns(db, "inference_stats", STATS_COLUMNS_M015)
