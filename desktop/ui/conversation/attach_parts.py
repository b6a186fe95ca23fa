"""What the composer's chips and a message's attachments share: an attachment's kind and size
in words, its badge (a document's format, or why it failed), and thumbnails read with Qt's
image reader on a worker thread (``QImage`` is safe there; a ``QPixmap`` is made on the GUI
thread). Thumbnails of stored files are kept, a few hundred, so paging a conversation back and
forth reads each file once."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QImage, QImageReader, QImageWriter, QPainter, QPixmap

from desktop.local.memory import format_bytes
from desktop.store.attachments import Attachment
from desktop.ui.kit.theme import current_colors

THUMB_CACHE = 300  # thumbnails kept (a few KB each)

# A document's format as its badge and its chip name it, by MIME type.
FORMATS: dict[str, tuple[str, str]] = {
    "application/pdf": ("PDF", "PDF"),
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ("DOC", "Word"),
    "text/markdown": ("MD", "Markdown"),
    "text/csv": ("CSV", "CSV"),
    "application/json": ("JSON", "JSON"),
    "text/html": ("HTML", "HTML"),
    "text/plain": ("TXT", "text"),
    "image/png": ("PNG", "PNG"),
    "image/jpeg": ("JPG", "JPEG"),
    "image/gif": ("GIF", "GIF"),
    "image/webp": ("WEBP", "WebP"),
}


class AttachmentFiles(Protocol):
    """What the window asks of ``services.attachments`` to show a stored attachment."""

    def path(self, attachment: Attachment) -> Path: ...

    def viewing_copy(self, attachment: Attachment) -> Path: ...


def format_of(attachment: Attachment, fallback_name: str = "") -> tuple[str, str]:
    """(badge text, word) of a file: ("PDF", "PDF"), ("PY", "code") for a source file."""
    known = FORMATS.get(attachment.mime)
    if known is not None:
        return known
    suffix = Path(fallback_name or attachment.name).suffix.lstrip(".").upper()[:4]
    if attachment.kind == "image":
        return suffix or "IMG", "image"
    return suffix or "TXT", "code" if attachment.mime.startswith("text/x-") else "document"


def size_words(attachment: Attachment) -> str:
    """ "12.3 KiB · PDF" (and the image's pixels, the document's pages when known)."""
    return f"{format_bytes(attachment.size)} · {format_of(attachment)[1]}"


def badge(text: str, size: int, ratio: float, *, error: bool = False) -> QPixmap:
    """A document's square: its format in small capitals ("PDF"); ``error``: a red "!"."""
    colours = current_colors()
    pixmap = QPixmap(int(size * ratio), int(size * ratio))
    pixmap.setDevicePixelRatio(ratio)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    rect = QRectF(1, 1, size - 2, size - 2)
    fill, line, ink = (
        (colours.error_bg, colours.error_border, colours.error_text)
        if error
        else (colours.code_bg, colours.border, colours.muted)
    )
    painter.setBrush(QColor(fill))
    painter.setPen(QColor(line))
    painter.drawRoundedRect(rect, 6, 6)
    font = QFont()
    font.setBold(True)
    font.setPixelSize(max(7, int(size * (0.45 if error else 0.26))))
    painter.setFont(font)
    painter.setPen(QColor(ink))
    painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, "!" if error else text)
    painter.end()
    return pixmap


def read_thumbnail(path: Path, longest: int) -> QImage | None:
    """The image at ``path`` at most ``longest`` pixels on its longer edge, turned as its
    EXIF says; None when it cannot be read. Blocking: on a worker thread."""
    reader = QImageReader(str(path))
    reader.setAutoTransform(True)
    size = reader.size()
    if size.isValid() and max(size.width(), size.height()) > longest:
        reader.setScaledSize(size.scaled(longest, longest, Qt.AspectRatioMode.KeepAspectRatio))
    image = reader.read()
    if image.isNull():
        return None
    if max(image.width(), image.height()) > longest:  # a reader that cannot scale while reading
        image = scaled(image, longest)
    return image


def scaled(image: QImage, longest: int) -> QImage:
    """``image`` at most ``longest`` pixels on its longer edge, smoothly."""
    if max(image.width(), image.height()) <= longest:
        return image
    return image.scaled(
        QSize(longest, longest),
        Qt.AspectRatioMode.KeepAspectRatio,
        Qt.TransformationMode.SmoothTransformation,
    )


def png_bytes(image: QImage) -> bytes:
    """A pasted image as PNG bytes (blocking for a large one: on a worker thread)."""
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not QImageWriter(buffer, QByteArray(b"png")).write(image):
        return b""  # the attachment's check says the data is no image
    return bytes(buffer.data().data())


_thumbs: OrderedDict[tuple[str, int], QImage] = OrderedDict()


def cached_thumbnail(sha256: str, longest: int) -> QImage | None:
    """A stored file's thumbnail read before (None: not yet)."""
    key = (sha256, longest)
    image = _thumbs.get(key)
    if image is not None:
        _thumbs.move_to_end(key)
    return image


def keep_thumbnail(sha256: str, longest: int, image: QImage) -> None:
    _thumbs[(sha256, longest)] = image
    while len(_thumbs) > THUMB_CACHE:
        _thumbs.popitem(last=False)


def pixmap_of(image: QImage, ratio: float) -> QPixmap:
    """A thumbnail read at ``ratio`` times its size in the window, sharp on that screen."""
    pixmap = QPixmap.fromImage(image)
    pixmap.setDevicePixelRatio(ratio)
    return pixmap
