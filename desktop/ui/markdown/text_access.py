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

What PySide6 (6.11) does not bind: ``QAccessibleTextInterface.selection()`` and
``attributes()`` (out-parameters). Its ``selection()`` stub leaves the offsets untouched, so
a bridge would read garbage; on Linux the stub is replaced in C++ (``_NativeSelection``), and
elsewhere the selection still reaches assistive technology through the selection events
(``notify_selection``: the event carries start and end). ``attributes()`` answers no
attributes. ``textAtOffset`` / ``textBeforeOffset`` / ``textAfterOffset`` are Qt's own
defaults over ``text()``: characters, words and sentences as QTextBoundaryFinder finds them;
lines and paragraphs both end at a newline (not at a wrap).

Notifications (``notify_inserted``, ``notify_reset``, ``notify_selection``) build and post an
event only while ``QAccessible.isActive()`` (an assistive technology is listening); otherwise
they return at once, so a streaming reply may call them on every flush.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import sys
import weakref
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

log = logging.getLogger(__name__)

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
        _native_selection.adopt(self)

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
        other = QAccessibleWidget.interface_cast(self, t)
        # None (no such interface) must go back as a null void*: anything but a VoidPtr here
        # makes the binding fail inside the bridge's call (a crash, not an exception)
        return other if isinstance(other, shiboken6.VoidPtr) else shiboken6.VoidPtr(0)  # type: ignore[return-value]

    # children: parts the widget speaks for (``accessible_text = False``) are left out, so a
    # screen reader meets one text, not the text and an unnamed piece of it
    def _children(self) -> list[Any]:
        found = []
        for index in range(QAccessibleWidget.childCount(self)):
            kid = QAccessibleWidget.child(self, index)
            if kid is not None and getattr(type(kid.object()), MARKER, None) is not False:
                found.append(kid)
        return found

    def childCount(self) -> int:
        return len(self._children())

    def child(self, index: int) -> Any:
        kids = self._children()
        return kids[index] if 0 <= index < len(kids) else None

    def indexOfChild(self, child: Any) -> int:
        target = child.object() if child is not None else None
        for index, kid in enumerate(self._children()):
            if kid.object() is target:
                return index
        return -1

    def childAt(self, x: int, y: int) -> Any:
        kid = QAccessibleWidget.childAt(self, x, y)
        if kid is None or getattr(type(kid.object()), MARKER, None) is False:
            return None  # over a part: the point is this text's
        return kid

    def text(self, *args: Any) -> str:
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
        caret = min(self.caret, len(whole))
        chosen = target.selection_range()
        if chosen and caret not in chosen:  # selected before anyone listened: its end
            caret = chosen[1]
        return to_utf16(whole, caret)

    def selection_utf16(self) -> tuple[int, int] | None:
        """The selection in UTF-16 offsets (what ``selection(0)`` answers in C++)."""
        chosen = self._target().selection_range()
        if not chosen:
            return None
        whole = self._target().toPlainText()
        return to_utf16(whole, chosen[0]), to_utf16(whole, chosen[1])

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


