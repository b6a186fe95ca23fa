"""The pieces Settings is built of: drop-downs of (value, words), wrapping notes, form groups
whose fields line up from one group to the next, and one-line paths that never widen the
dialog."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QComboBox, QFormLayout, QGroupBox, QLabel, QSizePolicy

from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.widgets import plain

PATH_HINT_PX = 240  # the width a path asks for; it gets what the row has


def choice_box(
    name: str, choices: Sequence[tuple[Any, str]], current: Any, extra: str | None = None
) -> QComboBox:
    """A drop-down of (value, words); ``current`` selected, added with ``extra`` words when it
    is not one of the choices (a value set elsewhere is shown, not lost)."""
    box = QComboBox()
    box.setAccessibleName(name)
    for value, text in choices:
        box.addItem(text, value)
    if box.findData(current) < 0 and extra is not None:
        box.addItem(extra, current)
    box.setCurrentIndex(max(0, box.findData(current)))
    return box


def note(text: str, object_name: str = "DialogNote") -> QLabel:
    """A paragraph that wraps to the width it gets (plain text: see ``widgets.plain``)."""
    label = plain(QLabel(text))
    label.setObjectName(object_name)
    label.setWordWrap(True)
    return label


def same_widths(groups: Sequence[QGroupBox]) -> None:
    """Every group's labels as wide as the widest, and its drop-downs too: the fields line up
    from one group to the next. Called again when the text size changes."""
    forms = [g.layout() for g in groups]
    labels = [
        label
        for f in forms
        if isinstance(f, QFormLayout)
        for i in range(f.rowCount())
        if (item := f.itemAt(i, QFormLayout.ItemRole.LabelRole)) is not None
        and (label := item.widget()) is not None
    ]
    boxes = [box for g in groups for box in g.findChildren(QComboBox)]
    for same in (labels, boxes):
        for widget in same:
            widget.setMinimumWidth(0)
        if same:
            width = max(widget.sizeHint().width() for widget in same)
            for widget in same:
                widget.setMinimumWidth(width)


def group_box(title: str) -> tuple[QGroupBox, QFormLayout]:
    group = QGroupBox(title)
    form = QFormLayout(group)
    form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
    form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
    return group, form


class PathLabel(ElidedLabel):
    """A path on one line, elided in the middle when it does not fit (whole in its tooltip);
    it takes the width there is and never asks for more: a long path does not widen the
    dialog."""

    def __init__(self, text: str, mode: Qt.TextElideMode) -> None:
        super().__init__(text, mode)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

    def sizeHint(self) -> QSize:
        return QSize(PATH_HINT_PX, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:
        return QSize(PATH_HINT_PX // 2, super().minimumSizeHint().height())
