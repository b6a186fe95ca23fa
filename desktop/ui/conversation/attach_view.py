"""A sent question's attachments, under its text in the bubble: image thumbnails (a click shows
the image full size, fitted to the screen; Esc closes) and document chips (name and size; a
click opens a copy under the file's own name with the system's viewer). Only the person's own
files are opened so, never anything a model wrote. Thumbnails and copies are read on worker
threads (``AttachmentFiles``: ``services.attachments``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import shiboken6
from PySide6.QtCore import QEvent, QSize, Qt, QUrl
from PySide6.QtGui import QDesktopServices, QGuiApplication, QIcon, QImage
from PySide6.QtWidgets import QDialog, QLabel, QToolButton, QWidget

from desktop.errors import UserError
from desktop.store.attachments import Attachment
from desktop.ui.conversation.attach_parts import (
    AttachmentFiles,
    badge,
    cached_thumbnail,
    format_of,
    keep_thumbnail,
    pixmap_of,
    read_thumbnail,
    size_words,
)
from desktop.ui.kit.async_door import loop_running, run_blocking, start
from desktop.ui.kit.widgets import FlowLayout, vbox, warn

THUMB_PX = 112  # an image's thumbnail in a bubble, on its longer edge
BADGE_PX = 28
NAME_CHARS = 32  # a document chip's name is cut in the middle past this many characters
SCREEN_SHARE = 0.9  # the viewer takes at most this much of the screen


def open_url(url: QUrl) -> bool:
    """The system's viewer for a file (tests replace this)."""
    return QDesktopServices.openUrl(url)


def short_name(name: str, limit: int = NAME_CHARS) -> str:
    if len(name) <= limit:
        return name
    half = (limit - 1) // 2
    return f"{name[:half]}…{name[-(limit - 1 - half) :]}"


