"""Selection, copy and the text as one string, for ``MarkdownView`` (a mixin).

A position is (item index, offset in that item's plain text); index ``len(items)`` is the live
tail. Selection runs across blocks (drag, double-click a word, Ctrl+A); Ctrl+C and "Copy" give
plain text, "Copy as Markdown" the source (a whole block's own source, Qt's Markdown of a
part). Links open on a click, never on hover. For screen readers
(``desktop.ui.markdown.text_access``) the same text is one string: rendered blocks and the
tail separated by a blank line.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, QRect, Qt, QUrl
from PySide6.QtGui import (
    QContextMenuEvent,
    QDesktopServices,
    QGuiApplication,
    QKeyEvent,
    QMouseEvent,
)
from PySide6.QtWidgets import QMenu

from desktop.ui.markdown import text_access
from desktop.ui.markdown.text_keys import copy_keys, word_bounds

if TYPE_CHECKING:
    from PySide6.QtWidgets import QWidget

    from desktop.ui.markdown.render import BlockItem, Style
    from desktop.ui.markdown.stream_text import StreamText

# What mypy checks the mixin against: the QWidget it is mixed into (at run time, no base).
if TYPE_CHECKING:
    _Widget = QWidget
else:
    _Widget = object

Pos = tuple[int, int]  # (item index, offset in its text); index len(items) is the tail


def open_link(url: str) -> None:
    """Links open in the system browser, and only when clicked (never on hover or render)."""
    qurl = QUrl(url)
    if qurl.scheme() in ("http", "https", "mailto"):
        QDesktopServices.openUrl(qurl)


class BlockSelection(_Widget):
    """Mixed into ``MarkdownView`` (before QWidget), which holds the state it reads."""

    _items: list[BlockItem]
    _tops: list[float]
    _tail_block: object | None
    _selection: tuple[Pos, Pos] | None
    _press: Pos | None
    _pressed_link: str

    if TYPE_CHECKING:

        @property
        def _tail(self) -> StreamText: ...

        @property
        def style_(self) -> Style: ...
        def _tail_top(self) -> float: ...

    # selection --------------------------------------------------------------------------------
    def _item_selection(self, index: int) -> tuple[int, int] | None:
        if self._selection is None:
            return None
        (a_index, a_off), (b_index, b_off) = sorted(self._selection)
        if index < a_index or index > b_index:
            return None
        start = a_off if index == a_index else 0
        end = b_off if index == b_index else 1 << 30
        return (start, end)

    def pos_at(self, point: QPointF) -> Pos:
        """The (item, offset) nearest a point in the view; past the items, the tail."""
        style = self.style_
        if self._tail_block is not None and point.y() >= self._tail_top():
            local = point - QPointF(self._tail.geometry().topLeft())
            return (len(self._items), self._tail.offset_at(local))
        if not self._items:
            return (0, 0)
        index = max(0, bisect_right(self._tops, point.y()) - 1)
        item = self._items[index]
        if point.y() > item.top + item.height:  # in the gap below it
            return (index, item.length)
        return (index, item.offset_at(point - QPointF(0, item.top), style))

    def select_pos(self, start: Pos, end: Pos) -> None:
        self._selection = (start, end) if start != end else None
        low, high = sorted((start, end))
        tail = len(self._items)
        if self._selection is None or high[0] < tail:
            self._tail.select(0, 0)
        else:
            self._tail.select(low[1] if low[0] == tail else 0, high[1])
        self.update()
        if text_access.active():
            text_access.notify_selection(self, self._to_offset(start), self._to_offset(end))

    def select_all(self) -> None:
        self.select_pos((0, 0), (len(self._items), self._tail.length))

    def has_selection(self) -> bool:
        return self._selection is not None

    def selected_text(self, markdown: bool = False) -> str:
        if self._selection is None:
            return ""
        (a_index, a_off), (b_index, b_off) = sorted(self._selection)
        parts: list[str] = []
        for index in range(a_index, min(b_index, len(self._items) - 1) + 1):
            if index >= len(self._items):
                break
            item = self._items[index]
            item.build(self.style_)
            start = a_off if index == a_index else 0
            end = b_off if index == b_index else item.length
            if end > start:
                parts.append(item.markdown(start, end) if markdown else item.copy_text(start, end))
        if b_index >= len(self._items) and self._tail_block is not None:
            start = a_off if a_index == len(self._items) else 0
            parts.append(self._tail.toPlainText()[start:b_off])
        return "\n\n".join(p for p in parts if p)

    def copy(self, markdown: bool = False) -> None:
        text = self.selected_text(markdown)
        if text:
            QGuiApplication.clipboard().setText(text)

    # the text as one string (screen readers: desktop.ui.markdown.text_access) ------------
    def _parts(self) -> list[str]:
        style = self.style_
        parts = []
        for item in self._items:
            item.build(style)
            parts.append(item.plain_text())
        if self._tail_block is not None:
            parts.append(self._tail.toPlainText())
        return parts

    def toPlainText(self) -> str:
        """What is shown, as plain text: blocks rendered (no Markdown marks), the tail as is;
        blocks are separated by a blank line."""
        return "\n\n".join(self._parts())

    def _layout_text(self) -> tuple[list[int], list[int]]:
        """Where each part starts in toPlainText(), and its length (one pass over the parts)."""
        starts, lengths, at = [], [], 0
        for part in self._parts():
            starts.append(at)
            lengths.append(len(part))
            at += len(part) + 2
        return starts, lengths

    def _to_offset(self, pos: Pos) -> int:
        starts, lengths = self._layout_text()
        if pos[0] < len(starts):
            return starts[pos[0]] + pos[1]
        return starts[-1] + lengths[-1] if starts else 0  # past the last part: the end

    def _to_pos(self, offset: int) -> Pos:
        starts, lengths = self._layout_text()
        if not starts:
            return (0, 0)
        index = max(0, bisect_right(starts, offset) - 1)
        return (index, max(0, min(offset - starts[index], lengths[index])))

    def selection_range(self) -> tuple[int, int] | None:
        if self._selection is None:
            return None
        low, high = sorted(self._selection)
        return (self._to_offset(low), self._to_offset(high))

    def select(self, start: int, end: int) -> None:
        self.select_pos(self._to_pos(start), self._to_pos(end))

    def offset_at(self, point: QPointF) -> int:
        return self._to_offset(self.pos_at(point))

    def cursor_rect(self, offset: int) -> QRect:
        index, at = self._to_pos(offset)
        if index >= len(self._items):
            rect = self._tail.cursor_rect(at)
            return rect.translated(self._tail.pos()) if not rect.isNull() else QRect()
        item = self._items[index]
        return item.cursor_rect(at, self.style_).translated(0, item.top).toAlignedRect()

    def accessible_label(self) -> str:
        return self.accessibleName() or "Reply"

    # events -----------------------------------------------------------------------------------
    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self._pressed_link = self._link_at(event.position())
            self._press = self.pos_at(event.position())
            self.select_pos(self._press, self._press)
            self.setFocus(Qt.FocusReason.MouseFocusReason)
            event.accept()
            return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._press is not None and event.buttons() & Qt.MouseButton.LeftButton:
            self.select_pos(self._press, self.pos_at(event.position()))
            return
        link = self._link_at(event.position())
        self.setCursor(Qt.CursorShape.PointingHandCursor if link else Qt.CursorShape.IBeamCursor)
        self.setToolTip(self.link_tip(link))

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        link = self._pressed_link
        self._press, self._pressed_link = None, ""
        if link and self._selection is None and self._link_at(event.position()) == link:
            self.follow_link(link)
        event.accept()

    def follow_link(self, link: str) -> None:
        """A link was clicked (the view's own links, such as citations, are its own)."""
        open_link(link)

    def link_tip(self, link: str) -> str:
        """The tooltip over a link: its address."""
        return link

    def _link_at(self, point: QPointF) -> str:
        if self._tail_block is not None and point.y() >= self._tail_top():
            return ""
        index = max(0, bisect_right(self._tops, point.y()) - 1)
        if index >= len(self._items):
            return ""
        item = self._items[index]
        if item.is_code or point.y() > item.top + item.height:
            return ""
        return item.anchor_at(point - QPointF(0, item.top), self.style_)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        index, at = self.pos_at(event.position())
        if index >= len(self._items):
            text = self._tail.toPlainText()
        else:
            item = self._items[index]
            text = item.plain_text() if not item.is_code else item.block.code
        low, high = word_bounds(text, at)
        self.select_pos((index, low), (index, high))

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if not copy_keys(event, self.copy, self.select_all):
            super().keyPressEvent(event)

    def context_menu(self) -> QMenu:
        menu = QMenu(self)
        selected = self._selection is not None
        menu.addAction("Copy", self.copy).setEnabled(selected)
        menu.addAction("Copy as Markdown", lambda: self.copy(markdown=True)).setEnabled(selected)
        menu.addSeparator()
        menu.addAction("Select all", self.select_all)
        return menu

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        self.context_menu().exec(event.globalPos())
