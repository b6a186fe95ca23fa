"""Reply text as a screen reader reads it: only through QAccessible
(desktop/ui/markdown/text_access.py).

Two ways in. From Python, ``QAccessible.queryAccessibleInterface(widget)`` and its text
interface, as a Python client would. And, on Linux x86-64, through the C++ virtual tables, the
way the AT-SPI bridge (Orca) or IAccessible2 (NVDA) calls it: ``textInterface()`` is inline
in C++ and asks ``interface_cast``, and ``textAtOffset`` is Qt's own code over our ``text()``;
a Python-only check would miss both (it did: the first version had no text interface in C++).

No assistive technology runs here: the tests switch ``QAccessible.setActive(True)`` and
replace ``text_access._post`` (what hands an event to ``QAccessible.updateAccessibility``, and
so to the platform bridge) with a list, to read the events a bridge would get.
"""

from __future__ import annotations

import ctypes
import platform
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import shiboken6
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QAccessible, QAccessibleEvent
from PySide6.QtWidgets import QWidget

from desktop.ui.markdown import text_access
from desktop.ui.markdown.stream_text import StreamText

TEXT = "Hello world. This is a reply.\nSecond line here"
Boundary = QAccessible.TextBoundaryType


def shown_reply(qtbot: Any, widget: Any, size: tuple[int, int], text: str) -> Any:
    """``widget`` (with painted text given its accessible text) named as a reply, shown at
    ``size``, with ``text`` appended as a stream would."""
    text_access.install()
    widget.setAccessibleName("Reply from Helper")
    qtbot.addWidget(widget)
    widget.resize(*size)
    widget.show()
    qtbot.waitExposed(widget)
    widget.append_text(text)
    return widget


@pytest.fixture
def stream(qtbot: Any) -> StreamText:
    text_access.install()  # once more in shown_reply: installing is idempotent
    return shown_reply(qtbot, StreamText(), (420, 40), TEXT)


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[QAccessibleEvent]]:
    """An assistive technology listening: the events the platform bridge would be handed."""
    posted: list[QAccessibleEvent] = []
    monkeypatch.setattr(text_access, "_post", posted.append)
    QAccessible.setActive(True)
    try:
        yield posted
    finally:
        QAccessible.setActive(False)


def iface_of(widget: QWidget) -> Any:
    iface = QAccessible.queryAccessibleInterface(widget)
    assert iface is not None
    return iface


def inside(widget: StreamText, offset: int) -> QPoint:
    """A point just inside the left edge of a character's box (widget coordinates)."""
    box = widget.cursor_rect(offset)
    return QPoint(box.left() + 1, box.center().y())


# what a screen reader is told ---------------------------------------------------------------
def test_stream_text_reads_as_read_only_multi_line_selectable_text(stream: StreamText) -> None:
    iface = iface_of(stream)
    assert iface.role() == QAccessible.Role.StaticText  # as Qt's read-only QTextBrowser
    state = iface.state()
    assert (state.readOnly, state.multiLine, state.selectableText, state.focusable) == (
        1,
        1,
        1,
        1,
    )
    assert not state.editable
    assert iface.text(QAccessible.Text.Name) == "Reply from Helper"
    assert iface.text(QAccessible.Text.Value) == TEXT
    plain = QWidget()
    assert iface_of(plain).role() != QAccessible.Role.StaticText  # others keep Qt's own
    plain.deleteLater()


def test_character_count_and_text_grow_as_the_reply_streams(stream: StreamText) -> None:
    text = iface_of(stream).textInterface()
    assert text.characterCount() == len(TEXT)
    assert text.text(6, 11) == "world"
    stream.append_text(" and more")
    assert text.characterCount() == len(TEXT) + 9
    assert text.text(len(TEXT), len(TEXT) + 9) == " and more"
    stream.set_all("Reopened")
    assert text.characterCount() == 8
    assert iface_of(stream).text(QAccessible.Text.Value) == "Reopened"