class AttachmentStrip(QWidget):
    """The files of one sent question, in a row that wraps. ``buttons``: one per file."""

    def __init__(self, attachments: Sequence[Attachment], files: AttachmentFiles | None) -> None:
        super().__init__()
        self.setObjectName("AttachmentStrip")
        self.files = files
        self.attachments = list(attachments)
        self.tasks: set[asyncio.Task[Any]] = set()
        self._badged: dict[QToolButton, tuple[str, int]] = {}  # (format, size) until a thumbnail
        flow = FlowLayout(self, 6)
        self.buttons: list[QToolButton] = []
        for attachment in self.attachments:
            button = (
                self._image(attachment)
                if attachment.kind == "image"
                else self._document(attachment)
            )
            button.clicked.connect(self._opener(attachment))
            flow.addWidget(button)
            self.buttons.append(button)

    def _image(self, attachment: Attachment) -> QToolButton:
        button = QToolButton()
        button.setObjectName("AttachImage")
        button.setAccessibleName(f"Image {attachment.name}")
        button.setToolTip(f"{attachment.name} · {size_words(attachment)}\nClick to see it whole")
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.setIconSize(QSize(THUMB_PX, THUMB_PX * 3 // 4))
        ratio = self.devicePixelRatioF() or 1.0
        longest = int(THUMB_PX * max(ratio, 1.0))
        image = cached_thumbnail(attachment.sha256, longest)
        if image is not None:
            _show_thumb(button, image, ratio)
        else:
            mark = format_of(attachment)[0]
            self._badged[button] = (mark, BADGE_PX * 2)
            button.setIcon(QIcon(badge(mark, BADGE_PX * 2, ratio)))
            if self.files is not None and loop_running():
                self._track(start(self._load(button, attachment, longest), name="thumbnail"))
        return button

    def _document(self, attachment: Attachment) -> QToolButton:
        button = QToolButton()
        button.setObjectName("AttachDocument")
        button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        # a space apart from the badge (the style sets the icon against the text)
        button.setText(f" {short_name(attachment.name)}\n {size_words(attachment)}")
        button.setAccessibleName(f"Document {attachment.name}")
        limit = attachment.text_limit
        cut = f" (the first {limit:,} characters were sent)" if limit is not None else ""
        button.setToolTip(f"{attachment.name}{cut}\nClick to open it with your system's viewer")
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        self._badged[button] = (format_of(attachment)[0], BADGE_PX)
        button.setIconSize(QSize(BADGE_PX, BADGE_PX))
        self._paint_badges()
        return button

    def _paint_badges(self) -> None:
        ratio = self.devicePixelRatioF() or 1.0
        for button, (text, size) in self._badged.items():
            button.setIcon(QIcon(badge(text, size, ratio)))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.StyleChange:  # light, dark: the badges' colours
            self._paint_badges()

    def _track(self, task: asyncio.Task[Any]) -> None:
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _load(self, button: QToolButton, attachment: Attachment, longest: int) -> None:
        files = self.files
        assert files is not None
        image = await run_blocking(lambda: read_thumbnail(files.path(attachment), longest))
        if image is None:
            return  # a file gone or unreadable: its badge stays
        keep_thumbnail(attachment.sha256, longest, image)
        if shiboken6.isValid(button) and shiboken6.isValid(self):
            self._badged.pop(button, None)
            _show_thumb(button, image, self.devicePixelRatioF() or 1.0)

    def _opener(self, attachment: Attachment) -> Any:
        # a plain closure (see bubble._action_slot)
        return lambda: self.open(attachment)

    def open(self, attachment: Attachment) -> asyncio.Task[Any] | None:
        """A click: an image in the viewer, a document with the system's viewer."""
        if self.files is None:
            return None
        go = show_image if attachment.kind == "image" else open_document
        task = start(go(self, self.files, attachment), name="open attachment")
        self._track(task)
        return task


def _show_thumb(button: QToolButton, image: QImage, ratio: float) -> None:
    pixmap = pixmap_of(image, max(ratio, 1.0))
    button.setIcon(QIcon(pixmap))
    size = pixmap.deviceIndependentSize().toSize()
    button.setIconSize(size)


async def open_document(parent: QWidget, files: AttachmentFiles, attachment: Attachment) -> None:
    """A copy of the person's own file under its name, opened with the system's viewer."""
    try:
        path = await run_blocking(files.viewing_copy, attachment)
    except (UserError, OSError) as exc:
        words = exc.user_message if isinstance(exc, UserError) else str(exc.strerror or exc)
        if shiboken6.isValid(parent):
            warn(parent, "Cannot open the file", f"{attachment.name} could not be opened: {words}")
        return
    open_url(QUrl.fromLocalFile(str(path)))


class ImageViewer(QDialog):
    """An image whole, fitted to the screen; Esc (or Close) closes it."""

    def __init__(self, parent: QWidget | None, name: str, image: QImage, ratio: float) -> None:
        super().__init__(parent)
        self.setObjectName("ImageViewer")
        self.setWindowTitle(name)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        layout = vbox(self, (8, 8, 8, 8))
        self.picture = QLabel()
        self.picture.setObjectName("ImageViewerPicture")
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture.setAccessibleName(f"Image {name}")
        self.picture.setPixmap(pixmap_of(image, max(ratio, 1.0)))
        layout.addWidget(self.picture)  # Esc closes it, as any dialog


async def show_image(parent: QWidget, files: AttachmentFiles, attachment: Attachment) -> None:
    """The image whole in a viewer, read at most as large as the screen shows it."""
    screen = parent.screen() if shiboken6.isValid(parent) else None
    screen = screen or QGuiApplication.primaryScreen()
    area = screen.availableGeometry()
    ratio = screen.devicePixelRatio() or 1.0
    fit = QSize(int(area.width() * SCREEN_SHARE * ratio), int(area.height() * SCREEN_SHARE * ratio))
    image = await run_blocking(_read_fitted, files, attachment, fit)
    if not shiboken6.isValid(parent):
        return
    if image is None:
        warn(parent, "Cannot show the image", f"{attachment.name} could not be read.")
        return
    viewer = ImageViewer(parent.window(), attachment.name, image, ratio)
    viewer.open()


def _read_fitted(files: AttachmentFiles, attachment: Attachment, fit: QSize) -> QImage | None:
    """On a worker thread: the image no larger than ``fit`` (the screen's share)."""
    image = read_thumbnail(files.path(attachment), max(fit.width(), fit.height()))
    if image is not None and (image.width() > fit.width() or image.height() > fit.height()):
        image = image.scaled(
            fit, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
        )
    return image
