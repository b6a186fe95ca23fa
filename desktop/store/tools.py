"""MCP servers, the tools each agent may use, and "always allow" grants, in SQLite (m009).

No secret is ever stored here: a server's secret environment values and its bearer key live in
the keyring (``desktop/tools/config.py`` reads and writes them); this table keeps only their
names (``secret_env``) and the keyring entry's name (``bearer_key_ref``).

``McpServer`` lives here (the store is below ``desktop/tools``, which re-exports it), like
``Agent`` lives in ``store/agents.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import sqlite_utils

from desktop.store.db import read_back, savepoint, utc_now

Transport = Literal["stdio", "http"]
ALL_TOOLS = "*"  # an agent_tools row for every tool of a server
DEFAULT_TIMEOUT_S = 60.0


def secret_key_ref(server: str, variable: str) -> str:
    """The keyring entry (``SecretStore`` key_ref) of one secret environment value."""
    return f"mcp:{server}:{variable}"


def bearer_key_ref(server: str) -> str:
    """The keyring entry of an HTTP server's bearer key."""
    return f"mcp:{server}:bearer"


@dataclass(frozen=True, slots=True)
class McpServer:
    """One configured MCP server.

    ``transport`` "stdio": ``command`` + ``args`` are spawned (in ``cwd``) with a minimal
    environment: PATH, HOME, LANG, TMPDIR, then ``env`` (plain values) and the ``secret_env``
    names with their values from the keyring. "http": streamable HTTP at ``url``, with an
    ``Authorization: Bearer`` header when ``bearer`` is set (the key is in the keyring under
    ``bearer_key_ref(name)``). ``timeout_s`` bounds each tool call.
    """

    name: str
    transport: Transport = "stdio"
    command: str = ""
    args: tuple[str, ...] = ()
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    secret_env: tuple[str, ...] = ()
    url: str = ""
    bearer: bool = False  # a bearer key is kept in the keyring for this server
    timeout_s: float = DEFAULT_TIMEOUT_S
    enabled: bool = True
    id: int | None = None
    created_at: str | None = None
    updated_at: str | None = None

    @property
    def bearer_key_ref(self) -> str | None:
        return bearer_key_ref(self.name) if self.bearer else None

    def secret_key_refs(self) -> dict[str, str]:
        """Each secret environment name → its keyring entry."""
        return {var: secret_key_ref(self.name, var) for var in self.secret_env}

    def with_changes(self, **changes: Any) -> McpServer:
        return replace(self, **changes)

    def where(self) -> str:
        """What it runs or where it is, for a list: the command line or the URL."""
        if self.transport == "http":
            return self.url
        return " ".join([self.command, *self.args])

    def to_public_dict(self) -> dict[str, Any]:
        """JSON-ready; names of secrets only, never a value."""
        return {
            "name": self.name,
            "transport": self.transport,
            "command": self.command,
            "args": list(self.args),
            "cwd": self.cwd,
            "env": dict(self.env),
            "secret_env": list(self.secret_env),
            "url": self.url,
            "bearer": self.bearer,
            "timeout_s": self.timeout_s,
            "enabled": self.enabled,
        }


@dataclass(frozen=True, slots=True)
class ToolGrant:
    """An "always allow this tool for this agent" grant."""

    agent_id: int
    server: str
    tool: str
    created_at: str