def test_offsets_are_utf16_as_qt_counts_them(stream: StreamText) -> None:
    stream.set_all("😀 ok")  # the emoji is one str character, two UTF-16 units
    text = iface_of(stream).textInterface()
    assert text.characterCount() == 5
    assert text.text(0, 2) == "😀"
    assert text.text(3, 5) == "ok"
    text.setSelection(0, 3, 5)
    assert stream.selected_text == "ok"


# selection ----------------------------------------------------------------------------------
def test_a_mouse_drag_is_the_selection_a_screen_reader_hears(
    stream: StreamText, qtbot: Any, events: list[QAccessibleEvent]
) -> None:
    qtbot.mousePress(stream, Qt.MouseButton.LeftButton, pos=inside(stream, 6))
    qtbot.mouseMove(stream, inside(stream, 11))
    qtbot.mouseRelease(stream, Qt.MouseButton.LeftButton, pos=inside(stream, 11))
    assert stream.selected_text == "world"
    text = iface_of(stream).textInterface()
    assert text.selectionCount() == 1
    assert text.cursorPosition() == 11  # the caret is where the drag ended
    last = [e for e in events if e.type() == QAccessible.Event.TextSelectionChanged][-1]
    assert (last.selectionStart(), last.selectionEnd(), last.cursorPosition()) == (6, 11, 11)
    assert text.text(last.selectionStart(), last.selectionEnd()) == "world"


def test_selection_set_through_the_interface_selects_in_the_widget(
    stream: StreamText,
) -> None:
    text = iface_of(stream).textInterface()
    text.setSelection(0, 0, 5)
    assert stream.selected_text == "Hello"
    assert text.cursorPosition() == 5
    text.removeSelection(0)
    assert stream.selected_text == ""
    assert text.selectionCount() == 0
    text.addSelection(13, 17)
    assert stream.selected_text == "This"
    text.setCursorPosition(3)
    assert text.cursorPosition() == 3
    assert stream.selected_text == ""  # moving the caret drops the selection, as in Qt


# geometry -----------------------------------------------------------------------------------
def test_offset_at_point_and_character_rect_agree(stream: StreamText) -> None:
    text = iface_of(stream).textInterface()
    for offset in (0, 6, 12, len("Hello world. This is a reply.") + 1, len(TEXT) - 1):
        box = text.characterRect(offset)  # screen coordinates
        assert box.isValid() and box.width() > 0 and box.height() > 0
        assert stream.rect().contains(stream.mapFromGlobal(box.center()))
        assert text.offsetAtPoint(QPoint(box.left() + 1, box.center().y())) == offset
    second = text.characterRect(len("Hello world. This is a reply.") + 1)
    assert second.top() > text.characterRect(0).top()  # the second line is lower
    assert text.characterRect(len(TEXT)).isNull()  # past the end: no box
    outside = stream.mapToGlobal(QPoint(-5, -5))
    assert text.offsetAtPoint(outside) == -1


# notifications ------------------------------------------------------------------------------
def test_streaming_posts_insert_reset_and_selection_events(
    stream: StreamText, events: list[QAccessibleEvent]
) -> None:
    stream.append_text(" Third")
    inserted = events[-1]
    assert inserted.type() == QAccessible.Event.TextInserted
    assert (inserted.changePosition(), inserted.textInserted()) == (len(TEXT), " Third")
    assert inserted.object() is stream
    stream.set_all("Fresh")
    reset = events[-1]
    assert reset.type() == QAccessible.Event.TextUpdated
    assert (reset.textRemoved(), reset.textInserted()) == (TEXT + " Third", "Fresh")
    stream.select(5, 1)
    chosen = events[-1]
    assert chosen.type() == QAccessible.Event.TextSelectionChanged
    assert (chosen.selectionStart(), chosen.selectionEnd(), chosen.cursorPosition()) == (1, 5, 1)


