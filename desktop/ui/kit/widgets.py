"""Small reusable widgets: the composer, the sidebar item delegate, the info bar,
``FlowLayout`` (a row that wraps onto more lines instead of squeezing its widgets), plain
labels and message boxes (``plain``, ``plain_label``, ``message_box``, ``confirm``, ``warn``,
``ask_text``: text from a model, a tool, a server or a file is never read as HTML), and small
builders (``push_button``, ``search_field``, ``column_scroll`` and ``scroll_column``: a page
that scrolls up and down only, ``vbox``/``hbox``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from PySide6.QtCore import (
    QEvent,
    QMargins,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QPoint,
    QRect,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor, QFont, QKeyEvent, QPainter, QPalette
from PySide6.QtWidgets import (
    QBoxLayout,
    QDialog,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLayout,
    QLayoutItem,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

SUBTITLE_ROLE = Qt.ItemDataRole.UserRole + 1
ID_ROLE = Qt.ItemDataRole.UserRole

MAX_COMPOSER_LINES = 8


Margins = tuple[int, int, int, int]
Box = TypeVar("Box", bound=QBoxLayout)


Label = TypeVar("Label", bound=QLabel)


def plain(label: Label) -> Label:
    """``label`` shows its text as typed, never as HTML: a name, a title, an error or a tool's
    words can hold ``<img src=…>``, which a rich-text label would read from disk (on the GUI
    thread) as it lays itself out. Every label that can show text from a model, a tool, a
    server or a file is plain; where the app writes markup itself it uses ``rich_label`` and
    ``html.escape`` on every string from outside."""
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


def plain_label(text: str = "", name: str = "", wrap: bool = False) -> QLabel:
    label = plain(QLabel())
    if name:
        label.setObjectName(name)
    label.setWordWrap(wrap)
    label.setText(text)
    return label


def rich_label(markup: str = "", name: str = "") -> QLabel:
    """A label with the app's own markup (every string from outside ``html.escape``'d)."""
    label = QLabel()
    label.setTextFormat(Qt.TextFormat.RichText)
    if name:
        label.setObjectName(name)
    label.setText(markup)
    return label


def message_box(
    parent: QWidget | None,
    icon: QMessageBox.Icon,
    title: str,
    text: str,
    buttons: QMessageBox.StandardButton = QMessageBox.StandardButton.Ok,
    default: QMessageBox.StandardButton = QMessageBox.StandardButton.NoButton,
) -> QMessageBox:
    """A ``QMessageBox`` whose text (and informative text) is plain (see ``plain``)."""
    box = QMessageBox(parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setIcon(icon)
    box.setWindowTitle(title)
    box.setText(text)
    box.setStandardButtons(buttons)
    if default != QMessageBox.StandardButton.NoButton:
        box.setDefaultButton(default)
    return box


def ask(
    parent: QWidget | None,
    title: str,
    text: str,
    buttons: QMessageBox.StandardButton,
    default: QMessageBox.StandardButton,
) -> QMessageBox.StandardButton:
    """``QMessageBox.question`` with plain text: the button pressed."""
    box = message_box(parent, QMessageBox.Icon.Question, title, text, buttons, default)
    return QMessageBox.StandardButton(box.exec())


def warn(parent: QWidget | None, title: str, text: str) -> None:
    """``QMessageBox.warning`` with plain text."""
    message_box(parent, QMessageBox.Icon.Warning, title, text).exec()


def ask_text(parent: QWidget | None, title: str, label: str, text: str) -> tuple[str, bool]:
    """``QInputDialog.getText`` with a plain label (it can name a conversation or an agent)."""
    dialog = QInputDialog(parent)
    dialog.setWindowTitle(title)
    dialog.setInputMode(QInputDialog.InputMode.TextInput)
    dialog.setLabelText("")  # builds the label, plain before it shows any text
    for child in dialog.findChildren(QLabel):
        plain(child)
    dialog.setLabelText(label)
    dialog.setTextValue(text)
    accepted = dialog.exec() == QDialog.DialogCode.Accepted
    return dialog.textValue(), accepted


def confirm(parent: QWidget | None, title: str, text: str) -> bool:
    """Yes / Cancel, Cancel the default: True when the person said yes."""
    answer = ask(
        parent,
        title,
        text,
        QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
        QMessageBox.StandardButton.Cancel,
    )
    return answer == QMessageBox.StandardButton.Yes


def cell_text(table: QTableWidget, row: int, column: int) -> str:
    """A table cell's text; "" for a cell nothing was put in."""
    item = table.item(row, column)
    return item.text() if item is not None else ""


def push_button(
    text: str,
    clicked: Callable[[], object] | None = None,
    *,
    tip: str = "",
    name: str = "",
    accessible: str = "",
) -> QPushButton:
    """A button: ``clicked`` runs when it is pressed; ``tip``, object ``name`` and
    ``accessible`` name when given."""
    button = QPushButton(text)
    for value, setter in (
        (name, button.setObjectName),
        (accessible, button.setAccessibleName),
        (tip, button.setToolTip),
    ):
        if value:
            setter(value)
    if clicked is not None:
        button.clicked.connect(clicked)
    return button


