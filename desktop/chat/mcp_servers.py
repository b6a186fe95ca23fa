"""Saving an MCP server from Settings → Tools, Qt-free and blocking (the keyring): the record
and its secrets, a secret value and a bearer key in the keyring, never in the database.

A new server is added with its secrets (``McpConfig.add``); an edited one gets the secrets
typed (the keyring first), then its record, then the keyring entries it no longer uses go
(variables no longer secret, a bearer key dropped). The dialog calls ``store_server`` off the
GUI thread (``run_blocking``).
"""

from __future__ import annotations

from dataclasses import dataclass

from desktop.store.tools import McpServer, bearer_key_ref, secret_key_ref
from desktop.tools.config import McpConfig


@dataclass
class ServerChanges:
    """What Save writes: the record, secret values typed (name → value), secret names no
    longer used (their keyring entries go) and a typed bearer key."""

    server: McpServer
    secrets: dict[str, str]
    dropped: list[str]
    bearer: str | None


def store_server(
    config: McpConfig, original: McpServer | None, changes: ServerChanges
) -> McpServer:
    """Blocking: store ``changes`` (``original``: the server as it was, None for a new one);
    returns the stored server. Raises ``ValidationError`` or another ``UserError``."""
    server = changes.server
    if original is None:
        return config.add(server, changes.secrets, changes.bearer)
    for var, value in changes.secrets.items():
        config.secrets.set(secret_key_ref(server.name, var), value)
    if changes.bearer:
        config.secrets.set(bearer_key_ref(server.name), changes.bearer)
    saved = config.update(server)
    for var in changes.dropped:
        config.secrets.delete(secret_key_ref(server.name, var))
    if original.bearer and not saved.bearer:
        config.secrets.delete(bearer_key_ref(server.name))
    return saved