def test_events_reach_qt_when_active_and_cost_nothing_when_not(
    stream: StreamText, monkeypatch: pytest.MonkeyPatch
) -> None:
    posted: list[QAccessibleEvent] = []
    monkeypatch.setattr(text_access, "_post", posted.append)
    assert not QAccessible.isActive()
    stream.append_text(" x")
    stream.set_all("y")
    stream.select(0, 1)
    assert posted == []  # nobody listening: no event built
    monkeypatch.undo()
    QAccessible.setActive(True)
    try:  # the real QAccessible.updateAccessibility takes them (no bridge here to read them)
        stream.append_text(" z")
        stream.set_all("w")
        stream.select(0, 1)
    finally:
        QAccessible.setActive(False)
    assert stream.toPlainText() == "w"


# through C++, as the platform bridge calls ---------------------------------------------------
CAN_CALL_NATIVE = sys.platform.startswith("linux") and platform.machine() == "x86_64"
native = pytest.mark.skipif(
    not CAN_CALL_NATIVE, reason="calls Qt 6's virtual tables with the x86-64 System V ABI"
)
# Slots in Qt 6's vtables (fixed for all of Qt 6: Qt keeps its ABI within a major version).
INTERFACE_CAST = 20  # QAccessibleInterface::interface_cast
SELECTION, SELECTION_COUNT, TEXT_AT_OFFSET, CHARACTER_COUNT = 2, 3, 12, 13  # the text part


class _QString(ctypes.Structure):
    _fields_ = [("d", ctypes.c_void_p), ("ptr", ctypes.c_void_p), ("size", ctypes.c_ssize_t)]

    def text(self) -> str:
        return ctypes.string_at(self.ptr, self.size * 2).decode("utf-16-le") if self.size else ""


def _slot(this: int, index: int) -> int:
    table = ctypes.cast(this, ctypes.POINTER(ctypes.c_void_p))[0]
    return int(ctypes.cast(table, ctypes.POINTER(ctypes.c_void_p))[index])


def native_text_interface(iface: Any) -> int:
    """``iface->textInterface()`` in C++: the address, or 0."""
    this = shiboken6.getCppPointer(iface)[0]
    cast = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
    return int(cast(_slot(this, INTERFACE_CAST))(this, 0) or 0)  # 0: TextInterface


def native_selection(text_iface: int) -> tuple[int, int]:
    """``selection(0, &start, &end)``, the offsets first set to what a bridge's stack held."""
    call = ctypes.CFUNCTYPE(
        None,
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_int),
        ctypes.POINTER(ctypes.c_int),
    )
    start, end = ctypes.c_int(32534), ctypes.c_int(1368090821)
    call(_slot(text_iface, SELECTION))(text_iface, 0, start, end)
    return start.value, end.value


def native_int(text_iface: int, index: int) -> int:
    call = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
    return int(call(_slot(text_iface, index))(text_iface))


def native_text_at(text_iface: int, offset: int, boundary: Any) -> tuple[str, int, int]:
    call = ctypes.CFUNCTYPE(
        None,
        ctypes.POINTER(_QString),  # the returned QString (hidden first argument)
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_int),
        ctypes.POINTER(ctypes.c_int),
    )
    result, start, end = _QString(), ctypes.c_int(-1), ctypes.c_int(-1)
    call(_slot(text_iface, TEXT_AT_OFFSET))(
        ctypes.byref(result), text_iface, offset, boundary.value, start, end
    )
    return result.text(), start.value, end.value


@native
def test_the_platform_bridge_gets_the_text_interface(stream: StreamText) -> None:
    iface = iface_of(stream)
    address = native_text_interface(iface)
    assert address != 0
    assert native_int(address, CHARACTER_COUNT) == len(TEXT)
    assert native_int(address, SELECTION_COUNT) == 0
    stream.select(0, 5)
    assert native_int(address, SELECTION_COUNT) == 1
    stream.append_text(" More")
    assert native_int(address, CHARACTER_COUNT) == len(TEXT) + 5


