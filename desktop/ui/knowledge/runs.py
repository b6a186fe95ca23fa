"""Indexing runs: at most one per collection, each on a worker thread (``run_blocking``),
paused, resumed and cancelled through its ``IndexControl``.

A run goes on whichever page is shown; the page and the watch both start runs here, so two
runs of one collection never overlap. Progress is reported on the worker thread and hops to
the GUI thread by a queued signal. A run that fails says why in words (``failed``); nothing
here raises into a slot.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from desktop.errors import UserError
from desktop.ui.kit.async_door import run_blocking, start

if TYPE_CHECKING:
    from desktop.chat.knowledge import KnowledgeService
    from desktop.knowledge import IndexControl, IndexProgress, IndexReport
    from desktop.store.knowledge import Collection

log = logging.getLogger("simi.ui.knowledge")


class IndexRuns(QObject):
    """Signals (collection id first):
    started(int): a run began.
    progressed(int, object): an ``IndexProgress``, on the GUI thread.
    paused_changed(int, bool): a run was paused (True) or resumed.
    finished(int, object): a run ended with its ``IndexReport`` (cancelled ones too).
    failed(int, str): a run could not go on; why, in words.
    """

    started = Signal(int)
    progressed = Signal(int, object)
    paused_changed = Signal(int, bool)
    finished = Signal(int, object)
    failed = Signal(int, str)
    _from_worker = Signal(int, object)  # emitted on the worker thread: queued to this one

    def __init__(self, knowledge: KnowledgeService, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.knowledge = knowledge
        self._wishes: dict[int, _Wish] = {}  # the runs under way: pause, cancel
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self.latest: dict[int, IndexProgress] = {}  # the last progress of a run under way
        self.reports: dict[int, IndexReport] = {}  # the last report of each collection
        self.errors: dict[int, str] = {}  # the last failure of each collection
        self._stopped = False
        self._from_worker.connect(self._progress_here)

    # asking --------------------------------------------------------------------------------
    def running(self, collection_id: int | None) -> bool:
        return collection_id is not None and collection_id in self._tasks

    def paused(self, collection_id: int | None) -> bool:
        wish = self._wishes.get(collection_id) if collection_id is not None else None
        return wish is not None and wish.paused and not wish.cancelled

    def cancelling(self, collection_id: int | None) -> bool:
        wish = self._wishes.get(collection_id) if collection_id is not None else None
        return wish is not None and wish.cancelled

    @property
    def any_running(self) -> bool:
        return bool(self._tasks)

    def task(self, collection_id: int) -> asyncio.Task[None] | None:
        return self._tasks.get(collection_id)

    # doing ---------------------------------------------------------------------------------
    def start(self, collection: Collection) -> asyncio.Task[None] | None:
        """Index ``collection`` now (incremental); None when it is already being indexed
        (or the window is closing)."""
        cid = collection.id
        if cid is None or self._stopped or cid in self._tasks:
            return None
        self._wishes[cid] = _Wish(collection.name)
        self.errors.pop(cid, None)
        task = start(self._run(cid), name=f"index collection {cid}")
        self._tasks[cid] = task
        self.started.emit(cid)
        return task

    def pause(self, collection_id: int) -> None:
        wish = self._wishes.get(collection_id)
        if wish is not None and not wish.cancelled:
            wish.paused = True
            wish.apply()
            self.paused_changed.emit(collection_id, True)

    def resume(self, collection_id: int) -> None:
        wish = self._wishes.get(collection_id)
        if wish is not None:
            wish.paused = False
            wish.apply()
            self.paused_changed.emit(collection_id, False)

    def cancel(self, collection_id: int) -> asyncio.Task[None] | None:
        """Stop the run between two files (what it read stays); its task, to await."""
        wish = self._wishes.get(collection_id)
        if wish is not None:
            wish.cancelled = True
            wish.apply()
            self.paused_changed.emit(collection_id, False)
        return self._tasks.get(collection_id)

    def stop(self) -> None:
        """The window closes: every run is cancelled and no new one starts."""
        self._stopped = True
        for wish in self._wishes.values():
            wish.cancelled = True
            wish.apply()

    async def wait(self) -> None:
        """Until every run under way has ended."""
        tasks = list(self._tasks.values())
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # the run -------------------------------------------------------------------------------
    async def _run(self, cid: int) -> None:
        wish = self._wishes[cid]
        emit = self._from_worker.emit
        report: IndexReport | None = None
        why = ""
        gone = False
        try:
            # desktop.knowledge (numpy) loads on a worker thread, not in this slot
            wish.control = await run_blocking(_new_control)
            wish.apply()  # a pause or cancel asked for meanwhile
            report = await run_blocking(self._index, cid, wish.control, lambda p: emit(cid, p))
            gone = report is None
        except asyncio.CancelledError:
            wish.cancelled = True  # the loop is closing: the thread stops between two files
            wish.apply()
            raise
        except UserError as exc:
            why = exc.user_message
        except (OSError, sqlite3.Error) as exc:
            log.warning("indexing %s failed: %s", wish.name, exc)
            detail = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            why = f"“{wish.name}” could not be indexed: {detail}."
        finally:
            self._tasks.pop(cid, None)
            self._wishes.pop(cid, None)
            self.latest.pop(cid, None)
        if gone:  # removed before its run began: nothing to say, no index file made
            self.reports.pop(cid, None)
            return
        if report is None:
            self.errors[cid] = why
            self.failed.emit(cid, why)
            return
        self.reports[cid] = report
        self.finished.emit(cid, report)

    def _index(
        self, collection_id: int, control: IndexControl, progress: Callable[[IndexProgress], None]
    ) -> IndexReport | None:
        """On the worker thread: the collection as it is stored now (its folders and model may
        have changed since the run was asked for), indexed; None when it was removed."""
        collection = self.knowledge.get(collection_id)
        if collection is None:
            return None
        return self.knowledge.index(collection, control, progress)

    def _progress_here(self, collection_id: int, progress: object) -> None:
        if collection_id not in self._tasks:
            return  # a late report of a run that has ended
        self.latest[collection_id] = progress  # type: ignore[assignment]
        self.progressed.emit(collection_id, progress)


@dataclass
class _Wish:
    """What the person asked of a run (pause, cancel), kept until its ``IndexControl`` exists
    (made on the worker thread) and passed on to it from then on."""

    name: str
    paused: bool = False
    cancelled: bool = False
    control: IndexControl | None = None

    def apply(self) -> None:
        if self.control is None:
            return
        if self.cancelled:
            self.control.cancel()
        elif self.paused:
            self.control.pause()
        else:
            self.control.resume()


def _new_control() -> IndexControl:
    """On a worker thread: the run's pause and cancel flags (the first imports numpy)."""
    from desktop.knowledge import IndexControl

    return IndexControl()
