"""What the Models page does with the selected file: New agent from this model, Load, Unload,
Open folder, Delete… (buttons, and the same actions in the table's context menu).

- New agent opens the agent editor filled in (``model_library.new_agent_for``: the automatic
  context for the RAM available now, every layer on the GPU when the estimate fits the free
  GPU memory); the person saves it.
- Load asks ``services.local`` for one token with the first using agent's load parameters (or
  the new-agent defaults), so the model is in memory when the next chat starts; the State
  column follows the runtime, and a load that had to put fewer layers on the GPU than asked
  (out of GPU memory) says so in the message. Unload frees the workers that hold this file.
- Delete is offered only for a file the app downloaded (``ModelLibrary.is_downloaded``: the
  hub's manifest), never for the starter or a file in a linked folder; it asks first, naming
  the file, its size and the agents using it.

The library, its rules and the memory probes are ``desktop.chat.model_library``'s.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QUrl, Signal
from PySide6.QtGui import QAction, QDesktopServices
from PySide6.QtWidgets import QMenu, QPushButton, QWidget

from desktop.chat.model_library import (
    ModelLibrary,
    agents_using,
    available_ram,
    gpu_memory,
    load_params_for_file,
    model_files,
    new_agent_for,
    size_on_disk,
)
from desktop.chat.services import Services
from desktop.errors import UserError
from desktop.local.catalog import ModelEntry
from desktop.local.memory import format_bytes
from desktop.ui.agents.editor import AgentEditorDialog
from desktop.ui.agents.local import attach_memory_estimate, attach_model_picker
from desktop.ui.agents.memory_estimate import MemoryEstimateView
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.widgets import confirm

log = logging.getLogger("simi.ui.models")


class ModelActions(QObject):
    """The action buttons; ``update_for(entry)`` enables what applies to the selection.

    Signals: agent_created(object): an agent saved from "New agent from this model";
    deleted(str): a downloaded file was deleted; said(str): a line for the page's message.
    """

    agent_created = Signal(object)
    deleted = Signal(str)
    said = Signal(str)

    def __init__(
        self,
        services: Services,
        parent: QWidget,
        selected: Callable[[], ModelEntry | None],
        ram: Callable[[], int | None] = available_ram,
        gpu: Callable[[], tuple[bool, int | None]] = gpu_memory,
        library: ModelLibrary | None = None,
    ) -> None:
        super().__init__(parent)
        self._services = services
        self._library = library or ModelLibrary.of(services)
        self._parent = parent
        self._selected = selected
        self._ram = ram
        self._gpu = gpu
        self.task: asyncio.Task[Any] | None = None  # the running Load/Unload/New agent step
        self.editor: AgentEditorDialog | None = None  # the last editor New agent opened
        # the library's files the app downloaded, read with each scan (off the GUI thread)
        self.downloaded_paths: set[str] = set()
        self.new_agent_button = QPushButton("New agent from this model")
        self.load_button = QPushButton("Load")
        self.unload_button = QPushButton("Unload")
        self.open_button = QPushButton("Open folder")
        self.delete_button = QPushButton("Delete…")
        tips = (
            "Make an agent that uses this file, with load settings that fit this computer",
            "Load the model into memory now (with its first agent's settings)",
            "Free the memory this model takes",
            "Show the file in the file manager",
            "Delete this downloaded file from the disk",
        )
        for button, tip in zip(self.buttons, tips, strict=True):
            button.setToolTip(tip)
        self.new_agent_button.clicked.connect(self.new_agent)
        self.load_button.clicked.connect(self.load)
        self.unload_button.clicked.connect(self.unload)
        self.open_button.clicked.connect(self.open_folder)
        self.delete_button.clicked.connect(self.delete)
        self.update_for(None)

    @property
    def buttons(self) -> tuple[QPushButton, ...]:
        return (
            self.new_agent_button,
            self.load_button,
            self.unload_button,
            self.open_button,
            self.delete_button,
        )

    @property
    def busy(self) -> bool:
        return self.task is not None and not self.task.done()

    def update_for(self, entry: ModelEntry | None) -> None:
        usable = entry is not None and entry.info is not None
        state = self._services.local.state_of(entry.path) if entry is not None else "unloaded"
        self.new_agent_button.setEnabled(usable and not self.busy)
        self.load_button.setEnabled(usable and not self.busy and state in ("unloaded", "error"))
        self.unload_button.setEnabled(
            entry is not None and not self.busy and state in ("ready", "error")
        )
        self.open_button.setEnabled(entry is not None)
        can_delete = entry is not None and not entry.starter and entry.path in self.downloaded_paths
        self.delete_button.setEnabled(can_delete and not self.busy)
        self.delete_button.setToolTip(
            "Delete this downloaded file from the disk"
            if can_delete
            else "Only models the app downloaded can be deleted here"
        )

    def menu(self, parent: QWidget) -> QMenu:
        """The context menu: the same actions, enabled alike."""
        menu = QMenu(parent)
        for button in self.buttons:
            action = QAction(button.text(), menu)
            action.setEnabled(button.isEnabled())
            action.triggered.connect(button.click)
            menu.addAction(action)
        return menu

    def _run(self, coro: Any, name: str) -> asyncio.Task[Any]:
        self.task = start(coro, name=name)
        self.task.add_done_callback(lambda _t: self.update_for(self._selected()))
        self.update_for(self._selected())
        return self.task

    def _run_on_model(
        self, step: Callable[[ModelEntry], Coroutine[Any, Any, None]], name: str
    ) -> asyncio.Task[Any] | None:
        """``step`` on the selected file, when its header could be read and nothing else runs."""
        entry = self._selected()
        if entry is None or entry.info is None or self.busy:
            return None
        return self._run(step(entry), name)

    # new agent -------------------------------------------------------------------------------
    def new_agent(self) -> asyncio.Task[Any] | None:
        return self._run_on_model(self._new_agent, "models: new agent")

    async def _new_agent(self, entry: ModelEntry) -> None:
        taken = [a.name for a in self._services.agents.list()]
        agent = await run_blocking(self.proposed_agent, entry, taken)
        self.open_editor(agent)

    def proposed_agent(self, entry: ModelEntry, taken: list[str]) -> Any:
        """Blocking (asks for the free RAM and GPU memory): the agent the editor opens with,
        named unlike ``taken``."""
        offload, vram = self._gpu()
        return new_agent_for(entry, taken, self._ram(), offload, vram)

    def open_editor(self, agent: Any) -> AgentEditorDialog:
        """The agent editor on ``agent`` (not stored yet); a saved one is announced."""
        services = self._services
        dialog = AgentEditorDialog(
            services.agents,
            services.secrets,
            agent,
            self._parent,
            tools=getattr(services, "tools", None),
            knowledge=getattr(services, "knowledge", None),
        )
        dialog.setWindowTitle("New agent")
        attach_memory_estimate(dialog, MemoryEstimateView(cache=services.local.model_info))
        attach_model_picker(dialog, self._library.entries)
        self.editor = dialog

        def finished(ok: bool) -> None:
            if ok and dialog.saved_agent is not None:
                self.said.emit(f"Created the agent {dialog.saved_agent.name}.")
                self.agent_created.emit(dialog.saved_agent)

        dialog.save_finished.connect(finished)
        dialog.finished.connect(lambda _r: dialog.deleteLater())
        dialog.open()
        return dialog

    # load / unload ---------------------------------------------------------------------------
    def load(self) -> asyncio.Task[Any] | None:
        return self._run_on_model(self._load, "models: load")

    async def _load(self, entry: ModelEntry) -> None:
        agents = self._services.agents.list()
        default = await run_blocking(self.proposed_agent, entry, [])
        params, whose = load_params_for_file(entry.path, agents, default)
        name = Path(entry.path).name
        self.said.emit(f"Loading {name}…")
        try:
            loaded = await self._services.local.load(params)
        except UserError as exc:
            self.said.emit(exc.user_message)
            return
        if not loaded:
            self.said.emit(f"{name} is not loaded: every llama.cpp worker is answering.")
            return
        how = f"with {whose}'s settings" if whose else "with new-agent settings"
        report = self._services.local.placement_of(params.model_path)
        note = f" {report.note}" if report is not None and report.note else ""
        self.said.emit(f"Loaded {name} ({how}, context {params.n_ctx:,}).{note}")

    def unload(self) -> asyncio.Task[Any] | None:
        entry = self._selected()
        if entry is None or self.busy:
            return None
        return self._run(self._unload(entry.path), "models: unload")

    async def _unload(self, path: str) -> None:
        await unload_file(self._services.local, path)
        self.said.emit(f"Unloaded {Path(path).name}; its memory is free.")

    # folder and delete -----------------------------------------------------------------------
    def open_folder(self) -> QUrl | None:
        entry = self._selected()
        if entry is None:
            return None
        url = QUrl.fromLocalFile(str(Path(entry.path).parent))
        if not QDesktopServices.openUrl(url):
            self.said.emit(f"No file manager opened {url.toLocalFile()}.")
        return url

    def delete(self) -> asyncio.Task[Any] | None:
        entry = self._selected()
        if entry is None or entry.starter or self.busy:
            return None
        if not self._library.is_downloaded(entry.path):
            self.said.emit(f"{Path(entry.path).name} was not downloaded by the app; it stays.")
            return None
        users = [a.name for a in agents_using(entry.path, self._services.agents.list())]
        parts = model_files(entry.path)
        what = f"{Path(entry.path).name} ({format_bytes(size_on_disk(entry.path))}"
        what += f", {len(parts)} parts)" if len(parts) > 1 else ")"
        text = f"Delete {what} from the disk?"
        if users:
            text += f" The agents {', '.join(users)} use it; they will need another file."
        if not confirm(self._parent, "Delete model", text):
            return None
        return self._run(self._delete(entry.path), "models: delete")

    async def _delete(self, path: str) -> None:
        size = await run_blocking(size_on_disk, path)
        await unload_file(self._services.local, path)
        try:
            removed = await run_blocking(self._library.delete, path)
        except (UserError, OSError) as exc:
            self.said.emit(getattr(exc, "user_message", None) or f"Not deleted: {exc}")
            return
        files = "file" if len(removed) == 1 else "files"
        self.said.emit(
            f"Deleted {Path(path).name} ({len(removed)} {files}, {format_bytes(size)} freed)."
        )
        self.deleted.emit(path)


async def unload_file(runtime: Any, path: str) -> None:
    """Free the workers that hold ``path`` (all of them when only it is loaded)."""
    workers = list(getattr(runtime, "workers", None) or [getattr(runtime, "worker", None)])
    holding = [
        w for w in workers if w is not None and w.params is not None and w.params.model_path == path
    ]
    others = [w for w in workers if w is not None and w.alive and w not in holding]
    if not others:
        await runtime.unload()
        return
    for worker in holding:
        await worker.unload()