@native
def test_words_sentences_and_lines_at_an_offset_through_cpp(stream: StreamText) -> None:
    address = native_text_interface(iface_of(stream))
    assert native_text_at(address, 7, Boundary.WordBoundary) == ("world", 6, 11)
    assert native_text_at(address, 7, Boundary.CharBoundary) == ("o", 7, 8)
    sentence = native_text_at(address, 14, Boundary.SentenceBoundary)
    assert sentence[0].startswith("This is a reply.")
    first_line = "Hello world. This is a reply.\n"
    assert native_text_at(address, 3, Boundary.LineBoundary) == (first_line, 0, len(first_line))
    assert native_text_at(address, len(first_line) + 2, Boundary.LineBoundary) == (
        "Second line here",
        len(first_line),
        len(TEXT),
    )


@native
def test_the_selection_a_bridge_reads_is_the_one_on_screen(stream: StreamText, qtbot: Any) -> None:
    address = native_text_interface(iface_of(stream))
    assert native_selection(address) == (-1, -1)  # none: the bridge then uses the caret
    qtbot.mousePress(stream, Qt.MouseButton.LeftButton, pos=inside(stream, 13))
    qtbot.mouseMove(stream, inside(stream, 20))
    qtbot.mouseRelease(stream, Qt.MouseButton.LeftButton, pos=inside(stream, 20))
    assert stream.selected_text == "This is"
    assert native_selection(address) == (13, 20)
    stream.set_all("😀 ok")
    stream.select(2, 4)
    assert native_selection(address) == (3, 5)  # UTF-16 offsets


@native
def test_every_interface_type_can_be_asked_for(stream: StreamText) -> None:
    """A bridge asks for each interface it knows; a wrong answer type crashed inside it."""
    this = shiboken6.getCppPointer(iface_of(stream))[0]
    cast = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
    answers = {
        kind.name: cast(_slot(this, INTERFACE_CAST))(this, kind.value)
        for kind in QAccessible.InterfaceType
    }
    assert answers["TextInterface"]
    assert answers["EditableTextInterface"] is None  # read-only
    assert answers["ValueInterface"] is None


def test_a_part_its_parent_speaks_for_posts_nothing(
    qtbot: Any, events: list[QAccessibleEvent]
) -> None:
    class Part(StreamText):
        accessible_text = False  # as MarkdownView's live tail

    part = Part()
    qtbot.addWidget(part)
    part.resize(300, 40)
    part.show()
    part.append_text("tail text")
    part.select(0, 4)
    assert events == []
    assert iface_of(part).role() != QAccessible.Role.StaticText


def test_parts_it_speaks_for_are_not_its_accessible_children(qtbot: Any) -> None:
    from PySide6.QtWidgets import QToolButton

    class Part(StreamText):
        accessible_text = False

    view = StreamText()
    qtbot.addWidget(view)
    view.resize(400, 200)
    part, button = Part(view), QToolButton(view)
    button.setText("Copy")
    part.setGeometry(0, 100, 400, 40)
    button.setGeometry(350, 0, 40, 20)
    view.show()
    qtbot.waitExposed(view)
    iface = iface_of(view)
    assert iface.childCount() == 1
    (kid,) = [iface.child(0)]
    assert kid.object() is button and kid.role() == QAccessible.Role.Button
    assert iface.indexOfChild(kid) == 0
    assert iface.child(1) is None
    over_part = view.mapToGlobal(QPoint(10, 110))
    assert iface.childAt(over_part.x(), over_part.y()) is None
    over_button = view.mapToGlobal(QPoint(360, 5))
    assert iface.childAt(over_button.x(), over_button.y()).object() is button


# MarkdownView: finished blocks painted as documents, the live tail plain --------------------
MARKDOWN = (
    "# Plan\n\nSome *emphasis* and `code` here.\n\n- first item\n- second item\n\n"
    "```python\nprint('hi')\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nThe tail is stre"
)


