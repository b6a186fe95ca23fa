"""``ToolStore`` / ``McpConfig`` on a real SQLite file and the real keyring (Secret Service)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop.errors import ValidationError
from desktop.settings.paths import AppPaths
from desktop.settings.secrets import SecretStore
from desktop.store.agents import Agent, AgentStore
from desktop.store.db import open_database
from desktop.store.tools import ALL_TOOLS, McpServer, ToolStore, secret_key_ref
from desktop.tools.config import McpConfig, parse_tool_list


@pytest.fixture
def opened(simi_home: Path, secret_service_env: dict[str, str]) -> Iterator[tuple]:
    paths = AppPaths.from_env()
    paths.ensure()
    db = open_database(paths.db_path)
    yield db, McpConfig(ToolStore(db), SecretStore()), paths.db_path
    db.conn.close()


def test_servers_round_trip_and_secrets_stay_in_the_keyring(opened: tuple) -> None:
    db, config, db_path = opened
    stdio = McpServer(
        name="files",
        command="npx",
        args=("-y", "@modelcontextprotocol/server-filesystem", "/home/me"),
        cwd="/home/me",
        env={"LOG_LEVEL": "debug"},
        secret_env=("GITHUB_TOKEN",),
        timeout_s=120.0,
    )
    saved = config.add(stdio, secret_values={"GITHUB_TOKEN": "ghp_never_in_sqlite_0005"})
    web = config.add(
        McpServer(name="web", transport="http", url="https://tools.example/mcp"),
        bearer="bearer_never_in_sqlite_0006",
    )
    assert saved.id is not None and web.bearer
    again = config.get("FILES")  # names are case-insensitive
    assert again is not None
    assert (again.args, again.env, again.secret_env, again.timeout_s) == (
        stdio.args,
        {"LOG_LEVEL": "debug"},
        ("GITHUB_TOKEN",),
        120.0,
    )
    assert config.secret_env_values(again) == {"GITHUB_TOKEN": "ghp_never_in_sqlite_0005"}
    assert config.bearer_value(web) == "bearer_never_in_sqlite_0006"
    assert [s.name for s in config.list()] == ["files", "web"]

    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for path in db_path.parent.glob(db_path.name + "*"):
        data = path.read_bytes()
        assert b"ghp_never_in_sqlite_0005" not in data, path
        assert b"bearer_never_in_sqlite_0006" not in data, path

    edited = config.update(again.with_changes(timeout_s=5.0, enabled=False))
    assert (edited.timeout_s, edited.enabled) == (5.0, False)

    config.remove("files")
    assert config.get("files") is None
    assert config.secrets.get(secret_key_ref("files", "GITHUB_TOKEN")) is None


def test_validation_says_what_to_fix(opened: tuple) -> None:
    _db, config, _ = opened
    with pytest.raises(ValidationError) as caught:
        config.add(McpServer(name="bad name!", command=""))
    assert set(caught.value.fields) == {"name", "command"}
    with pytest.raises(ValidationError) as caught:
        config.add(McpServer(name="web", transport="http", url="ftp://x"))
    assert "url" in caught.value.fields
    with pytest.raises(ValidationError) as caught:
        config.add(McpServer(name="s", command="x", secret_env=("TOKEN",)))
    assert "No value was given for TOKEN" in caught.value.fields["secret_env"]
    config.add(McpServer(name="dup", command="x"))
    with pytest.raises(ValidationError):
        config.add(McpServer(name="DUP", command="y"))


def test_agent_tools_and_grants_go_with_their_agent(opened: tuple) -> None:
    db, config, _ = opened
    agent = AgentStore(db).insert(Agent(name="Helper", kind="openai", model="gpt-4o-mini"))
    store = config.store
    config.add(McpServer(name="files", command="x"))
    store.set_agent_tools(agent.id, parse_tool_list("files, web:search"))
    assert store.agent_tools(agent.id) == [("files", ALL_TOOLS), ("web", "search")]
    assert store.agent_may_use(agent.id, "files", "read")
    assert store.agent_may_use(agent.id, "web", "search")
    assert not store.agent_may_use(agent.id, "web", "fetch")

    store.add_grant(agent.id, "files", "read")
    store.add_grant(agent.id, "files", "read")  # twice is once
    assert [(g.server, g.tool) for g in store.grants(agent.id)] == [("files", "read")]
    assert store.has_grant(agent.id, "files", "read")
    assert store.revoke_grant(agent.id, "files", "read")
    assert not store.has_grant(agent.id, "files", "read")

    store.add_grant(agent.id, "files", "write")
    config.remove("files")  # a removed server takes its permissions and grants with it
    assert store.agent_tools(agent.id) == [("web", "search")]
    assert store.grants(agent.id) == []
    store.add_grant(agent.id, "web", "search")
    db.execute("DELETE FROM agents WHERE id = ?", [agent.id])
    assert store.agent_tools(agent.id) == [] and store.grants() == []


def test_m009_upgrades_a_database_of_the_previous_version(tmp_path: Path) -> None:
    from desktop.store.migrations import MIGRATIONS

    path = tmp_path / "old.db"
    old = open_database(path, migrations=[m for m in MIGRATIONS if m[0] != "m009_mcp_servers"])
    old.execute(
        "INSERT INTO conversations (title, created_at, updated_at) VALUES ('kept', 'x', 'x')"
    )
    assert "mcp_servers" not in old.table_names()
    old.conn.close()
    db = open_database(path)
    assert {"mcp_servers", "agent_tools", "tool_grants"} <= set(db.table_names())
    assert db.execute("SELECT title FROM conversations").fetchall() == [("kept",)]
    ToolStore(db).add_server(McpServer(name="files", command="x"))
    assert [s.name for s in ToolStore(db).list_servers()] == ["files"]
    db.conn.close()
