"""The Models page: two tabs, "On this computer" (the library) and "Find models" (the Hugging
Face Hub, ``desktop.ui.models.hub_view.HubView``; a finished download refreshes the library and
selects the new file).

"On this computer" is built on ``desktop.chat.model_library.ModelLibrary`` (Qt-free): the
table (``models_library.LibraryTable``), the selected file's header facts, the actions
(``models_actions.ModelActions``: new agent, load / unload, open folder, delete a download),
the linked folders and the disk they take. Scans (``ModelLibrary.scan``) run off the GUI
thread (``run_blocking``); the header of each file is read once per path + mtime, and the
llama.cpp build's devices are listed again (their free memory changes). The backend line names
each GPU with its memory (``desktop.local.gpu_text``); the details of a loaded model say where
it runs and the buffers llama.cpp allocated per device (``LocalRuntime.placement_of``), updated
as models load and unload. The whole tab scrolls when the window is too small for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QTabWidget,
    QWidget,
)

from desktop.chat.model_library import DiskUse, LibraryScan, ModelLibrary, gpu_support, used_by
from desktop.chat.services import Services
from desktop.errors import UserError
from desktop.local.catalog import ModelEntry
from desktop.local.gpu import GpuSupport
from desktop.local.gpu_text import backend_text
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.widgets import FlowLayout, column_scroll, plain, vbox
from desktop.ui.models.actions import ModelActions
from desktop.ui.models.facts import detail_facts
from desktop.ui.models.library import COLUMNS, ERROR_COLUMN, PATH_ROLE, LibraryTable

__all__ = ["COLUMNS", "ERROR_COLUMN", "ModelsPage"]

log = logging.getLogger("simi.ui.models")

STATE_TEXT = {
    "unloaded": "No model loaded",
    "loading": "Loading",
    "ready": "Ready",
    "busy": "Generating",
    "error": "Error",
}
ZWSP = "\u200b"  # lets a long path wrap after each "/"


class ModelsPage(QTabWidget):
    """Signals: refreshed(): the table shows a fresh scan; folders_changed(): a folder was
    added or removed; model_state_changed(str, str): the worker's state (re-emitted on the GUI
    thread from LocalRuntime's listener); agent_created(object): an agent was saved from
    "New agent from this model"."""

    refreshed = Signal()
    folders_changed = Signal()
    model_state_changed = Signal(str, str)
    agent_created = Signal(object)

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ModelsPage")
        self.setDocumentMode(True)
        self._services = services
        self.catalog = ModelLibrary.of(services)
        self.entries: list[ModelEntry] = []
        self.gpu: GpuSupport | None = None
        # the build and its devices, asked at each scan off the GUI thread (tests pass figures)
        self.gpu_probe: Callable[[], GpuSupport] = gpu_support
        self.disk: DiskUse | None = None
        self._scan: Any = None
        self._select_after: str | None = None

        self.library = self._build_library()
        self.addTab(self.library, "On this computer")
        self.setTabToolTip(0, "The GGUF files in the models folder and the linked folders")
        self.hub_view = self._build_hub()
        self.addTab(self.hub_view, "Find models")
        self.setTabToolTip(1, "Search the Hugging Face Hub and download GGUF models")

        runtime = services.local
        emit = self.model_state_changed.emit

        def listener(state: str, detail: str) -> None:  # may run on a worker thread
            emit(state, detail)

        runtime.add_listener(listener)
        self.destroyed.connect(lambda *_: runtime.remove_listener(listener))
        self.model_state_changed.connect(self._show_state)
        self._show_state(runtime.state, runtime.state_detail)
        self._show_folders()

    # building --------------------------------------------------------------------------------
    def _build_library(self) -> QWidget:
        content = QWidget()
        content.setObjectName("ModelsLibrary")
        layout = vbox(content, margins=(8, 8, 8, 8), spacing=6)
        self.backend_label = plain(QLabel("Checking the llama.cpp build…"))
        self.backend_label.setObjectName("ModelsBackend")
        self.backend_label.setWordWrap(True)
        self.state_label = plain(QLabel(""))  # the loaded model's name
        self.state_label.setObjectName("ModelsState")
        self.state_label.setWordWrap(True)
        layout.addWidget(self.backend_label)
        layout.addWidget(self.state_label)

        self.table = LibraryTable()
        self.table.setMinimumHeight(150)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._context_menu)
        layout.addWidget(self.table, 1)

        self.model_actions = ModelActions(
            self._services, self, self.selected_entry, library=self.catalog
        )
        self.model_actions.said.connect(self._say)
        self.model_actions.deleted.connect(lambda _p: self.refresh())
        self.model_actions.agent_created.connect(self._agent_created)
        layout.addWidget(_flow(*self.model_actions.buttons))
        self.details = QLabel("Select a model to see what its file says.")
        self.details.setObjectName("ModelsDetails")
        self.details.setWordWrap(True)
        self.details.setTextFormat(Qt.TextFormat.PlainText)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.details)

        folders = QLabel("Folders (linked in place; files are never copied):")
        folders.setWordWrap(True)
        layout.addWidget(folders)
        self.folder_list = QListWidget()
        self.folder_list.setMinimumHeight(48)
        self.folder_list.setMaximumHeight(90)
        layout.addWidget(self.folder_list)
        self.disk_label = plain(QLabel(""))
        self.disk_label.setObjectName("ModelsDiskUse")
        self.disk_label.setWordWrap(True)
        self.disk_label.setToolTip("Disk taken by the models in each folder")
        layout.addWidget(self.disk_label)
        self.add_button = QPushButton("Add folder…")
        self.remove_button = QPushButton("Remove folder")
        self.refresh_button = QPushButton("Refresh")
        layout.addWidget(_flow(self.add_button, self.remove_button, self.refresh_button))
        self.message = plain(QLabel(""))  # file and folder names, errors
        self.message.setObjectName("ModelsMessage")
        self.message.setWordWrap(True)
        layout.addWidget(self.message)

        self.add_button.clicked.connect(self._choose_folder)
        self.remove_button.clicked.connect(self._remove_selected)
        self.refresh_button.clicked.connect(self.refresh)
        self.folder_list.currentItemChanged.connect(lambda *_: self._update_buttons())
        self.table.itemSelectionChanged.connect(self._selection_changed)

        scroll = column_scroll("ModelsLibraryScroll")
        scroll.setWidget(content)
        return scroll

    def _build_hub(self) -> QWidget:
        from desktop.ui.models.hub_view import HubView

        view = HubView(self._services)
        view.downloaded.connect(self.show_downloaded)
        return view

    # public ----------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Scan the library again (off the GUI thread when a loop runs)."""
        self._show_folders()
        if self._scan is not None and not self._scan.done():
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no running loop (a plain script): scan here
            self._apply(self._scan_now())
            return
        self._scan = start(self._refresh(), name="models-page-scan")

    def show_downloaded(self, path: str) -> None:
        """A download finished: show the library with the new file selected."""
        self._select_after = str(path)
        self.setCurrentIndex(0)
        self.refresh()

    def add_folder(self, path: str | Path) -> bool:
        """Link ``path`` into the library; False (and a message) when it cannot be."""
        return self._change_folders(self.catalog.add_folder, path, "Linked {}.")

    def remove_folder(self, path: str | Path) -> bool:
        """Unlink ``path`` from the library; False (and a message) when it cannot be."""
        return self._change_folders(
            self.catalog.remove_folder, path, "Unlinked {}; its files were not touched."
        )

    def row_of(self, path: str | Path) -> int:
        return self.table.row_of(path)

    def cell_text(self, row: int, column: str) -> str:
        """A table cell's text; for a fact the details panel shows (Architecture, Layers…),
        that fact of the row's file."""
        if column in COLUMNS:
            item = self.table.item(row, COLUMNS.index(column))
            return item.text() if item is not None else ""
        entry = self.entries[row] if 0 <= row < len(self.entries) else None
        if entry is None or entry.info is None:
            return ""
        report = self._services.local.placement_of(entry.path)
        return dict(detail_facts(entry, report=report)).get(column, "")

    def row_error(self, row: int) -> str:
        """The error shown for an unreadable file's row ('' for a good one)."""
        entry = self.entries[row] if 0 <= row < len(self.entries) else None
        return self.cell_text(row, COLUMNS[ERROR_COLUMN]) if entry and entry.error else ""

    def selected_entry(self) -> ModelEntry | None:
        return self.table.selected_entry()

    def select(self, path: str | Path) -> bool:
        return self.table.select_path(path)

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

    def _scan_now(self) -> LibraryScan:
        """Blocking: the entries, the llama.cpp build, the disk use, the downloaded files."""
        return self.catalog.scan(self.gpu_probe)

    async def _refresh(self) -> None:
        self._apply(await run_blocking(self._scan_now))

    def _apply(self, scan: LibraryScan) -> None:
        entries, gpu, disk = scan.entries, scan.gpu, scan.disk
        self.entries, self.gpu, self.disk = entries, gpu, disk
        self.model_actions.downloaded_paths = scan.downloaded
        self.backend_label.setText(backend_text(gpu))
        self.disk_label.setText(f"Disk use: {disk.line}")
        users = used_by(entries, self._services.agents.list())
        runtime = self._services.local
        states = {e.path: runtime.state_of(e.path) for e in entries}
        self.table.show_entries(entries, users, states)
        if self._select_after is not None:
            self.table.select_path(self._select_after)
            self._select_after = None
        if self.table.selected_path() is None and entries:
            self.table.selectRow(0)  # the actions and details are there from the start
        self._selection_changed()
        self.refreshed.emit()

    def _agent_created(self, agent: Any) -> None:
        """A new agent uses a file: its Used by changes; the window (connected to
        ``agent_created``) shows the agent."""
        self.agent_created.emit(agent)
        self.refresh()

    def _selection_changed(self) -> None:
        entry = self.selected_entry()
        self.model_actions.update_for(entry)
        self._show_details(entry)

    def _show_details(self, entry: ModelEntry | None) -> None:
        """The selected file's facts; where it runs while it is loaded."""
        if entry is None:
            self.details.setText("Select a model to see what its file says.")
            return
        users = used_by([entry], self._services.agents.list())[entry.path]
        report = self._services.local.placement_of(entry.path)
        self.details.setText(details_text(detail_facts(entry, users, report)))

    def _context_menu(self, pos: QPoint) -> None:
        row = self.table.rowAt(pos.y())
        if row < 0:
            return
        self.table.selectRow(row)
        self.model_actions.menu(self).popup(self.table.viewport().mapToGlobal(pos))

    def _say(self, text: str) -> None:
        self.message.setText(text)

    def _show_folders(self) -> None:
        self.folder_list.clear()
        builtin = self.catalog.models_dir
        for folder in self.catalog.folders():
            label = f"{folder}  (built-in)" if folder == builtin else str(folder)
            item = QListWidgetItem(label)
            item.setData(PATH_ROLE, str(folder))
            item.setToolTip(str(folder))
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
        runtime = self._services.local
        for row, entry in enumerate(self.table.entries):
            self.table.set_state(row, runtime.state_of(entry.path))
        selected = self.selected_entry()
        self.model_actions.update_for(selected)
        self._show_details(selected)  # where a model runs comes and goes with its load


