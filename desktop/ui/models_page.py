"""The Models page: the local model library, the loaded model's state, the llama.cpp build.

Built on ``desktop.local.catalog.ModelCatalog`` (Qt-free). Scans run off the GUI thread
(``run_blocking``); the header of each file is read once per path + mtime.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.errors import UserError
from desktop.local.catalog import ModelCatalog, ModelEntry
from desktop.local.gpu import GpuSupport, detect
from desktop.local.memory import format_bytes
from desktop.ui.async_door import run_blocking, start

log = logging.getLogger("simi.ui.models")

COLUMNS = (
    "Model",
    "Architecture",
    "Parameters",
    "Quantization",
    "Size",
    "Trained context",
    "Layers",
    "Heads (KV)",
    "Embedding",
    "Chat template",
)
ERROR_COLUMN = 1  # an unreadable file's error spans the fact columns, from here to the end
PATH_ROLE = Qt.ItemDataRole.UserRole
STATE_TEXT = {
    "unloaded": "No model loaded",
    "loading": "Loading",
    "ready": "Ready",
    "busy": "Generating",
    "error": "Error",
}


class ModelsPage(QWidget):
    """Signals: refreshed(): the table shows a fresh scan; folders_changed(): a folder was
    added or removed; model_state_changed(str, str): the worker's state (re-emitted on the GUI
    thread from LocalRuntime's listener)."""

    refreshed = Signal()
    folders_changed = Signal()
    model_state_changed = Signal(str, str)

    def __init__(self, services: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ModelsPage")
        self._services = services
        self.catalog = ModelCatalog(services.paths, services.prefs, cache=services.local.model_info)
        self.entries: list[ModelEntry] = []
        self.gpu: GpuSupport | None = None
        self._scan: Any = None

        layout = QVBoxLayout(self)
        self.backend_label = QLabel("Checking the llama.cpp build…")
        self.backend_label.setObjectName("ModelsBackend")
        self.backend_label.setWordWrap(True)
        self.state_label = QLabel("")
        self.state_label.setObjectName("ModelsState")
        layout.addWidget(self.backend_label)
        layout.addWidget(self.state_label)

        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        layout.addWidget(self.table, 1)

        layout.addWidget(QLabel("Folders (linked in place; files are never copied):"))
        self.folder_list = QListWidget()
        self.folder_list.setMaximumHeight(90)
        layout.addWidget(self.folder_list)
        buttons = QHBoxLayout()
        self.add_button = QPushButton("Add folder…")
        self.remove_button = QPushButton("Remove folder")
        self.refresh_button = QPushButton("Refresh")
        for button in (self.add_button, self.remove_button, self.refresh_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        self.message = QLabel("")
        self.message.setObjectName("ModelsMessage")
        self.message.setWordWrap(True)
        buttons.addWidget(self.message, 2)
        layout.addLayout(buttons)

        self.add_button.clicked.connect(self._choose_folder)
        self.remove_button.clicked.connect(self._remove_selected)
        self.refresh_button.clicked.connect(self.refresh)
        self.folder_list.currentItemChanged.connect(lambda *_: self._update_buttons())
        self.model_state_changed.connect(self._show_state)

        runtime = services.local
        emit = self.model_state_changed.emit

        def listener(state: str, detail: str) -> None:  # may run on a worker thread
            emit(state, detail)

        runtime.add_listener(listener)
        self.destroyed.connect(lambda *_: runtime.remove_listener(listener))
        self._show_state(runtime.state, runtime.state_detail)
        self._show_folders()

    # public ----------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Scan the library again (off the GUI thread when a loop runs)."""
        self._show_folders()
        if self._scan is not None and not self._scan.done():
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no running loop (a plain script): scan here
            self._apply(self.catalog.entries(), self.gpu or detect())
            return
        self._scan = start(self._refresh(), name="models-page-scan")

    def add_folder(self, path: str | Path) -> bool:
        """Link ``path`` into the library; False (and a message) when it cannot be."""
        return self._change_folders(self.catalog.add_folder, path, "Linked {}.")

    def remove_folder(self, path: str | Path) -> bool:
        """Unlink ``path`` from the library; False (and a message) when it cannot be."""
        return self._change_folders(
            self.catalog.remove_folder, path, "Unlinked {}; its files were not touched."
        )

    def row_of(self, path: str | Path) -> int:
        for row in range(self.table.rowCount()):
            item = self.table.item(row, 0)
            if item is not None and item.data(PATH_ROLE) == str(path):
                return row
        return -1

    def cell_text(self, row: int, column: str) -> str:
        item = self.table.item(row, COLUMNS.index(column))
        return item.text() if item is not None else ""

    # internals -------------------------------------------------------------------------------
    def _change_folders(
        self, change: Callable[[str | Path], Path], path: str | Path, done: str
    ) -> bool:
        """Link or unlink a folder, say what happened (``done`` names the folder), rescan."""
        try:
            folder = change(path)
        except UserError as exc:
            self.message.setText(exc.user_message)
            return False
        self.message.setText(done.format(folder))
        self.folders_changed.emit()
        self.refresh()
        return True

    async def _refresh(self) -> None:
        entries = await run_blocking(self.catalog.entries)
        gpu = self.gpu or await run_blocking(detect)
        self._apply(entries, gpu)

    def _apply(self, entries: list[ModelEntry], gpu: GpuSupport) -> None:
        self.entries, self.gpu = entries, gpu
        self.backend_label.setText(gpu.summary)
        self.table.clearSpans()
        self.table.setRowCount(len(entries))
        for row, entry in enumerate(entries):
            for col, text in enumerate(_row_texts(entry)):
                item = QTableWidgetItem(text)
                if col == 0:
                    item.setData(PATH_ROLE, entry.path)
                    item.setToolTip(
                        entry.path if not entry.error else f"{entry.path}\n{entry.error}"
                    )
                self.table.setItem(row, col, item)
        # size the columns to the facts, then lay each error across them
        self.table.resizeColumnsToContents()
        for row, entry in enumerate(entries):
            if entry.error:
                item = QTableWidgetItem(entry.error)
                item.setToolTip(f"{entry.path}\n{entry.error}")
                item.setForeground(QBrush(QColor("#c0392b")))
                self.table.setItem(row, ERROR_COLUMN, item)
                self.table.setSpan(row, ERROR_COLUMN, 1, len(COLUMNS) - ERROR_COLUMN)
        self.refreshed.emit()

    def row_error(self, row: int) -> str:
        """The error shown for an unreadable file's row ('' for a good one)."""
        entry = self.entries[row] if 0 <= row < len(self.entries) else None
        return self.cell_text(row, COLUMNS[ERROR_COLUMN]) if entry and entry.error else ""

    def _show_folders(self) -> None:
        self.folder_list.clear()
        builtin = self.catalog.models_dir
        for folder in self.catalog.folders():
            label = f"{folder}  (built-in)" if folder == builtin else str(folder)
            item = QListWidgetItem(label)
            item.setData(PATH_ROLE, str(folder))
            self.folder_list.addItem(item)
        self._update_buttons()

    def _update_buttons(self) -> None:
        item = self.folder_list.currentItem()
        removable = item is not None and item.data(PATH_ROLE) != str(self.catalog.models_dir)
        self.remove_button.setEnabled(removable)

    def _choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a folder of GGUF models")
        if folder:
            self.add_folder(folder)

    def _remove_selected(self) -> None:
        item = self.folder_list.currentItem()
        if item is not None:
            self.remove_folder(item.data(PATH_ROLE))

    def _show_state(self, state: str, detail: str) -> None:
        text = STATE_TEXT.get(state, state)
        params = self._services.local.loaded_params
        name = Path(params.model_path).name if params is not None else ""
        if state in ("ready", "busy", "loading") and name:
            text = f"{text}: {name}"
        if state == "error" and detail:
            text = f"{text}: {detail}"
        self.state_label.setText(f"Loaded model: {text}")


def _row_texts(entry: ModelEntry) -> list[str]:
    name = Path(entry.path).name + ("  (starter)" if entry.starter else "")
    info = entry.info
    if info is None:
        return [name, *([""] * (len(COLUMNS) - 1))]  # the error is laid over the rest
    heads = f"{info.head_count or '?'} ({info.head_count_kv or '?'})"
    return [
        name,
        info.architecture,
        info.parameters_label,
        info.quantization or "?",
        format_bytes(info.file_size),
        f"{info.context_length:,}" if info.context_length else "?",
        str(info.block_count or "?"),
        heads,
        str(info.embedding_length or "?"),
        "yes" if info.chat_template_present else "no: using ChatML",
    ]
