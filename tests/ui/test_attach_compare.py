"""Files in the compare view's one composer go to every column.

The two remote agents talk to FaultServer on loopback (OpenAI-compatible, recording each
request), standing in for hosted APIs no test can reach.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QDragEnterEvent, QDropEvent, QImage
from PySide6.QtWidgets import QApplication

from desktop.ui.compare.view import CompareView
from tests.ui.test_attach_composer import WAIT_MS, files_mime, settled
from tests.ui.test_attach_send import PLAN, _questions, _remote, _server, _user_text


def test_files_dropped_and_pasted_on_the_compare_page_go_to_every_column(
    qtbot: Any, qloop: Any, services: Any, tmp_path: Path
) -> None:
    doc = tmp_path / "plan.md"
    doc.write_text(PLAN)
    with _server() as one, _server() as two:
        view = CompareView(services)
        qtbot.addWidget(view)
        view.resize(1280, 800)
        view.set_agents([_remote(services, one, "Left"), _remote(services, two, "Right")])
        view.show()
        qtbot.waitExposed(view)
        column = view.columns[0].pane  # its own composer is hidden: a drop on it is the page's
        mime = files_mime(doc)
        copy, button = Qt.DropAction.CopyAction, Qt.MouseButton.LeftButton
        enter = QDragEnterEvent(QPoint(30, 30), copy, mime, button, Qt.KeyboardModifier(0))
        QApplication.sendEvent(column.transcript.viewport(), enter)
        assert enter.isAccepted() and view.files.hint.isVisible()
        assert column.files.hint.isHidden()
        QApplication.sendEvent(
            view, QDropEvent(QPoint(30, 30).toPointF(), copy, mime, button, Qt.KeyboardModifier(0))
        )
        image = QImage(40, 30, QImage.Format.Format_RGB32)
        image.fill(QColor("#2a9d8f"))
        QApplication.clipboard().setImage(image)
        view.composer.paste()
        chips = settled(qtbot, view)
        assert [(c.name, c.state) for c in chips] == [
            ("plan.md", "ready"),
            ("Pasted image.png", "ready"),
        ]
        assert column.files.row.chips == []
        view.composer.setPlainText("Summarise the plan.")
        with qtbot.waitSignal(view.all_finished, timeout=WAIT_MS):
            qtbot.mouseClick(view.send_button, Qt.MouseButton.LeftButton)
        bodies = [server.requests[-1] for server in (one, two)]
    for body in bodies:
        assert "PLUMTREE" in _user_text(body) and "Summarise the plan." in _user_text(body)
        parts = body.json()["messages"][-1]["content"]
        assert [p["type"] for p in parts if p.get("type") == "image_url"] == ["image_url"]
    assert view.files.row.chips == [] and view.composer.toPlainText() == ""
    for each in view.columns:
        (question,) = _questions(each.pane)
        assert [b.accessibleName() for b in question.attachments.buttons] == [
            "Document plan.md",
            "Image Pasted image.png",
        ]
