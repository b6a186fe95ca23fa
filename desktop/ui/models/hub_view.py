"""The Models page's "Find models" tab: search the Hugging Face Hub, a repository's GGUF
models with fit marks, downloads with progress.

Nothing contacts the hub until the person searches (the empty state says so, naming the host
from ``HF_ENDPOINT``). Every hub call runs on a worker thread (``run_blocking``); a newer
search or selection supersedes an older one still on its way. Errors are shown in the tab
with their finished text and Retry; a gated or private repository opens the access-token
panel (``hub_token.py``), and the failed action runs again once a token is saved.
Fit marks come from ``desktop.hub.files.fit_of`` with this machine's RAM and its largest
GPU's memory (``hub_browse.machine_memory``, as ``simi models files``), for the context picked
beside the models (4,096 by default): first from the file sizes, then from one GGUF header
per repository scaled for the other quantizations (``hub_browse.reference_header``), and for
the selected model from its own header (all read with Range requests). The blocking work is
``desktop.chat.hub_browse``'s; downloads are ``hub_downloads.py``'s.

Closing the window pauses every running download (the view watches its window's Close event;
``pause_all()`` does the same for a caller): the parts stay, listed as paused with Resume at
the next start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import urlparse

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.hub_browse import header_info, list_models, machine_memory, reference_header
from desktop.chat.services import Services
from desktop.errors import UserError
from desktop.hub.client import HubAuthError, HubClient, RepoSummary
from desktop.hub.files import GgufModel, fit_of, info_for
from desktop.local.catalog import ModelInfo
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.widgets import push_button, scroll_column, search_field
from desktop.ui.models.hub_downloads import DownloadsPanel
from desktop.ui.models.hub_format import size_text
from desktop.ui.models.hub_parts import EmptyState, Notice
from desktop.ui.models.hub_tables import ModelTable, RepoTable
from desktop.ui.models.hub_token import TokenPanel

log = logging.getLogger("simi.ui.hub")

CONTEXTS = (2048, 4096, 8192, 16384, 32768, 65536, 131072)
DEFAULT_CONTEXT = 4096
Action = Callable[[], Coroutine[Any, Any, None]]


class HubView(QWidget):
    downloaded = Signal(str)  # the path of a model whose download completed and verified

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("HubView")
        self.services = services
        self._client: HubClient | None = None
        self._memory: tuple[int | None, int | None] | None = None
        self._headers: dict[tuple[str, str], ModelInfo | None] = {}  # exact, per model
        self._references: dict[str, tuple[GgufModel, ModelInfo] | None] = {}  # per repo
        self._have: set[str] = set()
        self._repo: RepoSummary | None = None
        self._generation = 0  # a newer search or selection makes older answers stale
        self._retry_action: Action | None = None
        self.machine: Callable[[], tuple[int | None, int | None]] = machine_memory

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 8, 6, 6)
        layout.setSpacing(6)
        row = QHBoxLayout()
        row.setSpacing(6)
        self.search_box = search_field(
            "SearchBox", "Search models, e.g. qwen 2.5", "Search the Hugging Face Hub"
        )
        self.search_box.returnPressed.connect(self._search_clicked)
        self.search_button = push_button(
            "Search",
            self._search_clicked,
            name="PrimaryButton",
            accessible="Search the Hugging Face Hub",
        )
        self.token_button = push_button(
            "Access token",
            self._token_clicked,
            tip="An access token for gated or private repositories",
            accessible="Access token for gated or private repositories",
        )
        row.addWidget(self.search_box, 1)
        row.addWidget(self.search_button)
        row.addWidget(self.token_button)
        layout.addLayout(row)
        # Below the search row everything scrolls as one when the window is too short for it
        # (the smallest window with the token panel open): nothing is squeezed or clipped.
        self.body, inner = scroll_column("HubBody", "HubBodyInner", spacing=6)
        layout.addWidget(self.body, 1)
        layout = inner  # what follows is added to the scrolled column

        self.status = ElidedLabel("")
        self.status.setObjectName("DialogNote")
        layout.addWidget(self.status)
        self.notice = Notice(self._retry)
        self.notice_text, self.notice_retry = self.notice.text, self.notice.retry
        layout.addWidget(self.notice)
        self.token = TokenPanel(services)
        self.token.saved.connect(self._forget_client)
        self.token.removed.connect(self._forget_client)
        layout.addWidget(self.token)

        self.stack = QStackedWidget()
        self.empty = EmptyState(self.host())
        self.empty_hint = self.empty.hint
        self.stack.addWidget(self.empty)
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.setChildrenCollapsible(False)
        self.repos = RepoTable()
        self.repos.itemSelectionChanged.connect(self._repo_selected)
        self.splitter.addWidget(self.repos)
        self.splitter.addWidget(self._models_pane())
        self.splitter.setSizes([200, 220])
        self.stack.addWidget(self.splitter)
        layout.addWidget(self.stack, 1)

        self.downloads = DownloadsPanel(services)
        self.downloads.downloaded.connect(self._on_downloaded)
        self.downloads.changed.connect(self._download_changed)
        self.downloads.auth_needed.connect(self._download_needs_token)
        layout.addWidget(self.downloads)
        self._watched: QWidget | None = None  # the window whose closing pauses the downloads
        self._load_pending()

    # public ----------------------------------------------------------------------------------
    def search(self, query: str) -> None:
        """Search the hub for ``query`` (as pressing Search does)."""
        self.search_box.setText(query)
        self._search_clicked()

    def pause_all(self) -> None:
        """Pause every running download (call it when the window closes); parts stay."""
        self.downloads.pause_all()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        window = self.window()
        if window is not self and window is not self._watched:
            if self._watched is not None:
                self._watched.removeEventFilter(self)
            window.installEventFilter(self)
            self._watched = window

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._watched and event.type() == QEvent.Type.Close:
            self.pause_all()  # the parts stay; the next start lists them with Resume
        return False

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.downloads.set_rows_shown(1 if self.height() < 520 else 2)

    def host(self) -> str:
        endpoint = self.services.hub.endpoint
        return urlparse(endpoint).netloc or endpoint

    # building --------------------------------------------------------------------------------
    def _models_pane(self) -> QWidget:
        pane = QWidget()
        col = QVBoxLayout(pane)
        col.setContentsMargins(0, 4, 0, 0)
        col.setSpacing(4)
        head = QHBoxLayout()
        self.repo_title = ElidedLabel("Pick a repository above to see its models")
        self.repo_title.setObjectName("HubRepoTitle")
        font = self.repo_title.font()
        font.setBold(True)
        self.repo_title.setFont(font)
        self.context = QComboBox()
        self.context.setObjectName("HubContext")
        for n in CONTEXTS:
            self.context.addItem(f"{n:,} tokens", n)
        self.context.setCurrentIndex(CONTEXTS.index(DEFAULT_CONTEXT))
        self.context.setToolTip("The context you want to run with: the fit marks count its memory")
        self.context.setAccessibleName("Context for the fit marks")
        self.context.currentIndexChanged.connect(lambda _i: self._show_fits())
        context_label = QLabel("Context")
        context_label.setBuddy(self.context)
        head.addWidget(self.repo_title, 1)
        head.addWidget(context_label)
        head.addWidget(self.context)
        col.addLayout(head)
        self.models = ModelTable(self._model_action)
        self.models.itemSelectionChanged.connect(self._model_selected)
        col.addWidget(self.models, 1)
        return pane

    # actions ---------------------------------------------------------------------------------
    def n_ctx(self) -> int:
        value = self.context.currentData()
        return int(value) if value else DEFAULT_CONTEXT

    def _search_clicked(self) -> None:
        query = self.search_box.text().strip()
        if not query:
            self.status.setText("Type a model name to search for.")
            return
        self._run(lambda: self._search(query))

    def _run(self, action: Action) -> None:
        """Start ``action``; its UserError is shown in the tab with Retry (a token is asked
        for on HubAuthError, then the action runs again)."""
        self._generation += 1
        self._retry_action = action
        self.notice.hide()
        start(self._guarded(action), name="hub-view")

    async def _guarded(self, action: Action) -> None:
        generation = self._generation
        try:
            await action()
        except HubAuthError as exc:
            if generation == self._generation:
                self.status.setText("")
                self.token.ask(str(exc), lambda: self._run(action))
        except UserError as exc:
            if generation == self._generation:
                self.status.setText("")
                self.notice_text.setText(str(exc))
                self.notice.show()
        finally:
            if generation == self._generation:
                self.search_button.setEnabled(True)

    def _retry(self) -> None:
        if self._retry_action is not None:
            self._run(self._retry_action)

    def _token_clicked(self) -> None:
        if self.token.isVisible():
            self.token.hide()
            return
        start(self._show_token(), name="hub-token-state")

    async def _show_token(self) -> None:
        try:
            saved = await run_blocking(self.services.hub.has_token)
        except UserError as exc:
            self.token.ask(str(exc), None)
            return
        if saved:
            self.token.show_saved()
        else:
            self.token.ask(
                "Gated and private repositories need an access token from your Hugging Face "
                "account.",
                None,
            )

    def _forget_client(self) -> None:
        """The token changed: the next call builds a client with the new one."""
        old, self._client = self._client, None
        if old is not None:
            start(run_blocking(old.close), name="hub-client-close")

    async def client(self) -> HubClient:
        """The hub client with the saved token (the keyring is read on a worker thread)."""
        if self._client is None:
            self._client = await run_blocking(self.services.hub.client)
        return self._client

    async def _search(self, query: str) -> None:
        generation = self._generation
        self.search_button.setEnabled(False)
        self.status.setText(f"Searching {self.host()} for “{query}”…")
        client = await self.client()
        memory = self._memory_task()
        repos = await run_blocking(client.search, query)
        if generation != self._generation:
            return
        self.stack.setCurrentWidget(self.splitter)
        self.repos.show_repos(repos)
        self._repo = None
        self.models.show_models([])
        self.repo_title.setText("Pick a repository above to see its models")
        n = len(repos)
        self.status.setText(
            f"{n} repositor{'y' if n == 1 else 'ies'} with GGUF files for “{query}”"
            if n
            else f"No GGUF repositories match “{query}”. Try fewer or other words."
        )
        await memory

    def _memory_task(self) -> asyncio.Future[None]:
        async def measure() -> None:
            if self._memory is None:
                self._memory = await run_blocking(self.machine)

        return asyncio.ensure_future(measure())

    def _repo_selected(self) -> None:
        repo = self.repos.selected_repo()
        if repo is None or (self._repo is not None and repo.id == self._repo.id):
            return
        self._repo = repo
        self._run(lambda: self._list(repo))

    async def _list(self, repo: RepoSummary) -> None:
        generation = self._generation
        self.repo_title.setText(f"Models in {repo.id}")
        self.models.show_models([])
        self.status.setText(f"Listing the GGUF files of {repo.id}…")
        client = await self.client()
        models, have = await run_blocking(list_models, self.services.hub, client, repo.id)
        if generation != self._generation:
            return
        self._have = have
        self.models.show_models(models)
        self.repo_title.setText(f"Models in {repo.id} ({len(models)})")
        if not models:
            self.status.setText(f"{repo.id} has no GGUF model files.")
        if self._memory is None:
            self._memory = await run_blocking(self.machine)
        self._show_fits()
        for model in models:
            self._show_action(model.name)
        if models and repo.id not in self._references:
            start(self._reference(repo, models), name="hub-reference-header")

    async def _reference(self, repo: RepoSummary, models: list[GgufModel]) -> None:
        """One header of the repository, scaled for the others' marks (a few Range reads)."""
        try:
            client = await self.client()
            found = await run_blocking(reference_header, client, repo.id, models)
        except UserError as exc:
            log.info("no reference header for %s: %s", repo.id, exc)
            found = None
        self._references[repo.id] = found
        if self._repo is not None and self._repo.id == repo.id:
            self._show_fits()

    def _show_fits(self) -> None:
        if self._repo is None:
            return
        ram, vram = self._memory or (None, None)
        for model in self.models.models:
            info = self._headers.get((self._repo.id, model.name)) or info_for(
                model, self._references.get(self._repo.id)
            )
            self.models.set_fit(model.name, fit_of(model, self.n_ctx(), ram, vram, info))
        if not self.models.models:
            return
        where = f"{size_text(ram)} of memory" if ram else "unknown memory"
        gpu = f", {size_text(vram)} on the GPU" if vram else ", no GPU offload"
        basis = f"Fit marks for {self.n_ctx():,} tokens of context, against {where}{gpu}"
        self.status.set_texts([basis, f"Fit for {self.n_ctx():,} tokens, {where}{gpu}"])
        self.status.setToolTip(basis + " (each mark's tooltip has its estimate)")

    def _model_selected(self) -> None:
        model = self.models.selected_model()
        repo = self._repo
        if model is None or repo is None or (repo.id, model.name) in self._headers:
            return
        start(self._refine(repo, model), name="hub-header")

    async def _refine(self, repo: RepoSummary, model: GgufModel) -> None:
        """The selected model's fit from its GGUF header (None when it cannot be read)."""
        try:
            client = await self.client()
            info = await run_blocking(header_info, client, repo.id, model)
        except UserError as exc:
            log.info("no header for %s/%s: %s", repo.id, model.name, exc)
            info = None
        self._headers[(repo.id, model.name)] = info
        if self._repo is not None and self._repo.id == repo.id:
            self._show_fits()

    def _model_action(self, model: GgufModel) -> None:
        repo = self._repo
        if repo is None:
            return
        state = self.downloads.state_of(repo.id, model.name)
        if state == "paused":
            download = self.downloads.downloads[(repo.id, model.name)]
            self.downloads.toggle_pause(download)
            return
        self.downloads.begin(repo.id, model)

    def _show_action(self, name: str) -> None:
        repo = self._repo
        if repo is None:
            return
        state = self.downloads.state_of(repo.id, name)
        if state == "complete" or (name in self._have and state is None):
            self.models.set_action(name, "Downloaded", False, "In your models folder")
        elif state in ("queued", "running", "verifying"):
            self.models.set_action(name, "Downloading", False, "See Downloads below")
        elif state == "paused":
            self.models.set_action(name, "Resume", True, "Resume the paused download")
        elif state == "failed":
            self.models.set_action(name, "Retry", True, "Try the download again")
        else:
            self.models.set_action(name, "Download", True, "Download into your models folder")

    def _download_changed(self, repo: str, name: str) -> None:
        if self._repo is not None and self._repo.id == repo:
            if self.downloads.state_of(repo, name) == "complete":
                self._have.add(name)
            self._show_action(name)

    def _on_downloaded(self, path: str) -> None:
        self.downloaded.emit(path)

    def _download_needs_token(self, retry: Callable[[], None]) -> None:
        self.token.ask(
            "This repository is gated or private: the hub needs an access token to download it.",
            retry,
        )

    def _load_pending(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        start(self._pending(), name="hub-pending")

    async def _pending(self) -> None:
        try:
            pending = await run_blocking(self.services.hub.downloads.pending)
        except (UserError, OSError) as exc:
            log.warning("could not list unfinished downloads: %s", exc)
            return
        self.downloads.add_pending(pending)
