"""Keeps indexed collections up to date while the app runs.

A ``QFileSystemWatcher`` on each indexed collection's roots (its folders, and the files it names
one by one) and on the folders that hold its indexed files (``MAX_WATCHED`` paths in all: the
system's watches are a limited resource) notices a file added, removed or renamed there (as most
editors save: a new file renamed over the old); after ``DEBOUNCE_MS`` without another change the
collection is indexed again (incremental: unchanged files are only looked at). Changes the
watcher missed (a file written in place, a folder past the limit, an empty folder that got a
file) are found by a quiet re-sync of every indexed collection each ``RESYNC_MS``. A collection
never indexed is not watched (the person has not asked for it yet); with no indexed collection
nothing is watched and no timer runs. Runs go through ``IndexRuns``: never two of one collection
at once (a change during a run indexes it again when that run has ended).

The window owns it and starts it after its first paint (``MainWindow.build_pages_when_idle``),
so it watches before the Knowledge page is first shown and start-up does not wait for it.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Signal

from desktop.errors import UserError
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.knowledge.runs import IndexRuns

if TYPE_CHECKING:
    from desktop.chat.knowledge import KnowledgeService
    from desktop.store.knowledge import Collection

log = logging.getLogger("simi.ui.knowledge")

DEBOUNCE_MS = 2_000
RESYNC_MS = 5 * 60 * 1000
MAX_WATCHED = 1_000


class KnowledgeWatch(QObject):
    """Signals: watching(): the set of watched collections was read again."""

    watching = Signal()

    def __init__(
        self,
        knowledge: KnowledgeService,
        parent: QObject | None = None,
        *,
        debounce_ms: int = DEBOUNCE_MS,
        resync_ms: int = RESYNC_MS,
    ) -> None:
        super().__init__(parent)
        self.knowledge = knowledge
        self.runs = IndexRuns(knowledge, self)
        self.collections: dict[int, Collection] = {}  # the indexed ones, watched
        self.dirty: set[int] = set()  # changed since their last run began
        self._fs: QFileSystemWatcher | None = None  # made when there is something to watch
        self._started = False
        self._stopped = False
        self._reading: asyncio.Task[None] | None = None
        self._read_again = False
        self.debounce = QTimer(self)
        self.debounce.setSingleShot(True)
        self.debounce.setInterval(debounce_ms)
        self.debounce.timeout.connect(self.tick)
        self.resync_timer = QTimer(self)
        self.resync_timer.setInterval(resync_ms)
        self.resync_timer.timeout.connect(self.resync)
        self.runs.finished.connect(self._run_ended)
        self.runs.failed.connect(self._run_ended)

    @property
    def started(self) -> bool:
        return self._started

    def watched_paths(self) -> list[str]:
        if self._fs is None:
            return []
        return sorted([*self._fs.directories(), *self._fs.files()])

    # starting and reading ------------------------------------------------------------------
    def start(self) -> asyncio.Task[None] | None:
        """Begin watching (once; later calls read the collections again)."""
        self._started = True
        return self.refresh()

    def refresh(self) -> asyncio.Task[None] | None:
        """Read which collections are indexed and their roots again (off the GUI thread): a
        collection was made, changed, removed or indexed."""
        if not self._started or self._stopped:
            return None
        if self._reading is not None and not self._reading.done():
            self._read_again = True
            return self._reading
        self._reading = start(self._read(), name="knowledge watch: read collections")
        return self._reading

    async def _read(self) -> None:
        while True:
            self._read_again = False
            try:
                indexed, roots = await run_blocking(self._indexed)
            except (UserError, OSError) as exc:  # the store went away: try at the next change
                log.warning("knowledge watch could not read the collections: %s", exc)
                return
            if self._stopped:
                return
            self._watch(indexed, roots)
            if not self._read_again:
                return

    def _indexed(self) -> tuple[list[Collection], list[str]]:
        """On a worker thread: the collections that have an index, and what to watch of them
        that exists now (a missing path would make the watcher complain): their roots first,
        then the folders of their indexed files, ``MAX_WATCHED`` at most."""
        indexed = [
            c
            for c in self.knowledge.collections()
            if c.id is not None and self.knowledge.index_path(c).exists()
        ]
        paths = dict.fromkeys(p for c in indexed for p in c.paths if os.path.exists(p))
        for collection in indexed:
            if len(paths) >= MAX_WATCHED:
                break
            for folder in self.knowledge.folders(collection):
                if len(paths) >= MAX_WATCHED:
                    break
                if folder not in paths and os.path.isdir(folder):
                    paths[folder] = None
        return indexed, sorted(paths)

    def _watch(self, indexed: list[Collection], roots: list[str]) -> None:
        self.collections = {c.id: c for c in indexed if c.id is not None}
        self.dirty &= set(self.collections)
        if not roots:
            if self._fs is not None:
                self._unwatch_all()
            self.resync_timer.stop()
            self.watching.emit()
            return
        if self._fs is None:
            self._fs = QFileSystemWatcher(self)
            self._fs.directoryChanged.connect(self.path_changed)
            self._fs.fileChanged.connect(self.path_changed)
        now = set(self.watched_paths())
        gone = sorted(now - set(roots))
        if gone:
            self._fs.removePaths(gone)
        new = [r for r in roots if r not in now]
        if new:
            self._fs.addPaths(new)
        if not self.resync_timer.isActive():
            self.resync_timer.start()
        self.watching.emit()

    def _unwatch_all(self) -> None:
        if self._fs is not None:
            paths = self.watched_paths()
            if paths:
                self._fs.removePaths(paths)

    # changes -------------------------------------------------------------------------------
    def path_changed(self, path: str) -> None:
        """A watched folder or file changed: its collections are indexed again after a quiet
        ``DEBOUNCE_MS``."""
        for cid, collection in self.collections.items():
            if any(
                path == p or path.startswith(p.rstrip(os.sep) + os.sep) for p in collection.paths
            ):
                self.dirty.add(cid)
        if self.dirty:
            self.debounce.start()

    def resync(self) -> None:
        """Every indexed collection, quietly (an unchanged file costs one ``stat``)."""
        self.dirty |= set(self.collections)
        self.tick()

    def tick(self) -> list[int]:
        """Start a run for each changed collection not being indexed now (the others wait
        for their run to end). Returns the ids started."""
        begun = []
        for cid in sorted(self.dirty):
            collection = self.collections.get(cid)
            if collection is None:
                self.dirty.discard(cid)
                continue
            if self.runs.running(cid):
                continue  # again when this run has ended
            self.dirty.discard(cid)
            if self.runs.start(collection) is not None:
                begun.append(cid)
        return begun

    def _run_ended(self, collection_id: int, _outcome: object) -> None:
        if self._stopped:
            return
        if collection_id in self.dirty:
            self.debounce.start()
        self.refresh()  # a first index makes a collection watched

    def stop(self) -> None:
        """The window closes: no timer, no watcher, the runs cancelled."""
        self._stopped = True
        self.debounce.stop()
        self.resync_timer.stop()
        self._unwatch_all()
        self.runs.stop()
        if self._reading is not None:
            self._reading.cancel()
