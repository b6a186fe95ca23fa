"""MCP server configuration: what a person may enter, and the servers' secrets in the keyring.

``McpServer`` is the stored record (``desktop/store/tools.py``); ``McpConfig`` validates it with
finished messages, stores it, and keeps its secret environment values and bearer key in the
``SecretStore`` (key_ref ``mcp:<server>:<VAR>`` / ``mcp:<server>:bearer``): never in SQLite.
Keyring calls block (D-Bus, maybe an unlock prompt): from the window, call the secret methods
on a worker thread (``McpManager`` does, with ``asyncio.to_thread``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from desktop.errors import UserError, ValidationError
from desktop.settings.secrets import SecretStore
from desktop.store.tools import (
    ALL_TOOLS,
    DEFAULT_TIMEOUT_S,
    McpServer,
    ToolStore,
    Transport,
    bearer_key_ref,
    secret_key_ref,
)

__all__ = [
    "ALL_TOOLS",
    "DEFAULT_TIMEOUT_S",
    "McpConfig",
    "McpServer",
    "Transport",
    "parse_tool_list",
    "validate_server",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def validate_server(server: McpServer) -> None:
    """Raises ``ValidationError`` (field → message) for what cannot work."""
    problems: dict[str, str] = {}
    if not _NAME.match(server.name):
        problems["name"] = (
            "A server name is 1 to 64 letters, digits, '-', '_' or '.', starting with a letter "
            "or digit (it is used in tool names, e.g. files:read)."
        )
    if server.transport == "stdio":
        if not server.command.strip():
            problems["command"] = "Give the command that starts the server, e.g. npx or uvx."
        if server.url:
            problems["url"] = "A stdio server has a command, not a URL."
    elif server.transport == "http":
        parts = urlsplit(server.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            problems["url"] = "Give the server's full URL, e.g. https://example.com/mcp."
        if server.command:
            problems["command"] = "An HTTP server has a URL, not a command."
    else:
        problems["transport"] = "The transport is stdio (a command) or http (a URL)."
    for var in [*server.env, *server.secret_env]:
        if not _ENV_NAME.match(var):
            problems["env"] = f"“{var}” is not an environment variable name (A-Z, 0-9, _)."
    overlap = sorted(set(server.env) & set(server.secret_env))
    if overlap:
        problems["secret_env"] = f"{', '.join(overlap)} is given both as plain and as secret."
    if not (0 < server.timeout_s <= 3600):
        problems["timeout_s"] = "The timeout is between 1 second and 1 hour."
    if problems:
        raise ValidationError(problems)


def parse_tool_list(text: str) -> list[tuple[str, str]]:
    """``"files,web:search"`` → ``[("files", "*"), ("web", "search")]`` (the CLI's --tools)."""
    pairs: list[tuple[str, str]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        server, _, tool = item.partition(":")
        if not server.strip():
            raise ValidationError({"tools": f"“{item}” names no server (SERVER or SERVER:TOOL)."})
        pairs.append((server.strip(), tool.strip() or ALL_TOOLS))
    return pairs


class McpConfig:
    """``ToolStore`` plus the keyring: add, update, remove servers with their secrets."""

    def __init__(self, store: ToolStore, secrets: SecretStore) -> None:
        self.store = store
        self.secrets = secrets

    def list(self) -> list[McpServer]:
        return self.store.list_servers()

    def get(self, name: str) -> McpServer | None:
        return self.store.get_server(name)

    def require(self, name: str) -> McpServer:
        server = self.store.get_server(name)
        if server is None:
            names = ", ".join(s.name for s in self.store.list_servers()) or "none yet"
            raise UserError(f"There is no MCP server called “{name}”. Servers: {names}.")
        return server

    def add(
        self,
        server: McpServer,
        secret_values: Mapping[str, str] | None = None,
        bearer: str | None = None,
    ) -> McpServer:
        """Stores a new server; ``secret_values`` (one per ``secret_env`` name) and ``bearer``
        go to the keyring first, so a refused keyring stores nothing."""
        validate_server(server)
        if self.store.get_server(server.name) is not None:
            taken = f"There is already an MCP server called “{server.name}”."
            raise ValidationError({"name": taken})
        secret_values = dict(secret_values or {})
        missing = [v for v in server.secret_env if not secret_values.get(v)]
        if missing:
            raise ValidationError({"secret_env": f"No value was given for {', '.join(missing)}."})
        if server.transport == "http" and bearer:
            server = server.with_changes(bearer=True)
        elif not bearer:
            server = server.with_changes(bearer=False)
        for var in server.secret_env:
            self.secrets.set(secret_key_ref(server.name, var), secret_values[var])
        if server.bearer and bearer:
            self.secrets.set(bearer_key_ref(server.name), bearer)
        return self.store.add_server(server)

    def update(self, server: McpServer) -> McpServer:
        """Saves changed plain fields (name changes are not supported: the keyring entries are
        named after it; remove and add instead)."""
        validate_server(server)
        stored = self.require(server.name)
        return self.store.update_server(server.with_changes(id=stored.id))

    def remove(self, name: str) -> McpServer:
        """Removes the server, its keyring entries, agents' permissions and grants."""
        server = self.require(name)
        for ref in server.secret_key_refs().values():
            self.secrets.delete(ref)
        if server.bearer_key_ref:
            self.secrets.delete(server.bearer_key_ref)
        self.store.delete_server(server.name)
        return server

    # secrets (blocking: call off the GUI thread) ----------------------------------------------
    def secret_env_values(self, server: McpServer) -> dict[str, str]:
        """The secret environment of a server, from the keyring. A value that is gone is a
        ``UserError`` naming it (the server would start without it and fail obscurely)."""
        values: dict[str, str] = {}
        for var, ref in server.secret_key_refs().items():
            value = self.secrets.get(ref)
            if not value:
                raise UserError(
                    f"The secret {var} of MCP server “{server.name}” is not in the keyring any "
                    f"more. Give it again: simi mcp remove {server.name}, then add it."
                )
            values[var] = value
        return values

    def bearer_value(self, server: McpServer) -> str | None:
        ref = server.bearer_key_ref
        return self.secrets.get(ref) if ref else None
