"""The streaming reply on screen: exact text, auto-follow, and painting only what changed.

These use the real widgets on the offscreen platform. "What is on screen" is the window's
backing store (``QScreen.grabWindow``), which holds what incremental painting left there;
``QWidget.grab()`` renders everything afresh. The two must be identical: a stale pixel (a
bubble edge left behind by a partial repaint, a strip not repainted after a blit) fails.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from PySide6.QtCore import QEvent, QObject, QPoint, Qt
from PySide6.QtGui import QGuiApplication, QImage
from PySide6.QtWidgets import QApplication

from desktop.store.conversations import Message
from desktop.ui.conversation.transcript import Transcript
from desktop.ui.kit import theme
from desktop.ui.markdown.stream_text import FREEZE_LINES, StreamText

WORDS = [
    "the",
    "keeper",
    "climbed",
    "the",
    "stairs",
    "and",
    "watched",
    "the",
    "long",
    "grey",
    "line",
    "of",
    "the",
    "sea",
]


def _tokens(start: int, count: int) -> str:
    return "".join(
        " " + WORDS[i % len(WORDS)] + ("\n\n" if i % 50 == 49 else "")
        for i in range(start, start + count)
    )


def _streaming(message_id: int = 1) -> Message:
    return Message(message_id, 1, "assistant", "", "streaming", None, None, None, "A", "m", "", "")


def _settle(app: QApplication) -> None:
    for _ in range(4):
        app.processEvents()


class _BodyPaint(QObject):
    """Area the transcript's content widget painted (full repaint = the whole view)."""

    def __init__(self, body: QObject) -> None:
        super().__init__()
        self.body = body
        self.pixels = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.body and event.type() == QEvent.Type.Paint:
            self.pixels += sum(r.width() * r.height() for r in event.region())  # type: ignore[attr-defined]
        return False


def _on_screen_matches_fresh_render(app: QApplication, transcript: Transcript) -> bool:
    screen = app.primaryScreen().grabWindow(transcript.winId()).toImage()
    fresh = transcript.grab().toImage()
    if screen.size() != fresh.size():
        # under QT_SCALE_FACTOR (scripts/test-matrix scale-1.5) the offscreen platform's
        # grabWindow returns the top-left crop, window-sized, of the device pixels: compare that
        fresh = fresh.copy(0, 0, screen.width(), screen.height())
    fmt = QImage.Format.Format_RGB32
    return screen.convertToFormat(fmt) == fresh.convertToFormat(fmt)


@pytest.fixture
def transcript(qapp: QApplication) -> Any:
    view = Transcript()
    view.resize(900, 700)
    view.show()
    view.add_message(_streaming())
    _settle(qapp)
    yield view
    view.close()
    view.deleteLater()
    _settle(qapp)


def test_streamed_text_is_exact_and_lays_out_like_the_whole_text(qapp: QApplication) -> None:
    rng = random.Random(5)
    # prose with paragraphs, then one 20,000-character paragraph with no newline at all
    text = _tokens(0, 400) + "\n" + "".join(rng.choice(WORDS) + " " for _ in range(4000))
    streamed, whole = StreamText(), StreamText()
    for widget in (streamed, whole):
        widget.resize(480, 10)
        widget.show()
    _settle(qapp)
    at = 0
    while at < len(text):
        step = rng.randint(1, 200)
        streamed.append_text(text[at : at + step])
        at += step
    whole.set_all(text)

    assert streamed.toPlainText() == text and streamed.length == len(text)
    # the live piece stays short however long the paragraph: appends do not re-lay out it all
    tail = streamed._pieces[-1].layout
    assert tail is not None and tail.lineCount() <= FREEZE_LINES + 1
    assert streamed.piece_count > 20
    # splitting the long paragraph into pieces breaks lines exactly where one layout would
    assert streamed.height() == whole.height()
    streamed.resize(300, streamed.height())
    whole.resize(300, whole.height())
    assert streamed.height() == whole.height() > 480
    assert streamed.toPlainText() == text
    streamed.close()
    whole.close()


