"""The sidebar's conversation list (model/view: 10,000 rows cost one reset, not 10,000
widgets) and the search results with highlighted hits."""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import (
    QModelIndex,
    QPersistentModelIndex,
    QRect,
    QSize,
    QStringListModel,
    Qt,
)
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import (
    QListView,
    QListWidget,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QWidget,
)

from desktop.store.conversations import Conversation
from desktop.store.search import HIT_END, HIT_START
from desktop.ui.kit.resources import icon
from desktop.ui.kit.safe_document import SafeDocument
from desktop.ui.kit.text_format import relative_time
from desktop.ui.kit.widgets import ID_ROLE, SUBTITLE_ROLE, TwoLineDelegate, paint_row_background

PINNED_ROLE = Qt.ItemDataRole.UserRole + 2
MESSAGE_ROLE = Qt.ItemDataRole.UserRole + 3
SNIPPET_ROLE = Qt.ItemDataRole.UserRole + 4

Index = QModelIndex | QPersistentModelIndex
_LEAF = Qt.ItemFlag.ItemNeverHasChildren


class ConversationListModel(QStringListModel):
    """The conversations in ``ConversationStore.list``'s order.

    The rows live in C++: a ``QStringListModel`` of conversation ids, so the count a view
    asks for is never a Python call. A view lays out every row again after an insert or a
    removal (``QListView``'s layout asks the model for each row's index, and a Python
    ``rowCount`` answered each one: with 10,000 conversations, a reply moving its
    conversation to the top held the window ~14 ms). Python keeps the conversations by id
    and says what a row shows (``data``), asked only for the rows on screen."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._by_id: dict[int, Conversation] = {}
        self._ids: list[int] = []  # the same order, for row_of and the insertion point
        self._agent_names: dict[int, str] = {}

    def set_rows(self, rows: list[Conversation], agent_names: dict[int, str]) -> None:
        self._by_id = {c.id: c for c in rows}
        self._ids = [c.id for c in rows]
        self._agent_names = agent_names
        self.setStringList([str(c.id) for c in rows])  # one reset

    def place(self, conv: Conversation | None, conversation_id: int) -> None:
        """Put ``conv`` where ``list()``'s order puts it (pinned first, then the most recently
        active); None removes the conversation's row."""
        old = self.row_of(conversation_id)
        if old >= 0:
            self.removeRows(old, 1)
            del self._ids[old]
        self._by_id.pop(conversation_id, None)
        if conv is None:
            return
        row = next(
            (i for i, cid in enumerate(self._ids) if _above(conv, self._by_id[cid])),
            len(self._ids),
        )
        self._by_id[conv.id] = conv
        self._ids.insert(row, conv.id)
        self.insertRows(row, 1)  # an empty row, shown as nothing until its id is set
        self.setData(self.index(row, 0), str(conv.id))

    def conversation(self, row: int) -> Conversation | None:
        return self._by_id.get(self._ids[row]) if 0 <= row < len(self._ids) else None

    def row_of(self, conversation_id: int | None) -> int:
        try:
            return self._ids.index(conversation_id)  # type: ignore[arg-type]
        except ValueError:
            return -1

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsEnabled | _LEAF  # not editable

    def _conv(self, index: Index) -> Conversation | None:
        shown = super().data(index, Qt.ItemDataRole.DisplayRole)
        return self._by_id.get(int(shown)) if shown else None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        conv = self._conv(index) if index.isValid() else None
        if conv is None:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return conv.title or "New chat"
        if role == ID_ROLE:
            return conv.id
        if role == PINNED_ROLE:
            return int(conv.pinned)
        if role == SUBTITLE_ROLE:
            agent = ""
            if conv.agent_id:
                agent = self._agent_names.get(conv.agent_id, "deleted agent")
            when = relative_time(conv.updated_at)
            return " · ".join(p for p in (agent, when) if p)
        if role == Qt.ItemDataRole.ToolTipRole:
            return conv.title or "New chat"
        return None


