"""The agent editor's Tools section with real widgets and the real MCP test server
(``tests/helpers/mcp_server.py``, over stdio): Load tools starts it and lists its tools with
their descriptions; what is ticked is stored with the agent when the editor saves, and shown
again when it opens. No fakes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from PySide6.QtCore import Qt

from desktop.store.agents import Agent
from desktop.ui.agents.editor import AgentEditorDialog
from desktop.ui.agents.tools import NO_SERVERS
from tests.helpers.tool_turns import add_mcp_server

WAIT_MS = 60_000


@pytest.fixture
def tool_services(services: Any, qloop: Any, qtbot: Any):
    """The app's services; the MCP servers a test started are stopped at its end, inside the
    loop."""
    yield services
    done = asyncio.ensure_future(services.aclose())
    qtbot.waitUntil(done.done, timeout=WAIT_MS)


def remote_agent(services: Any) -> Agent:
    return services.agents.create(
        Agent(name="Tooly", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m")
    )


def open_editor(qtbot: Any, services: Any, agent: Agent | None) -> AgentEditorDialog:
    dialog = AgentEditorDialog(services.agents, services.secrets, agent, tools=services.tools)
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def save(qtbot: Any, dialog: AgentEditorDialog) -> None:
    with qtbot.waitSignal(dialog.save_finished, timeout=WAIT_MS) as blocker:
        qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert blocker.args == [True], dialog.general_error.text()


def load(qtbot: Any, dialog: AgentEditorDialog, name: str) -> None:
    section = dialog.tools_section
    assert section is not None
    with qtbot.waitSignal(section.loaded, timeout=WAIT_MS):
        qtbot.mouseClick(section.servers[name].load, Qt.MouseButton.LeftButton)


def test_without_servers_the_section_points_at_settings(tool_services: Any, qtbot: Any) -> None:
    dialog = open_editor(qtbot, tool_services, remote_agent(tool_services))
    section = dialog.tools_section
    assert section is not None and section.servers == {}
    assert section.note.text() == NO_SERVERS and "Settings → Tools" in NO_SERVERS
    assert section.selection() == []


def test_pick_tools_save_and_reopen_shows_them(tool_services: Any, qtbot: Any) -> None:
    add_mcp_server(tool_services)
    agent = remote_agent(tool_services)
    dialog = open_editor(qtbot, tool_services, agent)
    part = dialog.tools_section.servers["tools"]
    assert not part.all_tools.isChecked() and part.list.count() == 0  # not started yet
    load(qtbot, dialog, "tools")
    items = [part.list.item(i) for i in range(part.list.count())]
    names = [item.data(Qt.ItemDataRole.UserRole) for item in items]
    assert {"add", "echo", "fail", "sleep", "crash"} <= set(names)
    add = items[names.index("add")]
    assert add.text() == "add — Add two numbers." and add.toolTip() == "Add two numbers."
    assert part.status.text().endswith("tools.")
    part.set_checked("add")
    part.set_checked("echo")
    save(qtbot, dialog)
    assert tool_services.tools.tools.agent_tools(agent.id) == [("tools", "add"), ("tools", "echo")]

    again = open_editor(qtbot, tool_services, tool_services.agents.get(agent.id))
    part = again.tools_section.servers["tools"]
    assert part.chosen_tools() == {"add", "echo"}  # listed from the running server's state
    part.all_tools.setChecked(True)
    assert not part.list.isEnabled()
    save(qtbot, again)
    assert tool_services.tools.tools.agent_tools(agent.id) == [("tools", "*")]


def test_ticked_tools_show_before_the_server_is_started(tool_services: Any, qtbot: Any) -> None:
    add_mcp_server(tool_services)
    agent = remote_agent(tool_services)
    tool_services.tools.tools.set_agent_tools(agent.id, [("tools", "echo")])
    dialog = open_editor(qtbot, tool_services, agent)
    part = dialog.tools_section.servers["tools"]
    assert part.chosen_tools() == {"echo"} and part.list.count() == 1
    part.set_checked("echo", False)
    save(qtbot, dialog)
    assert tool_services.tools.tools.agent_tools(agent.id) == []


def test_a_new_agent_is_stored_with_its_tools(tool_services: Any, qtbot: Any) -> None:
    add_mcp_server(tool_services)
    dialog = open_editor(qtbot, tool_services, None)
    dialog.kind.setCurrentIndex(dialog.kind.findData("openai-compatible"))
    dialog.name.setText("Fresh")
    dialog.base_url.setText("http://127.0.0.1:9/v1")
    dialog.model.setEditText("m")
    dialog.tools_section.servers["tools"].all_tools.setChecked(True)
    save(qtbot, dialog)
    assert dialog.saved_agent is not None
    saved = tool_services.tools.tools.agent_tools(dialog.saved_agent.id)
    assert saved == [("tools", "*")]


def test_a_server_that_does_not_start_says_so_in_the_section(
    tool_services: Any, qtbot: Any
) -> None:
    add_mcp_server(tool_services, "gone", command="/nonexistent/mcp-server", args=())
    dialog = open_editor(qtbot, tool_services, remote_agent(tool_services))
    load(qtbot, dialog, "gone")
    status = dialog.tools_section.servers["gone"].status.text()
    assert status.startswith("gone did not start: /nonexistent/mcp-server does not exist")
    assert "Settings → Tools" in status
