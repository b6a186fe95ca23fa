"""Streaming text whose cost per appended token does not depend on how long the text is.

A QTextEdit/QTextDocument was the first version: its layout and paint walk the whole document,
so a flush at 10,000 tokens cost ~6x one at 100 (bench/render.py). Here the text is a list of
pieces, each its own QTextLayout with its top cached:

- appending lays out only the last piece; a piece that has grown past ``FREEZE_LINES`` lines
  is split after its last full line, so the live piece stays short even when a model never
  writes a newline (the split is exact: greedy line breaking gives the frozen lines again);
- painting finds the first visible piece by bisection and draws only what the paint rect
  touches;
- the widget reports how much taller it is about to become *before* it invalidates anything
  (``before_grow``), so a transcript that follows the reply can blit its view up first and only
  the new strip is painted (``Transcript.prescroll``).

On a width change every piece is laid out again from the joined paragraphs (rare, and linear).
Text can be selected with the mouse while it streams (drag, double-click a word, Ctrl+A) and
copied (Ctrl+C or the context menu); offsets are those of ``toPlainText()``.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable

from PySide6.QtCore import QPointF, QRect, QRectF, QSize, Qt
from PySide6.QtGui import (
    QContextMenuEvent,
    QFont,
    QFontMetricsF,
    QGuiApplication,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QResizeEvent,
    QTextLayout,
    QTextOption,
)
from PySide6.QtWidgets import QMenu, QSizePolicy, QWidget

from desktop.ui.markdown import text_access
from desktop.ui.markdown.text_keys import copy_keys, word_bounds

FREEZE_LINES = 12  # the live piece is split once it wraps to more lines than this


def text_height(text: str, font: QFont, width: int) -> int:
    """The height a ``StreamText`` of ``width`` and ``font`` takes for ``text``, without one
    (the same line breaking; its long-paragraph split changes no line)."""
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    line_height = QFontMetricsF(font).height()
    total = 0.0
    for paragraph in text.split("\n"):
        if not paragraph:
            total += line_height
            continue
        layout = QTextLayout(paragraph, font)
        layout.setTextOption(option)
        layout.beginLayout()
        while True:
            line = layout.createLine()
            if not line.isValid():
                break
            line.setLineWidth(float(max(1, width)))
            total += line.height()
        layout.endLayout()
    return content_height(total, line_height)


def content_height(bottom: float, line: float) -> int:
    """A text widget's height for content ending at ``bottom``: at least a ``line``, 2 px
    under."""
    return max(math.ceil(bottom), math.ceil(line)) + 2


def fit_height(widget: QWidget, height: int) -> bool:
    """Fix ``widget``'s height at ``height``; whether that changed it."""
    if widget.height() == height:
        return False
    widget.setFixedHeight(height)
    return True


class _Piece:
    __slots__ = ("continues", "height", "layout", "text", "top")

    def __init__(self, text: str, continues: bool = False) -> None:
        self.text = text
        self.continues = continues  # True: the next piece is the rest of the same paragraph
        self.layout: QTextLayout | None = None
        self.top = 0.0
        self.height = 0.0


