"""Text from a model, a tool, a server or a file is shown as typed, never as HTML (issue 25,
item 2).

A rich-text label lays out ``<img src=…>`` by reading the file on the GUI thread (a FIFO froze
the window for good). Here every such string is hostile: an agent's name, its model, a tool's
and a server's names, an error from the server, a tool server's stderr, a conversation's title,
a model file's name. The real window is walked page by page (the conversation with its tool
cards, Stats, Models, Compare, Settings with Tools, the agent editor), and no visible label
that shows one of those strings may be rich text. (The image paths here do not exist, so a
failure is an assertion, not a hang; ``test_a_tool_card_with_a_fifo_…`` is the freeze itself,
in a subprocess.) The model is a loopback ``FaultServer`` standing in for an
OpenAI-compatible API; the tools are the real MCP test server.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import Qt as GuiQt  # mightBeRichText lives in QtGui
from PySide6.QtWidgets import QApplication, QLabel, QMessageBox, QWidget

from desktop.store.tool_steps import ToolStep
from desktop.store.tools import McpServer
from desktop.ui.agents.editor import AgentEditorDialog
from desktop.ui.kit import widgets
from desktop.ui.settings.dialog import SettingsDialog
from tests.helpers import gguf_files
from tests.helpers.cli import run_text
from tests.helpers.fault_server import FaultServer, error_reply
from tests.helpers.tool_server import Call, tool_reply
from tests.helpers.tool_turns import ROOT, add_mcp_server, tool_agent
from tests.helpers.widget_checks import describe

WAIT_MS = 30_000
NOWHERE = "/nonexistent-simi-hostile"


def hostile(what: str) -> str:
    return f'<img src="{NOWHERE}/{what}.png"><b>{what}</b>'


AGENT, MODEL, TOOL, ERROR = hostile("agent"), hostile("model"), hostile("tool"), hostile("error")
SERVER, STDERR, TITLE = hostile("server"), hostile("stderr"), hostile("title")
FILE = "<b>file<img src=nothing.png>.gguf"  # a file name has no "/"
# what survives any shortening of a path or a name in the labels
MARKS = {w: f"<b>{w}</b>" for w in ("agent", "model", "tool", "error", "server", "stderr", "title")}
MARKS["file"] = "<b>file<img"


def rich_labels(roots: list[QWidget]) -> tuple[list[str], set[str]]:
    """Visible labels showing a hostile string as rich text, and which strings were seen."""
    bad: list[str] = []
    seen: set[str] = set()
    for root in roots:
        labels = [root] if isinstance(root, QLabel) else []
        for label in [*labels, *root.findChildren(QLabel)]:
            if not label.isVisible():
                continue
            text = label.text()
            found = {what for what, mark in MARKS.items() if mark in text}
            seen |= found
            rich = label.textFormat() != Qt.TextFormat.PlainText
            if found and rich and GuiQt.mightBeRichText(text):
                bad.append(f"{describe(label)}: {sorted(found)}")
    return bad, seen


def everything() -> list[QWidget]:
    return [w for w in QApplication.topLevelWidgets() if w.isVisible()]


def settle(qtbot: Any) -> None:
    QApplication.processEvents()
    qtbot.wait(30)


def finish(qtbot: Any, coro: Any) -> Any:
    task = asyncio.ensure_future(coro)
    qtbot.waitUntil(task.done, timeout=WAIT_MS)
    return task.result()


@pytest.fixture
def hostile_services(services: Any, qloop: Any, qtbot: Any) -> Iterator[Any]:
    """The MCP test server ("tools"), one that fails with a hostile stderr line, one with a
    hostile name (stored as an older or imported database could hold it), and a hostile
    model file; the servers' processes are stopped after."""
    add_mcp_server(services)
    failing = ("-c", f"import sys; print({STDERR!r}, file=sys.stderr); sys.exit(1)")
    add_mcp_server(services, "failing", args=failing)
    config = services.tools.manager.config
    config.store.add_server(
        McpServer(name=SERVER, command=sys.executable, args=failing, cwd=str(ROOT))
    )
    finish(qtbot, services.tools.manager.check("failing"))
    services.paths.models_dir.mkdir(parents=True, exist_ok=True)
    gguf_files.text_file(services.paths.models_dir / FILE)
    yield services
    done = asyncio.ensure_future(services.aclose())
    qtbot.waitUntil(done.done, timeout=WAIT_MS)


def send(qtbot: Any, window: Any, text: str) -> None:
    window.pane.composer.setPlainText(text)
    qtbot.keyClick(window.pane.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.pane.busy, timeout=WAIT_MS)


