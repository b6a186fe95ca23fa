"""The two tables of the "Find models" tab: repositories found (with a "Gated" badge drawn as
a pill beside the name) and a repository's GGUF models with their fit mark and a Download
button each (a model with a vision projector in its repository: a "Sees images" pill). Pure
widgets: the view fills them and listens."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, QModelIndex, QObject, QPersistentModelIndex, QRect, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from desktop.chat.format import count_text
from desktop.chat.hub_browse import sees_images, vision_note
from desktop.hub.client import RepoSummary
from desktop.hub.files import Fit, GgufModel
from desktop.ui.kit.theme import current_colors
from desktop.ui.models.hub_format import fit_colour, relative_time, size_text

BADGE_ROLE = Qt.ItemDataRole.UserRole + 1  # text of a pill drawn at the cell's right
TONE_ROLE = Qt.ItemDataRole.UserRole + 2  # the pill's colours: "warn" (default) or "info"
VISION_BADGE = "Sees images"
KEY_ROLE = Qt.ItemDataRole.UserRole  # the repo id / the model name
REPO_COLUMNS = ("Repository", "Author", "Downloads", "Likes", "Licence", "Updated")
MODEL_COLUMNS = ("Model", "Quantization", "Size", "Fits this machine", "")
FIT_COLUMN = 3
ACTION_COLUMN = 4

Index = QModelIndex | QPersistentModelIndex


class BadgeDelegate(QStyledItemDelegate):
    """Draws the cell's text elided before a small rounded badge ("Gated", "Private")."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        badge = index.data(BADGE_ROLE)
        if not badge:
            super().paint(painter, option, index)
            return
        font = QFont(option.font)
        font.setPointSizeF(max(7.0, font.pointSizeF() * 0.85))
        font.setBold(True)
        metrics_w = _text_width(font, badge) + 12
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        pill = QRect(opt.rect.right() - metrics_w - 6, opt.rect.top(), metrics_w, opt.rect.height())
        opt.rect = opt.rect.adjusted(0, 0, -(metrics_w + 10), 0)
        style = opt.widget.style() if opt.widget is not None else None
        if style is not None:
            full = QStyleOptionViewItem(option)
            self.initStyleOption(full, index)
            full.text = ""
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, full, painter, opt.widget)
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        colors = current_colors()
        border, fill, text = (colors.warn_border, colors.warn_bg, colors.warn_text)
        if index.data(TONE_ROLE) == "info":  # a capability, not a warning
            border, fill, text = (colors.user_border, colors.selection, colors.text)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        box = QRectF(pill).adjusted(0, 4, 0, -4)
        painter.setPen(QPen(QColor(border), 1))
        painter.setBrush(QColor(fill))
        painter.drawRoundedRect(box, box.height() / 2, box.height() / 2)
        painter.setPen(QColor(text))
        painter.setFont(font)
        painter.drawText(box, Qt.AlignmentFlag.AlignCenter, badge)
        painter.restore()


def _text_width(font: QFont, text: str) -> int:
    return QFontMetrics(font).horizontalAdvance(text)


def _item(text: str, tip: str = "", align_right: bool = False) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setToolTip(tip or text)
    if align_right:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item


class FittedColumns:
    """The first column stretches (at least ``name_min`` px); the others, in the order given
    (most useful first), are shown while they fit beside it, and hidden beyond: a narrow
    window drops whole columns instead of squeezing every one into "…"."""

    def __init__(
        self,
        table: QTableWidget,
        name_min: int,
        others: Sequence[tuple[int, int]],
        after: Callable[[], None] | None = None,
    ) -> None:
        self.table = table
        self.after = after
        self.name_min = name_min
        self.others = list(others)
        header = table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column, width in self.others:
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Fixed)
            table.setColumnWidth(column, width)
        table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        table.installEventFilter(_ResizeHook(table, self.fit))

    def fit(self) -> None:
        room = self.table.viewport().width() - self.name_min
        for column, width in self.others:
            shown = width <= room
            if shown:
                room -= width
            self.table.setColumnHidden(column, not shown)
        if self.after is not None:
            self.after()

    def shown(self, column: int) -> bool:
        return not self.table.isColumnHidden(column)


