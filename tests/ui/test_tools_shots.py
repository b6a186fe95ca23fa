"""Settings → Tools, the server dialog and the agent editor's Tools section as a person sees
them, light and dark, checked for overlapping or cut widgets and unnamed controls; with
``SIMI_SCREENSHOT_DIR=/tmp/shots18`` the pictures are written there (else under the test's tmp
path) as tools-*.png. The servers are the real MCP test server (one ready, one that exits
while starting, with a line on stderr); no fakes."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QScrollArea

from desktop.store.agents import Agent
from desktop.store.tools import McpServer
from desktop.ui.agents.editor import AgentEditorDialog
from desktop.ui.settings.dialog import SettingsDialog
from tests.helpers.shots import check_and_shoot, settle
from tests.helpers.tool_turns import ROOT, SERVER_ARGS, add_mcp_server

WAIT_MS = 60_000
CRASHING = (
    "-c",
    "import sys; print('Error: Cannot find module fs-server', file=sys.stderr); sys.exit(1)",
)


@pytest.fixture
def tool_services(secret_service_env: dict[str, str], services: Any, qloop: Any, qtbot: Any):
    yield services
    done = asyncio.ensure_future(services.aclose())
    qtbot.waitUntil(done.done, timeout=WAIT_MS)


def finish(qtbot: Any, coro: Any) -> Any:
    task = asyncio.ensure_future(coro)
    qtbot.waitUntil(task.done, timeout=WAIT_MS)
    return task.result()


def stocked(services: Any, qtbot: Any) -> Agent:
    """A ready server, a failed one and two grants."""
    server = McpServer(name="tools", command=sys.executable, args=SERVER_ARGS, cwd=str(ROOT))
    services.tools.manager.config.add(
        server.with_changes(env={"LOG_LEVEL": "info"}, secret_env=("API_TOKEN",)),
        {"API_TOKEN": "tok-shot-0001"},
    )
    add_mcp_server(services, "files", args=CRASHING)
    agent = services.agents.create(
        Agent(
            name="Researcher", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m"
        )
    )
    services.tools.tools.set_agent_tools(agent.id, [("tools", "add"), ("tools", "echo")])
    services.tools.tools.add_grant(agent.id, "tools", "echo")
    services.tools.tools.add_grant(agent.id, "tools", "add")
    finish(qtbot, services.tools.manager.check("tools"))
    finish(qtbot, services.tools.manager.check("files"))
    return agent


def test_the_tools_page_server_dialog_and_agent_tools_are_shot(
    tool_services: Any, qtbot: Any, qapp: Any, shot_dir: Path
) -> None:
    agent = stocked(tool_services, qtbot)

    dialog = SettingsDialog.for_services(tool_services)
    qtbot.addWidget(dialog)
    dialog.resize(800, 680)
    assert dialog.tabs is not None and dialog.tools_page is not None
    dialog.tabs.setCurrentWidget(dialog.tools_page)
    dialog.show()
    page = dialog.tools_page
    page.select("files")
    settle(qapp)
    assert page.state_text("tools").startswith("ready, ")
    assert page.state_text("files").startswith("failed: exited while starting")
    assert "Cannot find module" in page.output.toPlainText()
    check_and_shoot(qapp, dialog, shot_dir / "tools-settings")

    editor = page.edit_server("tools")
    assert editor is not None
    settle(qapp)
    check_and_shoot(qapp, editor, shot_dir / "tools-server-dialog")
    editor.reject()

    agent_editor = AgentEditorDialog(
        tool_services.agents, tool_services.secrets, agent, tools=tool_services.tools
    )
    qtbot.addWidget(agent_editor)
    agent_editor.resize(640, 780)
    agent_editor.show()
    section = agent_editor.tools_section
    assert section is not None
    settle(qapp)
    scroll = agent_editor.findChild(QScrollArea)
    assert scroll is not None
    scroll.ensureWidgetVisible(section.group)
    settle(qapp)
    # The section alone: the editor's price note above it is another part's business.
    check_and_shoot(qapp, section.group, shot_dir / "tools-agent-editor")
    dialog.reject()