def test_no_label_shows_model_tool_server_or_file_text_as_html(
    hostile_services: Any, make_window: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = hostile_services
    problems: list[str] = []
    seen: set[str] = set()

    def check(where: str) -> None:
        settle(qtbot)
        bad, found = rich_labels(everything())
        problems.extend(f"{where}: {b}" for b in bad)
        seen.update(found)

    replies = [
        tool_reply("openai", [Call("c1", TOOL, json.dumps({"x": 1}))], text="Let me try."),
        tool_reply("openai", [], text="Done."),
        error_reply(500, {"error": {"message": ERROR}}),
    ]
    with FaultServer(replies) as server:
        agent = tool_agent(services, server.url + "/v1", name=AGENT)
        agent = services.agents.update(agent.with_changes(model=MODEL))
        window = make_window(services)
        window.select_agent(agent.id)
        send(qtbot, window, "use the tool")  # an unknown tool: its step says so
        send(qtbot, window, "again")  # the server answers an error
        conversation = window.conversation_id
        assert conversation is not None
        check("conversation, live")

        reply = next(m for m in services.conversations.messages(conversation) if m.role != "user")
        for position, result in ((5, ERROR), (6, f"{STDERR}\n(the server's stderr)")):
            step = ToolStep(reply.id, 1, position, f"c{position}", SERVER, TOOL, "{}")
            services.tools.steps.save(step.with_changes(status="error", result=result))
        services.conversations.rename(conversation, TITLE)
        again = make_window(services)  # the stored conversation, as reopened
        again.open_conversation(conversation)
        settle(qtbot)
        for bubble in again.pane.transcript.bubbles():
            steps = bubble.__dict__.get("tool_steps")
            for card in steps.ordered() if steps is not None else []:
                card.set_expanded(True)
        check("conversation, stored")

        again.show_page("stats")
        qtbot.waitUntil(lambda: again.stats_page.table.rowCount() > 0, timeout=WAIT_MS)
        check("stats")

        again.show_page("models")
        page = again.models_page
        model_file = services.paths.models_dir / FILE
        qtbot.waitUntil(lambda: page.row_of(model_file) >= 0, timeout=WAIT_MS)
        assert page.select(model_file)
        page.add_folder(services.paths.models_dir / "<b>folder<img src=x.png>")  # not there
        check("models")

        again.show_page("compare")
        view = again.compare_page.compare
        other = tool_agent(services, server.url + "/v1", name=AGENT + " too")
        view.set_agents([agent, other])
        assert view.send("compare")  # both fail with the server's error
        qtbot.waitUntil(lambda: not view.busy, timeout=WAIT_MS)
        check("compare")
        again.show_page("chat")

    dialog = SettingsDialog.for_services(services, again)
    qtbot.addWidget(dialog)
    dialog.show()
    for index in range(dialog.tabs.count()):
        dialog.tabs.setCurrentIndex(index)
        check(f"settings tab {dialog.tabs.tabText(index)}")
    tools = dialog.tools_page
    dialog.tabs.setCurrentWidget(tools)
    for name in ("failing", SERVER, "tools"):
        tools.select(name)
        check(f"settings tools {name[:12]}")
    dialog.close()

    editor = again.agents.editor(agent)
    assert isinstance(editor, AgentEditorDialog)
    qtbot.addWidget(editor)
    editor.show()
    check("agent editor")
    editor.close()

    monkeypatch.setattr(again, "confirm", lambda _title, _text: True)
    again.browser.delete(conversation)  # "Deleted “title”", with Undo
    check("after deleting the conversation")

    assert problems == [], "\n".join(problems)
    # the walk met every kind of string (else it proves nothing)
    assert seen >= {"agent", "model", "tool", "error", "server", "stderr", "title", "file"}, seen


def test_message_boxes_and_questions_are_plain(qapp: Any) -> None:
    box = widgets.message_box(None, QMessageBox.Icon.Warning, "Clone agent", AGENT)
    box.setInformativeText(ERROR)
    formats = {label.objectName(): label.textFormat() for label in box.findChildren(QLabel)}
    assert formats["qt_msgbox_label"] == Qt.TextFormat.PlainText
    assert formats["qt_msgbox_informativelabel"] == Qt.TextFormat.PlainText
    assert widgets.plain_label(TITLE).textFormat() == Qt.TextFormat.PlainText
    box.deleteLater()


TOOL_CARD_SCRIPT = """
import os, sys
from PySide6.QtWidgets import QApplication
from desktop.store.tool_steps import ToolStep
from desktop.ui.conversation.tool_cards import ToolSteps
app = QApplication([])
fifo = sys.argv[1]
name = f'<img src="{fifo}">'
steps = ToolSteps()
steps.resize(600, 400)
steps.show()
step = ToolStep(1, 1, 0, "c1", name, name, "{}", status="error", result=name, is_error=True, id=1)
card = steps.update_step(step)
card.set_expanded(True)
for _ in range(5):
    app.processEvents()
steps.grab()
print("shown")
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_tool_card_with_a_fifo_in_its_names_does_not_freeze(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    try:
        done = run_text([sys.executable, "-c", TOOL_CARD_SCRIPT, str(fifo)], env, timeout=40)
    except subprocess.TimeoutExpired:
        pytest.fail("the tool card froze: its label read the FIFO named in the tool's name")
    assert done.returncode == 0 and "shown" in done.stdout, done.stderr[-2000:]
