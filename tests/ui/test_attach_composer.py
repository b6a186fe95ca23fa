"""Files in a conversation's composer: the paperclip, a drop on the pane, a paste, and the chips
they make (name, size, kind, token estimate, thumbnail, ×; an error's words; busy while read).

Real ``services`` (a SQLite file, the attachments folder), real files in ``tmp_path`` and real
widgets offscreen. Where a test needs a file read to take its time, ``prepare`` is wrapped to
wait for the test (a slow disk, injected); the reading itself is the real one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QMimeData, QPoint, Qt, QUrl
from PySide6.QtGui import QColor, QDragEnterEvent, QDropEvent, QImage
from PySide6.QtWidgets import QApplication

from desktop.store.agents import Agent
from desktop.ui.conversation import attach_send
from desktop.ui.conversation.attach_row import MAX_PREPARING
from desktop.ui.conversation.pane import ConversationPane
from tests.ui.conftest import STARTER

WAIT_MS = 10_000


def make_pane(qtbot: Any, services: Any, agent: Agent | None = None) -> ConversationPane:
    """A conversation pane on the starter agent (or ``agent``), shown offscreen."""
    pane = ConversationPane(services, agent or services.agents.by_name(STARTER))
    qtbot.addWidget(pane)
    pane.resize(900, 700)
    pane.show()
    qtbot.waitExposed(pane)
    return pane


def text_file(folder: Path, name: str = "notes.txt", words: int = 200) -> Path:
    path = folder / name
    path.write_text("The quick brown fox jumps over the lazy dog. " * (words // 9 + 1))
    return path


def png_file(folder: Path, name: str = "photo.png", size: tuple[int, int] = (64, 48)) -> Path:
    image = QImage(*size, QImage.Format.Format_RGB32)
    image.fill(QColor("#3a7bd5"))
    path = folder / name
    assert image.save(str(path), "PNG")
    return path


def settled(qtbot: Any, pane: ConversationPane) -> list[Any]:
    """The chips once none is being read any more."""
    qtbot.waitUntil(lambda: not pane.files.row.preparing, timeout=WAIT_MS)
    return list(pane.files.row.chips)


def files_mime(*paths: Path) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    return mime


@pytest.fixture
def pane(qtbot: Any, qloop: Any, services: Any) -> Iterator[ConversationPane]:
    yield make_pane(qtbot, services)


def test_the_paperclip_attaches_a_text_file_as_a_chip_and_removing_it_releases_the_file(
    qtbot: Any, pane: ConversationPane, services: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    doc = text_file(tmp_path)
    asked: list[str] = []

    def dialog(parent: Any, title: str, folder: str, filters: str) -> tuple[list[str], str]:
        asked.append(title)
        return [str(doc)], filters

    monkeypatch.setattr(attach_send.QFileDialog, "getOpenFileNames", dialog)
    button = pane.files.button
    assert button.toolTip() == "Attach files (images, documents)" and not button.icon().isNull()
    assert not pane.send_button.isEnabled()  # nothing typed, nothing attached
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    assert asked == ["Attach files"]

    (chip,) = settled(qtbot, pane)
    assert chip.state == "ready" and pane.files.row.isVisible()
    assert chip.name_label.text() == "notes.txt"
    size = doc.stat().st_size
    assert chip.detail.text() == f"{size / 1024:.1f} KiB · text"
    tokens = chip.tokens_label.text()
    assert tokens.startswith("≈ ") and tokens.endswith(" tokens") and chip.tokens
    assert pane.send_button.isEnabled()  # a file alone may be sent

    stored = services.attachments.path(chip.attachment)
    assert stored.read_bytes() == doc.read_bytes()
    qtbot.mouseClick(chip.remove_button, Qt.MouseButton.LeftButton)
    assert pane.files.row.chips == [] and pane.files.row.isHidden()
    assert not pane.send_button.isEnabled()
    services.attachments.collect()  # released: no message holds it, so it goes
    assert not stored.exists()


def test_two_files_dragged_onto_the_pane_show_the_drop_hint_then_make_two_chips(
    qtbot: Any, pane: ConversationPane, tmp_path: Path
) -> None:
    one, two = text_file(tmp_path, "a.md"), png_file(tmp_path, "b.png")
    mime = files_mime(one, two)
    copy = Qt.DropAction.CopyAction
    button, none = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    enter = QDragEnterEvent(QPoint(20, 20), copy, mime, button, none)
    # over the text box: the composer leaves files to the pane, which shows where to drop
    QApplication.sendEvent(pane.composer.viewport(), enter)
    assert enter.isAccepted() and pane.files.hint.isVisible()
    assert pane.files.hint.text() == "Drop files here to attach them"
    assert pane.files.hint.geometry().contains(pane.transcript.geometry().center())

    drop = QDropEvent(QPoint(20, 20).toPointF(), copy, mime, button, none)
    QApplication.sendEvent(pane, drop)
    assert drop.isAccepted() and pane.files.hint.isHidden()
    chips = settled(qtbot, pane)
    assert [(c.name, c.state) for c in chips] == [("a.md", "ready"), ("b.png", "ready")]
    assert pane.composer.toPlainText() == ""  # no path typed into the message


def test_a_pasted_image_becomes_an_image_chip_with_a_thumbnail(
    qtbot: Any, pane: ConversationPane
) -> None:
    image = QImage(160, 120, QImage.Format.Format_RGB32)
    image.fill(QColor("#d53a3a"))
    QApplication.clipboard().setImage(image)
    pane.composer.setFocus()
    pane.composer.paste()
    (chip,) = settled(qtbot, pane)
    assert chip.state == "ready" and chip.name_label.text() == "Pasted image.png"
    assert chip.attachment.kind == "image" and chip.attachment.mime == "image/png"
    assert chip.detail.text().endswith("· PNG 160×120")
    thumb = chip.thumb.pixmap()
    assert not thumb.isNull()
    shown = thumb.deviceIndependentSize()
    assert (round(shown.width()), round(shown.height())) == (40, 30)  # 4:3, fitted to 40 px
    assert thumb.toImage().pixelColor(20, 15).name() == "#d53a3a"
    assert pane.composer.toPlainText() == ""

    words = QMimeData()  # copied text that an editor also offers as a picture: the words
    words.setText("a copied sentence")
    words.setImageData(image)
    QApplication.clipboard().setMimeData(words)
    pane.composer.paste()
    assert pane.composer.toPlainText() == "a copied sentence"
    assert len(pane.files.row.chips) == 1


def test_copied_files_pasted_into_the_composer_are_attached_not_typed(
    qtbot: Any, pane: ConversationPane, tmp_path: Path
) -> None:
    mime = files_mime(text_file(tmp_path, "report.csv"))
    mime.setText(str(tmp_path / "report.csv"))  # file managers put the path as text too
    QApplication.clipboard().setMimeData(mime)
    pane.composer.paste()
    (chip,) = settled(qtbot, pane)
    assert chip.name == "report.csv" and chip.state == "ready"
    assert pane.composer.toPlainText() == ""


def test_a_folder_and_a_missing_file_get_error_chips_in_words(
    qtbot: Any, pane: ConversationPane, tmp_path: Path
) -> None:
    folder = tmp_path / "holiday photos"
    folder.mkdir()
    pane.files.row.add_files([folder, tmp_path / "<img src=x>vanished.txt"])
    chips = settled(qtbot, pane)
    assert [c.state for c in chips] == ["error", "error"]
    hostile = chips[1]  # a name is shown as typed, never read as HTML
    assert hostile.name_label.shown_text().startswith("<img src")
    plain = Qt.TextFormat.PlainText
    assert hostile.name_label.textFormat() == hostile.error_label.textFormat() == plain
    for chip in chips:
        assert chip.property("state") == "error" and chip.error_label.isVisible()
        assert chip.name in chip.error_label.text()  # finished words naming the file
        assert "Traceback" not in chip.error_label.text() and chip.remove_button.isVisible()
    assert "folder" in chips[0].error_label.text()
    assert not pane.send_button.isEnabled()  # nothing that can be sent


def test_send_waits_while_a_file_is_read_and_the_chip_shows_its_progress(
    qtbot: Any, pane: ConversationPane, services: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    go = threading.Event()
    real = services.attachments.prepare

    def slow(path: Path, **kw: Any) -> Any:  # a slow disk: half read, then waits for the test
        kw["progress"](50, 100)
        assert go.wait(WAIT_MS / 1000)
        return real(path, **kw)

    monkeypatch.setattr(services.attachments, "prepare", slow)
    pane.composer.setPlainText("what does it say?")
    (chip,) = pane.files.row.add_files([text_file(tmp_path)])
    qtbot.waitUntil(lambda: chip.detail.text() == "Reading… 50%", timeout=WAIT_MS)
    assert chip.state == "preparing" and chip.bar.isVisible() and chip.bar.value() == 500
    assert not pane.send_button.isEnabled()
    pane.send()  # Enter while it is read: nothing goes, the composer says why
    assert pane.conversation_id is None and "Wait until every file is read" in pane.hint.text()
    go.set()
    qtbot.waitUntil(lambda: chip.state == "ready", timeout=WAIT_MS)
    assert pane.send_button.isEnabled() and chip.bar.isHidden()


def test_removing_a_chip_while_it_is_read_lets_the_message_go_without_it(
    qtbot: Any, pane: ConversationPane, services: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    go = threading.Event()
    real = services.attachments.prepare

    def slow(path: Path, **kw: Any) -> Any:  # a slow disk: waits for the test
        assert go.wait(WAIT_MS / 1000)
        return real(path, **kw)

    monkeypatch.setattr(services.attachments, "prepare", slow)
    pane.composer.setPlainText("never mind the file")
    (chip,) = pane.files.row.add_files([text_file(tmp_path)])
    qtbot.waitUntil(lambda: chip.state == "preparing", timeout=WAIT_MS)
    assert not pane.send_button.isEnabled()
    qtbot.mouseClick(chip.remove_button, Qt.MouseButton.LeftButton)
    assert pane.files.row.chips == [] and pane.send_button.isEnabled()
    go.set()
    qtbot.waitUntil(lambda: not pane.files.row.tasks, timeout=WAIT_MS)
    services.attachments.collect()  # whatever was stored is nobody's: it goes
    folder = services.attachments.store.folder
    assert [p for p in folder.rglob("*") if p.is_file()] == []


def test_fifty_files_at_once_are_read_a_few_at_a_time(
    qtbot: Any, pane: ConversationPane, services: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    paths = [text_file(tmp_path, f"part {i:02}.txt", words=20) for i in range(50)]
    lock = threading.Lock()
    running, most = [0], [0]
    real = services.attachments.prepare

    def counted(path: Path, **kw: Any) -> Any:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            return real(path, **kw)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(services.attachments, "prepare", counted)
    chips = pane.files.row.add_files(paths)
    assert len(chips) == 50 and all(c.state in ("waiting", "preparing") for c in chips)
    assert pane.files.row.scroller.height() < 200  # the chips scroll; the composer stays put
    chips = settled(qtbot, pane)
    assert [c.state for c in chips] == ["ready"] * 50
    assert [c.name for c in chips] == [p.name for p in paths]  # in the order given
    assert 1 <= most[0] <= MAX_PREPARING


def test_a_drafts_files_survive_its_pane_being_closed_to_save_memory(
    qtbot: Any, services: Any, make_window: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    from desktop.ui.shell import pane_stack

    monkeypatch.setattr(pane_stack, "MAX_IDLE_PANES", 1)
    agent = services.agents.by_name(STARTER)
    convs = [services.conversations.create(agent.id) for _ in range(3)]
    window = make_window(services)
    window.open_conversation(convs[0].id)
    window.pane.files.row.add_files([text_file(tmp_path)])
    settled(qtbot, window.pane)
    for conv in convs[1:]:
        window.open_conversation(conv.id)
    assert convs[0].id not in [p.conversation_id for p in window.panes]  # its pane closed
    window.open_conversation(convs[0].id)
    (chip,) = window.pane.files.row.chips
    assert chip.name == "notes.txt" and chip.state == "ready"
    qtbot.waitUntil(lambda: chip.tokens_label.text().startswith("≈ "), timeout=WAIT_MS)