# selection() in C++ ------------------------------------------------------------------------
class _NativeSelection:
    """``QAccessibleTextInterface::selection(int, int*, int*)`` for C++ callers.

    PySide6 does not bind it (out-parameters), and its stub leaves the offsets as they were:
    the AT-SPI bridge then reads uninitialised ints for GetSelection (seen: (32534,
    1368090821) for a selection of 6..11). On Linux (Itanium C++ ABI) the stub's slot in the
    binding's QAccessibleTextInterface vtable (slot 2, after the two destructors; Qt keeps
    this layout for all of Qt 6) is replaced once by a ctypes function that answers from the
    interface's ``selection_utf16()``, or -1/-1 (no selection) for any other object. The slot
    is only replaced when it points into PySide6's QtGui binding (the stub), never elsewhere.
    """

    SLOT = 2

    def __init__(self) -> None:
        self._by_address: weakref.WeakValueDictionary[int, TextAccessible] = (
            weakref.WeakValueDictionary()
        )
        self._state = "unpatched"  # "patched", or "unsupported" after a refusal
        prototype = ctypes.CFUNCTYPE(
            None,
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_int),
        )
        self._function = prototype(self._selection)  # kept alive as long as the module

    @property
    def patched(self) -> bool:
        return self._state == "patched"

    def adopt(self, iface: TextAccessible) -> None:
        address = int(shiboken6.getCppPointer(iface)[1])
        self._by_address[address] = iface
        if self._state == "unpatched":
            self._state = "patched" if self._patch(address) else "unsupported"

    def _selection(self, this: int | None, index: int, start: Any, end: Any) -> None:
        low = high = -1
        iface = self._by_address.get(this or 0)
        if iface is not None and index == 0:
            try:
                chosen = iface.selection_utf16()
            except Exception:  # a deleted widget: no selection
                chosen = None
            if chosen:
                low, high = chosen
        if start:
            start[0] = low
        if end:
            end[0] = high

    def _patch(self, text_part: int) -> bool:
        if not sys.platform.startswith("linux") or platform.machine() not in (
            "x86_64",
            "aarch64",
        ):
            return False
        try:
            table = ctypes.c_void_p.from_address(text_part).value or 0
            slot = table + self.SLOT * ctypes.sizeof(ctypes.c_void_p)
            current = ctypes.c_void_p.from_address(slot).value or 0
            maps = _mappings()
            owner = next((m for m in maps if m[0] <= current < m[1]), None)
            page = next((m for m in maps if m[0] <= slot < m[1]), None)
            if owner is None or page is None or "PySide6/QtGui" not in owner[3]:
                log.warning("text_access: unexpected vtable; selection() left as PySide6's")
                return False
            size = os.sysconf("SC_PAGE_SIZE")
            base = slot & ~(size - 1)
            libc = ctypes.CDLL(None, use_errno=True)
            libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            read, write = 1, 2  # PROT_READ, PROT_WRITE
            was = read if "r" in page[2] else 0
            was |= write if "w" in page[2] else 0
            if not was & write and libc.mprotect(base, size, read | write) != 0:
                return False
            ctypes.c_void_p.from_address(slot).value = ctypes.cast(
                self._function, ctypes.c_void_p
            ).value
            if not was & write:
                libc.mprotect(base, size, was)
            return True
        except (OSError, ValueError, StopIteration) as error:
            log.warning("text_access: selection() left as PySide6's (%s)", error)
            return False


def _mappings() -> list[tuple[int, int, str, str]]:
    """This process's memory mappings: (start, end, permissions, path)."""
    found = []
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            low, high = (int(x, 16) for x in fields[0].split("-"))
            found.append((low, high, fields[1], fields[5].strip() if len(fields) > 5 else ""))
    return found


_native_selection = _NativeSelection()


# notifications ------------------------------------------------------------------------------
def active() -> bool:
    """Whether an assistive technology is listening (the notifications cost nothing if not)."""
    return bool(QAccessible.isActive())


def _listened(widget: QWidget) -> bool:
    """An assistive technology listens, and ``widget`` speaks for itself (a part that its
    parent speaks for, like MarkdownView's live tail, sets ``accessible_text = False``)."""
    return bool(QAccessible.isActive()) and getattr(type(widget), MARKER, False) is True


def _post(event: QAccessibleEvent) -> None:
    QAccessible.updateAccessibility(event)


def notify_inserted(widget: QWidget, position: int, text: str) -> None:
    """``text`` was inserted at ``position`` (a str index, usually the old end)."""
    if not text or not _listened(widget):
        return
    whole = widget.toPlainText()  # type: ignore[attr-defined]
    at = to_utf16(whole, position)
    event = QAccessibleTextInsertEvent(widget, at, text)
    _post(event)


def notify_reset(widget: QWidget, old_text: str = "") -> None:
    """All the text was replaced (``old_text``: what it was, when known)."""
    if not _listened(widget):
        return
    event = QAccessibleTextUpdateEvent(widget, 0, old_text, widget.toPlainText())  # type: ignore[attr-defined]
    _post(event)


def notify_selection(widget: QWidget, start: int, end: int) -> None:
    """The selection became [start, end) (str indices, either order; equal: none)."""
    if not _listened(widget):
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
