"""A tool call in the window as a person sees it, light and dark, in the window at 1280×800 and
at its minimum 720×480: the approval prompt (tool, server, the arguments, the three answers)
and the expanded result. Each is checked for overlapping or cut widgets and unnamed controls;
with ``SIMI_SCREENSHOT_DIR=/tmp/shots18`` the pictures are written there (else under the
test's tmp path) as tool-*.png.

A loopback ``FaultServer`` replaying ``tool_reply`` streams stands in for a model that calls
tools; the tool is the real MCP test server (``tests/helpers/mcp_server.py``, stdio).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, Qt

from tests.helpers.fault_server import FaultServer
from tests.helpers.shots import check_and_shoot, settle
from tests.helpers.tool_server import Call, tool_reply
from tests.helpers.tool_turns import add_mcp_server, tool_agent
from tests.ui.test_tool_approval import TIMEOUT_MS, cards

SIZES = {"laptop": (1280, 800), "smallest": (720, 480)}
LISTING = (
    "notes/2026-11-30.md  1.2 kB\n"
    "notes/todo.md  640 B\n"
    "<b>drafts</b>/letter.txt  3.4 kB\n"
    "photos/  (12 files)"
)


@pytest.mark.parametrize("size", list(SIZES))
def test_an_approval_prompt_and_an_expanded_result_are_shot(
    size: str, services: Any, make_window: Any, qtbot: Any, qapp: Any, shot_dir: Path
) -> None:
    add_mcp_server(services, name="files")
    arguments = {"text": LISTING}
    replies = [
        tool_reply(
            "openai",
            [Call("c1", "echo", json.dumps(arguments))],
            text="I'll list the folder first.",
        ),
        tool_reply("openai", [], text="There are two notes, one draft and a photos folder."),
    ]
    with FaultServer(replies) as server:
        agent = tool_agent(services, server.url + "/v1", tools="files", name="Researcher")
        window = make_window(services)
        window.resize(*SIZES[size])
        window.select_agent(agent.id)
        pane = window.pane
        pane.composer.setPlainText("What is in my notes folder?")
        qtbot.keyClick(pane.composer, Qt.Key.Key_Return)
        reply_id = pane.presenter.turn.assistant_message_id
        try:
            qtbot.waitUntil(
                lambda: bool(cards(pane, reply_id)) and cards(pane, reply_id)[0].waiting,
                timeout=TIMEOUT_MS,
            )
            settle(qapp)
            (card,) = cards(pane, reply_id)
            # what will run is in view: the card's title (tool and server) is not scrolled off
            view = pane.transcript.viewport()
            top = card.title.mapTo(view, QPoint(0, 0)).y()
            assert top >= 0 and top + card.title.height() <= view.height()
            assert (window.width(), window.height()) == SIZES[size]
            check_and_shoot(qapp, window, shot_dir / f"tool-approval-{size}")

            card.buttons["once"].click()
            qtbot.waitUntil(lambda: not pane.busy, timeout=TIMEOUT_MS)
            card.set_expanded(True)
            settle(qapp)
            pane.transcript.ensureWidgetVisible(card, 0, 0)
            settle(qapp)
            assert card.result.toPlainText() == LISTING
            assert (window.width(), window.height()) == SIZES[size]
            check_and_shoot(qapp, window, shot_dir / f"tool-result-{size}")
        finally:
            pane.presenter.stop()
            qtbot.waitUntil(lambda: not pane.busy, timeout=TIMEOUT_MS)
            done = asyncio.ensure_future(services.aclose())
            qtbot.waitUntil(done.done, timeout=TIMEOUT_MS)
