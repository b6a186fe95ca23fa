"""Files in the window, for people to look at and for the layout checks: a conversation whose
question carries an image and a document, and a composer holding an image, a document and a
file that could not be attached; the drop hint; light and dark. ``SIMI_SCREENSHOT_DIR=/tmp``
writes attach_*.png.

The agent talks to FaultServer on loopback (OpenAI-compatible), standing in for a hosted API.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QDragEnterEvent
from PySide6.QtWidgets import QApplication

from desktop.store.agents import Agent
from tests.helpers.fault_server import FaultServer, Reply
from tests.helpers.shots import check_and_shoot, save_grab, settle
from tests.ui.test_attach_composer import WAIT_MS, files_mime, make_pane, png_file, settled

ANSWER = "The plan: meet at the old mill at nine. The chart shows sales rising each quarter."


def _answer(_request: Any) -> Reply:
    def chunks() -> Iterator[bytes]:
        for word in ANSWER.split(" "):
            chunk = {"choices": [{"index": 0, "delta": {"content": word + " "}}]}
            yield f"data: {json.dumps(chunk)}\n\n".encode()
        yield b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        yield b"data: [DONE]\n\n"

    return Reply(body=chunks())


def test_render_files_in_the_composer_and_in_a_sent_question(
    qtbot: Any, qloop: Any, services: Any, qapp: QApplication, tmp_path: Path, shot_dir: Path
) -> None:
    plan = tmp_path / "Quarterly plan and budget for the northern region (final).md"
    plan.write_text("# Plan\n\nMeet at the old mill at nine.\n" * 40)
    chart = png_file(tmp_path, "sales chart.png", (640, 400))
    folder = tmp_path / "Holiday photos"
    folder.mkdir()
    with FaultServer(_answer) as server:
        agent = services.agents.create(
            Agent(name="Analyst", kind="openai-compatible", base_url=server.url + "/v1", model="m")
        )
        pane = make_pane(qtbot, services, agent)
        pane.resize(980, 760)
        pane.files.row.add_files([chart, plan])
        settled(qtbot, pane)
        pane.composer.setPlainText("What does the plan say, and what does the chart show?")
        qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: pane.conversation_id is not None and not pane.busy, timeout=WAIT_MS)
    question = next(b for b in pane.transcript.bubbles() if b.role == "user")
    image = question.attachments.buttons[0]
    qtbot.waitUntil(lambda: image.iconSize().height() == 70, timeout=WAIT_MS)  # 640×400

    pane.files.row.add_files([png_file(tmp_path, "diagram.png", (300, 300)), plan, folder])
    settled(qtbot, pane)
    pane.composer.setPlainText("And this diagram?")
    check_and_shoot(qapp, pane, shot_dir / "attach_pane")

    mime = files_mime(chart)
    enter = QDragEnterEvent(
        QPoint(40, 40),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier(0),
    )
    QApplication.sendEvent(pane.transcript.viewport(), enter)
    assert pane.files.hint.isVisible()
    settle(qapp)
    save_grab(pane, shot_dir / "attach_drop.png", 5_000)
