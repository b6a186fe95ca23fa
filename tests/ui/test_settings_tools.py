"""Settings → Tools with real widgets, the real MCP test server (``tests/helpers/mcp_server.py``,
written with the SDK, over stdio) and the real keyring (the Secret Service fixture): a server
added through the dialog with a secret value, checked, fixed with "Use <path>", edited,
removed; "always allow" grants listed and revoked. No fakes."""

from __future__ import annotations

import asyncio
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QPushButton

from desktop.store.agents import Agent
from desktop.store.tools import McpServer, secret_key_ref
from desktop.ui.settings.dialog import SettingsDialog
from desktop.ui.settings.mcp_server_dialog import STORED, McpServerDialog
from desktop.ui.settings.tools import NO_GRANTS, ToolsPage
from tests.helpers.tool_turns import ROOT, SERVER_ARGS, add_mcp_server
from tests.tools import test_manager

http_server = test_manager.http_server  # the test server over streamable HTTP, with a bearer key

WAIT_MS = 60_000
SECRET = "tok-ui-secret-4242"


@pytest.fixture
def tool_services(secret_service_env: dict[str, str], services: Any, qloop: Any, qtbot: Any):
    """The app's services on the real keyring; the MCP servers a test started are stopped at
    its end, inside the loop."""
    yield services
    done = asyncio.ensure_future(services.aclose())
    qtbot.waitUntil(done.done, timeout=WAIT_MS)


@pytest.fixture
def page(tool_services: Any, qtbot: Any) -> Iterator[ToolsPage]:
    view = ToolsPage(tool_services.tools, tool_services.agents)
    qtbot.addWidget(view)
    view.resize(760, 600)
    view.show()
    yield view
    view.detach()


def finish(qtbot: Any, task: asyncio.Task[Any] | None) -> Any:
    assert task is not None
    qtbot.waitUntil(task.done, timeout=WAIT_MS)
    return task.result()


def save(qtbot: Any, dialog: McpServerDialog) -> None:
    with qtbot.waitSignal(dialog.save_finished, timeout=WAIT_MS):
        qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)


def check(qtbot: Any, page: ToolsPage, name: str) -> None:
    page.select(name)
    with qtbot.waitSignal(page.checked, timeout=WAIT_MS):
        qtbot.mouseClick(page.check_button, Qt.MouseButton.LeftButton)


def add_with_secret(services: Any) -> None:
    """The test server with a secret environment value in the keyring (as Add stores it)."""
    server = McpServer(name="tools", command=sys.executable, args=SERVER_ARGS, cwd=str(ROOT))
    services.tools.manager.config.add(
        server.with_changes(secret_env=("TOOL_TOKEN",)), {"TOOL_TOKEN": SECRET}
    )


def db_bytes(simi_home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in simi_home.glob("**/*.db*"))


def test_the_empty_page_says_what_servers_are_and_offers_to_add_one(page: ToolsPage) -> None:
    assert not page.empty_row.isHidden() and page.table.isHidden()
    assert "MCP servers give agents tools" in page.intro.text()
    assert page.empty_add.text() == "Add server…"
    assert page.grants_note.text() == NO_GRANTS


def test_add_a_stdio_server_with_a_secret_then_check_it(
    page: ToolsPage, tool_services: Any, qtbot: Any, simi_home: Path
) -> None:
    qtbot.mouseClick(page.empty_add, Qt.MouseButton.LeftButton)
    dialog = page.dialog
    assert dialog is not None and dialog.isVisible()
    dialog.name.setText("tools")
    dialog.command.setText(sys.executable)
    dialog.args.setText("-m tests.helpers.mcp_server --stdio")
    dialog.cwd.setText(str(ROOT))
    dialog.add_env_row("PLAIN", "1")
    secret = dialog.add_env_row("TOOL_TOKEN", SECRET, secret=True)
    assert secret.value.echoMode() == secret.value.EchoMode.Password
    save(qtbot, dialog)

    config = tool_services.tools.manager.config
    stored = config.get("tools")
    assert stored is not None and stored.args == ("-m", "tests.helpers.mcp_server", "--stdio")
    assert stored.env == {"PLAIN": "1"} and stored.secret_env == ("TOOL_TOKEN",)
    assert config.secrets.get(secret_key_ref("tools", "TOOL_TOKEN")) == SECRET
    assert SECRET.encode() not in db_bytes(simi_home)
    assert page.table.rowCount() == 1 and page.empty_row.isHidden()
    assert page.state_text("tools") == "stopped"

    check(qtbot, page, "tools")
    n = len(tool_services.tools.manager.state("tools").tools)
    assert n >= 8 and page.state_text("tools") == f"ready, {n} tools"
    assert page.status.text() == f"tools: ready, {n} tools"
    env = tool_services.tools.manager.call("tools", "env", {"name": "TOOL_TOKEN"})
    assert finish(qtbot, asyncio.ensure_future(env)).text == SECRET  # the keyring's value