def _above(a: Conversation, b: Conversation) -> bool:
    """Whether ``a`` is listed above ``b``: ``ConversationStore.list``'s order (pinned first,
    then the most recent activity, then the newer id)."""
    if a.pinned != b.pinned:
        return bool(a.pinned)
    if a.updated_at != b.updated_at:
        return a.updated_at > b.updated_at
    return a.id > b.id


class _Row:
    """What ``QListWidget.item(i)`` gave the tests and callers: text() and data(role)."""

    def __init__(self, index: QModelIndex) -> None:
        self._index = index

    def text(self) -> str:
        return str(self._index.data(Qt.ItemDataRole.DisplayRole))

    def data(self, role: int) -> Any:
        return self._index.data(role)


class ConversationDelegate(TwoLineDelegate):
    """Two lines, and a pin on pinned conversations."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        super().paint(painter, option, index)
        if index.data(PINNED_ROLE):
            size = 14
            rect = option.rect
            target = QRect(rect.right() - size - 14, rect.top() + 10, size, size)
            icon("pin.svg").paint(painter, target)


class ConversationList(QListView):
    """A list view with the few QListWidget conveniences the window uses."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.list_model = ConversationListModel(self)
        self.setModel(self.list_model)
        self.setUniformItemSizes(True)  # layout is O(1) in the number of rows
        self.setItemDelegate(ConversationDelegate(self))

    def count(self) -> int:
        return self.list_model.rowCount()

    def item(self, row: int) -> _Row:
        return _Row(self.list_model.index(row, 0))

    def setCurrentRow(self, row: int) -> None:
        if row < 0:
            self.selectionModel().clearCurrentIndex()
            self.clearSelection()
        else:
            self.setCurrentIndex(self.list_model.index(row, 0))

    def current_id(self) -> int | None:
        index = self.currentIndex()
        return int(index.data(ID_ROLE)) if index.isValid() else None


def snippet_html(snippet: str, highlight: str) -> str:
    """FTS snippet with its hit marks as highlighted spans (text is escaped first)."""
    text = html.escape(" ".join(snippet.split()))
    start = f'<span style="background:{highlight}; font-weight:600">'
    return text.replace(HIT_START, start).replace(HIT_END, "</span>")


class SearchResultDelegate(QStyledItemDelegate):
    """A hit: conversation title, then the matching text with the words highlighted."""

    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:
        return QSize(200, option.fontMetrics.height() * 3 + 18)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        painter.save()
        palette = option.palette
        rect = paint_row_background(painter, option)
        title = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
        fm = option.fontMetrics
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        font = option.font
        font.setWeight(font.Weight.DemiBold)
        painter.setFont(font)
        painter.drawText(
            QRect(rect.left() + 10, rect.top() + 5, rect.width() - 20, fm.height()),
            Qt.AlignmentFlag.AlignLeft,
            fm.elidedText(title, Qt.TextElideMode.ElideRight, rect.width() - 20),
        )
        snippet = index.data(SNIPPET_ROLE)
        if snippet:
            doc = SafeDocument()  # the snippet is message text: nothing it names is loaded
            doc.setDefaultFont(option.font)
            doc.setDocumentMargin(0)
            doc.setTextWidth(rect.width() - 20)
            highlight = QColor(palette.color(QPalette.ColorRole.Highlight))
            highlight.setAlpha(70)
            color = palette.color(QPalette.ColorRole.PlaceholderText).name()
            doc.setHtml(
                f'<div style="color:{color}">'
                f"{snippet_html(str(snippet), highlight.name(QColor.NameFormat.HexArgb))}</div>"
            )
            painter.translate(rect.left() + 10, rect.top() + 7 + fm.height())
            painter.setClipRect(QRect(0, 0, rect.width() - 20, fm.height() * 2 + 2))
            doc.drawContents(painter)
        painter.restore()


class SearchResults(QListWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("SearchResults")
        self.setItemDelegate(SearchResultDelegate(self))
        self.setMouseTracking(True)
        self.setUniformItemSizes(True)