class StreamText(QWidget):
    """Read-only plain text that grows at the end; as tall as its content."""

    accessible_text = True  # text_access gives it a screen reader's text interface

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("StreamText")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        # Resizing only exposes the new strip at the bottom; the rest of the text stays put.
        self.setAttribute(Qt.WidgetAttribute.WA_StaticContents, True)
        self._pieces: list[_Piece] = [_Piece("")]
        self._tops: list[float] = [0.0]  # parallel to _pieces, for bisection
        self._length = 0
        self._width = -1
        self._option = QTextOption()
        self._option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.before_grow: Callable[[int], None] | None = None
        self._selection: tuple[int, int] | None = None  # [start, end) in toPlainText()
        self._press_at: int | None = None
        self.setCursor(Qt.CursorShape.IBeamCursor)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.DefaultContextMenu)
        self._fit()

    # text -------------------------------------------------------------------------------------
    def toPlainText(self) -> str:
        parts: list[str] = []
        for piece in self._pieces:
            parts.append(piece.text)
            if not piece.continues:
                parts.append("\n")
        return "".join(parts)[:-1]

    @property
    def length(self) -> int:
        return self._length

    @property
    def piece_count(self) -> int:
        return len(self._pieces)

    def set_all(self, text: str) -> None:
        old = self.toPlainText() if text_access.active() else ""
        self._pieces = [_Piece(p) for p in text.split("\n")]
        self._length = len(text)
        self._relayout_all()
        self.update()
        text_access.notify_reset(self, old)

    def append_text(self, text: str) -> bool:
        """Add text at the end; True when that made the widget taller."""
        if not text:
            return False
        self._length += len(text)
        first = len(self._pieces) - 1
        old_bottom = self._bottom()
        lines = text.split("\n")
        self._pieces[-1].text += lines[0]
        self._pieces.extend(_Piece(p) for p in lines[1:])
        if self._width > 0:
            self._layout_from(first)
            first = self._freeze_long_tail(first)
        changed_top = self._pieces[first].top if first < len(self._pieces) else old_bottom
        grow = math.ceil(self._bottom()) - math.ceil(old_bottom)
        if grow > 0 and self.before_grow is not None:
            self.before_grow(grow)
        self.update(QRect(0, int(changed_top), self.width(), self.height() - int(changed_top)))
        grew = self._fit()
        text_access.notify_inserted(self, self._length - len(text), text)
        return grew

    # layout -----------------------------------------------------------------------------------
    def _line_width(self) -> float:
        return float(max(1, self._width))

    def _layout_piece(self, piece: _Piece, top: float) -> None:
        layout = QTextLayout(piece.text, self.font())
        layout.setTextOption(self._option)
        layout.setCacheEnabled(True)
        layout.beginLayout()
        height = 0.0
        width = self._line_width()
        while True:
            line = layout.createLine()
            if not line.isValid():
                break
            line.setLineWidth(width)
            line.setPosition(QPointF(0, height))
            height += line.height()
        layout.endLayout()
        piece.layout = layout
        piece.top = top
        piece.height = height if piece.text else QFontMetricsF(self.font()).height()

    def _layout_from(self, index: int) -> None:
        top = self._pieces[index - 1].top + self._pieces[index - 1].height if index else 0.0
        del self._tops[index:]
        for piece in self._pieces[index:]:
            self._layout_piece(piece, top)
            self._tops.append(top)
            top += piece.height

    def _freeze_long_tail(self, first: int) -> int:
        """Split the last piece after its last full line once it wraps past FREEZE_LINES."""
        tail = self._pieces[-1]
        layout = tail.layout
        if layout is None or layout.lineCount() <= FREEZE_LINES:
            return first
        cut = layout.lineAt(layout.lineCount() - 1).textStart()
        if cut <= 0:
            return first
        head = _Piece(tail.text[:cut], continues=True)
        rest = _Piece(tail.text[cut:])
        self._pieces[-1:] = [head, rest]
        index = len(self._pieces) - 2
        self._layout_from(index)
        return min(first, index)

    def _relayout_all(self) -> None:
        if self._width <= 0:
            return
        paragraphs: list[str] = []
        current = ""
        for piece in self._pieces:
            current += piece.text
            if not piece.continues:
                paragraphs.append(current)
                current = ""
        self._pieces = [_Piece(p) for p in paragraphs] or [_Piece("")]
        self._tops = []
        self._layout_from(0)
        while True:  # long paragraphs are kept as frozen pieces + a short tail
            before = len(self._pieces)
            self._freeze_long_tail(len(self._pieces) - 1)
            if len(self._pieces) == before:
                break
        self._fit()

    def _bottom(self) -> float:
        last = self._pieces[-1]
        return last.top + last.height if self._width > 0 else 0.0

    def _fit(self) -> bool:
        line = QFontMetricsF(self.font()).height()
        return fit_height(self, content_height(self._bottom(), line))

    def sizeHint(self) -> QSize:
        return QSize(200, self.height())

    # events -----------------------------------------------------------------------------------
    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != self._width:
            self._width = event.size().width()
            self._relayout_all()
            self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        if self._width <= 0:
            return
        rect = event.rect()
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        clip = QRectF(rect)
        bottom = rect.bottom() + 1
        pieces = self._pieces
        first = max(0, bisect_right(self._tops, rect.top()) - 1)
        starts = self._starts() if self._selection else None
        for index in range(first, len(pieces)):
            piece = pieces[index]
            if piece.top > bottom:
                break
            if piece.layout is not None:
                ranges = self._selection_ranges(piece, starts[index]) if starts else []
                # the clip (painter coordinates) makes draw() skip lines outside it
                piece.layout.draw(painter, QPointF(0, piece.top), ranges, clip)
        painter.end()

    # selection --------------------------------------------------------------------------------
    def _starts(self) -> list[int]:
        """Where each piece begins in toPlainText()."""
        starts: list[int] = []
        at = 0
        for piece in self._pieces:
            starts.append(at)
            at += len(piece.text) + (0 if piece.continues else 1)
        return starts

    def _selection_ranges(self, piece: _Piece, start: int) -> list[QTextLayout.FormatRange]:
        assert self._selection is not None
        low, high = self._selection
        a, b = max(low, start), min(high, start + len(piece.text))
        if a >= b:
            return []
        selected = QTextLayout.FormatRange()
        selected.start, selected.length = a - start, b - a
        palette = self.palette()
        selected.format.setBackground(palette.color(QPalette.ColorRole.Highlight))
        selected.format.setForeground(palette.color(QPalette.ColorRole.HighlightedText))
        return [selected]

    def offset_at(self, point: QPointF) -> int:
        """The toPlainText() offset nearest a point in the widget."""
        if self._width <= 0:
            return 0
        index = max(0, bisect_right(self._tops, point.y()) - 1)
        piece = self._pieces[index]
        start = self._starts()[index]
        layout = piece.layout
        if layout is None or layout.lineCount() == 0:
            return start
        y = point.y() - piece.top
        line = layout.lineAt(layout.lineCount() - 1)
        for n in range(layout.lineCount()):
            candidate = layout.lineAt(n)
            if y < candidate.y() + candidate.height():
                line = candidate
                break
        return start + min(len(piece.text), line.xToCursor(point.x()))

    @property
    def selected_text(self) -> str:
        if not self._selection:
            return ""
        low, high = self._selection
        return self.toPlainText()[low:high]

    def select(self, start: int, end: int) -> None:
        low, high = sorted((max(0, start), max(0, end)))
        self._selection = (low, min(high, self._length)) if high > low else None
        self.update()
        text_access.notify_selection(self, start, end)

    def selection_range(self) -> tuple[int, int] | None:
        return self._selection

    def accessible_label(self) -> str:
        return self.accessibleName()

    def cursor_rect(self, offset: int) -> QRect:
        """The box of the character at ``offset`` (widget coordinates; null past the end)."""
        if self._width <= 0 or not 0 <= offset < self._length:
            return QRect()
        starts = self._starts()
        index = bisect_right(starts, offset) - 1
        piece, local = self._pieces[index], offset - starts[index]
        layout = piece.layout
        if layout is None or layout.lineCount() == 0:
            return QRect(0, int(piece.top), 1, math.ceil(piece.height))
        line = layout.lineForTextPosition(min(local, len(piece.text)))
        if not line.isValid():
            line = layout.lineAt(layout.lineCount() - 1)
        # PySide6's stub types cursorToX as returning object; it returns (x, position)
        left: float = line.cursorToX(local)[0]  # type: ignore[index]
        right: float = left + 1
        if local < len(piece.text):
            right = line.cursorToX(local + 1)[0]  # type: ignore[index]
        top = piece.top + line.y()
        return QRect(
            math.floor(min(left, right)),
            math.floor(top),
            max(1, math.ceil(abs(right - left))),
            math.ceil(line.height()),
        )

    def select_all(self) -> None:
        self.select(0, self._length)

    def copy(self) -> None:
        if self.selected_text:
            QGuiApplication.clipboard().setText(self.selected_text)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self._press_at = self.offset_at(event.position())
            self.select(self._press_at, self._press_at)
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._press_at is not None:
            self.select(self._press_at, self.offset_at(event.position()))

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        self._press_at = None
        super().mouseReleaseEvent(event)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        text = self.toPlainText()
        at = self.offset_at(event.position())
        self.select(*word_bounds(text, at))

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if not copy_keys(event, self.copy, self.select_all):
            super().keyPressEvent(event)

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        menu = QMenu(self)
        copy = menu.addAction("Copy", self.copy)
        copy.setEnabled(bool(self._selection))
        menu.addAction("Select all", self.select_all)
        menu.exec(event.globalPos())

    def dispose(self) -> None:
        self.before_grow = None
        self.hide()
        self.deleteLater()
