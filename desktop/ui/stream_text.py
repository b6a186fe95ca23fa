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
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable

from PySide6.QtCore import QPointF, QRect, QRectF, QSize, Qt
from PySide6.QtGui import (
    QFontMetricsF,
    QPainter,
    QPaintEvent,
    QResizeEvent,
    QTextLayout,
    QTextOption,
)
from PySide6.QtWidgets import QSizePolicy, QWidget

FREEZE_LINES = 12  # the live piece is split once it wraps to more lines than this


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
        self._pieces = [_Piece(p) for p in text.split("\n")]
        self._length = len(text)
        self._relayout_all()
        self.update()

    def append_text(self, text: str) -> None:
        if not text:
            return
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
        self._fit()

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

    def _fit(self) -> None:
        line = math.ceil(QFontMetricsF(self.font()).height())
        height = max(math.ceil(self._bottom()), line) + 2
        if self.height() != height:
            self.setFixedHeight(height)

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
        for index in range(max(0, bisect_right(self._tops, rect.top()) - 1), len(pieces)):
            piece = pieces[index]
            if piece.top > bottom:
                break
            if piece.layout is not None:
                # the clip (painter coordinates) makes draw() skip lines outside it
                piece.layout.draw(painter, QPointF(0, piece.top), [], clip)
        painter.end()

    def dispose(self) -> None:
        self.before_grow = None
        self.hide()
        self.deleteLater()
