"""Small widgets of the Knowledge page: its one-line lists and red messages."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHBoxLayout, QLabel, QListWidget, QWidget

from desktop.ui.kit.widgets import hbox, plain_label


def one_line_list(name: str, accessible: str) -> QListWidget:
    """A list of plain-text rows, one line each (a passage found: two), elided (the whole
    of a row is its tooltip), scrolling up and down only."""
    view = QListWidget()
    view.setObjectName(name)
    view.setAccessibleName(accessible)
    view.setWordWrap(False)
    view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
    view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    view.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
    return view


def fit_rows(view: QListWidget, most_rows: int, most_px: int = 10_000) -> None:
    """``view`` as tall as its rows (at least one, at most ``most_rows`` or ``most_px``)."""
    rows = [view.sizeHintForRow(i) for i in range(min(view.count(), most_rows))]
    inner = sum(rows) if rows else view.fontMetrics().height() + 8
    view.setFixedHeight(min(most_px, inner + 2 * view.frameWidth() + 4))


def button_row(*buttons: QWidget) -> QHBoxLayout:
    """Buttons side by side from the left, the rest of the row empty."""
    row = hbox(spacing=8)
    for button in buttons:
        row.addWidget(button)
    row.addStretch(1)
    return row


def error_label() -> QLabel:
    """A field's message, red, hidden while empty."""
    label = plain_label("", "FieldError", wrap=True)
    label.hide()
    return label


def say(label: QLabel, text: str) -> None:
    """``text`` in ``label``, which shows only with some."""
    label.setText(text)
    label.setVisible(bool(text))
