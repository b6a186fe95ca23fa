"""The composer's attachments: a chip per file above the text box, and the row that holds them.

A file given (the paperclip, a drop, a paste) becomes a chip at once and is made ready on a
worker thread through ``services.attachments`` (sniffed, stored, a document's text extracted,
its token estimate for the agent, an image's thumbnail): a few at a time, so 50 files never
block the window or the disk. A chip is waiting, preparing (a busy bar, with progress for a
big file), ready (thumbnail or format badge, name, size, kind, "≈ 1,234 tokens", ×) or failed
(red, the ``AttachError``'s words, ×). Removing a chip releases its stored file.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import shiboken6
from PySide6.QtCore import QEvent, QSize, Qt, Signal
from PySide6.QtGui import QImage
from PySide6.QtWidgets import (
    QFrame,
    QLabel,
    QProgressBar,
    QSizePolicy,
    QToolButton,
    QWidget,
)

from desktop.attach.errors import AttachError
from desktop.attach.prepare import Prepared
from desktop.chat.services import Services
from desktop.errors import UserError
from desktop.local.memory import format_bytes
from desktop.store.agents import Agent
from desktop.store.attachments import Attachment
from desktop.ui.conversation.attach_parts import (
    badge,
    format_of,
    keep_thumbnail,
    pixmap_of,
    png_bytes,
    read_thumbnail,
    scaled,
)
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.widgets import FlowLayout, column_scroll, hbox, plain, vbox

MAX_PREPARING = 3  # files read at once; the rest wait their turn
CHIP_WIDTH = 236
THUMB_PX = 40
MAX_ROWS_SHOWN = 2.5  # chips beyond this many rows scroll
PASTED_NAME = "Pasted image.png"
BUG_WORDS = "Could not attach this file: something went wrong inside SIMI Multi."


@dataclass
class _Job:
    """What the worker thread and the chip share: cancelled (the chip was removed) and the
    progress it last reported, handed to the GUI thread by ``report``."""

    report: Callable[[int, int], None] = lambda _done, _total: None
    cancelled: bool = False
    shown: int = -1  # the percentage last handed on

    def progress(self, done: int, total: int) -> None:
        percent = int(done * 100 / total) if total > 0 else 0
        if percent != self.shown:
            self.shown = percent
            self.report(done, total)

    def is_cancelled(self) -> bool:
        return self.cancelled


@dataclass
class _Done:
    prepared: Prepared
    tokens: int | None
    thumb: QImage | None = None


class AttachChip(QFrame):
    """One file in the composer. ``state``: "waiting", "preparing", "ready" or "error"."""

    def __init__(self, name: str, remove: Callable[[AttachChip], None]) -> None:
        super().__init__()
        self.setObjectName("AttachChip")
        self.name = name
        self.state = "waiting"
        self.prepared: Prepared | None = None
        self.tokens: int | None = None
        self.error = ""
        self.job = _Job()
        self.kept = False  # an edited message's own attachment (already stored, not new)
        self.setFixedWidth(CHIP_WIDTH)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self.setAccessibleName(f"Attachment {name}")
        row = hbox(self, (6, 6, 4, 6), 8)
        self.thumb = QLabel()
        self.thumb.setObjectName("AttachThumb")
        self.thumb.setFixedSize(THUMB_PX, THUMB_PX)
        self.thumb.setAlignment(Qt.AlignmentFlag.AlignCenter)
        row.addWidget(self.thumb, 0, Qt.AlignmentFlag.AlignTop)
        column = vbox(None, (0, 0, 0, 0), 1)
        self.name_label = ElidedLabel(name, Qt.TextElideMode.ElideMiddle)
        self.name_label.setObjectName("AttachName")
        self.detail = ElidedLabel()
        self.detail.setObjectName("AttachDetail")
        self.tokens_label = ElidedLabel()
        self.tokens_label.setObjectName("AttachDetail")
        self.error_label = plain(QLabel())
        self.error_label.setObjectName("AttachError")
        self.error_label.setWordWrap(True)
        self.error_label.hide()
        self.bar = QProgressBar()
        self.bar.setObjectName("AttachProgress")
        self.bar.setAccessibleName(f"Reading {name}")
        self.bar.setTextVisible(False)
        self.bar.setFixedHeight(4)
        self.bar.setRange(0, 0)  # busy until the first progress report
        self.bar.hide()
        for widget in (self.name_label, self.detail, self.tokens_label, self.error_label):
            column.addWidget(widget)
        column.addWidget(self.bar)
        column.addStretch(1)
        row.addLayout(column, 1)
        self.remove_button = QToolButton()
        self.remove_button.setObjectName("AttachRemove")
        self.remove_button.setText("×")
        self.remove_button.setToolTip("Remove this file")
        self.remove_button.setAccessibleName(f"Remove {name}")
        self.remove_button.setAutoRaise(True)
        self.remove_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.remove_button.clicked.connect(lambda: remove(self))
        row.addWidget(self.remove_button, 0, Qt.AlignmentFlag.AlignTop)
        self._badge(Path(name).suffix.lstrip(".").upper()[:4] or "FILE")
        self._set_state("waiting")
        self.detail.setText("Waiting…")

    @property
    def attachment(self) -> Attachment | None:
        return self.prepared.attachment if self.prepared is not None else None

    def sizeHint(self) -> QSize:
        tall = self.heightForWidth(CHIP_WIDTH)  # with the frame; -1 with no wrapping text
        return QSize(CHIP_WIDTH, tall if tall > 0 else super().sizeHint().height())

    def _badge(self, text: str, *, error: bool = False) -> None:
        self._badged: tuple[str, bool] | None = (text, error)
        self.thumb.setPixmap(badge(text, THUMB_PX, self.devicePixelRatioF() or 1.0, error=error))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        badged = getattr(self, "_badged", None)
        if badged is not None and event.type() == QEvent.Type.StyleChange:  # light, dark
            self._badge(badged[0], error=badged[1])

    def _set_state(self, state: str) -> None:
        self.state = state
        self.setProperty("state", state)
        self.style().unpolish(self)
        self.style().polish(self)
        self.updateGeometry()

    def set_preparing(self) -> None:
        self._set_state("preparing")
        self.detail.setText("Reading…")
        self.bar.show()

    def set_progress(self, done: int, total: int) -> None:
        if self.state != "preparing" or total <= 0:
            return
        self.bar.setRange(0, 1000)
        self.bar.setValue(int(done * 1000 / total))
        self.detail.setText(f"Reading… {done * 100 // total}%")

    def set_ready(
        self, prepared: Prepared, thumb: QImage | None, tokens: int | None, agent_name: str = ""
    ) -> None:
        self.prepared = prepared
        attachment = prepared.attachment
        self.bar.hide()
        self.name = attachment.name
        self.name_label.setText(attachment.name)
        if thumb is not None:
            self._badged = None
            longest = max(thumb.width(), thumb.height())
            self.thumb.setPixmap(pixmap_of(thumb, max(1.0, longest / THUMB_PX)))
        else:
            self._badge(format_of(attachment)[0])
        self.detail.setText(chip_words(prepared))
        self.set_tokens(tokens, agent_name)
        self._set_state("ready")

    def set_tokens(self, tokens: int | None, agent_name: str = "") -> None:
        self.tokens = tokens
        self.tokens_label.setText(f"≈ {tokens:,} tokens" if tokens is not None else "")
        self.tokens_label.setVisible(tokens is not None)
        if tokens is not None and agent_name:
            self.tokens_label.setToolTip(f"About {tokens:,} tokens of {agent_name}'s context")

    def set_error(self, words: str) -> None:
        self.error = words
        self.bar.hide()
        self.detail.hide()
        self.tokens_label.hide()
        self.error_label.setText(words)
        self.error_label.show()
        self._badge("", error=True)
        self.remove_button.setToolTip("Remove this file (it will not be sent)")
        self._set_state("error")


def chip_words(prepared: Prepared) -> str:
    """ "12.3 KiB · PDF, 3 pages" / "2.1 MiB · PNG 1600×1200"."""
    attachment = prepared.attachment
    kind = format_of(attachment)[1]
    if prepared.width and prepared.height:
        kind += f" {prepared.width}×{prepared.height}"
    elif prepared.pages:
        kind += f", {prepared.pages:,} page" + ("s" if prepared.pages != 1 else "")
    return f"{format_bytes(attachment.size)} · {kind}"


class AttachRow(QFrame):
    """The chips of one composer (hidden while it has none); chips beyond a few rows scroll.

    Signals: changed(): a chip came, went, or finished preparing (Send may change).
    ``agent`` is asked for the agent the estimates are for.
    """

    changed = Signal()

    def __init__(self, services: Services, agent: Callable[[], Agent | None]) -> None:
        super().__init__()
        self.setObjectName("AttachRow")
        self.services = services
        self._agent = agent
        self.chips: list[AttachChip] = []
        self._gate: asyncio.Semaphore | None = None
        self._kept: list[Attachment] | None = None  # an edited message's, as it had them
        self.tasks: set[asyncio.Task[Any]] = set()
        layout = vbox(self)
        self.scroller = column_scroll("AttachScroll")
        self.body = QWidget()
        self.body.setObjectName("AttachBody")
        self.flow = FlowLayout(self.body, 6)
        self.scroller.setWidget(self.body)
        layout.addWidget(self.scroller)
        self.hide()

    # state -----------------------------------------------------------------------------------
    @property
    def preparing(self) -> bool:
        """True while any chip is still being read (Send waits)."""
        return any(c.state in ("waiting", "preparing") for c in self.chips)

    def attachments(self) -> list[Attachment]:
        """The ready chips' attachments, in order (failed ones are not sent)."""
        return [c.attachment for c in self.chips if c.state == "ready" and c.attachment]

    def failed(self) -> list[AttachChip]:
        return [c for c in self.chips if c.state == "error"]

    def edited(self) -> list[Attachment] | None:
        """What an edited message should carry: None while its own attachments are as they
        were (the message keeps them), else the chips'."""
        if self._kept is not None and self.attachments() == self._kept and not self.failed():
            return None
        return self.attachments()

    def tokens(self) -> int:
        return sum(c.tokens or 0 for c in self.chips if c.state == "ready")

    # adding ----------------------------------------------------------------------------------
    def add_files(self, paths: Sequence[Path]) -> list[AttachChip]:
        """A chip per path, each prepared in turn (a folder or a missing file: its error)."""
        chips = []
        service = self.services.attachments
        for path in paths:
            chip = self._add_chip(path.name or str(path))
            chips.append(chip)
            self._queue(chip, partial(_prepare_file, service, path, chip.job))
        return chips

    def add_image(self, image: QImage, name: str = PASTED_NAME) -> AttachChip:
        """An image pasted as pixels: encoded as PNG and stored on a worker thread."""
        chip = self._add_chip(name)
        service = self.services.attachments
        frozen = image.copy()  # the clipboard's image may change while it is read
        self._queue(chip, lambda agent: _prepare_image(service, frozen, name, agent))
        return chip

    def add_ready(self, attachments: Sequence[Attachment], *, kept: bool = False) -> None:
        """Stored attachments as ready chips (estimated again): an edited message's own
        (``kept``: they are the message's, and say so in ``edited``), or a draft put back."""
        if kept:
            self._kept = list(attachments)
        for attachment in attachments:
            chip = self._add_chip(attachment.name)
            chip.kept = kept
            chip.set_ready(Prepared(attachment), None, None)
        self.refresh_tokens()

    def _add_chip(self, name: str) -> AttachChip:
        chip = AttachChip(name, self.remove)
        self.chips.append(chip)
        self.flow.addWidget(chip)
        self.show()
        self._fit_height()
        self.changed.emit()
        return chip

    def _queue(self, chip: AttachChip, work: Callable[[Agent | None], _Done]) -> None:
        loop = asyncio.get_running_loop()

        def report(done: int, total: int) -> None:  # on the worker thread
            with contextlib.suppress(RuntimeError):  # the loop closed: the app is quitting
                loop.call_soon_threadsafe(self._progress, chip, done, total)

        chip.job.report = report
        task = start(self._prepare(chip, work), name="attach: prepare")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _progress(self, chip: AttachChip, done: int, total: int) -> None:
        if shiboken6.isValid(chip):
            chip.set_progress(done, total)

    async def _prepare(self, chip: AttachChip, work: Callable[[Agent | None], _Done]) -> None:
        job = chip.job  # plain Python: still there after × deleted the chip
        if self._gate is None:
            self._gate = asyncio.Semaphore(MAX_PREPARING)
        async with self._gate:
            if job.cancelled or not shiboken6.isValid(chip):
                return
            chip.set_preparing()
            agent = self._agent()
            try:
                done = await run_blocking(work, agent)
            except UserError as exc:
                if not job.cancelled and shiboken6.isValid(chip):
                    chip.set_error(exc.user_message)
                    self._changed()
                return
            except Exception:
                if not job.cancelled and shiboken6.isValid(chip):
                    chip.set_error(BUG_WORDS)
                    self._changed()
                raise
        if job.cancelled or not shiboken6.isValid(chip):
            self.services.attachments.release(done.prepared.attachment)  # removed meanwhile
            return
        if done.thumb is not None:
            keep_thumbnail(done.prepared.attachment.sha256, THUMB_PX * 2, done.thumb)
        chip.set_ready(done.prepared, done.thumb, done.tokens, agent.name if agent else "")
        self._changed()

    # removing --------------------------------------------------------------------------------
    def remove(self, chip: AttachChip) -> None:
        """× on a chip: stop reading it, or release its stored file."""
        chip.job.cancelled = True
        attachment = chip.attachment
        if attachment is not None and not chip.kept:
            self.services.attachments.release(attachment)
        self._drop(chip)
        self._changed()

    def clear(self, *, release: bool, chips: Sequence[AttachChip] | None = None) -> None:
        """The chips go (``chips``: those, else all): after sending (``release`` False: the
        message holds the files now) or when the draft is given up (True)."""
        for chip in list(self.chips if chips is None else chips):
            chip.job.cancelled = True
            if release and chip.attachment is not None and not chip.kept:
                self.services.attachments.release(chip.attachment)
            self._drop(chip)
        self._kept = None
        self._changed()

    def _drop(self, chip: AttachChip) -> None:
        if chip in self.chips:
            self.chips.remove(chip)
        self.flow.removeWidget(chip)
        chip.hide()
        chip.deleteLater()

    def _changed(self) -> None:
        if not shiboken6.isValid(self):
            return
        self.setVisible(bool(self.chips))
        self._fit_height()
        self.changed.emit()

    # estimates -------------------------------------------------------------------------------
    def refresh_tokens(self) -> asyncio.Task[None] | None:
        """The agent changed (or an edit brought its message's files): estimate again."""
        agent = self._agent()
        ready = [c for c in self.chips if c.state == "ready" and c.attachment is not None]
        if agent is None or not ready:
            for chip in ready:
                chip.set_tokens(None)
            return None
        service = self.services.attachments
        wanted = [c.attachment for c in ready if c.attachment is not None]

        async def go() -> None:
            found = await run_blocking(lambda: [_estimate(service, a, agent) for a in wanted])
            for chip, tokens in zip(ready, found, strict=True):
                if shiboken6.isValid(chip):
                    chip.set_tokens(tokens, agent.name)
            self._changed()

        task = start(go(), name="attach: estimate")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    # layout ----------------------------------------------------------------------------------
    def _fit_height(self) -> None:
        width = max(self.scroller.viewport().width(), CHIP_WIDTH)
        needed = self.flow.heightForWidth(width)
        one = max((c.sizeHint().height() for c in self.chips), default=0)
        most = int(one * MAX_ROWS_SHOWN + 6 * 2)
        self.scroller.setFixedHeight(max(0, min(needed, most)))

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        self._fit_height()