def search_field(name: str, placeholder: str, accessible: str) -> QLineEdit:
    """A one-line search box with a clear button."""
    field = QLineEdit()
    field.setObjectName(name)
    field.setPlaceholderText(placeholder)
    field.setAccessibleName(accessible)
    field.setClearButtonEnabled(True)
    return field


def column_scroll(name: str = "") -> QScrollArea:
    """A frameless scroll area whose widget takes its width: it scrolls up and down only."""
    area = QScrollArea()
    if name:
        area.setObjectName(name)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    return area


def fit_over(window: QWidget, parent: QWidget | None, width: int, height: int, margin: int) -> None:
    """``window`` (a panel of its own) at ``width``×``height``, or the parent window's size
    less ``margin`` where that is smaller, centred over the parent window."""
    host = parent.window() if parent is not None else None
    if host is None:
        window.resize(width, height)
        return
    window.resize(min(width, host.width() - margin), min(height, host.height() - margin))
    center = host.frameGeometry().center()
    window.move(center.x() - window.width() // 2, center.y() - window.height() // 2)


def _set(box: Box, margins: Margins, spacing: int) -> Box:
    """``vbox``/``hbox``: a column/row layout (on ``parent`` when given), margins, spacing."""
    box.setContentsMargins(*margins)
    box.setSpacing(spacing)
    return box


def vbox(
    parent: QWidget | None = None, margins: Margins = (0, 0, 0, 0), spacing: int = 0
) -> QVBoxLayout:
    return _set(QVBoxLayout(parent) if parent is not None else QVBoxLayout(), margins, spacing)


def hbox(
    parent: QWidget | None = None, margins: Margins = (0, 0, 0, 0), spacing: int = 0
) -> QHBoxLayout:
    return _set(QHBoxLayout(parent) if parent is not None else QHBoxLayout(), margins, spacing)


def scroll_column(
    name: str, body_name: str, margins: Margins = (0, 0, 0, 0), spacing: int = 0
) -> tuple[QScrollArea, QVBoxLayout]:
    """A ``column_scroll`` holding one widget (``body_name``); its column layout, to fill."""
    area = column_scroll(name)
    body = QWidget()
    body.setObjectName(body_name)
    column = vbox(body, margins, spacing)
    area.setWidget(body)
    return area, column


class ComposerEdit(QPlainTextEdit):
    """Message input: Enter (or Ctrl+Enter) sends, Shift+Enter inserts a new line.

    Signals: submitted() when Enter is pressed without Shift.
    """

    submitted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ComposerEdit")
        self.setAccessibleName("Message")
        self.setTabChangesFocus(True)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.document().setDocumentMargin(7)  # ~ centres one line on the Send button
        self.document().documentLayout().documentSizeChanged.connect(self._fit_height)
        self._fit_height()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            mods = event.modifiers()
            if mods & Qt.KeyboardModifier.ShiftModifier:
                self.textCursor().insertText("\n")
                event.accept()
                return
            if not mods & Qt.KeyboardModifier.AltModifier:
                event.accept()
                self.submitted.emit()
                return
        super().keyPressEvent(event)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.StyleChange, QEvent.Type.FontChange):
            self._fit_height()

    def _fit_height(self, *_args: object) -> None:
        # QPlainTextDocumentLayout reports its size in lines, laid out lazily: cheap even for
        # a 1 MB paste.
        total = int(self.document().size().height()) or 1
        lines = max(1, min(MAX_COMPOSER_LINES, total))
        policy = (
            Qt.ScrollBarPolicy.ScrollBarAsNeeded
            if total > MAX_COMPOSER_LINES
            else Qt.ScrollBarPolicy.ScrollBarAlwaysOff
        )
        if self.verticalScrollBarPolicy() != policy:
            self.setVerticalScrollBarPolicy(policy)
        line_px = self.fontMetrics().lineSpacing()
        margins = self.contentsMargins()
        doc_margin = int(self.document().documentMargin()) * 2
        height = lines * line_px + doc_margin + margins.top() + margins.bottom() + 1
        if self.height() != height or self.minimumHeight() != height:
            self.setFixedHeight(height)


class FocusFrame(QFrame):
    """A frame that sets the ``focused`` property while a child has focus (for the QSS)."""

    def __init__(self, object_name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(object_name)
        self.setProperty("focused", False)

    def watch(self, widget: QWidget) -> None:
        widget.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.FocusIn, QEvent.Type.FocusOut):
            focused = event.type() == QEvent.Type.FocusIn
            if self.property("focused") != focused:
                self.setProperty("focused", focused)
                self.style().unpolish(self)
                self.style().polish(self)
        return False


def paint_row_background(painter: QPainter, option: QStyleOptionViewItem) -> QRect:
    """The sidebar rows' rounded selection/hover background; returns the row's inner rect."""
    rect = option.rect.adjusted(6, 2, -6, -2)
    selected = bool(option.state & QStyle.StateFlag.State_Selected)
    hovered = bool(option.state & QStyle.StateFlag.State_MouseOver)
    if selected or hovered:
        bg = QColor(option.palette.color(QPalette.ColorRole.Highlight))
        bg.setAlpha(46 if selected else 18)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(bg)
        painter.drawRoundedRect(rect, 8, 8)
    return rect