def test_add_an_http_server_with_a_bearer_key_then_check_and_edit_it(
    page: ToolsPage, tool_services: Any, qtbot: Any, simi_home: Path, http_server: str
) -> None:
    dialog = page.add_server()
    dialog.transport.setCurrentIndex(dialog.transport.findData("http"))
    assert dialog.stdio_group.isHidden() and not dialog.http_group.isHidden()
    dialog.name.setText("web")
    dialog.url.setText(http_server)
    dialog.bearer.setText("bearer-key-0004")
    assert dialog.bearer.echoMode() == dialog.bearer.EchoMode.Password
    save(qtbot, dialog)
    config = tool_services.tools.manager.config
    stored = config.get("web")
    assert stored is not None and stored.bearer and stored.url == http_server
    assert config.bearer_value(stored) == "bearer-key-0004"
    assert b"bearer-key-0004" not in db_bytes(simi_home)
    assert page.table.item(0, 1).text() == http_server
    check(qtbot, page, "web")
    assert page.state_text("web").startswith("ready, ")

    dialog = page.edit_server("web")
    assert dialog.bearer.text() == "" and dialog.bearer.placeholderText() == STORED
    dialog.timeout.setValue(5)
    save(qtbot, dialog)
    assert config.bearer_value(config.get("web")) == "bearer-key-0004"  # kept


def test_a_field_error_shows_under_its_field_and_keeps_what_was_typed(
    page: ToolsPage, tool_services: Any, qtbot: Any
) -> None:
    dialog = page.add_server()
    dialog.name.setText("no spaces allowed")
    dialog.command.setText("uvx")
    dialog.args.setText('mcp-server-fetch --flag "a b"')
    save(qtbot, dialog)
    assert "A server name is 1 to 64 letters" in dialog.error_text("name")
    assert dialog.isVisible() and dialog.command.text() == "uvx"
    dialog.args.setText('unclosed "quote')
    dialog.name.setText("fetch")
    save(qtbot, dialog)
    assert "do not split like a shell" in dialog.error_text("args")
    assert dialog.error_text("name") == ""
    assert tool_services.tools.manager.config.list() == []