class _ResizeHook(QObject):
    def __init__(self, table: QTableWidget, on_resize: Callable[[], None]) -> None:
        super().__init__(table)
        self._on_resize = on_resize

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.Resize, QEvent.Type.Show, QEvent.Type.LayoutRequest):
            self._on_resize()
        return False


class RepoTable(QTableWidget):
    """Repositories found: name (with badges), author, downloads, likes, licence, updated."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("HubRepos")
        self.setAccessibleName("Repositories found")
        self.setColumnCount(len(REPO_COLUMNS))
        _setup(self, REPO_COLUMNS)
        self.setItemDelegateForColumn(0, BadgeDelegate(self))
        # name first, then what matters most for choosing: downloads, freshness, likes...
        self.repos: list[RepoSummary] = []
        self._full_ids = False
        self.columns = FittedColumns(
            self, 190, ((2, 84), (5, 104), (3, 56), (4, 96), (1, 110)), self._name_texts
        )

    def _name_texts(self) -> None:
        """Without the Author column the name says "owner/name"."""
        full = self.isColumnHidden(1)
        if full == self._full_ids:
            return
        self._full_ids = full
        for row, repo in enumerate(self.repos):
            item = self.item(row, 0)
            if item is not None:
                item.setText(repo.id if full else repo.id.split("/", 1)[-1])

    def show_repos(self, repos: Sequence[RepoSummary]) -> None:
        self.repos = list(repos)
        self.setRowCount(0)
        self.setRowCount(len(self.repos))
        for row, repo in enumerate(self.repos):
            name = repo.id if self._full_ids else repo.id.split("/", 1)[-1]
            first = _item(name, repo.id)
            first.setData(KEY_ROLE, repo.id)
            badges = [b for b, on in (("Gated", repo.gated), ("Private", repo.private)) if on]
            if badges:
                first.setData(BADGE_ROLE, " · ".join(badges))
                first.setToolTip(
                    f"{repo.id}\n{' and '.join(badges)}: an access token is needed to download"
                )
            self.setItem(row, 0, first)
            self.setItem(row, 1, _item(repo.author or repo.id.split("/", 1)[0]))
            self.setItem(
                row, 2, _item(count_text(repo.downloads), f"{repo.downloads:,} downloads", True)
            )
            self.setItem(row, 3, _item(count_text(repo.likes), f"{repo.likes:,} likes", True))
            self.setItem(row, 4, _item(repo.license or "—", repo.license or "No licence given"))
            self.setItem(row, 5, _item(relative_time(repo.last_modified), repo.last_modified or ""))

    def selected_repo(self) -> RepoSummary | None:
        rows = self.selectionModel().selectedRows()
        return self.repos[rows[0].row()] if rows else None


class ModelTable(QTableWidget):
    """A repository's models: name, quantization, size, fit mark, and an action button.

    ``on_action(model)`` is called when a row's button is pressed (Download or Resume)."""

    def __init__(
        self, on_action: Callable[[GgufModel], None], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("HubModels")
        self.setAccessibleName("Models in this repository")
        self.setColumnCount(len(MODEL_COLUMNS))
        _setup(self, MODEL_COLUMNS)
        self.setItemDelegateForColumn(0, BadgeDelegate(self))  # "Sees images"
        self.columns = FittedColumns(
            self, 150, ((FIT_COLUMN, 124), (ACTION_COLUMN, 116), (2, 76), (1, 100))
        )
        self._on_action = on_action
        self.models: list[GgufModel] = []
        self.buttons: dict[str, QPushButton] = {}

    def show_models(self, models: Sequence[GgufModel]) -> None:
        self.models = list(models)
        self.buttons = {}
        self.setRowCount(0)
        self._fit_row_height()
        self.setRowCount(len(self.models))
        for row, model in enumerate(self.models):
            parts = len(model.files)
            tip = model.name + (
                f"\n{parts} files (a split model, downloaded together)" if parts > 1 else ""
            )
            if sees_images(model):
                tip += "\n" + vision_note(model)
            name = _item(model.name + (f"  ({parts} parts)" if parts > 1 else ""), tip)
            name.setData(KEY_ROLE, model.name)
            if sees_images(model):
                name.setData(BADGE_ROLE, VISION_BADGE)
                name.setData(TONE_ROLE, "info")
            self.setItem(row, 0, name)
            self.setItem(row, 1, _item(model.quantization or "—"))
            size_tip = f"{model.size:,} bytes"
            if model.projector is not None:
                size_tip += f", and {model.projector.size:,} bytes of vision projector"
            self.setItem(row, 2, _item(size_text(model.size), size_tip, True))
            self.setItem(row, FIT_COLUMN, _item("…", "Estimating the memory it needs"))
            button = QPushButton("Download")
            button.setObjectName("HubDownload")
            button.setAccessibleName(f"Download {model.name}")
            button.clicked.connect(self._slot(model))
            self.buttons[model.name] = button
            self.setCellWidget(row, ACTION_COLUMN, button)

    def _fit_row_height(self) -> None:
        """Every row tall enough for its button (in the current font and style)."""
        probe = QPushButton("Download")
        probe.setObjectName("HubDownload")
        height = max(probe.sizeHint().height() + 4, self.fontMetrics().height() + 10)
        probe.deleteLater()
        self.verticalHeader().setDefaultSectionSize(height)

    def _slot(self, model: GgufModel) -> Callable[[], None]:
        return lambda: self._on_action(model)

    def set_fit(self, name: str, fit: Fit) -> None:
        row = self.row_of(name)
        if row is None:
            return
        item = _item(fit.label, fit.detail)
        item.setForeground(QColor(fit_colour(fit.verdict, current_colors().dark)))
        font = item.font()
        font.setBold(fit.verdict != "unknown")
        item.setFont(font)
        item.setData(KEY_ROLE, fit.verdict)
        self.setItem(row, FIT_COLUMN, item)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.StyleChange):
            dark = current_colors().dark  # light/dark switched: the marks' colours follow
            for row in range(self.rowCount()):
                item = self.item(row, FIT_COLUMN)
                if item is not None and (verdict := item.data(KEY_ROLE)):
                    item.setForeground(QColor(fit_colour(verdict, dark)))

    def set_action(self, name: str, text: str, enabled: bool, tip: str = "") -> None:
        button = self.buttons.get(name)
        if button is None:
            return
        button.setText(text)
        button.setEnabled(enabled)
        button.setToolTip(tip)
        button.setAccessibleName(f"{text} {name}")

    def row_of(self, name: str) -> int | None:
        for row, model in enumerate(self.models):
            if model.name == name:
                return row
        return None

    def fit_text(self, name: str) -> str:
        row = self.row_of(name)
        item = self.item(row, FIT_COLUMN) if row is not None else None
        return item.text() if item is not None else ""

    def selected_model(self) -> GgufModel | None:
        rows = self.selectionModel().selectedRows()
        return self.models[rows[0].row()] if rows else None


def _setup(table: QTableWidget, columns: Sequence[str]) -> None:
    table.setHorizontalHeaderLabels(list(columns))
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.verticalHeader().setVisible(False)
    table.setWordWrap(False)
    table.setTextElideMode(Qt.TextElideMode.ElideRight)
    table.setAlternatingRowColors(True)
    header = table.horizontalHeader()
    header.setHighlightSections(False)
    header.setMinimumSectionSize(40)