def _row_to_server(row: dict[str, Any]) -> McpServer:
    return McpServer(
        id=row["id"],
        name=row["name"],
        transport=row["transport"],
        command=row["command"],
        args=tuple(json.loads(row["args"] or "[]")),
        cwd=row["cwd"],
        env=dict(json.loads(row["env"] or "{}")),
        secret_env=tuple(json.loads(row["secret_env"] or "[]")),
        url=row["url"],
        bearer=row["bearer_key_ref"] is not None,
        timeout_s=float(row["timeout_s"]),
        enabled=bool(row["enabled"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class ToolStore:
    """Every method is one short transaction (usable from a worker thread or the GUI thread,
    like the other stores)."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    def _tx(self) -> AbstractContextManager[None]:
        return savepoint(self._db)

    # servers ----------------------------------------------------------------------------------
    def _values(self, server: McpServer) -> dict[str, Any]:
        return {
            "name": server.name,
            "transport": server.transport,
            "command": server.command,
            "args": json.dumps(list(server.args)),
            "cwd": server.cwd,
            "env": json.dumps(dict(server.env), sort_keys=True),
            "secret_env": json.dumps(list(server.secret_env)),
            "url": server.url,
            "bearer_key_ref": server.bearer_key_ref,
            "timeout_s": float(server.timeout_s),
            "enabled": int(server.enabled),
        }

    def add_server(self, server: McpServer) -> McpServer:
        now = utc_now()
        values = self._values(server) | {"created_at": now, "updated_at": now}
        names = ", ".join(values)
        marks = ", ".join(f":{k}" for k in values)
        with self._tx():
            cur = self._db.execute(f"INSERT INTO mcp_servers ({names}) VALUES ({marks})", values)
            new_id = cur.lastrowid
        return read_back(self.get_server_by_id(int(new_id or 0)))

    def update_server(self, server: McpServer) -> McpServer:
        if server.id is None:
            raise ValueError("update_server needs a stored server (with an id)")
        values = self._values(server) | {"updated_at": utc_now(), "id": server.id}
        sets = ", ".join(f"{k} = :{k}" for k in values if k != "id")
        with self._tx():
            self._db.execute(f"UPDATE mcp_servers SET {sets} WHERE id = :id", values)
        return read_back(self.get_server_by_id(server.id))

    def delete_server(self, name: str) -> bool:
        """Removes the server, the agents' permissions for it and its grants."""
        with self._tx():
            cur = self._db.execute("DELETE FROM mcp_servers WHERE name = ?", [name])
            self._db.execute("DELETE FROM agent_tools WHERE server = ?", [name])
            self._db.execute("DELETE FROM tool_grants WHERE server = ?", [name])
        return bool(cur.rowcount)

    def _one(self, where: str, params: list[Any]) -> McpServer | None:
        rows = list(self._db.query(f"SELECT * FROM mcp_servers WHERE {where}", params))
        return _row_to_server(rows[0]) if rows else None

    def get_server(self, name: str) -> McpServer | None:
        return self._one("name = ?", [name])

    def get_server_by_id(self, server_id: int) -> McpServer | None:
        return self._one("id = ?", [server_id])

    def list_servers(self) -> list[McpServer]:
        rows = self._db.query("SELECT * FROM mcp_servers ORDER BY name COLLATE NOCASE")
        return [_row_to_server(r) for r in rows]

    # an agent's tools -------------------------------------------------------------------------
    def set_agent_tools(self, agent_id: int, allowed: Iterable[tuple[str, str]]) -> None:
        """Replaces what the agent may use: (server, tool) pairs, tool ``ALL_TOOLS`` for all of
        a server's tools. An empty list: no tools."""
        pairs = sorted({(server, tool or ALL_TOOLS) for server, tool in allowed})
        with self._tx():
            self._db.execute("DELETE FROM agent_tools WHERE agent_id = ?", [agent_id])
            for server, tool in pairs:
                self._db.execute(
                    "INSERT INTO agent_tools (agent_id, server, tool) VALUES (?, ?, ?)",
                    [agent_id, server, tool],
                )

    def agent_tools(self, agent_id: int) -> list[tuple[str, str]]:
        """(server, tool) pairs, sorted; tool ``ALL_TOOLS`` means every tool of that server."""
        rows = self._db.execute(
            "SELECT server, tool FROM agent_tools WHERE agent_id = ? ORDER BY server, tool",
            [agent_id],
        ).fetchall()
        return [(r[0], r[1]) for r in rows]

    def agent_may_use(self, agent_id: int, server: str, tool: str) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM agent_tools WHERE agent_id = ? AND server = ? AND tool IN (?, ?)",
            [agent_id, server, tool, ALL_TOOLS],
        ).fetchone()
        return row is not None

    # "always allow" grants --------------------------------------------------------------------
    def add_grant(self, agent_id: int, server: str, tool: str) -> None:
        with self._tx():
            self._db.execute(
                "INSERT OR IGNORE INTO tool_grants (agent_id, server, tool, created_at) "
                "VALUES (?, ?, ?, ?)",
                [agent_id, server, tool, utc_now()],
            )

    def has_grant(self, agent_id: int, server: str, tool: str) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM tool_grants WHERE agent_id = ? AND server = ? AND tool = ?",
            [agent_id, server, tool],
        ).fetchone()
        return row is not None

    def grants(self, agent_id: int | None = None) -> list[ToolGrant]:
        sql = "SELECT agent_id, server, tool, created_at FROM tool_grants"
        params: list[Any] = []
        if agent_id is not None:
            sql += " WHERE agent_id = ?"
            params.append(agent_id)
        rows = self._db.execute(sql + " ORDER BY agent_id, server, tool", params).fetchall()
        return [ToolGrant(r[0], r[1], r[2], r[3]) for r in rows]

    def revoke_grant(self, agent_id: int, server: str, tool: str) -> bool:
        with self._tx():
            cur = self._db.execute(
                "DELETE FROM tool_grants WHERE agent_id = ? AND server = ? AND tool = ?",
                [agent_id, server, tool],
            )
        return bool(cur.rowcount)
