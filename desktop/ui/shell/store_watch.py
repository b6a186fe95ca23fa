"""One store, many doors: what the ``simi`` command or a second window changes in the database
appears in an open window within a second, without a restart.

``StoreWatch`` asks SQLite every 500 ms whether another connection committed
(``desktop.store.watch.ChangeWatch``: one pragma on the GUI thread's connection; what the window
writes on the GUI thread never counts, so it causes no refresh; what it writes on a worker
thread, on that thread's own connection (``run_blocking``: an import, Settings → Tools) counts
like another door's and costs one re-read). When one did, it emits ``changed``
(``MainWindow.refresh_from_store`` then reads the agents and the conversation list again,
keeping what the person had); while a dialog is open (an agent editor, a rename) it waits
until the dialog closes.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal, SignalInstance
from PySide6.QtWidgets import QApplication

from desktop.store.watch import ChangeWatch

POLL_MS = 500


class StoreWatch(QObject):
    """Emits ``changed`` (at most once per poll) when another connection committed."""

    changed = Signal()

    def __init__(self, watch: ChangeWatch, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._watch = watch
        self._pending = False
        self.refreshes = 0  # how many times ``changed`` was emitted (for tests)
        self.timer = QTimer(self)
        self.timer.setInterval(POLL_MS)
        self.timer.timeout.connect(self.poll)
        self.timer.start()

    def poll(self) -> None:
        if self._watch.changed():
            self._pending = True
        if self._pending and QApplication.activeModalWidget() is None:
            self._pending = False
            self.refreshes += 1
            self.changed.emit()

    def stop(self) -> None:
        self.timer.stop()


def watch_store(watch: ChangeWatch, parent: QObject, stop_on: SignalInstance) -> StoreWatch:
    """Poll ``watch`` until ``stop_on`` fires (the window's ``closed``)."""
    poller = StoreWatch(watch, parent)
    stop_on.connect(poller.stop)
    return poller