class TwoLineDelegate(QStyledItemDelegate):
    """Sidebar rows: optional icon, a title line and a muted subtitle, rounded selection."""

    def __init__(self, parent: QObject | None = None, icon_size: int = 0) -> None:
        super().__init__(parent)
        self._icon_size = icon_size

    def sizeHint(
        self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> QSize:
        fm = option.fontMetrics
        height = fm.height() * 2 + 4 + 16
        return QSize(200, max(height, self._icon_size + 16))

    def paint(
        self,
        painter: QPainter,
        option: QStyleOptionViewItem,
        index: QModelIndex | QPersistentModelIndex,
    ) -> None:
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        palette = option.palette
        rect = paint_row_background(painter, option)
        selected = bool(option.state & QStyle.StateFlag.State_Selected)

        x = rect.left() + 10
        icon = index.data(Qt.ItemDataRole.DecorationRole)
        if self._icon_size and icon is not None:
            top = rect.top() + (rect.height() - self._icon_size) // 2
            target = QRect(x, top, self._icon_size, self._icon_size)
            if hasattr(icon, "paint"):
                icon.paint(painter, target)
            else:
                painter.drawPixmap(target, icon)
            x += self._icon_size + 10

        title = str(index.data(Qt.ItemDataRole.DisplayRole) or "")
        subtitle = str(index.data(SUBTITLE_ROLE) or "")
        width = rect.right() - x - 8
        fm = option.fontMetrics
        title_font = QFont(option.font)
        title_font.setWeight(QFont.Weight.DemiBold if selected else QFont.Weight.Medium)
        sub_font = QFont(option.font)
        sub_font.setPointSizeF(max(7.0, option.font.pointSizeF() - 1.5))

        text_h = fm.height() * 2 + 2
        top = rect.top() + (rect.height() - text_h) // 2
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        painter.setFont(title_font)
        title_rect = QRect(x, top, width, fm.height())
        painter.drawText(
            title_rect,
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            painter.fontMetrics().elidedText(title, Qt.TextElideMode.ElideRight, width),
        )
        painter.setFont(sub_font)
        painter.setPen(palette.color(QPalette.ColorRole.PlaceholderText))
        sub_rect = QRect(x, top + fm.height() + 2, width, fm.height())
        painter.drawText(
            sub_rect,
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            painter.fontMetrics().elidedText(subtitle, Qt.TextElideMode.ElideRight, width),
        )
        painter.restore()


class InfoBar(QFrame):
    """A dismissible one-line notice above the transcript. Signals: dismissed()."""

    dismissed = Signal()

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("InfoBar")
        layout = self.row = QHBoxLayout(self)  # the label, then any buttons, then the close
        layout.setContentsMargins(16, 8, 8, 8)
        layout.setSpacing(8)
        self.label = plain_label(text, "InfoText", wrap=True)
        layout.addWidget(self.label, 1)
        close = QToolButton()
        close.setObjectName("InfoClose")
        close.setText("✕")
        close.setToolTip("Dismiss")
        close.setAccessibleName("Dismiss")
        close.setAutoRaise(True)
        close.clicked.connect(self._dismiss)
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.close_button = close

    def _dismiss(self) -> None:
        self.hide()
        self.dismissed.emit()


class FlowLayout(QLayout):
    """Widgets left to right, wrapping onto a new line when the width runs out (a row of
    buttons in a narrow bubble, or at a large text size): nothing is squeezed below its size
    hint, so no text is cut."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 0) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._spacing = spacing
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._arrange(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._arrange(rect, move=True)

    def sizeHint(self) -> QSize:
        """One line of everything (the width it would like)."""
        shown = [i.sizeHint() for i in self._items if not i.isEmpty()]
        width = sum(s.width() for s in shown) + self._spacing * max(0, len(shown) - 1)
        height = max((s.height() for s in shown), default=0)
        return _grown(QSize(width, height), self.contentsMargins())

    def minimumSize(self) -> QSize:
        """As narrow as its widest widget."""
        size = QSize()
        for item in self._items:
            if not item.isEmpty():
                size = size.expandedTo(item.minimumSize())
        return _grown(size, self.contentsMargins())

    def _arrange(self, rect: QRect, move: bool) -> int:
        margins = self.contentsMargins()
        area = rect.marginsRemoved(margins)
        x, y, line_height = area.x(), area.y(), 0
        for item in self._items:
            if item.isEmpty():
                continue
            hint = item.sizeHint()
            if x > area.x() and x + hint.width() > area.right() + 1:
                x, y = area.x(), y + line_height + self._spacing
                line_height = 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + self._spacing
            line_height = max(line_height, hint.height())
        return y + line_height - rect.y() + margins.bottom()


def _grown(size: QSize, margins: QMargins) -> QSize:
    return QSize(
        size.width() + margins.left() + margins.right(),
        size.height() + margins.top() + margins.bottom(),
    )