def _flow(*widgets: QWidget) -> QWidget:
    """Widgets in a row that wraps when narrow (nothing is squeezed)."""
    host = QWidget()
    flow = FlowLayout(host, spacing=6)
    for widget in widgets:
        flow.addWidget(widget)
    return host


# The details panel's lines: facts on one line run on with " · " and wrap between them.
DETAIL_LINES = (
    ("Name",),
    ("Architecture", "Parameters", "Layers", "Heads (KV)", "Embedding"),
    ("Size", "Trained context", "Chat template"),
    ("Images",),
    ("Used by",),
    ("Where it runs",),
    ("Buffers",),
    ("GPU note",),
    ("Problem",),
    ("File",),
)


LOAD_FACTS = ("Where it runs", "Buffers", "GPU note")


def details_text(facts: list[tuple[str, str]]) -> str:
    """The facts as a few lines a person reads at a glance (a path may wrap at each "/")."""
    by_label = dict(facts)
    lines = []
    for labels in DETAIL_LINES:
        parts = [f"{label}: {by_label[label]}" for label in labels if by_label.get(label)]
        if parts:
            line = " · ".join(parts)
            # a path may wrap after each "/"; "31/31 layers" is no path
            lines.append(line if labels[0] in LOAD_FACTS else line.replace("/", "/" + ZWSP))
    folder = by_label.get("Folder", "")
    if folder.startswith("installed"):
        lines.append(f"({folder})")
    return "\n".join(lines)
