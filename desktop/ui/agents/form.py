"""The agent editor's form machinery: grouped rows in one label column, a red message under
each field, inline status text, and the small row layouts the sections are built from."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QBoxLayout,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from desktop.ui.kit import theme
from desktop.ui.kit.widgets import plain

LABEL_WIDTH_PX = 120


class WrapLabel(QLabel):
    """A word-wrapped label whose height follows the width it really gets.

    A form row takes its field's ``sizeHint``, and for a wrapped QLabel that height is computed
    for a much narrower guessed width: a two-line message got four lines of room, centred.
    """

    def __init__(self, text: str = "", object_name: str = "") -> None:
        super().__init__()
        plain(self)  # errors and statuses quote servers, files and names: never HTML
        self.setText(text)
        self.setWordWrap(True)
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        if object_name:
            self.setObjectName(object_name)

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        parent = self.parentWidget()
        # The parent's width is settled before ours (a form field's column); ours may not be.
        width = parent.contentsRect().width() if parent is not None else self.width()
        if width > 40:
            hint.setHeight(self.heightForWidth(width))
        return hint

    def minimumSizeHint(self) -> QSize:
        # Never squeezed to one line: the scroll area scrolls instead.
        return QSize(super().minimumSizeHint().width(), self.sizeHint().height())

    def hasHeightForWidth(self) -> bool:
        # Otherwise QLayout::totalSizeHint asks for the height at the *hint's* width (a narrow
        # guess), and the form row keeps that height.
        return False

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.updateGeometry()


class FieldForm:
    """Rows keyed by field name, each with its error label; ``show_errors`` fills them."""

    def __init__(self) -> None:
        self.errors: dict[str, QLabel] = {}
        self.rows: dict[str, tuple[QFormLayout, QWidget]] = {}

    @staticmethod
    def group(title: str) -> QGroupBox:
        group = QGroupBox(title)
        form = QFormLayout(group)
        form.setContentsMargins(12, 12, 12, 12)
        form.setHorizontalSpacing(12)
        form.setVerticalSpacing(8)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        return group

    def add(
        self,
        group: QGroupBox,
        field: str,
        label: str,
        widget: QWidget,
        extra: QWidget | None = None,
    ) -> None:
        """A row: ``widget``, then ``extra`` (notes, warnings), then the field's error label."""
        error = WrapLabel(object_name="FieldError")
        error.hide()
        box = column(widget, *([extra] if extra is not None else []), error)
        form = form_of(group)
        form.addRow(label, box)
        label_widget = form.labelForField(box)
        field_widget = _named_field(widget, label)
        if label_widget is not None:
            label_widget.setMinimumWidth(LABEL_WIDTH_PX)  # one column across the groups
            if isinstance(label_widget, QLabel) and field_widget is not None:
                label_widget.setBuddy(field_widget)
        self.errors[field] = error
        self.rows[field] = (form, box)

    def set_row_visible(self, field: str, visible: bool) -> None:
        form, box = self.rows[field]
        form.setRowVisible(box, visible)

    def error_text(self, field: str) -> str:
        label = self.errors.get(field)
        return label.text() if label is not None and not label.isHidden() else ""

    def show_errors(self, errors: dict[str, str], only: tuple[str, ...] | None = None) -> list[str]:
        """Show each field's message (and clear the others; with ``only``, just those fields).
        Returns the messages for fields without a row."""
        for field, label in self.errors.items():
            if only is not None and field not in only:
                continue
            message = errors.get(field, "")
            label.setText(message)
            label.setVisible(bool(message))
        if only is None:
            first = next((f for f in self.errors if errors.get(f)), None)
            if first is not None:
                self.rows[first][1].setFocus()
        return [m for f, m in errors.items() if f not in self.errors]


_FIELD_TYPES = (QLineEdit, QComboBox, QPlainTextEdit, QAbstractSpinBox)


def _named_field(widget: QWidget, label: str) -> QWidget | None:
    """The row's input (``widget`` itself, or the first one in it), named after the row's
    label for screen readers (the label sits beside the row's host, not the input)."""
    inside = [widget, *widget.findChildren(QWidget)]
    field = next(
        (
            f
            for f in inside
            if isinstance(f, _FIELD_TYPES) and not isinstance(f.parentWidget(), QComboBox)
        ),
        None,
    )
    if field is not None and label and not field.accessibleName():
        field.setAccessibleName(label)
    return field


def form_of(group: QGroupBox) -> QFormLayout:
    form = group.layout()
    assert isinstance(form, QFormLayout)
    return form


def line(placeholder: str) -> QLineEdit:
    edit = QLineEdit()
    edit.setPlaceholderText(placeholder)
    return edit


def _laid_out(
    layout: QBoxLayout,
    widgets: tuple[QWidget, ...],
    spacing: int,
    margins: tuple[int, int, int, int] = (0, 0, 0, 0),
) -> None:
    layout.setContentsMargins(*margins)
    layout.setSpacing(spacing)
    for widget in widgets:
        layout.addWidget(widget)


def row(
    first: QWidget,
    *rest: QWidget,
    stretch: bool = False,
    spacing: int = 8,
    margins: tuple[int, int, int, int] = (0, 0, 0, 0),
) -> QWidget:
    """Widgets side by side; ``first`` takes the spare width (or, with ``stretch``, none
    does)."""
    host = QWidget()
    layout = QHBoxLayout(host)
    _laid_out(layout, (first, *rest), spacing, margins)
    if stretch:
        layout.addStretch(1)
    else:
        layout.setStretchFactor(first, 1)
    return host


def column(*widgets: QWidget) -> QWidget:
    """Widgets stacked, 4 px apart, no margins."""
    host = QWidget()
    _laid_out(QVBoxLayout(host), widgets, 4)
    return host


def say(label: QLabel, text: str, tone: str) -> None:
    """Inline status text: ``ok`` green, ``error`` red, ``muted`` grey."""
    colors = theme.current_colors()
    color = {
        "ok": "#4ac26b" if colors.dark else "#1a7f37",
        "error": colors.error_text,
    }.get(tone, colors.muted)
    label.setProperty("tone", tone)
    size = round(12 * theme.current_text_scale())
    label.setStyleSheet(f"color: {color}; font-size: {size}px;")
    plain(label).setText(text)  # a server's or a probe's words
    label.setVisible(bool(text))


def restyle(label: QLabel, object_name: str) -> None:
    if label.objectName() != object_name:
        label.setObjectName(object_name)
        label.style().unpolish(label)
        label.style().polish(label)


def shown_text(label: QLabel) -> str:
    return label.text() if not label.isHidden() else ""


def show_value(value: object) -> str:
    """A stored value as its field shows it (None: empty)."""
    return "" if value is None else str(value)
