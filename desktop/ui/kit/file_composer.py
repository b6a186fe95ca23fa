"""The composer that also takes files: pasted (copied files, or an image on the clipboard) or
dropped on it. It hands them on as signals and never inserts a path or an image as text; a
drag of files is left to the widget around it (the pane shows where to drop and takes it).
Also the paperclip icon of the attach buttons, drawn in the theme's colour."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from PySide6.QtCore import QEvent, QMimeData, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QDragEnterEvent,
    QDragMoveEvent,
    QDropEvent,
    QIcon,
    QImage,
    QPainter,
    QPainterPath,
    QPalette,
    QPen,
    QPixmap,
)
from PySide6.QtWidgets import QToolButton, QWidget

from desktop.ui.kit.widgets import ComposerEdit

ATTACH_TIP = "Attach files (images, documents)"


def local_files(mime: QMimeData | None) -> list[Path]:
    """The local files a drag or the clipboard carries (addresses of anything else left out)."""
    if mime is None or not mime.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]


def pasted_image(mime: QMimeData) -> QImage | None:
    """The image a paste carries (a screenshot, "Copy image"), unless it comes with words:
    some editors put a picture of copied text beside the text, and the text is what was meant."""
    if not mime.hasImage():
        return None
    words = mime.text().strip() if mime.hasText() else ""
    if words and not (words.startswith(("http://", "https://", "file:")) and " " not in words):
        return None
    data = mime.imageData()
    image = data.toImage() if isinstance(data, QPixmap) else data
    return image if isinstance(image, QImage) and not image.isNull() else None


class FileComposer(ComposerEdit):
    """``ComposerEdit`` (Enter sends) that takes files. Signals: files_given(list) with the
    ``Path``s pasted or dropped on it; image_given(QImage) for an image pasted as pixels (a
    screenshot)."""

    files_given = Signal(list)
    image_given = Signal(QImage)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return (
            bool(local_files(source)) or source.hasImage() or super().canInsertFromMimeData(source)
        )

    def insertFromMimeData(self, source: QMimeData) -> None:
        files = local_files(source)
        image = pasted_image(source)
        if files:
            self.files_given.emit(files)
        elif image is not None:
            self.image_given.emit(image)
        else:
            super().insertFromMimeData(source)

    # A drag of files goes on to the pane (ignored here), which shows the drop hint.
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if not _passed_on(event):
            super().dragEnterEvent(event)

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        if not _passed_on(event):
            super().dragMoveEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        if not _passed_on(event):
            super().dropEvent(event)


def _passed_on(event: QDropEvent) -> bool:
    """Ignore a drag or drop of local files (the widget around the composer takes them);
    False for anything else, which the composer handles itself."""
    if local_files(event.mimeData()):
        event.ignore()
        return True
    return False


def paperclip_icon(colour: QColor, size: int = 20, ratio: float = 2.0) -> QIcon:
    """A paperclip drawn with the pen of ``colour`` (no icon font or file needed); drawn once
    per colour, size and pixel ratio (every composer, and each palette or style change)."""
    return _paperclip(colour.rgba(), size, ratio)


@cache
def _paperclip(rgba: int, size: int, ratio: float) -> QIcon:
    colour = QColor.fromRgba(rgba)
    pixmap = QPixmap(int(size * ratio), int(size * ratio))
    pixmap.setDevicePixelRatio(ratio)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.translate(size / 2, size / 2)
    painter.rotate(40)
    painter.scale(size / 24, size / 24)
    painter.translate(-6, -12)  # the clip below is 12 wide and 22 high, four lines 4 apart
    path = QPainterPath(QPointF(8, 8))
    path.lineTo(8, 16)
    path.arcTo(QRectF(4, 14, 4, 4), 0, -180)  # the inner loop
    path.lineTo(4, 5)
    path.arcTo(QRectF(4, 1, 8, 8), 180, -180)  # the top
    path.lineTo(12, 17)
    path.arcTo(QRectF(0, 11, 12, 12), 0, -180)  # the outer loop
    path.lineTo(0, 7)
    pen = QPen(colour, 1.8)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    painter.setPen(pen)
    painter.drawPath(path)
    painter.end()
    return QIcon(pixmap)


class AttachButton(QToolButton):
    """The paperclip beside Send; its icon follows the theme's colours."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("AttachButton")
        self.setToolTip(ATTACH_TIP)
        self.setAccessibleName("Attach files")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setAutoRaise(True)
        self.setIconSize(QSize(20, 20))
        self._icon: QIcon | None = None
        self._paint_icon()

    def _paint_icon(self) -> None:
        colour = self.palette().color(QPalette.ColorRole.PlaceholderText)
        icon = paperclip_icon(colour, 20, max(2.0, self.devicePixelRatioF()))
        if icon is not self._icon:
            self._icon = icon
            self.setIcon(icon)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.StyleChange):
            self._paint_icon()