def test_a_missing_command_names_the_path_searched_and_use_path_fixes_it(
    page: ToolsPage, tool_services: Any, qtbot: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """The server's own PATH (a short one, as a GUI app gets) lacks the command; it is in
    ~/.local/bin, one of the usual folders."""
    home = tmp_path / "home"
    bin_dir = home / ".local" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "simi-test-mcp"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -m tests.helpers.mcp_server --stdio\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("HOME", str(home))
    add_mcp_server(
        tool_services, "local", command="simi-test-mcp", args=(), env={"PATH": "/nonexistent"}
    )
    page.refresh()
    check(qtbot, page, "local")
    assert page.state_text("local").startswith("failed: the command “simi-test-mcp” was not")
    assert "Searched PATH: /nonexistent." in page.status.text()
    assert not page.use_path_row.isHidden()
    assert page.use_path.text() == f"Use {script}"

    qtbot.mouseClick(page.use_path, Qt.MouseButton.LeftButton)
    assert tool_services.tools.manager.config.get("local").command == str(script)
    assert page.use_path_row.isHidden() and "Press Check" in page.status.text()
    check(qtbot, page, "local")
    assert page.state_text("local").startswith("ready, ")


def test_a_server_that_exits_shows_why_and_its_stderr(
    page: ToolsPage, tool_services: Any, qtbot: Any
) -> None:
    add_mcp_server(
        tool_services,
        "broken",
        args=("-c", "import sys; print('no such module: fs', file=sys.stderr); sys.exit(2)"),
    )
    page.refresh()
    check(qtbot, page, "broken")
    assert page.state_text("broken").startswith("failed: exited while starting")
    assert not page.output.isHidden() and page.output.isReadOnly()
    assert "no such module: fs" in page.output.toPlainText()
    assert page.use_path_row.isHidden()


def test_edit_keeps_a_stored_secret_unless_it_is_replaced(
    page: ToolsPage, tool_services: Any, qtbot: Any, simi_home: Path
) -> None:
    config = tool_services.tools.manager.config
    add_with_secret(tool_services)
    page.refresh()
    dialog = page.edit_server("tools")
    assert dialog is not None and dialog.name.isReadOnly()
    (row,) = dialog.env_rows
    assert row.value.text() == "" and row.value.placeholderText() == STORED
    assert row.secret.isChecked()
    dialog.timeout.setValue(30)
    save(qtbot, dialog)
    assert config.get("tools").timeout_s == 30.0
    assert config.secrets.get(secret_key_ref("tools", "TOOL_TOKEN")) == SECRET

    dialog = page.edit_server("tools")
    dialog.env_rows[0].value.setText("tok-replaced-0001")
    save(qtbot, dialog)
    assert config.secrets.get(secret_key_ref("tools", "TOOL_TOKEN")) == "tok-replaced-0001"
    assert b"tok-replaced-0001" not in db_bytes(simi_home)

    dialog = page.edit_server("tools")
    qtbot.mouseClick(dialog.env_rows[0].remove, Qt.MouseButton.LeftButton)
    save(qtbot, dialog)
    assert config.get("tools").secret_env == ()
    assert config.secrets.get(secret_key_ref("tools", "TOOL_TOKEN")) is None


def test_remove_asks_then_takes_the_agents_access_and_grants_with_it(
    page: ToolsPage, tool_services: Any, qtbot: Any
) -> None:
    config = tool_services.tools.manager.config
    add_with_secret(tool_services)
    agent = tool_services.agents.create(
        Agent(name="Tooly", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m")
    )
    tool_services.tools.tools.set_agent_tools(agent.id, [("tools", "*")])
    tool_services.tools.tools.add_grant(agent.id, "tools", "echo")
    page.refresh()
    page.select("tools")
    asked: list[str] = []
    page.confirm = lambda title, text: asked.append(text) or False  # type: ignore[method-assign]
    assert page.remove_server() is None and config.get("tools") is not None
    assert "Agents lose access" in asked[0] and "grants go" in asked[0]

    page.confirm = lambda title, text: True  # type: ignore[method-assign]
    assert finish(qtbot, page.remove_server()) is True
    assert config.list() == [] and not page.empty_row.isHidden()
    assert tool_services.tools.tools.agent_tools(agent.id) == []
    assert tool_services.tools.tools.grants() == [] and page.grants_table.rowCount() == 0
    assert config.secrets.get(secret_key_ref("tools", "TOOL_TOKEN")) is None


def test_grants_are_listed_with_their_agent_and_revoked(
    page: ToolsPage, tool_services: Any, qtbot: Any
) -> None:
    add_mcp_server(tool_services)
    store = tool_services.tools.tools
    agent = tool_services.agents.create(
        Agent(name="Tooly", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m")
    )
    store.add_grant(agent.id, "tools", "echo")
    store.add_grant(agent.id, "tools", "add")
    page.refresh()
    table = page.grants_table
    assert table.rowCount() == 2
    rows = [[table.item(r, c).text() for c in range(3)] for r in range(2)]
    assert rows == [["Tooly", "add", "tools"], ["Tooly", "echo", "tools"]]
    assert table.item(0, 3).text()[0].isdigit()  # "1 Dec 2026, 20:15"
    assert "asks again" in page.grants_note.text()
    revoke = table.cellWidget(1, 4)
    assert isinstance(revoke, QPushButton) and revoke.text() == "Revoke"
    qtbot.mouseClick(revoke, Qt.MouseButton.LeftButton)
    assert not store.has_grant(agent.id, "tools", "echo") and store.has_grant(
        agent.id, "tools", "add"
    )
    assert table.rowCount() == 1 and table.item(0, 1).text() == "add"


def test_settings_has_a_tools_tab_and_the_page_follows_server_states(
    tool_services: Any, qtbot: Any
) -> None:
    add_mcp_server(tool_services)
    dialog = SettingsDialog.for_services(tool_services)
    qtbot.addWidget(dialog)
    assert dialog.tabs is not None and dialog.tabs.tabText(1) == "Tools"
    page = dialog.tools_page
    assert page is not None and page.state_text("tools") == "stopped"
    # A server started elsewhere (a turn) shows up live, through McpManager.on_state.
    finish(qtbot, asyncio.ensure_future(tool_services.tools.manager.check("tools")))
    assert page.state_text("tools").startswith("ready, ")
    dialog.reject()
    assert page._state_changed not in tool_services.tools.manager.on_state
