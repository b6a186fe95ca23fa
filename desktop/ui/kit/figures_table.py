"""Read-only tables of figures (the Stats page's tables, a prompt run's results).

``figures_table`` sets a ``QTableWidget`` up: a header with a tooltip per column, no row
numbers, nothing to select, edit or focus. ``fill_figures`` puts in rows of (text, tooltip)
cells, every column but the first right-aligned, and sizes the columns to their contents once.
``fit_rows_height`` fixes a table's height to its rows, for a table that never scrolls up and
down itself (it sits in a page that scrolls).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from PySide6.QtCore import Qt
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

Table = TypeVar("Table", bound=QTableWidget)
Cell = tuple[str, str]  # text, tooltip ("" for none); a column's header is the same


def figures_table(table: Table, name: str, columns: Sequence[Cell], min_width: int) -> Table:
    """``table`` read-only, named ``name``, with ``columns``; no column narrower than
    ``min_width`` and the last one not stretched (a wide table scrolls sideways)."""
    table.setAccessibleName(name)
    table.setStyleSheet("QTableWidget::item { padding: 0 4px; }")
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
    table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
    table.verticalHeader().setVisible(False)
    set_columns(table, columns)
    header = table.horizontalHeader()
    header.setMinimumSectionSize(min_width)
    header.setStretchLastSection(False)
    return table


def set_columns(table: QTableWidget, columns: Sequence[Cell]) -> None:
    """The columns' headers, each with its tooltip."""
    table.setColumnCount(len(columns))
    for col, (name, tip) in enumerate(columns):
        item = QTableWidgetItem(name)
        item.setToolTip(tip)
        table.setHorizontalHeaderItem(col, item)


def fill_figures(
    table: QTableWidget, rows: Sequence[Sequence[Cell]], icons: Sequence[QIcon] = ()
) -> None:
    """One row per item of ``rows``; ``icons``, when given, one per row for its first cell."""
    header = table.horizontalHeader()
    # sized once when filled (ResizeToContents would measure again after every cell)
    header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    table.setUpdatesEnabled(False)
    table.setRowCount(len(rows))
    right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
    for r, cells in enumerate(rows):
        for c, (text, tip) in enumerate(cells):
            item = QTableWidgetItem(text)
            if tip:
                item.setToolTip(tip)
            if c:
                item.setTextAlignment(right)
            elif icons:
                item.setIcon(icons[r])
            table.setItem(r, c, item)
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)  # once, now
    table.setUpdatesEnabled(True)


def fit_rows_height(table: QTableWidget, minimum: int) -> None:
    """Fix ``table``'s height to show every row (and the sideways scroll bar when its columns
    are wider than it), at least ``minimum``."""
    header = table.horizontalHeader()
    height = header.height() + 2 * table.frameWidth()
    height += sum(table.rowHeight(r) for r in range(table.rowCount()))
    if header.length() > table.width() - 2 * table.frameWidth():
        height += table.horizontalScrollBar().sizeHint().height()
    table.setFixedHeight(max(height, minimum))