# On a worker thread --------------------------------------------------------------------------
def _estimate(service: Any, attachment: Attachment, agent: Agent | None) -> int | None:
    if agent is None:
        return None
    try:
        return int(service.estimate_tokens(attachment, agent))
    except UserError:
        return None  # no estimate is no reason to refuse the file


def _finish(service: Any, prepared: Prepared, agent: Agent | None, image: QImage | None) -> _Done:
    attachment = prepared.attachment
    thumb = None
    if attachment.kind == "image":
        longest = THUMB_PX * 2  # sharp at twice the pixels
        thumb = scaled(image, longest) if image is not None else None
        if thumb is None:
            thumb = read_thumbnail(service.path(attachment), longest)
    return _Done(prepared, _estimate(service, attachment, agent), thumb)


def _prepare_file(service: Any, path: Path, job: _Job, agent: Agent | None) -> _Done:
    prepared = service.prepare(path, progress=job.progress, cancel=job.is_cancelled)
    return _finish(service, prepared, agent, None)


def _prepare_image(service: Any, image: QImage, name: str, agent: Agent | None) -> _Done:
    if image.isNull():
        raise AttachError("The clipboard's image could not be read. Copy it again.")
    prepared = service.prepare_bytes(png_bytes(image), name)
    return _finish(service, prepared, agent, image)
