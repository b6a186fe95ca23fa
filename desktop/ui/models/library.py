"""The Models page's table of files on this computer.

Six columns that fit beside the sidebar at 1,180 px: Model (the file name, elided in the
middle, the whole path in its tooltip), Quantization, Size, Context (trained), Used by (agent
names) and State (Loaded / Loading / Not loaded / Error). The other header facts are in the
details panel (``desktop.ui.models.facts.detail_facts``). Each column gets the width its
texts need and the model column the rest; narrower than that, Used by elides, then the
columns the details panel repeats are hidden, then every column shrinks in proportion and
its texts end in "…" (each cell that can be cut has its whole text in its tooltip). An
unreadable file's error lies across the fact columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPersistentModelIndex, Qt, QTimer
from PySide6.QtGui import QBrush, QColor, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from desktop.chat.model_library import size_on_disk
from desktop.local.catalog import ModelEntry
from desktop.local.memory import format_bytes
from desktop.ui.models.facts import STATE_WORDS

COLUMNS = ("Model", "Quantization", "Size", "Context", "Used by", "State")
COLUMN_TIPS = {
    "Model": "The model file (its whole path in each row's tooltip)",
    "Quantization": "How the weights are stored (fewer bits: smaller, a little less exact)",
    "Size": "Bytes on disk (every part of a split model)",
    "Context": "The context the model was trained on, in tokens",
    "Used by": "The agents that use this file",
    "State": "Whether the model is in memory now",
}
ERROR_COLUMN = 1  # an unreadable file's error spans the fact columns, from here to the end
PATH_ROLE = Qt.ItemDataRole.UserRole
MODEL_MIN = 160  # the model column never gets less than this while others have room
USED_BY_MAX = 220  # a long list of agents elides here (the tooltip has them all)
USED_BY_MIN = 80  # how far Used by gives way before a column is hidden
HIDE_FIRST = ("Context", "Used by", "Size")  # narrow: these go (the details panel has them)
CELL_PADDING = 18  # the item's margins and the grid line, around the text


class _MiddleElide(QStyledItemDelegate):
    """File names elide in the middle: the start and the quantization suffix stay."""

    def initStyleOption(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        super().initStyleOption(option, index)
        option.textElideMode = Qt.TextElideMode.ElideMiddle


class LibraryTable(QTableWidget):
    """``show_entries(entries, used_by, state_of)``; ``set_state(row, state)`` live."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, len(COLUMNS), parent)
        self.setObjectName("ModelsTable")
        self.setHorizontalHeaderLabels(COLUMNS)
        for col, name in enumerate(COLUMNS):
            header_item = self.horizontalHeaderItem(col)
            if header_item is not None:
                header_item.setToolTip(COLUMN_TIPS[name])
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.setWordWrap(False)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.verticalHeader().setVisible(False)
        self.setItemDelegateForColumn(0, _MiddleElide(self))
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        header.setStretchLastSection(False)
        header.setTextElideMode(Qt.TextElideMode.ElideRight)
        header.setMinimumSectionSize(24)
        self.setMinimumWidth(200)
        self.entries: list[ModelEntry] = []
        # a theme or text-size change restyles the header: the titles' widths change with it
        self._refit = QTimer(self)
        self._refit.setSingleShot(True)
        self._refit.setInterval(0)
        self._refit.timeout.connect(self.fit_columns)
        header.installEventFilter(self)

    # filling ---------------------------------------------------------------------------------
    def show_entries(
        self,
        entries: Sequence[ModelEntry],
        used_by: dict[str, list[str]],
        states: Mapping[str, str],
    ) -> None:
        selected = self.selected_path()
        self.entries = list(entries)
        self.clearSpans()
        self.setRowCount(len(entries))
        for row, entry in enumerate(entries):
            texts = row_texts(entry, used_by.get(entry.path, []), states.get(entry.path, ""))
            for col, text in enumerate(texts):
                item = QTableWidgetItem(text)
                item.setToolTip(text if col else _path_tip(entry))
                if col == 0:
                    item.setData(PATH_ROLE, entry.path)
                if col == COLUMNS.index("Used by") and not text:
                    item.setToolTip("No agent uses this file")
                self.setItem(row, col, item)
            if entry.error:
                item = QTableWidgetItem(entry.error)
                item.setToolTip(_path_tip(entry))
                item.setForeground(QBrush(QColor("#c0392b")))
                self.setItem(row, ERROR_COLUMN, item)
                self.setSpan(row, ERROR_COLUMN, 1, len(COLUMNS) - ERROR_COLUMN)
        self.fit_columns()
        if selected is not None:
            self.select_path(selected)

    def set_state(self, row: int, state: str) -> None:
        entry = self.entries[row] if 0 <= row < len(self.entries) else None
        if entry is None or entry.error:
            return
        item = self.item(row, COLUMNS.index("State"))
        text = STATE_WORDS.get(state, state)
        if item is not None and item.text() != text:
            item.setText(text)
            item.setToolTip(text)

    # selection -------------------------------------------------------------------------------
    def row_of(self, path: str | Path) -> int:
        for row in range(self.rowCount()):
            item = self.item(row, 0)
            if item is not None and item.data(PATH_ROLE) == str(path):
                return row
        return -1

    def selected_path(self) -> str | None:
        rows = {index.row() for index in self.selectionModel().selectedRows()}
        if not rows:
            return None
        item = self.item(min(rows), 0)
        return str(item.data(PATH_ROLE)) if item is not None else None

    def selected_entry(self) -> ModelEntry | None:
        path = self.selected_path()
        return next((e for e in self.entries if e.path == path), None)

    def select_path(self, path: str | Path) -> bool:
        row = self.row_of(path)
        if row < 0:
            return False
        self.selectRow(row)
        item = self.item(row, 0)
        if item is not None:
            self.scrollToItem(item)
        return True

    # widths ----------------------------------------------------------------------------------
    def natural_widths(self) -> list[int]:
        """The width each column's header and texts need (Used by at most ``USED_BY_MAX``)."""
        metrics = self.fontMetrics()
        header = self.horizontalHeader()
        widths = []
        for col, name in enumerate(COLUMNS):
            need = header.sectionSizeHint(col) + 2  # the style's own margins around the title
            for row in range(self.rowCount()):
                if self.columnSpan(row, col) > 1 or (col > ERROR_COLUMN and self._spanned(row)):
                    continue
                item = self.item(row, col)
                if item is not None:
                    need = max(need, metrics.horizontalAdvance(item.text()) + CELL_PADDING)
            widths.append(min(need, USED_BY_MAX) if name == "Used by" else need)
        return widths

    def _spanned(self, row: int) -> bool:
        return self.columnSpan(row, ERROR_COLUMN) > 1

    def fit_columns(self) -> None:
        """Each column its natural width and the model column the rest; short of room, Used
        by gives way down to ``USED_BY_MIN``, then the columns the details panel repeats are
        hidden (Context, then Used by, then Size), then all shrink in proportion."""
        room = self.viewport().width()
        if room <= 0:
            return
        natural = self.natural_widths()
        least = [MODEL_MIN, *natural[1:]]
        least[COLUMNS.index("Used by")] = min(natural[COLUMNS.index("Used by")], USED_BY_MIN)
        hidden: set[int] = set()
        for name in HIDE_FIRST:
            if sum(w for c, w in enumerate(least) if c not in hidden) <= room:
                break
            hidden.add(COLUMNS.index(name))
        widths = [0 if c in hidden else w for c, w in enumerate(natural)]
        used = COLUMNS.index("Used by")
        short = MODEL_MIN + sum(widths[1:]) - room
        if short > 0 and used not in hidden:
            widths[used] -= min(short, widths[used] - least[used])
        rest = sum(widths[1:])
        if room >= MODEL_MIN + rest:
            widths[0] = room - rest
        else:
            model = min(natural[0], max(MODEL_MIN, room // 3), room)
            scale = max(0.0, room - model) / max(1, rest)
            widths = [model, *(int(w * scale) for w in widths[1:])]
            widths[0] = max(24, room - sum(widths[1:]))
        header = self.horizontalHeader()
        for col, width in enumerate(widths):
            self.setColumnHidden(col, col in hidden)
            if col not in hidden and header.sectionSize(col) != width:
                header.resizeSection(col, width)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.fit_columns()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in _RESTYLED:
            self._refit.start()

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        self._refit.start()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in _RESTYLED:
            self._refit.start()
        return super().eventFilter(watched, event)


_RESTYLED = (QEvent.Type.FontChange, QEvent.Type.StyleChange, QEvent.Type.Polish)


def row_texts(entry: ModelEntry, users: Sequence[str], state: str) -> list[str]:
    name = Path(entry.path).name + ("  (starter)" if entry.starter else "")
    info = entry.info
    if info is None:
        return [name, *([""] * (len(COLUMNS) - 1))]  # the error is laid over the rest
    return [
        name,
        info.quantization or "?",
        format_bytes(size_on_disk(entry.path) or info.file_size),
        f"{info.context_length:,}" if info.context_length else "?",
        ", ".join(users),
        STATE_WORDS.get(state, state),
    ]


def _path_tip(entry: ModelEntry) -> str:
    return entry.path if not entry.error else f"{entry.path}\n{entry.error}"
