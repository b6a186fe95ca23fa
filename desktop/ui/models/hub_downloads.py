"""The downloads strip of the "Find models" tab: one row per download with its name, a bar,
"1.2 GB of 4.9 GB · 12.3 MB/s · 5 min left", Pause/Resume, Cancel (asks first) and, after a
failure, the hub's words and Retry.

Progress comes from each download's own thread (``Downloader.start``'s ``on_progress``); it
is handed to the GUI thread by a Qt signal (a queued connection: the receiver lives on the
GUI thread), so no widget is touched from a download thread. Downloads left unfinished at the
last exit (``Downloader.pending()``) are listed as paused, with Resume.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.services import Services
from desktop.errors import UserError
from desktop.hub.client import HubAuthError
from desktop.hub.downloads import DownloadHandle, DownloadProgress, PendingDownload
from desktop.hub.files import GgufModel
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.widgets import ask, plain, scroll_column
from desktop.ui.models.hub_format import percent, progress_texts

log = logging.getLogger("simi.ui.hub")

ACTIVE = ("queued", "running", "verifying")
ROWS_SHOWN = 2  # the strip grows to this many rows, then scrolls (one in a short window)


@dataclass
class Download:
    """One row's facts: what is downloaded, its handle while a thread runs it, its last
    progress."""

    repo: str
    model: GgufModel
    revision: str
    progress: DownloadProgress
    handle: DownloadHandle | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.repo, self.model.name)


class ProgressBridge(QObject):
    """Lives on the GUI thread; ``arrived`` is emitted from download threads (queued)."""

    arrived = Signal(object)


class DownloadRow(QFrame):
    """Name and status on the first line, the bar and the buttons on the second."""

    def __init__(self, download: Download, panel: DownloadsPanel) -> None:
        super().__init__()
        self.setObjectName("HubDownloadRow")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.download = download
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 4, 0, 4)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(2)
        self.name = ElidedLabel(download.model.name)
        self.name.setToolTip(f"{download.repo} · {download.model.name}")
        font = self.name.font()
        font.setBold(True)
        self.name.setFont(font)
        self.name.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.status = ElidedLabel("")
        self.status.setObjectName("HubDownloadStatus")
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.status.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        grid.addWidget(self.name, 0, 0)
        grid.addWidget(self.status, 0, 1)
        grid.setColumnStretch(0, 2)
        grid.setColumnStretch(1, 3)
        line = QHBoxLayout()
        line.setSpacing(6)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        self.bar.setMaximumHeight(10)
        self.bar.setAccessibleName(f"Progress of {download.model.name}")
        line.addWidget(self.bar, 1)
        self.pause = self._button("Pause", panel.toggle_pause)
        self.retry = self._button("Retry", panel.retry)
        self.cancel = self._button("Cancel", panel.ask_cancel)
        self.dismiss = QToolButton()
        self.dismiss.setText("✕")
        self.dismiss.setAutoRaise(True)
        self.dismiss.setToolTip("Remove from the list")
        self.dismiss.setAccessibleName(f"Remove {download.model.name} from the list")
        self.dismiss.clicked.connect(lambda: panel.dismiss(self.download))
        for widget in (self.pause, self.retry, self.cancel, self.dismiss):
            line.addWidget(widget)
        grid.addLayout(line, 1, 0, 1, 2)
        self.error = plain(QLabel())  # a failure's whole text, wrapped under the bar
        self.error.setObjectName("FieldError")
        self.error.setWordWrap(True)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.hide()
        grid.addWidget(self.error, 2, 0, 1, 2)
        self.show_progress(download.progress)

    def _button(self, text: str, action: Callable[[Download], None]) -> QPushButton:
        button = QPushButton(text)
        button.setObjectName("RetryButton")  # the compact button style
        button.setAccessibleName(f"{text} {self.download.model.name}")
        button.clicked.connect(lambda: action(self.download))
        return button

    def show_progress(self, p: DownloadProgress) -> None:
        self.bar.setValue(1000 if p.state == "complete" else percent(p))
        self.bar.setVisible(p.state not in ("complete", "cancelled"))
        failed = p.state == "failed"
        texts = ["Failed"] if failed else progress_texts(p)
        self.status.set_texts(texts)
        self.status.setToolTip(texts[0])
        self.error.setText(p.error or "The download failed." if failed else "")
        self.error.setVisible(failed)
        paused = p.state == "paused"
        self.pause.setVisible(p.state in ("running", "queued") or paused)
        self.pause.setText("Resume" if paused else "Pause")
        self.pause.setAccessibleName(f"{self.pause.text()} {p.name}")
        self.retry.setVisible(failed)
        self.cancel.setVisible(p.state not in ("complete", "cancelled"))
        self.cancel.setEnabled(p.state != "verifying")
        self.dismiss.setVisible(p.state in ("complete", "cancelled", "failed"))


class DownloadsPanel(QFrame):
    """Signals: downloaded(path) once a file is complete and verified; changed(repo, name)
    whenever a download's state changes (the models table updates its button);
    auth_needed(retry) when the hub asks for an access token (``retry`` starts it again)."""

    downloaded = Signal(str)
    changed = Signal(str, str)
    auth_needed = Signal(object)

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("HubDownloads")
        self._services = services
        self.downloads: dict[tuple[str, str], Download] = {}
        self.rows: dict[tuple[str, str], DownloadRow] = {}
        self.rows_shown = ROWS_SHOWN
        self._bridge = ProgressBridge(self)
        self._bridge.arrived.connect(self._on_progress)
        # Replaced by tests: asks whether to cancel (True = cancel it).
        self.confirm_cancel: Callable[[str], bool] = self._ask_cancel

        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 6, 0, 0)
        outer.setSpacing(2)
        title = QLabel("DOWNLOADS")
        title.setObjectName("SectionLabel")
        outer.addWidget(title)
        self.scroll_area, self.list = scroll_column("HubDownloadList", "HubDownloadBody")
        self.list.addStretch(1)
        outer.addWidget(self.scroll_area)
        self.hide()

    # public ----------------------------------------------------------------------------------
    def state_of(self, repo: str, name: str) -> str | None:
        download = self.downloads.get((repo, name))
        return download.progress.state if download is not None else None

    def begin(self, repo: str, model: GgufModel, revision: str = "main") -> None:
        """Download ``model`` (or resume its part); a row shows it at once."""
        key = (repo, model.name)
        known = self.downloads.get(key)
        if known is not None and known.progress.state in ACTIVE:
            return
        progress = DownloadProgress(
            repo, model.name, known.progress.done if known else 0, model.size, "queued"
        )
        download = Download(repo, model, revision, progress)
        self.downloads[key] = download
        self._show(download)
        start(self._start(download), name=f"hub-download-{model.name}")

    def add_pending(self, pending: list[PendingDownload]) -> None:
        """Downloads a previous session left unfinished, listed as paused."""
        for p in pending:
            key = (p.repo, p.model.name)
            if key in self.downloads:
                continue
            progress = DownloadProgress(p.repo, p.model.name, p.done, p.model.size, "paused")
            download = Download(p.repo, p.model, p.revision, progress)
            self.downloads[key] = download
            self._show(download)

    def pause_all(self) -> None:
        """Pause every running download (the parts stay, to resume later)."""
        for download in self.downloads.values():
            if download.handle is not None and download.progress.state in ACTIVE:
                download.handle.pause()

    def set_rows_shown(self, n: int) -> None:
        """How many rows the strip shows before it scrolls (the view says, by its height)."""
        if n != self.rows_shown:
            self.rows_shown = n
            self._fit_height()

    def active(self) -> list[Download]:
        return [d for d in self.downloads.values() if d.progress.state in ACTIVE]

    # row actions -----------------------------------------------------------------------------
    def toggle_pause(self, download: Download) -> None:
        if download.progress.state == "paused":
            if download.handle is not None:
                download.handle.resume()
                self._set(download, replace(download.progress, state="running"))
            else:  # listed from a previous session, or paused before this one ran
                self.begin(download.repo, download.model, download.revision)
        elif download.handle is not None:
            download.handle.pause()

    def retry(self, download: Download) -> None:
        self.begin(download.repo, download.model, download.revision)

    def ask_cancel(self, download: Download) -> None:
        if not self.confirm_cancel(download.model.name):
            return
        start(self._cancel(download), name=f"hub-cancel-{download.model.name}")

    def dismiss(self, download: Download) -> None:
        self.downloads.pop(download.key, None)
        row = self.rows.pop(download.key, None)
        if row is not None:
            row.hide()
            row.deleteLater()
        self._fit_height()

    # internals -------------------------------------------------------------------------------
    def _ask_cancel(self, name: str) -> bool:
        answer = ask(
            self,
            "Cancel the download?",
            f"Cancel downloading {name}? The part downloaded so far is deleted.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
        return answer == QMessageBox.StandardButton.Yes

    async def _start(self, download: Download) -> None:
        emit = self._bridge.arrived.emit

        def on_progress(p: DownloadProgress) -> None:  # runs on the download's thread
            try:
                emit(p)
            except RuntimeError:  # the window is gone; the download keeps its part
                pass

        downloads = self._services.hub.downloads
        try:
            handle = await run_blocking(
                downloads.start, download.repo, download.model, on_progress, download.revision
            )
        except UserError as exc:
            self._fail(download, str(exc))
            self._ask_token_if(download, exc)
            return
        download.handle = handle
        if download.progress.state == "cancelled":  # cancelled while it was starting
            await run_blocking(handle.cancel)
        elif download.progress.state == "failed":  # it failed before we held its handle
            self._ask_token_if(download, handle.exception)

    def _ask_token_if(self, download: Download, exc: BaseException | None) -> None:
        """A gated or private repository: the view asks for a token, then starts it again."""
        if isinstance(exc, HubAuthError):
            self.auth_needed.emit(lambda: self.begin(download.repo, download.model))

    async def _cancel(self, download: Download) -> None:
        handle = download.handle
        if handle is not None and not handle.finished:
            await run_blocking(handle.cancel)
        else:  # no thread runs it (a previous session's, or one that failed): delete parts
            downloads = self._services.hub.downloads
            await run_blocking(downloads.remove_parts, download.repo, download.model)
        self._set(download, replace(download.progress, state="cancelled", done=0))

    def _fail(self, download: Download, text: str) -> None:
        self._set(download, replace(download.progress, state="failed", error=text))

    def _on_progress(self, p: DownloadProgress) -> None:
        download = self.downloads.get((p.repo, p.name))
        if download is None:
            return
        before = download.progress.state
        if before == "cancelled" and p.state != "cancelled":
            return  # a late report from a thread being cancelled
        self._set(download, p)
        if p.state == "complete" and before != "complete" and p.path:
            self.downloaded.emit(p.path)
        if p.state == "failed" and before != "failed" and download.handle is not None:
            self._ask_token_if(download, download.handle.exception)

    def _set(self, download: Download, p: DownloadProgress) -> None:
        changed = p.state != download.progress.state
        download.progress = p
        row = self.rows.get(download.key)
        if row is not None:
            row.show_progress(p)
            if changed:
                self._fit_height()
        if changed:
            self.changed.emit(download.repo, download.model.name)

    def _show(self, download: Download) -> None:
        row = self.rows.get(download.key)
        if row is None:
            row = DownloadRow(download, self)
            self.rows[download.key] = row
            self.list.insertWidget(self.list.count() - 1, row)
        else:
            row.download = download
            row.show_progress(download.progress)
        self.show()
        self._fit_height()
        self.changed.emit(download.repo, download.model.name)

    def _fit_height(self) -> None:
        rows = [r for r in self.rows.values() if not r.isHidden()]
        if not rows:
            self.hide()
            return
        width = max(self.scroll_area.viewport().width(), 200)
        heights = sorted(
            (r.heightForWidth(width) if r.hasHeightForWidth() else r.sizeHint().height())
            for r in rows
        )
        wanted = sum(heights[-self.rows_shown :]) + 2
        self.scroll_area.setMaximumHeight(wanted)  # a short window may squeeze it to one row
        self.scroll_area.setMinimumHeight(min(wanted, heights[0] + 2))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_height()