@pytest.fixture
def markdown(qtbot: Any, qloop: Any) -> Any:
    from desktop.ui.markdown.view import MarkdownView

    view = shown_reply(qtbot, MarkdownView(), (520, 60), MARKDOWN)
    qtbot.waitUntil(lambda: not view.laying_out)
    return view


def test_markdown_reads_as_its_rendered_text(markdown: Any) -> None:
    iface = iface_of(markdown)
    assert iface.role() == QAccessible.Role.StaticText
    assert iface.text(QAccessible.Text.Name) == "Reply from Helper"
    value = iface.text(QAccessible.Text.Value)
    assert value == markdown.toPlainText()
    for shown in ("Plan", "Some emphasis and code here.", "first item", "print('hi')", "tail"):
        assert shown in value
    for mark in ("# Plan", "*emphasis*", "`code`", "```"):
        assert mark not in value  # what is seen, not the Markdown marks
    text = iface.textInterface()
    before = text.characterCount()
    markdown.append_text("aming on")
    assert text.characterCount() == before + len("aming on")
    assert iface.text(QAccessible.Text.Value).endswith("The tail is streaming on")
    # the Copy button of the code block is a child; the live tail is not
    kids = [iface.child(k) for k in range(iface.childCount())]
    assert [kid.role() for kid in kids] == [QAccessible.Role.Button]


def test_markdown_geometry_round_trips_in_every_kind_of_block(markdown: Any) -> None:
    iface = iface_of(markdown)
    text, value = iface.textInterface(), iface.text(QAccessible.Text.Value)
    tops = []
    for word in ("Plan", "emphasis", "second", "print", "tail"):
        offset = value.index(word)
        box = text.characterRect(offset)
        assert box.isValid(), word
        assert text.offsetAtPoint(QPoint(box.left() + 1, box.center().y())) == offset, word
        tops.append(box.top())
    assert tops == sorted(tops)  # heading, prose, list, code, tail: top to bottom


def test_markdown_selection_across_blocks_both_ways(
    markdown: Any, qtbot: Any, events: list[QAccessibleEvent]
) -> None:
    iface = iface_of(markdown)
    text, value = iface.textInterface(), iface.text(QAccessible.Text.Value)
    start, end = value.index("emphasis"), value.index("item") + len("item")

    def at(offset: int) -> QPoint:
        box = markdown.cursor_rect(offset)
        return QPoint(box.left() + 1, box.center().y())

    qtbot.mousePress(markdown, Qt.MouseButton.LeftButton, pos=at(start))
    qtbot.mouseMove(markdown, at(end))
    qtbot.mouseRelease(markdown, Qt.MouseButton.LeftButton, pos=at(end))
    assert markdown.selection_range() == (start, end)
    assert text.selectionCount() == 1
    last = [e for e in events if e.type() == QAccessible.Event.TextSelectionChanged][-1]
    assert (last.selectionStart(), last.selectionEnd()) == (start, end)
    assert text.text(start, end).startswith("emphasis and code here.")
    assert text.text(start, end).endswith("first item")
    if CAN_CALL_NATIVE:  # the C++ selection() too, where it can be called
        assert native_selection(native_text_interface(iface)) == (start, end)
    second = value.index("second")
    text.setSelection(0, second, second + len("second"))
    assert markdown.selected_text() == "second"


def test_markdown_streaming_posts_what_changed(
    markdown: Any, events: list[QAccessibleEvent]
) -> None:
    shown = len(markdown.toPlainText())
    markdown.append_text("aming")  # the tail grows
    inserted = events[-1]
    assert inserted.type() == QAccessible.Event.TextInserted
    assert (inserted.changePosition(), inserted.textInserted()) == (shown, "aming")
    markdown.append_text(" on.\n\nNext")  # the tail's block finishes: blocks changed
    assert events[-1].type() == QAccessible.Event.TextUpdated
    assert events[-1].textInserted() == markdown.toPlainText()
