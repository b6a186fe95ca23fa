"""A reply's sources in the window: the "Sources" list under its text, each opening its
passage where it is in its file, and the citations "[n]" of the reply's text linking to them.

Real parts: a SQLite file (the passages stored on the reply, read back with the bubbles'
other rows), real files on disk, a real knowledge collection searched before a remote agent's
turn (keyword search; the agent is FaultServer, a loopback stand-in for an OpenAI-compatible
endpoint), Qt widgets offscreen. Pictures for people to look at: ``SIMI_SCREENSHOT_DIR=…``
writes sources-reply-*.png and sources-viewer-*.png."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import shiboken6
from PySide6.QtCore import QPoint, Qt, QUrl
from PySide6.QtWidgets import QApplication

from desktop.store.agents import Agent
from desktop.store.knowledge import Source
from desktop.ui.conversation import source_view
from desktop.ui.conversation.sources import SourceList
from desktop.ui.markdown.render import CITATION_SCHEME
from tests.helpers.fault_server import FaultServer, Reply
from tests.helpers.shots import light_and_dark, save_grab, settle
from tests.helpers.widget_checks import cut_labels, overlaps, unnamed_controls

NOTES = "\n".join(f"Line {n} of the notes." for n in range(1, 41)) + "\n"
PASSAGE = "\n".join(f"Line {n} of the notes." for n in range(20, 25))
CARS = "The car needs new tyres before winter.\nCheck the oil every month.\n"
ANSWER = (
    "Line 20 says what the notes are about [1]; the tyres come first [2].\n\n"
    "```python\nfound = [1] + [9]\n```\n\n"
    "There is no source [9], and `[1]` in code is only code."
)


def files(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "files"
    root.mkdir()
    notes, cars = root / "notes.md", root / "cars.txt"
    notes.write_text(NOTES, encoding="utf-8")
    cars.write_text(CARS, encoding="utf-8")
    return notes, cars


def sources_for(notes: Path, cars: Path) -> list[Source]:
    return [
        Source(1, "Notes", str(notes), 20, 24, None, 0.0321, PASSAGE),
        Source(2, "Notes", str(cars), 1, 2, None, 0.0287, CARS.strip()),
    ]


def stored_conversation(services: Any, sources: list[Source], answer: str = ANSWER) -> Any:
    """A conversation of one question and its reply, the reply's sources stored."""
    store = services.conversations
    agent = services.agents.by_name("SmolLM2 (local)")
    conv = store.create(agent.id, "Notes")
    question = store.add_message(conv.id, "user", "What do my notes say?")
    reply = store.add_message(
        conv.id, "assistant", answer, agent_name=agent.name, parent_id=question.id
    )
    services.knowledge.store.add_sources(reply.id, sources)
    return conv.id, reply.id


@pytest.fixture
def shown(services: Any, window: Any, tmp_path: Path) -> Iterator[tuple[Any, Any, Path, Path]]:
    """The window showing a reply with two sources: (window, its bubble, notes, cars)."""
    notes, cars = files(tmp_path)
    conv_id, reply_id = stored_conversation(services, sources_for(notes, cars))
    window.open_conversation(conv_id)
    yield window, window.pane.transcript.bubble(reply_id), notes, cars


def fragments(view: Any) -> Iterator[tuple[Any, Any]]:
    """Every text fragment of the view's rendered blocks, with its block item."""
    for item in view.items:
        doc = item.build(view.style_)
        block = doc.begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                yield item, it.fragment()
                it += 1
            block = block.next()


def citation_point(view: Any, number: int) -> QPoint:
    """Where "[number]" is linked in the view (the middle of its digit)."""
    href = f"{CITATION_SCHEME}:{number}"
    for item, fragment in fragments(view):
        if fragment.charFormat().anchorHref() == href:
            rect = item.cursor_rect(fragment.position() + 1, view.style_)
            return rect.center().toPoint() + QPoint(0, int(item.top))
    raise AssertionError(f"no link to source {number}")