def test_the_view_follows_the_reply_until_scrolled_up(
    qapp: QApplication, transcript: Transcript
) -> None:
    bar = transcript.verticalScrollBar()
    for start in range(0, 3000, 33):
        transcript.append_text(1, _tokens(start, 33))
        _settle(qapp)
        assert bar.value() == bar.maximum()
    assert bar.maximum() > 2000 and transcript.following

    bar.setValue(bar.maximum() - 400)  # the person scrolls up to read
    _settle(qapp)
    assert not transcript.following
    held, longest = bar.value(), bar.maximum()
    for start in range(3000, 3600, 33):
        transcript.append_text(1, _tokens(start, 33))
        _settle(qapp)
    assert bar.value() == held and bar.maximum() > longest
    assert _on_screen_matches_fresh_render(qapp, transcript)

    transcript.scroll_to_bottom()
    transcript.append_text(1, _tokens(3600, 200))
    _settle(qapp)
    assert transcript.following and bar.value() == bar.maximum()


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
@pytest.mark.parametrize("earlier", [0, 12], ids=["alone", "after-a-screen-of-messages"])
def test_streaming_paints_only_the_new_strip_and_leaves_no_stale_pixels(
    qapp: QApplication, dark: bool, earlier: int
) -> None:
    theme.install(qapp, dark=dark)
    view = Transcript()
    view.resize(900, 700)
    view.show()
    view.show_path(
        [
            Message(
                k,
                1,
                "user" if k % 2 else "assistant",
                _tokens(k * 40, 40).strip(),
                "complete",
                None,
                None,
                None,
                "A",
                "m",
                "",
                "",
            )
            for k in range(100, 100 + earlier)
        ]
    )
    view.finish_opening()  # the opening screen is built over a few turns: all of it, now
    view.add_message(_streaming(1))
    _settle(qapp)
    if not earlier:  # a reply alone scrolls once it is taller than the view
        for start in range(0, 3000, 500):
            view.append_text(1, _tokens(start, 500))
            _settle(qapp)
    spy = _BodyPaint(view.widget())
    qapp.installEventFilter(spy)
    painted = []
    try:
        for k in range(30):
            spy.pixels = 0
            view.append_text(1, _tokens(3000 + 33 * k, 33))
            _settle(qapp)
            painted.append(spy.pixels)
    finally:
        qapp.removeEventFilter(spy)
    bar = view.verticalScrollBar()
    assert bar.value() == bar.maximum() > 0  # it followed, scrolling every flush
    view_area = view.viewport().width() * view.viewport().height()
    # a flush that moved the view by repainting it all would paint ~view_area
    assert max(painted) < 0.3 * view_area
    assert _on_screen_matches_fresh_render(qapp, view)
    view.close()
    theme.install(qapp, dark=False)


def test_a_context_error_wraps_its_text_beside_all_three_buttons(qapp: QApplication) -> None:
    view = Transcript()
    view.resize(900, 600)
    view.show()
    error = "The conversation is longer than the context (2048 tokens). " * 2
    view.show_path(
        [Message(1, 1, "assistant", "", "error", error, "context_too_long", None, "A", "m", "", "")]
    )
    _settle(qapp)
    bubble = view.bubble(1)
    assert bubble is not None
    buttons = [bubble.retry_button, *bubble.fit_buttons.values()]
    assert all(not b.isHidden() for b in buttons)
    text = bubble.error_text.geometry()
    assert all(text.right() < b.geometry().left() for b in buttons)  # nothing drawn over it
    assert text.height() > bubble.error_text.fontMetrics().height() * 1.5  # it wraps instead
    view.close()


def test_streaming_text_can_be_selected_and_copied(qtbot: Any, qapp: QApplication) -> None:
    widget = StreamText()
    widget.resize(420, 10)
    widget.show()
    _settle(qapp)
    first, second = "Lighthouses guide ships past rocks.", "The keeper trims the wick nightly."
    widget.append_text(first + "\n")
    widget.append_text(second[:10])
    widget.append_text(second[10:])  # still streaming: the text arrives in pieces

    def point(piece: int, char: int) -> QPoint:
        layout = widget._pieces[piece].layout
        assert layout is not None
        line = layout.lineForTextPosition(char)
        x, _ = line.cursorToX(char)
        return QPoint(int(x) + 1, int(widget._pieces[piece].top + line.y() + line.height() / 2))

    qtbot.mouseDClick(widget, Qt.MouseButton.LeftButton, pos=point(1, second.index("keeper") + 2))
    assert widget.selected_text == "keeper"

    qtbot.mousePress(widget, Qt.MouseButton.LeftButton, pos=point(0, first.index("ships")))
    qtbot.mouseMove(widget, point(1, second.index("trims")))
    qtbot.mouseRelease(widget, Qt.MouseButton.LeftButton, pos=point(1, second.index("trims")))
    expected = first[first.index("ships") :] + "\n" + second[: second.index("trims")]
    assert widget.selected_text == expected
    QGuiApplication.clipboard().clear()
    qtbot.keyClick(widget, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == expected
    widget.close()


def test_no_blank_gap_under_the_last_message_when_a_reply_is_rendered(
    qapp: QApplication,
) -> None:
    view = Transcript()
    view.resize(1000, 700)
    view.show()
    story = "\n\n".join(_tokens(k * 60, 55).strip() for k in range(10))
    view.show_path(
        [
            Message(1, 1, "user", "A story, please.", "complete", None, None, None, "", "", "", ""),
            Message(2, 1, "assistant", story, "complete", None, None, None, "A", "m", "", ""),
        ]
    )
    _settle(qapp)
    body, bar = view.widget(), view.verticalScrollBar()
    last = view.bubble(2)
    assert last is not None
    content_bottom = (
        last.parentWidget().geometry().bottom() + 1 + body.layout().contentsMargins().bottom()
    )
    # the content is exactly as tall as the messages (or the view, when they are shorter):
    # word-wrapped bubbles are taller at their narrowest width, which must not count
    assert body.height() == max(view.viewport().height(), content_bottom)
    assert bar.maximum() == max(0, content_bottom - view.viewport().height())
    view.close()
