"""What a person would notice in a laid-out window, as lists of findings (empty = fine).

- ``overlaps(root)``: visible sibling widgets whose rectangles intersect (one hides part of
  the other), or a widget sticking out of its parent (cut off) outside a scroll area.
- ``cut_labels(root)``: visible labels (and buttons) whose text is wider than the room they
  got and that neither wrap nor end in an ellipsis; an elided one without a tooltip; a
  wrapped one that got fewer lines of height than its text needs.
- ``unnamed_controls(root)``: buttons and fields whose accessible name (what a screen reader
  says, through ``QAccessible``), with the label it is read with, is empty or has no letter.

Each finding names the widget by its class, object name and text, so a failure says where.
"""

from __future__ import annotations

from collections.abc import Iterator

from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QAccessible, QImage
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QAbstractSpinBox,
    QComboBox,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollBar,
    QSplitterHandle,
    QTextEdit,
    QToolButton,
    QWidget,
)

CONTROL_TYPES = (QAbstractButton, QLineEdit, QComboBox, QPlainTextEdit, QTextEdit, QAbstractSpinBox)
# Inner parts Qt builds inside a control (a combo's line edit, a spin box's editor, a line
# edit's clear button): the control itself carries the name.
_INNER_OF = (QComboBox, QAbstractSpinBox, QLineEdit)


def describe(widget: QWidget) -> str:
    text = ""
    for getter in ("text", "title", "placeholderText", "windowTitle"):
        value = getattr(widget, getter, None)
        if callable(value):
            try:
                found = value()
            except TypeError:
                continue
            if isinstance(found, str) and found:
                text = found
                break
    name = widget.objectName()
    parent = widget.parentWidget()
    owner = f" in {type(parent).__name__}#{parent.objectName()}" if parent is not None else ""
    return f"{type(widget).__name__}#{name} {text[:50]!r}{owner}"


def visible_widgets(root: QWidget) -> Iterator[QWidget]:
    """``root`` and every descendant a person can see (shown, not in a hidden parent)."""
    stack = [root]
    while stack:
        widget = stack.pop()
        yield widget
        for child in widget.findChildren(QWidget, options=_direct()):
            if child.isVisible() and not child.isWindow():
                stack.append(child)


def _direct():  # type: ignore[no-untyped-def]
    from PySide6.QtCore import Qt

    return Qt.FindChildOption.FindDirectChildrenOnly


def _is_viewport(widget: QWidget) -> bool:
    """A scroll area's viewport: its content being partly out of view there is scrolling."""
    parent = widget.parentWidget()
    return isinstance(parent, QAbstractScrollArea) and parent.viewport() is widget


def overlaps(root: QWidget, tolerance: int = 1) -> list[str]:
    found: list[str] = []
    for parent in visible_widgets(root):
        if isinstance(parent, _INNER_OF):
            continue
        children = [
            c
            for c in parent.findChildren(QWidget, options=_direct())
            if c.isVisible()
            and not c.isWindow()
            and not isinstance(c, (QSplitterHandle, QScrollBar))
            and c.width() > 0
            and c.height() > 0
        ]
        bounds = parent.rect()
        clipped_by_scroll = isinstance(parent, QAbstractScrollArea) or _is_viewport(parent)
        for i, a in enumerate(children):
            ga = a.geometry()
            if not clipped_by_scroll and not _inside(ga, bounds, tolerance):
                found.append(f"{describe(a)} sticks out of its parent ({_r(ga)} in {_r(bounds)})")
            for b in children[i + 1 :]:
                common = ga.intersected(b.geometry())
                if common.width() > tolerance and common.height() > tolerance:
                    found.append(
                        f"{describe(a)} {_r(ga)} overlaps {describe(b)} {_r(b.geometry())}"
                    )
    return found


def _inside(rect: QRect, bounds: QRect, tolerance: int) -> bool:
    return (
        rect.left() >= bounds.left() - tolerance
        and rect.top() >= bounds.top() - tolerance
        and rect.right() <= bounds.right() + tolerance
        and rect.bottom() <= bounds.bottom() + tolerance
    )