def links_of(view: Any) -> list[tuple[bool, str, str]]:
    """Every link in the view: (in a code block, its text, its address)."""
    return [
        (item.is_code, fragment.text(), fragment.charFormat().anchorHref())
        for item, fragment in fragments(view)
        if fragment.charFormat().isAnchor()
    ]


def opened_viewer(qtbot: Any, bubble: Any, number: int) -> Any:
    qtbot.mouseClick(bubble.sources.buttons[number], Qt.MouseButton.LeftButton)
    viewer = bubble.sources.viewer
    assert viewer is not None and viewer.source.position == number
    qtbot.waitUntil(lambda: viewer.loading is None and viewer.shown is not None, timeout=10_000)
    return viewer


def test_a_reply_lists_its_sources_under_its_text(shown: Any) -> None:
    window, bubble, notes, cars = shown
    part = bubble.sources
    assert isinstance(part, SourceList) and part.isVisible()
    assert part.title.text() == "Sources"
    texts = {n: b.text() for n, b in part.buttons.items()}
    assert texts == {
        1: "[1]  notes.md · lines 20–24 · 0.032",
        2: "[2]  cars.txt · lines 1–2 · 0.029",
    }
    assert part.buttons[1].toolTip().startswith(str(notes) + "\n")
    assert part.buttons[2].toolTip().startswith(str(cars) + "\n")
    # under the text, above the actions (Copy, Regenerate…)
    layout = bubble.layout()
    assert layout.indexOf(bubble.body_box) < layout.indexOf(part) < layout.indexOf(bubble._actions)
    assert bubble.body_box.geometry().bottom() < part.geometry().top()
    assert part.geometry().bottom() < bubble.copy_button.geometry().top()
    question = window.pane.transcript.bubbles()[0]
    assert question._built("sources") is None


def test_a_reply_without_sources_shows_no_sources_row(services: Any, window: Any) -> None:
    conv_id, reply_id = stored_conversation(services, [], answer="No sources here [1].")
    window.open_conversation(conv_id)
    bubble = window.pane.transcript.bubble(reply_id)
    assert bubble._built("sources") is None and bubble.findChildren(SourceList) == []
    assert links_of(bubble.view) == []  # "[1]" is text: the reply has no source 1


