"""What is built late stays invisible to the person: a long conversation opens a few bubbles
per loop turn (newest first, at the bottom), every message still appears when scrolled to, and
a bubble's rarely used parts (action buttons, stats footer, a reply's live tail) are built the
moment they are needed."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from PySide6.QtCore import QCoreApplication, QEvent, QObject
from PySide6.QtWidgets import QApplication

from desktop.store.conversations import Message
from desktop.ui.conversation.bubble import MessageBubble
from desktop.ui.conversation.bubble_parts import ACTIONS
from desktop.ui.conversation.paging import FIRST_SCREEN, MAX_LOADED
from desktop.ui.conversation.transcript import Transcript


def message(i: int, status: str = "complete", content: str | None = None) -> Message:
    role = "user" if i % 2 == 0 else "assistant"
    text = content if content is not None else f"{role} message {i}"
    return Message(i + 1, 1, role, text, status, None, None, None, "Bench", "m", "", "")


def transcript_of(qtbot: Any, count: int) -> Transcript:
    transcript = Transcript()
    qtbot.addWidget(transcript)
    transcript.resize(900, 600)
    transcript.show()
    transcript.show_path([message(i) for i in range(count)])
    return transcript


class Resizes(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize:
            self.count += 1
        return False


def test_a_long_conversation_opens_newest_first_at_the_bottom(qtbot: Any) -> None:
    transcript = transcript_of(qtbot, 200)
    assert transcript._rows, "the newest bubble is built at once"
    assert transcript._rows[-1].bubble.message_id == 200  # the newest message
    qtbot.waitUntil(lambda: not transcript.opening and not transcript.prefetching)
    bar = transcript.verticalScrollBar()
    assert transcript.following and bar.value() == bar.maximum()
    last = transcript._rows[-1]
    assert last.geometry().bottom() - bar.value() <= transcript.viewport().height()
    assert last.geometry().bottom() - bar.value() > transcript.viewport().height() - 40


def test_a_bubble_of_the_opening_screen_is_there_when_asked_for(qtbot: Any) -> None:
    transcript = transcript_of(qtbot, 200)
    first_of_screen = 200 - FIRST_SCREEN + 1  # message ids start at 1
    bubble = transcript.bubble(first_of_screen)  # asked before the loop built it
    assert bubble is not None and bubble.text == f"user message {first_of_screen - 1}"
    assert not transcript.opening
    assert transcript.window_range == (200 - FIRST_SCREEN, 200)
    assert [b.message_id for b in transcript.bubbles()] == list(range(first_of_screen, 201))


def test_every_message_appears_when_scrolled_to(qtbot: Any) -> None:
    transcript = transcript_of(qtbot, 150)
    qtbot.waitUntil(lambda: not transcript.opening)
    bar = transcript.verticalScrollBar()
    seen: dict[int, str] = {}
    for _ in range(2_000):
        for bubble in transcript.bubbles():
            seen[bubble.message_id] = bubble.text
        if bar.value() == 0 and transcript.window_range[0] == 0:
            break
        bar.setValue(bar.value() - transcript.viewport().height())
        QApplication.processEvents()
        assert len(transcript.bubbles()) <= MAX_LOADED
    assert sorted(seen) == list(range(1, 151))
    assert all(seen[i + 1] == message(i).content for i in range(150))


def test_rows_built_above_leave_the_others_laid_out_as_they_were(qtbot: Any) -> None:
    transcript = transcript_of(qtbot, 200)
    qtbot.waitUntil(lambda: not transcript.opening and not transcript.prefetching)
    shown = transcript._rows[-1]
    spy = Resizes()
    shown.installEventFilter(spy)
    shown.bubble.installEventFilter(spy)
    transcript.load_earlier()  # a page of rows above: none below them is squeezed meanwhile
    assert spy.count == 0


def test_action_buttons_are_built_when_they_show_in_their_order(qtbot: Any) -> None:
    question = MessageBubble(message(0))
    qtbot.addWidget(question)
    assert sorted(question.action_buttons) == ["copy", "delete", "edit"]
    reply = MessageBubble(message(1))
    qtbot.addWidget(reply)
    assert "continue" not in reply.action_buttons and "edit" not in reply.action_buttons
    reply.set_busy(True)
    reply.update_from(message(1), {"finish_reason": "length"})  # cut short: Continue shows
    button = reply.action_buttons["continue"]
    assert not button.isHidden() and not button.isEnabled()  # built busy, as the others
    order = [key for key, _text, _tip in ACTIONS]
    layout = reply._actions
    laid = [layout.itemAt(i).widget() for i in range(layout.count())]
    keys = {b: k for k, b in reply.action_buttons.items()}
    assert [keys[w] for w in laid] == [k for k in order if k in reply.action_buttons]
    reply.set_busy(False)
    assert button.isEnabled()
    assert not question.action_buttons["regenerate"].isVisible()  # asked for: built hidden


def test_the_footer_is_built_with_the_first_stats(qtbot: Any) -> None:
    reply = MessageBubble(message(1))
    qtbot.addWidget(reply)
    reply.show()
    assert reply._built("footer") is None
    reply.update_from(message(1), {"ttft_ms": 85.0, "total_ms": 900.0, "output_tokens": 40})
    qtbot.waitUntil(lambda: reply.footer.isVisible())
    assert reply.footer.text()
    layout = reply.layout()
    assert layout.indexOf(reply.footer) == layout.indexOf(reply._actions) - 1  # above them


def test_a_stored_reply_has_no_live_tail_and_still_selects_and_copies(qtbot: Any) -> None:
    reply = MessageBubble(message(1, content="Some **bold** words.\n\nA second paragraph."))
    qtbot.addWidget(reply)
    reply.show()
    view = reply.view
    assert view is not None and view._tail_widget is None
    view.select_all()
    assert "Some bold words." in view.selected_text() and "second paragraph" in view.toPlainText()
    streaming = MessageBubble(message(3, status="streaming", content=""))
    qtbot.addWidget(streaming)
    streaming.append_text("still coming")
    assert streaming.view is not None and streaming.view.tail_text == "still coming"


def test_paging_frees_the_bubbles_it_sheds_without_the_cycle_collector(qtbot: Any) -> None:
    """A shed bubble goes by reference counting, a few per step. Were any of its parts to
    hold it back (a cycle), the GUI thread's cycle collector would free thousands of them
    in one pass every 10 s: a 75-85 ms hold while a person pages (kit.loop, kit.weak)."""
    transcript = transcript_of(qtbot, 1_000)
    qtbot.waitUntil(lambda: not transcript.opening and not transcript.prefetching)
    gc.collect()
    shed: list[weakref.ref[MessageBubble]] = []
    for _ in range(30):
        before = {id(b): weakref.ref(b) for b in transcript.bubbles()}
        transcript.load_earlier()
        alive = {id(b) for b in transcript.bubbles()}
        shed += [ref for key, ref in before.items() if key not in alive]
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    assert len(shed) > 100  # the window moved past MAX_LOADED and shed rows
    still = [ref for ref in shed if ref() is not None]
    assert still == [], f"{len(still)} of {len(shed)} shed bubbles wait for the cycle collector"