def _r(rect: QRect) -> str:
    return f"{rect.x()},{rect.y()} {rect.width()}x{rect.height()}"


def cut_labels(root: QWidget) -> list[str]:
    found: list[str] = []
    for widget in visible_widgets(root):
        if isinstance(widget, QLabel):
            found.extend(_label_findings(widget))
        elif isinstance(widget, (QPushButton, QToolButton)) and widget.text():
            needed = widget.minimumSizeHint().width()
            if widget.width() + 1 < needed and not widget.text().endswith("…"):
                found.append(f"{describe(widget)} is {widget.width()} px wide, needs {needed}")
    return found


def _label_findings(label: QLabel) -> list[str]:
    text = QLabel.text(label)  # what is drawn (an eliding label's text() may be the whole)
    if not text or (label.pixmap() is not None and not label.pixmap().isNull()):
        return []
    room = label.contentsRect()
    if label.wordWrap():
        needed = label.heightForWidth(label.width())
        if needed > label.height() + 1:
            return [f"{describe(label)} wraps to {needed} px but got {label.height()} px"]
        return []
    if text.endswith("…") and not label.toolTip():
        return [f"{describe(label)} is elided without a tooltip"]
    needed = _text_width(label)
    have = room.width() - 2 * label.margin()
    if needed > have + 1:
        return [f"{describe(label)} needs {needed} px, has {have} px"]
    return []


def _text_width(label: QLabel) -> int:
    from PySide6.QtCore import Qt

    rich = label.textFormat() == Qt.TextFormat.RichText or (
        label.textFormat() == Qt.TextFormat.AutoText and "<" in QLabel.text(label)
    )
    if not rich:
        lines = QLabel.text(label).split("\n")
        metrics = label.fontMetrics()
        return max(metrics.horizontalAdvance(line) for line in lines) + max(0, label.indent())
    # rich text: the label's own idea of its width, less the margins it adds
    return label.sizeHint().width() - 2 * label.margin()


def accessible_name(widget: QWidget) -> str:
    iface = QAccessible.queryAccessibleInterface(widget)
    if iface is None:
        return ""
    return iface.text(QAccessible.Text.Name) or ""


def accessible_label(widget: QWidget) -> str:
    """The name of the label a screen reader reads with ``widget`` (its Label relation: a
    form row's label, the buddy). On Linux a combo box's own name is its current text and
    its label comes this way."""
    iface = QAccessible.queryAccessibleInterface(widget)
    if iface is None:
        return ""
    labels = iface.relations(QAccessible.RelationFlag.Label)
    return " ".join(other.text(QAccessible.Text.Name) or "" for other, _flag in labels)


def unnamed_controls(root: QWidget) -> list[str]:
    found: list[str] = []
    for widget in [root, *root.findChildren(QWidget)]:
        if not isinstance(widget, CONTROL_TYPES):
            continue
        parent = widget.parentWidget()
        if isinstance(parent, _INNER_OF) or (
            parent is not None and isinstance(parent.parentWidget(), _INNER_OF)
        ):
            continue
        if widget.objectName().startswith("qt_"):  # Qt's own scroll-area corners etc.
            continue
        name = accessible_name(widget) + " " + accessible_label(widget)
        if not any(ch.isalpha() for ch in name):
            found.append(f"{describe(widget)} has accessible name {name!r}")
    return found


def logical_image(widget: QWidget) -> QImage:
    """``widget.grab()`` as an image addressed in logical pixels, as the tests' points are: at a
    device pixel ratio other than 1 (QT_SCALE_FACTOR) each logical pixel is sampled from the
    device pixel under it."""
    image = widget.grab().toImage()
    ratio = image.devicePixelRatio()
    if ratio == 1:
        return image
    logical = image.scaled(
        round(image.width() / ratio),
        round(image.height() / ratio),
        Qt.AspectRatioMode.IgnoreAspectRatio,
        Qt.TransformationMode.FastTransformation,
    )
    logical.setDevicePixelRatio(1)
    return logical