def test_clicking_a_source_opens_the_file_at_the_passage(
    qtbot: Any, shown: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _window, bubble, notes, _cars = shown
    viewer = opened_viewer(qtbot, bubble, 1)
    assert viewer.isVisible()
    assert viewer.windowTitle() == "Source [1] · notes.md · lines 20–24"
    assert viewer.path_label.text() == str(notes)
    assert viewer.note.isHidden()  # the file itself is shown
    assert viewer.text.toPlainText() == NOTES
    assert viewer.highlighted == PASSAGE  # the passage's lines, highlighted
    assert viewer.text.textCursor().blockNumber() == 19  # line 20
    first_seen = viewer.text.firstVisibleBlock().blockNumber()
    assert 19 - source_view.CONTEXT_LINES <= first_seen <= 19  # scrolled to it, near the top
    assert bubble.sources.buttons[1].property("chosen") == "true"

    opened: list[QUrl] = []
    monkeypatch.setattr(source_view, "open_file", lambda url: opened.append(url) or True)
    assert viewer.open_button.isVisible() and viewer.open_button.isEnabled()
    qtbot.mouseClick(viewer.open_button, Qt.MouseButton.LeftButton)
    assert opened == [QUrl.fromLocalFile(str(notes))]
    viewer.close()


def test_a_deleted_changed_or_paged_file_shows_the_stored_passage_and_why(
    qtbot: Any, services: Any, window: Any, tmp_path: Path, qapp: QApplication, shot_dir: Path
) -> None:
    notes, cars = files(tmp_path)
    pdf = tmp_path / "files" / "report.pdf"
    pdf.write_bytes(b"%PDF-1.4\n")
    sources = [
        *sources_for(notes, cars),
        Source(3, "Notes", str(pdf), 4, 9, 3, 0.02, "The budget grew by a tenth."),
        Source(4, "Web", "https://example.com/notes.md", 1, 2, None, 0.01, "Somewhere else."),
    ]
    conv_id, reply_id = stored_conversation(services, sources)
    window.open_conversation(conv_id)
    bubble = window.pane.transcript.bubble(reply_id)
    notes.unlink()
    cars.write_text("Everything changed.\n", encoding="utf-8")

    gone = opened_viewer(qtbot, bubble, 1)
    assert gone.text.toPlainText() == PASSAGE and gone.highlighted == ""
    assert gone.note.isVisible()
    assert gone.note.text() == "The file is no longer there: this is the passage as it was found."
    assert not gone.open_button.isEnabled()  # nothing there to open
    settle(qapp)
    assert overlaps(gone) == [] and cut_labels(gone) == []
    save_grab(gone, shot_dir / "sources-viewer-gone-light.png", 5_000)

    changed = opened_viewer(qtbot, bubble, 2)
    assert not shiboken6.isValid(gone) or not gone.isVisible()  # one viewer at a time
    assert changed.text.toPlainText() == CARS.strip()
    assert changed.note.text().startswith("The file has changed since it was searched")
    assert changed.open_button.isEnabled()  # the file is there: it may be opened

    paged = opened_viewer(qtbot, bubble, 3)
    assert paged.text.toPlainText() == "The budget grew by a tenth."
    assert paged.note.text() == "report.pdf is a PDF: this is the passage as it was read from it."
    assert paged.windowTitle() == "Source [3] · report.pdf · page 3, lines 4–9"

    remote = opened_viewer(qtbot, bubble, 4)
    assert remote.text.toPlainText() == "Somewhere else."
    assert remote.open_button.isHidden()  # not a path on this computer: nothing to open
    remote.close()


def test_clicking_a_citation_opens_that_source(qtbot: Any, shown: Any) -> None:
    _window, bubble, _notes, _cars = shown
    view = bubble.view
    point = citation_point(view, 2)
    assert view.link_tip(f"{CITATION_SCHEME}:2") == "Source 2: cars.txt, lines 1–2"
    qtbot.mouseClick(view, Qt.MouseButton.LeftButton, pos=point)
    viewer = bubble.sources.viewer
    assert viewer is not None and viewer.source.position == 2
    assert bubble.sources.buttons[2].property("chosen") == "true"
    assert bubble.sources.buttons[1].property("chosen") != "true"
    qtbot.waitUntil(lambda: viewer.shown is not None, timeout=10_000)
    assert viewer.highlighted == CARS.strip()
    viewer.close()


def test_citations_in_code_and_numbers_without_a_source_stay_text(shown: Any) -> None:
    _window, bubble, _notes, _cars = shown
    links = links_of(bubble.view)
    # only the prose's [1] and [2]: not [9] (no such source), not the code block's [1] and
    # [9], not the code span's `[1]`
    assert links == [
        (False, "[1]", f"{CITATION_SCHEME}:1"),
        (False, "[2]", f"{CITATION_SCHEME}:2"),
    ]
    assert bubble.text == ANSWER  # the text itself is the reply's, as written
    [code] = bubble.code_blocks()
    assert code.block.code == "found = [1] + [9]"


def test_a_reopened_conversation_shows_its_sources_read_back_once(
    services: Any,
    window: Any,
    make_window: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    notes, cars = files(tmp_path)
    conv_id, reply_id = stored_conversation(services, sources_for(notes, cars))
    other = services.conversations.create(window.current_agent.id, "Other")
    services.conversations.add_message(other.id, "user", "Hello")
    reads: list[list[int]] = []
    knowledge = services.knowledge
    real = knowledge.sources_of

    def counted(ids: Any) -> Any:
        reads.append(list(ids))
        return real(ids)

    monkeypatch.setattr(knowledge, "sources_of", counted)
    window.open_conversation(conv_id)
    window.pane.transcript.bubbles()
    assert reads == [[reply_id]]  # the replies shown, in the step that reads their rows
    window.open_conversation(other.id)
    window.open_conversation(conv_id)  # its pane was kept: nothing is read again
    assert reads == [[reply_id]]
    window.close()
    again = make_window(services)  # the app started again
    again.open_conversation(conv_id)
    bubble = again.pane.transcript.bubble(reply_id)
    assert [b.text() for b in bubble.sources.buttons.values()] == [
        "[1]  notes.md · lines 20–24 · 0.032",
        "[2]  cars.txt · lines 1–2 · 0.029",
    ]
    assert reads == [[reply_id], [reply_id]]  # once per opening


def slow_reply(text_parts: list[str], first_after_s: float) -> Iterator[bytes]:
    """OpenAI-style chunks of ``text_parts``, the first one only after ``first_after_s``."""
    time.sleep(first_after_s)
    for part in text_parts:
        chunk = {"choices": [{"index": 0, "delta": {"content": part}}]}
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    yield b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def test_sources_show_as_the_reply_starts_before_its_first_token(
    qtbot: Any, services: Any, make_window: Any, tmp_path: Path
) -> None:
    notes, _cars = files(tmp_path)
    collection = services.knowledge.create("Notes", [notes.parent])
    services.knowledge.index(collection)
    parts = ["The tyres ", "come first ", "[1]."]
    with FaultServer(lambda _r: Reply(body=slow_reply(parts, 1.5))) as server:
        agent = services.agents.create(
            Agent(name="Reader", kind="openai-compatible", base_url=server.url + "/v1", model="m")
        )
        services.knowledge.set_agent_collections(agent.id, [collection])
        window = make_window(services)
        window.reload_agents()
        window.pane.set_agent(services.agents.get(agent.id))
        window.pane.composer.setPlainText("When do the tyres need changing before winter?")
        qtbot.keyClick(window.pane.composer, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: window.pane.presenter.busy, timeout=5_000)
        reply_id = window.pane.presenter.turn.assistant_message_id
        bubble = window.pane.transcript.bubble(reply_id)
        qtbot.waitUntil(lambda: bubble._built("sources") is not None, timeout=10_000)
        assert window.pane.presenter.busy and bubble.view.source == ""  # no token yet
        buttons = bubble.sources.buttons
        assert buttons[1].text().startswith("[1]  cars.txt · lines 1–2 · ")
        qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=20_000)
    bubble = window.pane.transcript.bubble(reply_id)
    assert bubble.view.source == "".join(parts)
    assert links_of(bubble.view) == [(False, "[1]", f"{CITATION_SCHEME}:1")]
    stored = services.knowledge.sources_of([reply_id])[reply_id]
    assert bubble.sources.buttons[1].text().startswith("[1]  cars.txt")
    assert len(bubble.sources.buttons) == len(stored)


def test_screenshots_of_a_reply_with_sources_and_its_viewer(
    qtbot: Any, shown: Any, qapp: QApplication, shot_dir: Path
) -> None:
    window, bubble, _notes, _cars = shown
    window.resize(1180, 760)
    viewer = None
    for shade in light_and_dark(qapp):
        settle(qapp)
        window.pane.transcript.scroll_to_bottom()
        settle(qapp)
        assert overlaps(bubble) == [] and cut_labels(bubble) == [], shade
        assert unnamed_controls(bubble.sources) == [], shade
        save_grab(window, shot_dir / f"sources-reply-{shade}.png", 20_000)
        viewer = opened_viewer(qtbot, bubble, 1)
        settle(qapp)
        assert overlaps(viewer) == [] and cut_labels(viewer) == [], shade
        assert unnamed_controls(viewer) == [], shade
        save_grab(viewer, shot_dir / f"sources-viewer-{shade}.png", 10_000)
        viewer.close()
