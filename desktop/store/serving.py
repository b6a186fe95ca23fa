"""What the local API server (``desktop/serve``) keeps in SQLite: its keys and how it serves
each agent.

``ApiKeyStore``: one row per key with its name, a hex SHA-256 of the key (never the key: the
key itself is in the OS keyring, ``serve/keys.py``), a hint to tell keys apart, the agents it
may call (None: every served agent) and when it was last used. A key is found by its hash.

``ServedAgentStore``: per agent, whether the server lists it (an agent with no row is served:
a new agent is callable on loopback like any other), whether a client's ``temperature`` /
``max_tokens`` override the agent's, and whether the agent's own MCP tools run for clients.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

import sqlite_utils

from desktop.store.db import read_back, utc_now


@dataclass(frozen=True, slots=True)
class ApiKeyRecord:
    id: int
    name: str
    key_hash: str
    hint: str
    agent_ids: tuple[int, ...] | None  # None: every agent the server serves
    created_at: str
    last_used_at: str | None

    def allows(self, agent_id: int | None) -> bool:
        return self.agent_ids is None or (agent_id is not None and agent_id in self.agent_ids)


def _key(row: tuple[object, ...]) -> ApiKeyRecord:
    key_id, name, key_hash, hint, agent_ids, created, used = row
    ids = json.loads(str(agent_ids)) if agent_ids is not None else None
    return ApiKeyRecord(
        id=int(str(key_id)),
        name=str(name),
        key_hash=str(key_hash),
        hint=str(hint),
        agent_ids=tuple(int(i) for i in ids) if ids is not None else None,
        created_at=str(created),
        last_used_at=str(used) if used is not None else None,
    )


_KEY_COLUMNS = "id, name, key_hash, hint, agent_ids, created_at, last_used_at"


class ApiKeyStore:
    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    def list(self) -> list[ApiKeyRecord]:
        rows = self._db.execute(f"SELECT {_KEY_COLUMNS} FROM api_keys ORDER BY name COLLATE NOCASE")
        return [_key(r) for r in rows.fetchall()]

    def by_name(self, name: str) -> ApiKeyRecord | None:
        row = self._db.execute(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE name = ? COLLATE NOCASE", [name]
        ).fetchone()
        return _key(row) if row else None

    def by_hash(self, key_hash: str) -> ApiKeyRecord | None:
        row = self._db.execute(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE key_hash = ?", [key_hash]
        ).fetchone()
        return _key(row) if row else None

    def add(
        self, name: str, key_hash: str, hint: str, agent_ids: tuple[int, ...] | None
    ) -> ApiKeyRecord:
        self._db.execute(
            "INSERT INTO api_keys (name, key_hash, hint, agent_ids, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            [
                name,
                key_hash,
                hint,
                json.dumps(list(agent_ids)) if agent_ids is not None else None,
                utc_now(),
            ],
        )
        return read_back(self.by_name(name))

    def set_agents(self, name: str, agent_ids: tuple[int, ...] | None) -> None:
        self._db.execute(
            "UPDATE api_keys SET agent_ids = ? WHERE name = ? COLLATE NOCASE",
            [json.dumps(list(agent_ids)) if agent_ids is not None else None, name],
        )

    def touch(self, key_id: int) -> None:
        """Note that the key was just used (shown beside it; never needed to check it)."""
        self._db.execute("UPDATE api_keys SET last_used_at = ? WHERE id = ?", [utc_now(), key_id])

    def remove(self, name: str) -> bool:
        cur = self._db.execute("DELETE FROM api_keys WHERE name = ? COLLATE NOCASE", [name])
        return bool(cur.rowcount)


@dataclass(frozen=True, slots=True)
class ServedAgent:
    """How the server serves one agent (the defaults for an agent without a row)."""

    agent_id: int
    exposed: bool = True
    client_sampling: bool = False
    run_tools: bool = False


class ServedAgentStore:
    writes: ClassVar[int] = 0  # as ``AgentStore.writes``

    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    def all(self) -> dict[int, ServedAgent]:
        rows = self._db.execute(
            "SELECT agent_id, exposed, client_sampling, run_tools FROM served_agents"
        ).fetchall()
        return {int(a): ServedAgent(int(a), bool(e), bool(c), bool(t)) for a, e, c, t in rows}

    def get(self, agent_id: int) -> ServedAgent:
        return self.all().get(agent_id, ServedAgent(agent_id))

    def set(self, served: ServedAgent) -> None:
        ServedAgentStore.writes += 1
        self._db.execute(
            "INSERT INTO served_agents (agent_id, exposed, client_sampling, run_tools) "
            "VALUES (?, ?, ?, ?) ON CONFLICT(agent_id) DO UPDATE SET "
            "exposed = excluded.exposed, client_sampling = excluded.client_sampling, "
            "run_tools = excluded.run_tools",
            [
                served.agent_id,
                int(served.exposed),
                int(served.client_sampling),
                int(served.run_tools),
            ],
        )
