"""The Knowledge page: the collections (folders and files agents can search, read where they
are) on the left; the one chosen on the right, with its name, folders, embedding model, its
indexing (Index now, Pause, Cancel, a progress bar, what the last run did and what it skipped)
and a search to try it. The embedding model list offers the library's embedding models (which
ones: ``KnowledgeService.embedding_models``, their headers read off the GUI thread); any GGUF
file can still be chosen.

Every call to the knowledge service runs off the GUI thread (``run_blocking``): reading an
index's figures opens its file, a search waits for the search thread, and even saving a
collection checks that its folders exist. Indexing is ``IndexRuns``' (shared with the watch,
owned by the window), so it goes on when another page is shown. File names, reasons and
passages are shown as plain text.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QGroupBox,
    QLabel,
    QLineEdit,
    QListWidgetItem,
    QProgressBar,
    QSplitter,
    QWidget,
)

from desktop.errors import UserError, ValidationError
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.widgets import (
    SUBTITLE_ROLE,
    TwoLineDelegate,
    confirm,
    hbox,
    plain_label,
    push_button,
    scroll_column,
    vbox,
)
from desktop.ui.knowledge import words
from desktop.ui.knowledge.parts import button_row, error_label, fit_rows, one_line_list
from desktop.ui.knowledge.try_search import TrySearch

if TYPE_CHECKING:
    from desktop.chat.knowledge import CollectionState, KnowledgeService
    from desktop.chat.services import Services
    from desktop.knowledge import IndexProgress, IndexReport
    from desktop.store.knowledge import Collection
    from desktop.ui.knowledge.runs import IndexRuns
    from desktop.ui.knowledge.watch import KnowledgeWatch

log = logging.getLogger("simi.ui.knowledge")

INTRO = (
    "Folders and files your agents can search. They are read where they are, never copied; "
    "choose which collections an agent searches in its editor (Knowledge)."
)
KEYWORDS_ONLY = "Keyword search only"
CHOOSE_MODEL = "Choose a GGUF file…"
EMBEDDER_NOTE = (
    "Optional: an embedding model (GGUF) finds passages by meaning as well as by their words."
)
NO_LIBRARY_EMBEDDER = (
    "No embedding model in your library: choose a GGUF file, or download one on the Models "
    "page (search “embed”)."
)
EMBEDDER_CHANGED = (
    "Changed: indexing again now, to compute every passage's vector with this model "
    "(keyword search works meanwhile)."
)
KEYWORDS_FROM_NOW = "Changed: keyword search only from now on."
CHANGED_PATHS = "Its folders and files changed: Index now reads them as they are now."
NO_COLLECTIONS = "No collections yet. New collection starts one from a folder."
NEW_HINT = "Name the collection, add its folders or files, then Create and index."
PATH_ROWS = 4  # rows of the folders and skipped files shown before they scroll
SKIPPED_ROWS = 5
ID = Qt.ItemDataRole.UserRole


class KnowledgePage(QWidget):
    """Signals:
    status(str): a short line for the window's status bar.
    loaded(): the collections and their figures were read again.
    saved(bool): a create or change of a collection ended (False: the fields say why).
    models_read(): the library's embedding models were read (the embedder list has them).
    searched(): a try-out search ended (``try_box.searched``).
    removed(): a collection was removed.
    """

    status = Signal(str)
    loaded = Signal()
    saved = Signal(bool)
    removed = Signal()
    models_read = Signal()

    def __init__(
        self, services: Services, watch: KnowledgeWatch, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("KnowledgePage")
        assert services.knowledge is not None
        self.knowledge: KnowledgeService = services.knowledge
        self.services = services
        self.watch = watch
        self.runs: IndexRuns = watch.runs
        self.states: dict[int, CollectionState | str] = {}
        self.collections: list[Collection] = []
        self.selected_id: int | None = None
        self.creating = False  # the right side describes a collection not made yet
        self._new_paths: list[str] = []
        self._new_embedder: str | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._reload_task: asyncio.Task[None] | None = None
        self._models_task: asyncio.Task[None] | None = None
        # (path, file name) of the library's embedding models; None until read
        self.library_embedders: list[tuple[str, str]] | None = None
        self._read_again = False
        self._shown_embedder: str | None = None
        self._shown_id: int | None = None
        self._paths_changed: set[int] = set()  # collections whose paths changed since a run
        self._asked: set[int] = set()  # runs started here (the watch's are not announced)

        outer = vbox(self, (16, 12, 16, 12), 8)
        outer.addWidget(plain_label("Knowledge", "PageTitle"))
        outer.addWidget(plain_label(INTRO, "PageIntro", wrap=True))
        split = QSplitter(Qt.Orientation.Horizontal)
        split.setObjectName("KnowledgeSplit")
        split.setChildrenCollapsible(False)
        split.addWidget(self._build_list())
        split.addWidget(self._build_details())
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setSizes([330, 670])
        outer.addWidget(split, 1)
        self.runs.started.connect(self._run_started)
        self.runs.progressed.connect(self._run_progressed)
        self.runs.paused_changed.connect(self._paused_changed)
        self.runs.finished.connect(self._run_finished)
        self.runs.failed.connect(self._run_failed)
        self._show_selected()
        self.reload()
        self.read_models()

    # building ------------------------------------------------------------------------------
    def _build_list(self) -> QWidget:
        side = QWidget()
        side.setObjectName("KnowledgeSide")
        layout = vbox(side, (0, 0, 8, 0), 8)
        self.list = one_line_list("KnowledgeCollections", "Collections")
        self.list.setItemDelegate(TwoLineDelegate(self.list))
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.currentItemChanged.connect(self._current_changed)
        self.empty = plain_label(NO_COLLECTIONS, "EmptyHint", wrap=True)
        self.empty.hide()
        self.new_button = push_button(
            "New collection",
            self.new_collection,
            name="PrimaryButton",
            tip="A new collection of folders and files",
        )
        self.remove_button = push_button(
            "Remove collection…",
            self.remove_collection,
            tip="Remove the collection and its index; the files stay where they are",
        )
        layout.addWidget(self.list, 1)
        layout.addWidget(self.empty)
        buttons = hbox(spacing=8)
        buttons.addWidget(self.new_button)
        buttons.addWidget(self.remove_button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        return side

    def _build_details(self) -> QWidget:
        area, column = scroll_column("KnowledgeScroll", "KnowledgeBody", (8, 0, 4, 0), 12)
        column.addWidget(self._build_collection_group())
        column.addWidget(self._build_index_group())
        self.try_box = TrySearch(self.knowledge, lambda: None if self.creating else self.selected)
        # its parts under the page's names (the tests and the window use them)
        self.search_group = self.try_box
        self.query, self.search_button = self.try_box.query, self.try_box.button
        self.search_note, self.results = self.try_box.note, self.try_box.results
        self.searched = self.try_box.searched
        self.try_search = self.try_box.try_search
        column.addWidget(self.try_box)
        self.error = plain_label("", "FieldError", wrap=True)
        self.error.hide()
        column.addWidget(self.error)
        column.addStretch(1)
        return area

    def _build_collection_group(self) -> QGroupBox:
        box = QGroupBox("Collection")
        box.setObjectName("KnowledgeCollection")
        layout = vbox(box, (12, 12, 12, 12), 6)
        self.new_hint = plain_label(NEW_HINT, "DialogNote", wrap=True)
        layout.addWidget(self.new_hint)
        layout.addWidget(plain_label("Name", "SectionLabel"))
        self.name = QLineEdit()
        self.name.setObjectName("KnowledgeName")
        self.name.setAccessibleName("Collection name")
        self.name.setPlaceholderText("e.g. Project notes")
        self.name.editingFinished.connect(self._name_edited)
        layout.addWidget(self.name)
        self.name_error = error_label()
        layout.addWidget(self.name_error)

        layout.addWidget(plain_label("Folders and files", "SectionLabel"))
        self.paths = one_line_list("KnowledgePaths", "Folders and files of the collection")
        self.paths.itemSelectionChanged.connect(self._update_buttons)
        layout.addWidget(self.paths)
        self.add_folder_button = push_button(
            "Add folder…", self.add_folder, tip="Add a folder: its files and subfolders"
        )
        self.add_files_button = push_button("Add files…", self.add_files, tip="Add single files")
        self.remove_path_button = push_button(
            "Remove path", self.remove_path, tip="Leave the chosen folder or file out"
        )
        layout.addLayout(
            button_row(self.add_folder_button, self.add_files_button, self.remove_path_button)
        )
        self.paths_error = error_label()
        layout.addWidget(self.paths_error)

        layout.addWidget(plain_label("Embedding model", "SectionLabel"))
        self.embedder = QComboBox()
        self.embedder.setObjectName("KnowledgeEmbedder")
        self.embedder.setAccessibleName("Embedding model")
        self.embedder.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.embedder.setMinimumContentsLength(24)
        self.embedder.activated.connect(self._embedder_chosen)
        layout.addWidget(self.embedder)
        self.embedder_note = plain_label(EMBEDDER_NOTE, "DialogNote", wrap=True)
        layout.addWidget(self.embedder_note)
        self.embedder_error = error_label()
        layout.addWidget(self.embedder_error)

        self.create_button = push_button(
            "Create and index", self.create_collection, name="PrimaryButton"
        )
        self.cancel_new_button = push_button("Cancel", self.cancel_new)
        self.create_row = QWidget()
        create_row = hbox(self.create_row, spacing=8)
        create_row.addStretch(1)
        create_row.addWidget(self.cancel_new_button)
        create_row.addWidget(self.create_button)
        layout.addWidget(self.create_row)
        return box

    def _build_index_group(self) -> QGroupBox:
        box = QGroupBox("Index")
        box.setObjectName("KnowledgeIndex")
        self.index_group = box
        layout = vbox(box, (12, 12, 12, 12), 6)
        self.index_button = push_button(
            "Index now", self.index_now, tip="Read new and changed files, drop deleted ones"
        )
        self.pause_button = push_button("Pause", self.pause_or_resume)
        self.cancel_button = push_button(
            "Cancel", self.cancel_index, tip="Stop now; what was read is kept"
        )
        layout.addLayout(button_row(self.index_button, self.pause_button, self.cancel_button))
        self.progress = QProgressBar()
        self.progress.setObjectName("KnowledgeProgress")
        self.progress.setAccessibleName("Indexing progress")
        self.progress.setTextVisible(False)
        self.progress.setFixedHeight(8)
        self.progress.hide()
        layout.addWidget(self.progress)
        self.progress_text = plain_label("", "DialogNote", wrap=True)
        self.progress_text.hide()
        layout.addWidget(self.progress_text)
        self.summary = plain_label("", "", wrap=True)
        self.summary.setObjectName("KnowledgeSummary")
        layout.addWidget(self.summary)
        self.index_error = error_label()
        layout.addWidget(self.index_error)
        self.skipped_label = plain_label("Skipped files", "SectionLabel")
        layout.addWidget(self.skipped_label)
        self.skipped = one_line_list("KnowledgeSkipped", "Files left out of the index, and why")
        self.skipped.setTextElideMode(Qt.TextElideMode.ElideRight)  # the path is short here
        layout.addWidget(self.skipped)
        return box

    # questions (tests replace these) -------------------------------------------------------
    def ask_folder(self) -> str | None:
        path = QFileDialog.getExistingDirectory(self, "Add a folder to the collection")
        return path or None

    def ask_files(self) -> list[str]:
        paths, _ = QFileDialog.getOpenFileNames(self, "Add files to the collection")
        return list(paths)

    def ask_model(self) -> str | None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Choose an embedding model", "", "GGUF models (*.gguf);;All files (*)"
        )
        return path or None

    def confirm(self, title: str, text: str) -> bool:
        return confirm(self, title, text)

    # reading -------------------------------------------------------------------------------
    def refresh(self) -> None:
        """The page is shown: read the collections and their figures again, and which
        models of the library embed (one may have been downloaded meanwhile)."""
        self.reload()
        self.read_models()

    def read_models(self) -> asyncio.Task[None]:
        """Read which GGUF models of the library are embedding models (their headers, off the
        GUI thread), for the embedder list; a read under way is the one returned."""
        if self._models_task is not None and not self._models_task.done():
            return self._models_task
        self._models_task = self._start(self._read_models(), "knowledge page: read models")
        return self._models_task

    async def _read_models(self) -> None:
        try:
            found = await run_blocking(self._library_embedders)
        except (UserError, OSError) as exc:
            log.warning("cannot list the library's embedding models: %s", exc)
            found = []
        self.library_embedders = found
        self._fill_embedders(self._shown_embedder)
        self.models_read.emit()

    def _library_embedders(self) -> list[tuple[str, str]]:
        """On a worker thread: (path, file name) of the library's embedding models."""
        from desktop.chat.model_library import ModelLibrary

        return self.knowledge.embedding_models(ModelLibrary.of(self.services).entries())

    def reload(self) -> asyncio.Task[None]:
        """Read the collections and their figures (once more after a read under way: it may
        have begun before the change that asks for this one)."""
        if self._reload_task is not None and not self._reload_task.done():
            self._read_again = True
            return self._reload_task
        self._reload_task = self._start(self._reload(), "knowledge page: read collections")
        return self._reload_task

    async def _reload(self) -> None:
        while True:
            self._read_again = False
            try:
                found = await run_blocking(self._read_all)
            except UserError as exc:
                self._say_error(exc.user_message)
                return
            if not self._read_again:
                break
        self.collections = [c for c, _ in found]
        self.states = {c.id: state for c, state in found if c.id is not None}
        self._fill_list()
        self.loaded.emit()

    def _read_all(self) -> list[tuple[Collection, CollectionState | str]]:
        """On a worker thread: each collection and what its index holds (or why it cannot
        be read)."""
        found: list[tuple[Collection, CollectionState | str]] = []
        for collection in self.knowledge.collections():
            found.append((collection, self._state_of(collection)))
        return found

    def _state_of(self, collection: Collection) -> CollectionState | str:
        try:
            return self.knowledge.state(collection)
        except UserError as exc:
            return exc.user_message
        except (OSError, sqlite3.Error) as exc:
            return f"Its index could not be read ({exc})."

    def _fill_list(self) -> None:
        keep = self.selected_id
        self.list.blockSignals(True)
        self.list.clear()
        for collection in self.collections:
            item = QListWidgetItem(collection.name)
            subtitle = words.row_subtitle(collection, self.states.get(collection.id or 0))
            item.setData(SUBTITLE_ROLE, subtitle)
            item.setData(Qt.ItemDataRole.AccessibleTextRole, f"{collection.name}: {subtitle}")
            item.setData(ID, collection.id)
            item.setToolTip("\n".join(collection.paths))
            self.list.addItem(item)
        self.list.blockSignals(False)
        self.empty.setVisible(not self.collections)
        ids = [c.id for c in self.collections]
        if keep not in ids:
            keep = ids[0] if ids and not self.creating else None
        self.selected_id = keep
        if keep is not None:
            self.list.setCurrentRow(ids.index(keep))
        self._show_selected()

    # the collection shown ------------------------------------------------------------------
    @property
    def selected(self) -> Collection | None:
        return next((c for c in self.collections if c.id == self.selected_id), None)

    def select(self, collection_id: int) -> None:
        ids = [c.id for c in self.collections]
        if collection_id in ids:
            self.list.setCurrentRow(ids.index(collection_id))

    def _current_changed(self, item: QListWidgetItem | None, _old: object) -> None:
        if item is None or (item.data(ID) == self.selected_id and not self.creating):
            return
        self.creating = False
        self.selected_id = item.data(ID)
        self._clear_errors()
        self.try_box.clear()
        self._show_selected()

    def _show_selected(self) -> None:
        collection = self.selected
        creating = self.creating
        self.new_hint.setVisible(creating)
        self.create_row.setVisible(creating)
        self.index_group.setVisible(not creating and collection is not None)
        self.search_group.setVisible(not creating and collection is not None)
        if creating:
            paths, embedder = self._new_paths, self._new_embedder
        elif collection is not None:
            if self._shown_id != collection.id or not self.name.hasFocus():
                self.name.setText(collection.name)
            paths, embedder = list(collection.paths), collection.embedder
        else:
            self.name.clear()
            paths, embedder = [], None
        self.paths.clear()
        for path in paths:
            item = QListWidgetItem(path)
            item.setToolTip(path)
            self.paths.addItem(item)
        fit_rows(self.paths, PATH_ROWS)
        self._fill_embedders(embedder)
        self._shown_id = None if creating or collection is None else collection.id
        if collection is not None and not creating:
            self._show_run(collection)
        self._update_buttons()

    def _fill_embedders(self, chosen: str | None) -> None:
        """Keyword search only, the library's embedding models, the chosen file when it is
        none of them, then Choose a GGUF file…; ``chosen`` (a path, None: keywords) current."""
        self._shown_embedder = chosen
        self.embedder.clear()
        self.embedder.addItem(KEYWORDS_ONLY, None)
        current = 0
        for path, name in self.library_embedders or []:
            self.embedder.addItem(name, path)
            self.embedder.setItemData(self.embedder.count() - 1, path, Qt.ItemDataRole.ToolTipRole)
            if path == chosen:
                current = self.embedder.count() - 1
        if chosen and not current:
            self.embedder.addItem(Path(chosen).name, chosen)
            current = self.embedder.count() - 1
            self.embedder.setItemData(current, chosen, Qt.ItemDataRole.ToolTipRole)
        self.embedder.setCurrentIndex(current)
        self.embedder.addItem(CHOOSE_MODEL, "")
        if self.embedder_note.text() in (EMBEDDER_NOTE, NO_LIBRARY_EMBEDDER):
            self.embedder_note.setText(self._embedder_note())

    def _embedder_note(self) -> str:
        """The note under the embedder list: where to find a model when the library has no
        embedding model and none is chosen, else what one is for."""
        if self.library_embedders == [] and not self._shown_embedder:
            return NO_LIBRARY_EMBEDDER
        return EMBEDDER_NOTE

    def _show_run(self, collection: Collection) -> None:
        """The selected collection's run under way, its last report, or its figures."""
        cid = collection.id
        assert cid is not None
        latest = self.runs.latest.get(cid)
        running = self.runs.running(cid)
        self.progress.setVisible(running)
        self.progress_text.setVisible(running)
        if running:
            if latest is not None:
                self._show_progress(latest)
            else:
                self.progress.setRange(0, 0)
                self.progress_text.setText("Starting…")
        report = self.runs.reports.get(cid)
        state = self.states.get(cid)
        error = self.runs.errors.get(cid)
        if error:
            self._say(self.index_error, error)
        else:
            self._say(self.index_error, "")
        if report is not None:
            self.summary.setText(words.report_text(report))
            self._show_skipped([(s.path, s.reason) for s in report.skipped])
        elif isinstance(state, str):
            self.summary.setText("")
            self._say(self.index_error, state)
            self._show_skipped([])
        elif state is not None:
            self.summary.setText(words.state_text(state))
            self._show_skipped(list(state.skipped))
        else:
            self.summary.setText("")
            self._show_skipped([])
        if cid in self._paths_changed and not running:
            shown = self.summary.text()
            self.summary.setText(f"{shown}\n{CHANGED_PATHS}" if shown else CHANGED_PATHS)
        if running:  # the progress line says where the run is; its report comes at its end
            self.summary.setText("")
        self.summary.setVisible(bool(self.summary.text()))

    def _show_skipped(self, skipped: list[tuple[str, str]]) -> None:
        collection = self.selected
        roots = collection.paths if collection is not None else ()
        self.skipped.clear()
        for path, reason in skipped:
            shown = words.skipped_line(words.shown_path(path, roots), reason)
            item = QListWidgetItem(shown)
            item.setToolTip(words.skipped_line(path, reason))
            self.skipped.addItem(item)
        fit_rows(self.skipped, SKIPPED_ROWS)
        self.skipped_label.setText(
            f"Skipped files ({len(skipped):,})" if skipped else "Skipped files"
        )
        self.skipped_label.setVisible(bool(skipped))
        self.skipped.setVisible(bool(skipped))

    def _update_buttons(self) -> None:
        collection = self.selected
        editing = self.creating or collection is not None
        for button in (self.add_folder_button, self.add_files_button):
            button.setEnabled(editing)
        self.remove_path_button.setEnabled(editing and bool(self.paths.selectedItems()))
        self.name.setEnabled(editing)
        self.embedder.setEnabled(editing)
        self.remove_button.setEnabled(collection is not None and not self.creating)
        self._run_buttons_for(collection.id if collection is not None else None)

    def _run_buttons_for(self, collection_id: int | None) -> None:
        if collection_id != self.selected_id:
            return
        running = self.runs.running(collection_id)
        stopping = self.runs.cancelling(collection_id)
        chosen = self.selected is not None and not self.creating
        self.index_button.setEnabled(chosen and not running)
        self.pause_button.setEnabled(running and not stopping)
        self.pause_button.setText("Resume" if self.runs.paused(collection_id) else "Pause")
        self.cancel_button.setEnabled(running and not stopping)
        self.search_button.setEnabled(chosen)

    def _paused_changed(self, collection_id: int, paused: bool) -> None:
        if collection_id == self.selected_id and not self.creating:
            text = self.progress_text.text().removeprefix("Paused. ")
            self.progress_text.setText(f"Paused. {text}" if paused else text)
        self._run_buttons_for(collection_id)

    # new collection ------------------------------------------------------------------------
    def new_collection(self) -> None:
        """The right side describes a new collection until Create (or Cancel)."""
        self.creating = True
        self._new_paths = []
        self._new_embedder = None
        self.list.clearSelection()
        self._clear_errors()
        self.name.clear()
        self._show_selected()
        self.name.setFocus()

    def cancel_new(self) -> None:
        self.creating = False
        self._clear_errors()
        if self.selected_id is None and self.collections:
            self.selected_id = self.collections[0].id
        self._fill_list()

    def create_collection(self) -> asyncio.Task[bool]:
        name, paths, embedder = self.name.text(), list(self._new_paths), self._new_embedder
        return self._start(self._create(name, paths, embedder), "knowledge page: create")

    async def _create(self, name: str, paths: list[str], embedder: str | None) -> bool:
        self.create_button.setEnabled(False)
        try:
            made = await self._saving(self.knowledge.create, name, paths, embedder)
        finally:
            self.create_button.setEnabled(True)
        if made is None:
            return False
        self.creating = False
        self._clear_errors()
        self.selected_id = made.id
        self.collections = [*[c for c in self.collections if c.id != made.id], made]
        self._fill_list()
        self.status.emit(f"Created the collection “{made.name}”; indexing it.")
        self.saved.emit(True)
        self._index(made)
        self.watch.refresh()
        await self.reload()
        return True

    # changing ------------------------------------------------------------------------------
    def _name_edited(self) -> None:
        collection = self.selected
        if self.creating or collection is None:
            return
        if self.name.text().strip() == collection.name:
            return
        self._update(collection, name=self.name.text())

    def add_folder(self) -> asyncio.Task[bool] | None:
        folder = self.ask_folder()
        return self._add_paths([folder] if folder else [])

    def add_files(self) -> asyncio.Task[bool] | None:
        return self._add_paths(self.ask_files())

    def _add_paths(self, added: list[str]) -> asyncio.Task[bool] | None:
        if not added:
            return None
        collection = self.selected
        if self.creating:
            for path in added:
                if path not in self._new_paths:
                    self._new_paths.append(path)
            if not self.name.text().strip():
                self.name.setText(Path(added[0]).name)
            self._say(self.paths_error, "")
            self._show_selected()
            return None
        if collection is None:
            return None
        return self._update(collection, paths=[*collection.paths, *added])

    def remove_path(self) -> asyncio.Task[bool] | None:
        chosen = {item.text() for item in self.paths.selectedItems()}
        if not chosen:
            return None
        if self.creating:
            self._new_paths = [p for p in self._new_paths if p not in chosen]
            self._show_selected()
            return None
        collection = self.selected
        if collection is None:
            return None
        return self._update(collection, paths=[p for p in collection.paths if p not in chosen])

    def _embedder_chosen(self, index: int) -> None:
        value = self.embedder.itemData(index)
        if value == "":  # "Choose a GGUF file…"
            picked = self.ask_model()
            if not picked:
                self._fill_embedders(self._shown_embedder)
                return
            value = picked
        chosen = value or None
        if self.creating:
            self._new_embedder = chosen
            self._fill_embedders(chosen)
            return
        collection = self.selected
        if collection is None or chosen == collection.embedder:
            self._fill_embedders(self._shown_embedder)
            return
        self._update(collection, embedder=chosen)

    def _update(self, collection: Collection, **changes: Any) -> asyncio.Task[bool]:
        return self._start(self._save_changes(collection, changes), "knowledge page: change")

    async def _save_changes(self, collection: Collection, changes: dict[str, Any]) -> bool:
        updated = await self._saving(self.knowledge.update, collection, **changes)
        if updated is None:
            self._show_selected()  # the stored values again
            return False
        self._clear_errors()
        self.collections = [updated if c.id == updated.id else c for c in self.collections]
        if "paths" in changes and updated.id is not None:
            self._paths_changed.add(updated.id)
        self._show_selected()
        if "embedder" in changes:
            self._say(self.embedder_error, "")
            self.embedder_note.setText(EMBEDDER_CHANGED if updated.embedder else KEYWORDS_FROM_NOW)
            if updated.embedder:  # a new model: its vectors, at once (Pause and Cancel work)
                self._index(updated)
        self.status.emit(f"Saved the collection “{updated.name}”.")
        self.saved.emit(True)
        self.watch.refresh()
        await self.reload()
        return True

    async def _saving(
        self, save: Callable[..., Collection], *args: Any, **kw: Any
    ) -> Collection | None:
        """``save`` (create or update) off the GUI thread; None after its refusal is shown (a
        field's words under the field, any other in words; ``saved`` says False)."""
        try:
            return await run_blocking(save, *args, **kw)
        except ValidationError as exc:
            self._show_field_errors(exc.fields)
        except UserError as exc:
            self._say_error(exc.user_message)
        self.saved.emit(False)
        return None

    def remove_collection(self) -> asyncio.Task[bool] | None:
        collection = self.selected
        if collection is None or collection.id is None:
            return None
        asked = self.confirm(
            "Remove collection",
            f"Remove the collection “{collection.name}” and its index? The files in its "
            "folders stay where they are; agents stop searching it.",
        )
        if not asked:
            return None
        return self._start(self._remove(collection), "knowledge page: remove")

    async def _remove(self, collection: Collection) -> bool:
        assert collection.id is not None
        running = self.runs.cancel(collection.id)
        if running is not None:
            await asyncio.gather(running, return_exceptions=True)
        try:
            await run_blocking(self.knowledge.delete, collection)
        except (UserError, OSError) as exc:
            self._say_error(getattr(exc, "user_message", None) or str(exc))
            return False
        self.runs.reports.pop(collection.id, None)
        self.collections = [c for c in self.collections if c.id != collection.id]
        self.selected_id = None
        self.status.emit(f"Removed the collection “{collection.name}”; its files are untouched.")
        self.watch.refresh()
        await self.reload()
        self.removed.emit()
        return True

    # indexing ------------------------------------------------------------------------------
    def index_now(self) -> asyncio.Task[None] | None:
        collection = self.selected
        if collection is None or self.creating:
            return None
        return self._index(collection)

    def _index(self, collection: Collection) -> asyncio.Task[None] | None:
        task = self.runs.start(collection)
        if task is not None and collection.id is not None:
            self._asked.add(collection.id)
        return task

    def pause_or_resume(self) -> None:
        cid = self.selected_id
        if cid is None or not self.runs.running(cid):
            return
        if self.runs.paused(cid):
            self.runs.resume(cid)
        else:
            self.runs.pause(cid)

    def cancel_index(self) -> None:
        if self.selected_id is not None:
            self.runs.cancel(self.selected_id)
            self.progress_text.setText("Cancelling after the file being read…")

    def _run_started(self, collection_id: int) -> None:
        self._paths_changed.discard(collection_id)
        if collection_id == self.selected_id and not self.creating:
            self._say(self.index_error, "")
            self.progress.setRange(0, 0)  # busy until the files are counted
            self.progress.show()
            self.progress_text.setText("Looking for files…")
            self.progress_text.show()
            self.summary.hide()
        self._run_buttons_for(collection_id)

    def _run_progressed(self, collection_id: int, progress: IndexProgress) -> None:
        if collection_id == self.selected_id and not self.creating:
            self._show_progress(progress)

    def _show_progress(self, p: IndexProgress) -> None:
        if p.files_total:
            self.progress.setRange(0, p.files_total)
            self.progress.setValue(p.files_done)
        text = words.progress_text(p)
        if self.runs.paused(self.selected_id):
            text = "Paused. " + text
        self.progress_text.setText(text)
        self.progress.show()
        self.progress_text.show()

    def _run_finished(self, collection_id: int, report: IndexReport) -> None:
        collection = next((c for c in self.collections if c.id == collection_id), None)
        name = collection.name if collection is not None else "the collection"
        if collection_id not in self._asked:
            pass  # the watch's: the page's figures change, the status line does not
        elif report.cancelled:
            self.status.emit(f"Indexing of “{name}” cancelled; what was read is kept.")
        else:
            self.status.emit(
                f"Indexed “{name}”: {words.count(report.files, 'file')}, "
                f"{words.count(report.chunks, 'passage')}."
            )
        self._run_ended(collection_id)

    def _run_failed(self, collection_id: int, why: str) -> None:
        if collection_id in self._asked:
            self.status.emit(why)
        self._run_ended(collection_id)

    def _run_ended(self, collection_id: int) -> None:
        self._asked.discard(collection_id)
        if collection_id == self.selected_id and not self.creating:
            self.progress.hide()
            self.progress_text.hide()
            self.embedder_note.setText(self._embedder_note())
            self._show_selected()  # the run's report and skipped files, now
        self._run_buttons_for(collection_id)
        self.reload()  # the figures of the list and the summary

    # messages ------------------------------------------------------------------------------
    def _show_field_errors(self, fields: dict[str, str]) -> None:
        placed = {
            "name": self.name_error,
            "paths": self.paths_error,
            "embedder": self.embedder_error,
        }
        rest = []
        for field, message in fields.items():
            label = placed.get(field)
            if label is not None:
                self._say(label, message)
            else:
                rest.append(message)
        self._say_error(" ".join(rest))

    def _clear_errors(self) -> None:
        for label in (self.name_error, self.paths_error, self.embedder_error, self.error):
            self._say(label, "")

    def _say_error(self, text: str) -> None:
        self._say(self.error, text)

    @staticmethod
    def _say(label: QLabel, text: str) -> None:
        label.setText(text)
        label.setVisible(bool(text))

    def error_text(self, field: str) -> str:
        """The message shown under ``field`` (name, paths, embedder; anything else: the
        page's own)."""
        label = {
            "name": self.name_error,
            "paths": self.paths_error,
            "embedder": self.embedder_error,
        }.get(field, self.error)
        return label.text() if label.isVisibleTo(self) else ""

    # tasks ---------------------------------------------------------------------------------
    def _start(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = start(coro, name=name)
        self._tasks = [t for t in self._tasks if not t.done()]
        self._tasks.append(task)
        return task

    async def wait(self) -> None:
        """Until the page's own work (reads, saves, searches) has ended; not the runs."""
        while any(not t.done() for t in self._tasks):
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        self.try_box.stop()
