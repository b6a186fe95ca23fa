"""The sidebar's conversation list (model/view: 10,000 rows cost one reset, not 10,000
widgets) and the search results with highlighted hits."""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QModelIndex,
    QPersistentModelIndex,
    QRect,
    QSize,
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


class ConversationListModel(QAbstractListModel):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: list[Conversation] = []
        self._agent_names: dict[int, str] = {}

    def set_rows(self, rows: list[Conversation], agent_names: dict[int, str]) -> None:
        self.beginResetModel()
        self._rows = rows
        self._agent_names = agent_names
        self.endResetModel()

    def place(self, conv: Conversation | None, conversation_id: int) -> None:
        """Put ``conv`` where ``list()``'s order puts it (pinned first, then the most recently
        active); None removes the conversation's row."""
        old = self.row_of(conversation_id)
        if old >= 0:
            self.beginRemoveRows(QModelIndex(), old, old)
            del self._rows[old]
            self.endRemoveRows()
        if conv is None:
            return
        row = next((i for i, c in enumerate(self._rows) if _above(conv, c)), len(self._rows))
        self.beginInsertRows(QModelIndex(), row, row)
        self._rows.insert(row, conv)
        self.endInsertRows()

    def conversation(self, row: int) -> Conversation | None:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def row_of(self, conversation_id: int | None) -> int:
        for i, conv in enumerate(self._rows):
            if conv.id == conversation_id:
                return i
        return -1

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or index.row() >= len(self._rows):
            return None
        conv = self._rows[index.row()]
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
