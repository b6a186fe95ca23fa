"""Sending a message with files from a conversation pane, and the files in its bubble.

The remote agents talk to FaultServer on loopback, an OpenAI-compatible server standing in for
a hosted API no test can reach; it records each request body, so a test reads what the model
was sent. The local agent is the real starter model, which cannot see images; its context is
counted with its own tokenizer (a vocabulary-only load). Where a local turn would start, the
test presses Stop as it starts (the check before sending is what is tested, not the model).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QUrl
from PySide6.QtWidgets import QApplication, QMessageBox

from desktop.store.agents import Agent
from desktop.ui.conversation import attach_view
from desktop.ui.conversation.attach_view import ImageViewer
from desktop.ui.conversation.pane import ConversationPane
from tests.helpers.fault_server import FaultServer, Reply, ticking_tokens
from tests.ui.conftest import STARTER
from tests.ui.test_attach_composer import WAIT_MS, make_pane, png_file, settled

PLAN = "# Plan\n\nThe secret word is PLUMTREE. Meet at the old mill at nine.\n"


def _server() -> FaultServer:
    return FaultServer(lambda _request: Reply(body=ticking_tokens(3)))


def _remote(services: Any, server: FaultServer, name: str = "Reader") -> Agent:
    return services.agents.create(
        Agent(name=name, kind="openai-compatible", base_url=server.url + "/v1", model="reader")
    )


def _sent(qtbot: Any, pane: ConversationPane, text: str) -> None:
    """Type ``text``, press Send, and wait until the reply is stored."""
    pane.composer.setPlainText(text)
    qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: pane.conversation_id is not None and not pane.busy, timeout=WAIT_MS)


def _user_text(request: Any) -> str:
    """What the last user message of an OpenAI-style request said, as text."""
    content = request.json()["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content)


def _questions(pane: ConversationPane) -> list[Any]:
    return [b for b in pane.transcript.bubbles() if b.role == "user"]


def test_a_starter_agent_that_cannot_see_says_so_in_the_composer_and_nothing_is_sent(
    qtbot: Any, qloop: Any, services: Any, tmp_path: Path
) -> None:
    pane = make_pane(qtbot, services)  # the starter: no vision projector
    pane.files.row.add_files([png_file(tmp_path)])
    settled(qtbot, pane)
    pane.composer.setPlainText("What is in this picture?")
    qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: pane.hint.property("warn") is True, timeout=WAIT_MS)
    words = pane.hint.text()
    assert "SmolLM2" in words and "cannot" in words and "image" in words
    assert pane.conversation_id is None and not pane.busy  # nothing stored, nothing sent
    assert len(pane.files.row.chips) == 1 and pane.composer.toPlainText()  # all kept to mend
    pane.composer.setPlainText("What is in this picture, please?")  # the words go on typing
    qtbot.waitUntil(lambda: "Enter to send" in pane.hint.text(), timeout=WAIT_MS)


def test_a_document_goes_to_a_remote_agent_and_its_chip_stays_in_the_question(
    qtbot: Any, qloop: Any, services: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    doc = tmp_path / "plan.md"
    doc.write_text(PLAN)
    with _server() as server:
        agent = _remote(services, server)
        pane = make_pane(qtbot, services, agent)
        pane.files.row.add_files([doc])
        settled(qtbot, pane)
        _sent(qtbot, pane, "Summarise the plan.")
        said = _user_text(server.requests[-1])
    assert "PLUMTREE" in said and "plan.md" in said and "Summarise the plan." in said
    assert pane.files.row.chips == [] and pane.composer.toPlainText() == ""

    (question,) = _questions(pane)
    (button,) = question.attachments.buttons
    assert button.objectName() == "AttachDocument" and button.isVisible()
    assert button.text() == f" plan.md\n {len(PLAN.encode())} B · Markdown"
    opened: list[QUrl] = []
    monkeypatch.setattr(attach_view, "open_url", lambda url: opened.append(url) or True)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(opened), timeout=WAIT_MS)
    copy = Path(opened[0].toLocalFile())  # a copy under its own name, for the system viewer
    assert copy.name == "plan.md" and copy.read_text() == PLAN

    again = ConversationPane(services, agent, pane.conversation_id)  # reopened from the store
    qtbot.addWidget(again)
    again.show_path()
    (question,) = _questions(again)
    assert [b.text() for b in question.attachments.buttons] == [button.text()]


def test_an_image_sent_shows_as_a_thumbnail_that_opens_full_size_and_esc_closes_it(
    qtbot: Any, qloop: Any, services: Any, tmp_path: Path
) -> None:
    with _server() as server:
        pane = make_pane(qtbot, services, _remote(services, server))
        pane.files.row.add_files([png_file(tmp_path, "chart.png", (320, 240))])
        settled(qtbot, pane)
        _sent(qtbot, pane, "")  # an image alone may be sent
        content = server.requests[-1].json()["messages"][-1]["content"]
    urls = [p["image_url"]["url"] for p in content if p.get("type") == "image_url"]
    assert len(urls) == 1 and urls[0].startswith("data:image/")

    (question,) = _questions(pane)
    (thumb,) = question.attachments.buttons
    assert thumb.objectName() == "AttachImage" and thumb.accessibleName() == "Image chart.png"
    qtbot.waitUntil(lambda: thumb.iconSize().width() == 112, timeout=WAIT_MS)
    assert thumb.iconSize().height() == 84  # 4:3 as the picture
    qtbot.mouseClick(thumb, Qt.MouseButton.LeftButton)

    def viewer() -> ImageViewer | None:
        found = [w for w in QApplication.topLevelWidgets() if isinstance(w, ImageViewer)]
        return found[0] if found and found[0].isVisible() else None

    qtbot.waitUntil(lambda: viewer() is not None, timeout=WAIT_MS)
    shown = viewer()
    assert shown is not None and shown.windowTitle() == "chart.png"
    picture = shown.picture.pixmap()
    assert (picture.width(), picture.height()) == (320, 240)  # whole: it fits the screen
    qtbot.keyClick(shown, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: viewer() is None, timeout=WAIT_MS)


def test_a_failed_chip_is_left_out_of_the_send_and_the_composer_says_so(
    qtbot: Any, qloop: Any, services: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "a folder"
    folder.mkdir()
    doc = tmp_path / "plan.md"
    doc.write_text(PLAN)
    with _server() as server:
        pane = make_pane(qtbot, services, _remote(services, server))
        pane.files.row.add_files([doc, folder])
        assert [c.state for c in settled(qtbot, pane)] == ["ready", "error"]
        _sent(qtbot, pane, "Read this.")
        said = _user_text(server.requests[-1])
    assert "PLUMTREE" in said and "a folder" not in said
    assert pane.hint.text() == "Sent without 1 file that could not be attached: a folder."
    assert pane.files.row.chips == []
    (question,) = _questions(pane)
    assert [b.accessibleName() for b in question.attachments.buttons] == ["Document plan.md"]


def test_editing_a_question_keeps_its_files(
    qtbot: Any, qloop: Any, services: Any, tmp_path: Path
) -> None:
    doc = tmp_path / "plan.md"
    doc.write_text(PLAN)
    with _server() as server:
        pane = make_pane(qtbot, services, _remote(services, server))
        pane.files.row.add_files([doc])
        settled(qtbot, pane)
        _sent(qtbot, pane, "Summarise the plan.")
        (first,) = _questions(pane)
        pane.edit_message(first.message_id)
        (kept,) = pane.files.row.chips  # the question's file, back in the composer
        assert kept.kept and kept.state == "ready" and kept.name == "plan.md"
        assert pane.composer.toPlainText() == "Summarise the plan."
        pane.composer.setPlainText("Summarise the plan in one line.")
        qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: len(server.requests) == 2 and not pane.busy, timeout=WAIT_MS)
        said = _user_text(server.requests[-1])
    assert "PLUMTREE" in said and "in one line" in said
    (edited,) = _questions(pane)
    assert edited.message_id != first.message_id
    found = services.chat.attachments_of([first.message_id, edited.message_id])
    assert [a.name for a in found[edited.message_id]] == ["plan.md"]
    assert found[edited.message_id] == found[first.message_id]  # the same stored file


def test_a_document_too_long_for_the_context_is_sent_in_part_when_the_person_says_so(
    qtbot: Any, qloop: Any, services: Any, tmp_path: Path
) -> None:
    agent = services.agents.by_name(STARTER)
    agent = services.agents.update(agent.with_changes(n_ctx=512, max_tokens=64))
    long = tmp_path / "minutes.txt"
    items = [f"The committee discussed item {i} and agreed." for i in range(300)]
    long.write_text(json.dumps({"minutes": items}))
    pane = make_pane(qtbot, services, agent)
    pane.presenter.turn_started.connect(lambda _turn: pane.presenter.stop())  # no model run
    pane.files.row.add_files([long])
    settled(qtbot, pane)

    def dialog() -> QMessageBox | None:
        box = pane.findChild(QMessageBox, "FirstPartDialog")
        return box if box is not None and box.isVisible() else None

    def answer(label: str) -> None:
        qtbot.waitUntil(lambda: dialog() is not None, timeout=WAIT_MS)
        box = dialog()
        assert box is not None
        assert "SmolLM2" in box.text() and "holds 512 tokens" in box.text()
        (button,) = [b for b in box.buttons() if b.text() == label]
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)

    pane.composer.setPlainText("What was decided?")
    qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)
    answer("Cancel")
    qtbot.waitUntil(lambda: pane.files.ready, timeout=WAIT_MS)
    assert pane.conversation_id is None and len(pane.files.row.chips) == 1  # nothing sent

    qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)
    answer("Send the first part")
    qtbot.waitUntil(lambda: pane.conversation_id is not None and not pane.busy, timeout=WAIT_MS)
    (question,) = _questions(pane)
    (sent,) = services.chat.attachments_of([question.message_id])[question.message_id]
    assert sent.name == "minutes.txt" and sent.text_limit is not None
    assert 0 < sent.text_limit < len(long.read_text())
    (button,) = question.attachments.buttons
    assert f"the first {sent.text_limit:,} characters were sent" in button.toolTip()
