"""A reply as rendered Markdown, while it streams and after: finished blocks painted, the live
tail plain.

Text goes through ``BlockSplitter``: each block it finishes becomes a ``BlockItem`` (its
document built and laid out once; it never changes again), and the unfinished block, the
tail, is a ``StreamText`` child placed below them (cost per flush independent of the reply's
length; an open code fence streams as monospace text in a code box). A stored reply is the same
split of the same text, so a finished bubble and one rendered from the store are the same
pixels. ``finish()`` turns the tail into its block.

Painting bisects the item tops and draws only what the paint rect touches. A width change:
``md_layout.py`` (what is on screen first, the rest when idle). Selection, copy and the text
as one string for screen readers: ``md_select.py``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from PySide6.QtCore import (
    QEvent,
    QRect,
    QRectF,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import (
    QGuiApplication,
    QPainter,
    QPaintEvent,
    QResizeEvent,
)
from PySide6.QtWidgets import QSizePolicy, QToolButton, QWidget

from desktop.chat.md_blocks import Block, BlockSplitter
from desktop.ui.kit.theme import current_colors
from desktop.ui.markdown import text_access
from desktop.ui.markdown.layout import LazyLayout
from desktop.ui.markdown.render import (
    CODE_PAD_X,
    CODE_PAD_Y,
    GAP,
    BlockItem,
    Style,
    citation_number,
    paint_code_frame,
)
from desktop.ui.markdown.select import BlockSelection, Pos
from desktop.ui.markdown.stream_text import StreamText, content_height, fit_height, text_height


class _Tail(StreamText):
    """The live tail: painted and selected through its view, which also speaks for it to
    screen readers (one text, not two)."""

    accessible_text = False


class MarkdownView(BlockSelection, LazyLayout, QWidget):
    """Read-only Markdown that grows at the end; as tall as its content.

    Signals:
        citation_clicked(int): a citation "[n]" of one of the sources given to
            ``set_citations`` was clicked (n).
    """

    citation_clicked = Signal(int)
    accessible_text = True  # desktop.ui.markdown.text_access exposes it to screen readers

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("MarkdownView")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setAttribute(Qt.WidgetAttribute.WA_StaticContents, True)
        self.setCursor(Qt.CursorShape.IBeamCursor)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self.setMouseTracking(True)
        self.before_grow: Callable[[int], None] | None = None
        self._style: Style | None = None
        self._width = -1
        self._items: list[BlockItem] = []
        self._tops: list[float] = []
        self._source: list[str] = []
        self._splitter = BlockSplitter()
        self._finished = False
        self._tail_widget: _Tail | None = None  # built when a reply has a tail (it streams)
        self._tail_block: Block | None = None
        self._tail_shown = 0  # characters of the tail's display text already in the widget
        self._selection: tuple[Pos, Pos] | None = None
        self._press: Pos | None = None
        self._pressed_link = ""
        self._lazy = QTimer(self)
        self._lazy.setInterval(0)
        self._lazy.timeout.connect(self._layout_slice)
        self._copied: QToolButton | None = None  # the Copy button that says "Copied" now
        self._copied_timer = QTimer(self)
        self._copied_timer.setSingleShot(True)
        self._copied_timer.setInterval(1500)
        self._copied_timer.timeout.connect(self._reset_copied)
        self._citations: dict[int, str] = {}  # source number -> its words (set_citations)
        self._fit()

    # content ----------------------------------------------------------------------------------
    @property
    def _tail(self) -> _Tail:
        """The live tail's widget, built the first time a reply has one (a stored reply that
        ends in a finished block never does)."""
        if self._tail_widget is None:
            tail = self._tail_widget = _Tail(self)
            tail.setObjectName("MarkdownTail")
            tail.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents, True)
            tail.before_grow = self._tail_grows
            tail.hide()
        return self._tail_widget

    @property
    def style_(self) -> Style:
        if self._style is None:
            self._style = Style(self.font(), current_colors())
            self._style.citations = frozenset(self._citations)
        return self._style

    def set_citations(self, sources: dict[int, str]) -> None:
        """The reply's sources by number, each with the words its tooltip says: "[n]" in the
        finished prose links to source n (``citation_clicked``); the live tail stays text."""
        if sources == self._citations:
            return
        self._citations = dict(sources)
        if self._style is None:
            return  # nothing rendered yet
        self._style.citations = frozenset(sources)
        dropped = False
        for item in self._items:
            if not item.is_code and item.doc is not None and "[" in item.block.source:
                item.drop_document()
                dropped = True
        if dropped:
            self._relayout()
            self.update()

    def follow_link(self, link: str) -> None:
        number = citation_number(link)
        if number is None:
            super().follow_link(link)
        elif number in self._citations:
            self.citation_clicked.emit(number)

    def link_tip(self, link: str) -> str:
        number = citation_number(link)
        if number is None:
            return super().link_tip(link)
        return self._citations.get(number, "")

    @property
    def source(self) -> str:
        """The Markdown as written so far."""
        if len(self._source) > 1:
            self._source = ["".join(self._source)]
        return self._source[0] if self._source else ""

    @property
    def items(self) -> list[BlockItem]:
        return self._items

    @property
    def tail_text(self) -> str:
        return self._tail.toPlainText() if self._tail_block is not None else ""

    @property
    def finished(self) -> bool:
        return self._finished

    def set_text(self, text: str, finished: bool) -> None:
        """Show ``text`` from scratch (a stored reply, or a bubble built mid-stream)."""
        self._lazy.stop()
        self._drop_items(0)
        self._selection = None
        self._source = [text] if text else []
        self._splitter = BlockSplitter()
        self._finished = False
        blocks = self._splitter.feed(text)
        if finished:
            blocks += self._splitter.finish()
            self._finished = True
        self._items = [BlockItem(b) for b in blocks]
        self._tail_block, self._tail_shown = None, 0
        self._sync_tail(force=True)
        self._relayout()
        self.update()
        text_access.notify_reset(self)

    def append_text(self, text: str) -> bool:
        """Add streamed text at the end; True when that made the view taller.

        Nothing is marked dirty before ``before_grow`` (a transcript that follows the reply
        blits its view up then, and anything dirty would be painted twice): growth within the
        same tail is announced by the tail itself; a new block or a new tail is measured first.
        """
        if not text or self._finished:
            return False
        self._source.append(text)
        first_new = len(self._items)
        shown = self._tail_shown
        for block in self._splitter.feed(text):
            self._add_item(block, place=False)
        if not self._continues_tail():
            self._announce_growth(self._measured_bottom())
            self._sync_tail(force=True)
        else:
            self._sync_tail(force=False)  # StreamText calls before_grow (_tail_grows) itself
        if len(self._items) != first_new:
            for item in self._items[first_new:]:
                self._place_copy_button(item)
            top = int(self._items[first_new].top) if self._width > 0 else 0
            self.update(QRect(0, top, self.width(), self.height() - top + 1000))
        if text_access.active():  # a screen reader listens: say what changed
            if len(self._items) != first_new or self._tail_shown < shown:
                text_access.notify_reset(self)
            else:
                whole = self.toPlainText()
                added = self._tail_shown - shown
                text_access.notify_inserted(self, len(whole) - added, whole[len(whole) - added :])
        # Grow only while streaming: a block that renders shorter than its plain tail leaves
        # room the next text fills, instead of pulling the view down (a whole-screen repaint).
        return self._fit(grow_only=True)

    def _continues_tail(self) -> bool:
        """Whether the splitter's tail is the one shown, grown at its end (same kind, font)."""
        tail, shown = self._splitter.tail, self._tail_block
        return (
            tail is not None
            and shown is not None
            and shown.start == tail.start
            and shown.kind == tail.kind
            and len(tail.code if tail.kind == "code" else tail.source) >= self._tail_shown
        )

    def _measured_bottom(self) -> float:
        """Where the content will end once the splitter's tail is shown (measured, not laid)."""
        tail = self._splitter.tail
        top = self._tail_top()
        if tail is None or self._width <= 0:
            return top - GAP if self._items else 0.0
        style = self.style_
        if tail.kind == "code":
            width = self._width - 2 * CODE_PAD_X - 2
            frame = style.header + 2 * CODE_PAD_Y + 2
            return top + frame + text_height(tail.code, style.mono, width) - 2
        return top + text_height(tail.source, style.font, self._width) - 2

    def _announce_growth(self, bottom: float) -> None:
        wanted = max(self.height(), self._height_for(bottom))
        if wanted > self.height() and self.before_grow is not None:
            self.before_grow(wanted - self.height())

    def _tail_grows(self, pixels: int) -> None:
        """The tail is about to be ``pixels`` taller (its own before_grow)."""
        self._announce_growth(self._bottom() + pixels)

    def finish(self) -> None:
        """The reply ended: its tail becomes a finished block."""
        if self._finished:
            return
        for block in self._splitter.finish():
            self._add_item(block)
        self._finished = True
        self._sync_tail(force=True)
        self._fit()
        self.update()
        text_access.notify_reset(self)

    def code_items(self) -> list[BlockItem]:
        return [item for item in self._items if item.is_code]

    # items and tail ---------------------------------------------------------------------------
    def _add_item(self, block: Block, place: bool = True) -> None:
        item = BlockItem(block)
        index = len(self._items)
        self._items.append(item)
        item.top = self._next_top(index)
        self._tops.append(item.top)
        if self._width > 0:
            item.layout(self._width, self.style_)
            if place:
                self._place_copy_button(item)

    def _drop_items(self, index: int) -> None:
        for item in self._items[index:]:
            if item.copy_button is not None:
                item.copy_button.deleteLater()
        del self._items[index:]
        del self._tops[index:]

    def _next_top(self, index: int) -> float:
        if index == 0:
            return 0.0
        before = self._items[index - 1]
        return before.top + before.height + GAP

    def _sync_tail(self, force: bool) -> None:
        tail = self._splitter.tail
        if tail is None:
            self._tail_block, self._tail_shown = None, 0
            if self._tail_widget is not None:
                self._tail_widget.set_all("")
                self._tail_widget.hide()
            return
        display = tail.code if tail.kind == "code" else tail.source
        same = not force and self._continues_tail()
        was_code = self._tail_block is not None and self._tail_block.kind == "code"
        self._tail_block = tail
        style = self.style_
        font = style.mono if tail.kind == "code" else style.font
        if self._tail.font() != font:
            self._tail.setFont(font)
            same = False
        if same:
            self._tail.append_text(display[self._tail_shown :])
        else:
            self._tail.set_all(display)
        self._tail_shown = len(display)
        self._place_tail()
        self._tail.show()
        if was_code != (tail.kind == "code"):  # the code box appears or goes: paint from there
            top = int(self._tail_top())
            self.update(QRect(0, top, self.width(), max(0, self.height() - top) + 1000))

    def _tail_top(self) -> float:
        return self._next_top(len(self._items))

    def _place_tail(self) -> None:
        if self._tail_block is None or self._width <= 0:
            return
        top = self._tail_top()
        if self._tail_block.kind == "code":
            style = self.style_
            x, y = CODE_PAD_X + 1, top + style.header + CODE_PAD_Y + 1
            width = self._width - 2 * CODE_PAD_X - 2
        else:
            x, y, width = 0, top, self._width
        geometry = QRect(int(x), int(y), int(max(1, width)), self._tail.height())
        if self._tail.geometry() != geometry:
            self._tail.setGeometry(geometry)

    def _tail_height(self) -> float:
        if self._tail_block is None:
            return 0.0
        height = float(self._tail.height() - 2)  # StreamText adds 2 px under its text
        if self._tail_block.kind == "code":
            height += self.style_.header + 2 * CODE_PAD_Y + 2
        return height

    def _bottom(self) -> float:
        if self._width <= 0:
            return 0.0
        if self._tail_block is not None:
            return self._tail_top() + self._tail_height()
        if not self._items:
            return 0.0
        last = self._items[-1]
        return last.top + last.height

    def _height_for(self, bottom: float) -> int:
        """The view's height for content ending at ``bottom`` (at least a line; 2 px under)."""
        return content_height(bottom, self.style_.line)

    def _wanted_height(self, grow_only: bool = False) -> int:
        height = self._height_for(self._bottom())
        return max(height, self.height()) if grow_only else height

    def _fit(self, grow_only: bool = False) -> bool:
        return fit_height(self, self._wanted_height(grow_only))

    def sizeHint(self) -> QSize:
        return QSize(200, self.height())

    def _place_copy_button(self, item: BlockItem) -> None:
        if not item.is_code:
            return
        button = item.copy_button
        if button is None:
            button = QToolButton(self)
            button.setObjectName("CodeCopy")
            button.setText("Copy")
            button.setToolTip("Copy this code")
            button.setAccessibleName(f"Copy this {item.block.language or 'code'} code")
            button.setAutoRaise(True)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(lambda _=False, it=item: self._copy_code(it))
            item.copy_button = button
            button.show()
        size = button.sizeHint()
        header = self.style_.header
        button.setGeometry(
            int(self._width - size.width() - 4),
            int(item.top + (header - size.height()) / 2 + 1),
            size.width(),
            size.height(),
        )

    def _copy_code(self, item: BlockItem) -> None:
        QGuiApplication.clipboard().setText(item.block.code)
        button = item.copy_button
        if button is not None:
            button.setText("Copied")
            self._copied = button
            self._copied_timer.start()

    def _reset_copied(self) -> None:
        if self._copied is not None:
            self._copied.setText("Copy")
            self._copied = None

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != self._width:
            self._width = event.size().width()
            self._relayout()
            self.update()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        kind = event.type()
        if kind in (QEvent.Type.PaletteChange, QEvent.Type.StyleChange, QEvent.Type.FontChange):
            colors = current_colors()
            style = self._style
            if style is None or style.colors != colors or style.font != self.font():
                self._style = None
                for item in self._items:
                    item.drop_document()
                self._sync_tail(force=True)
                self._relayout()
                self.update()

    # painting ---------------------------------------------------------------------------------
    def paintEvent(self, event: QPaintEvent) -> None:
        if self._width <= 0:
            return
        rect = QRectF(event.rect())
        style = self.style_
        palette = self.palette()
        painter = QPainter(self)
        first = max(0, bisect_right(self._tops, rect.top()) - 1)
        for index in range(first, len(self._items)):
            item = self._items[index]
            if item.top > rect.bottom():
                break
            if item.top + item.height < rect.top():
                continue
            painter.save()
            painter.translate(0, item.top)
            clip = rect.translated(0, -item.top)
            item.paint(painter, clip, style, palette, self._item_selection(index))
            painter.restore()
        tail = self._tail_block
        if tail is not None and tail.kind == "code":
            top = self._tail_top()
            painter.translate(0, top)
            paint_code_frame(painter, self._width, self._tail_height(), tail.language, style)
        painter.end()

    def dispose(self) -> None:
        self.before_grow = None
        self._lazy.stop()
        self.hide()
        self.deleteLater()
