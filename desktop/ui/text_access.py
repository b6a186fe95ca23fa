"""Custom-painted text (streaming and finished replies) as assistive technology reads it.

Qt knows how to expose a QTextEdit to a screen reader; our text widgets paint QTextLayouts
themselves, so without this module Orca/NVDA see an unnamed "client" with no text. Here a
``QAccessible`` factory gives every widget that implements ``AccessibleText`` (and says so with
the class attribute ``accessible_text = True``) an interface modelled on Qt's own for a
read-only ``QTextBrowser``: role ``StaticText``, states readOnly, multiLine, selectableText,
focusable; ``Name`` is the widget's label, ``Value`` its whole text, and a text interface
(character count, text ranges, selection, caret, character boxes, offset at a point).

Offsets the interface speaks are UTF-16 code units (Qt's); the widgets' are ``str`` indices.
They differ only after a character outside the BMP (an emoji), and are converted then.

What PySide6 (6.11) cannot do: ``QAccessibleTextInterface.selection()`` and ``attributes()``
have out-parameters and are not overridable from Python; the binding's stubs leave the
selection's offsets untouched (a bridge reading them gets what its variables held). The
selection is therefore also announced with every change (``notify_selection``: the event
carries start and end). ``textAtOffset`` / ``textBeforeOffset`` / ``textAfterOffset`` are Qt's
own defaults over ``text()``: character, word and sentence boundaries as QTextBoundaryFinder
finds them; line and paragraph both end at a newline.

Notifications (``notify_inserted``, ``notify_reset``, ``notify_selection``) build and post an
event only while ``QAccessible.isActive()`` (an assistive technology is listening); otherwise
they return at once, so a streaming reply may call them on every flush.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import shiboken6
from PySide6.QtCore import QObject, QPoint, QPointF, QRect
from PySide6.QtGui import (
    QAccessible,
    QAccessibleEvent,
    QAccessibleTextInsertEvent,
    QAccessibleTextInterface,
    QAccessibleTextSelectionEvent,
    QAccessibleTextUpdateEvent,
)
from PySide6.QtWidgets import QAccessibleWidget, QWidget

MARKER = "accessible_text"  # a class attribute set to True on every AccessibleText widget


@runtime_checkable
class AccessibleText(Protocol):
    """What a custom-painted, read-only, selectable text widget offers (offsets are indices
    into ``toPlainText()``)."""

    def toPlainText(self) -> str: ...
    def selection_range(self) -> tuple[int, int] | None: ...
    def select(self, start: int, end: int) -> None: ...
    def offset_at(self, point: QPointF) -> int: ...
    def cursor_rect(self, offset: int) -> QRect: ...
    def accessible_label(self) -> str: ...


_installed = False


def install() -> None:
    """Give every ``accessible_text`` widget its interface (once per process; idempotent)."""
    global _installed
    if not _installed:
        QAccessible.installFactory(_factory)
        _installed = True


def _factory(key: str, obj: QObject) -> QAccessibleWidget | None:
    # Called for every object an assistive technology (or a test) asks about: keep it cheap.
    if getattr(type(obj), MARKER, False) is True and isinstance(obj, QWidget):
        return TextAccessible(obj)
    return None


# UTF-16 <-> str offsets ---------------------------------------------------------------------
def to_utf16(text: str, index: int) -> int:
    """The UTF-16 offset of ``text[index]``."""
    index = max(0, min(index, len(text)))
    if text.isascii():  # O(1) in CPython
        return index
    return index + sum(1 for ch in text[:index] if ord(ch) > 0xFFFF)


def from_utf16(text: str, offset: int) -> int:
    """The ``str`` index at a UTF-16 offset (inside a surrogate pair: that character)."""
    if offset <= 0:
        return 0
    if text.isascii() or all(ord(ch) <= 0xFFFF for ch in text):
        return min(offset, len(text))
    units = 0
    for index, ch in enumerate(text):
        if units >= offset:
            return index
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(text)


def _utf16_length(text: str) -> int:
    return to_utf16(text, len(text))


# the interface ------------------------------------------------------------------------------
class TextAccessible(QAccessibleWidget, QAccessibleTextInterface):
    """The accessible interface of one ``AccessibleText`` widget (Qt caches one per widget)."""

    def __init__(self, widget: QWidget) -> None:
        QAccessibleWidget.__init__(self, widget, QAccessible.Role.StaticText)
        QAccessibleTextInterface.__init__(self)
        self.caret = 0  # str index; the moving end of the last selection

    def _target(self) -> Any:
        return self.widget()

    # QAccessibleInterface
    def role(self) -> QAccessible.Role:
        return QAccessible.Role.StaticText

    def state(self) -> QAccessible.State:
        state = QAccessibleWidget.state(self)
        state.readOnly = True
        state.multiLine = True
        state.selectableText = True
        state.focusable = True
        return state

    def textInterface(self) -> QAccessibleTextInterface:
        return self

    def interface_cast(self, t: QAccessible.InterfaceType) -> int:
        """What C++ (the platform bridge) calls: ``textInterface()`` is inline there and asks
        this, so the text interface must be handed out here as the address of this object's
        QAccessibleTextInterface part (the second base; shiboken keeps one C++ object per
        wrapped base)."""
        if t == QAccessible.InterfaceType.TextInterface:
            return shiboken6.VoidPtr(shiboken6.getCppPointer(self)[1])  # type: ignore[return-value]
        return QAccessibleWidget.interface_cast(self, t)

    def text(self, *args: Any) -> str:  # type: ignore[override]
        """``text(QAccessible.Text)`` of the interface, or ``text(start, end)`` of the text
        interface (one Python name serves both C++ overloads)."""
        if len(args) == 2:
            whole = self._target().toPlainText()
            start, end = (from_utf16(whole, offset) for offset in args)
            return str(whole[start:end]) if end > start else ""
        (kind,) = args
        if kind == QAccessible.Text.Name:
            return str(self._target().accessible_label())
        if kind == QAccessible.Text.Value:
            return str(self._target().toPlainText())
        return str(QAccessibleWidget.text(self, kind))

    # QAccessibleTextInterface
    def characterCount(self) -> int:
        return _utf16_length(self._target().toPlainText())

    def selectionCount(self) -> int:
        return 1 if self._target().selection_range() else 0

    def addSelection(self, startOffset: int, endOffset: int) -> None:
        self.setSelection(0, startOffset, endOffset)

    def removeSelection(self, selectionIndex: int) -> None:
        if selectionIndex == 0:
            caret = self.caret
            self._target().select(caret, caret)

    def setSelection(self, selectionIndex: int, startOffset: int, endOffset: int) -> None:
        if selectionIndex != 0:
            return
        whole = self._target().toPlainText()
        start, end = from_utf16(whole, startOffset), from_utf16(whole, endOffset)
        self._target().select(start, end)
        self.caret = end

    def cursorPosition(self) -> int:
        target = self._target()
        whole = target.toPlainText()
        return to_utf16(whole, min(self.caret, len(whole)))

    def setCursorPosition(self, position: int) -> None:
        whole = self._target().toPlainText()
        self.caret = from_utf16(whole, position)
        self._target().select(self.caret, self.caret)  # as in a read-only QTextBrowser

    def characterRect(self, offset: int) -> QRect:
        target = self._target()
        whole = target.toPlainText()
        if not 0 <= offset < _utf16_length(whole):
            return QRect()
        box = target.cursor_rect(from_utf16(whole, offset))
        if box.isNull():
            return QRect()
        return QRect(target.mapToGlobal(box.topLeft()), box.size())

    def offsetAtPoint(self, point: QPoint) -> int:
        target = self._target()
        local = target.mapFromGlobal(point)
        if not target.rect().contains(local):
            return -1
        return to_utf16(target.toPlainText(), target.offset_at(QPointF(local)))

    def scrollToSubstring(self, startIndex: int, endIndex: int) -> None:
        """The transcript keeps its own scroll position; nothing to do here."""


# notifications ------------------------------------------------------------------------------
def active() -> bool:
    """Whether an assistive technology is listening (the notifications cost nothing if not)."""
    return bool(QAccessible.isActive())


def _post(event: QAccessibleEvent) -> None:
    QAccessible.updateAccessibility(event)


def notify_inserted(widget: QWidget, position: int, text: str) -> None:
    """``text`` was inserted at ``position`` (a str index, usually the old end)."""
    if not text or not QAccessible.isActive():
        return
    whole = widget.toPlainText()  # type: ignore[attr-defined]
    at = to_utf16(whole, position)
    event = QAccessibleTextInsertEvent(widget, at, text)
    _post(event)


def notify_reset(widget: QWidget, old_text: str = "") -> None:
    """All the text was replaced (``old_text``: what it was, when known)."""
    if not QAccessible.isActive():
        return
    event = QAccessibleTextUpdateEvent(widget, 0, old_text, widget.toPlainText())  # type: ignore[attr-defined]
    _post(event)


def notify_selection(widget: QWidget, start: int, end: int) -> None:
    """The selection became [start, end) (str indices, either order; equal: none)."""
    if not QAccessible.isActive():
        return
    iface = QAccessible.queryAccessibleInterface(widget)
    whole = widget.toPlainText()  # type: ignore[attr-defined]
    length = len(whole)
    low, high = sorted((max(0, min(start, length)), max(0, min(end, length))))
    caret = max(0, min(end, length))
    if isinstance(iface, TextAccessible):
        iface.caret = caret
    event = QAccessibleTextSelectionEvent(widget, to_utf16(whole, low), to_utf16(whole, high))
    event.setCursorPosition(to_utf16(whole, caret))
    _post(event)
