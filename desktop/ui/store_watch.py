"""One store, many doors: what the ``simi`` command or a second window changes in the database
appears in an open window within a second, without a restart.

``StoreWatch`` asks SQLite every 500 ms whether another connection committed
(``desktop.store.watch.ChangeWatch``: one pragma on the GUI thread's connection; what the window
writes on the GUI thread never counts, so it causes no refresh; what it writes on a worker
thread, on that thread's own connection (``run_blocking``: an import, Settings → Tools) counts
like another door's and costs one re-read). When one did, the agents (sidebar, each
pane's agent, "Switch agent") and the conversation list are read again, keeping what the person
had: the highlighted agent, the conversation shown, both lists' scroll positions. A streaming
reply goes on untouched; while a dialog is open (an agent editor, a rename) the refresh waits
until it closes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QAbstractScrollArea, QApplication

from desktop.store.watch import ChangeWatch

if TYPE_CHECKING:
    from desktop.ui.main_window import MainWindow

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


def _scroll_positions(views: list[QAbstractScrollArea]) -> list[tuple[QAbstractScrollArea, int]]:
    return [(view, view.verticalScrollBar().value()) for view in views]


def refresh_from_store(window: MainWindow) -> None:
    """Read the agents and the conversation list again, keeping selection and scrolling."""
    views: list[QAbstractScrollArea] = [window.agents.agent_list, window.browser.conversation_list]
    kept = _scroll_positions(views)
    if window.services.agents.list() != window.agents.agents:
        window.reload_agents()  # sidebar, each pane's agent, and the conversation list
    else:
        window.browser.reload(current=window.conversation_id)
    for view, value in kept:
        view.verticalScrollBar().setValue(value)
    _close_gone_conversations(window)


def _close_gone_conversations(window: MainWindow) -> None:
    """An open conversation deleted elsewhere closes as if deleted here (the shown one gives
    way to a new chat); one still streaming a reply is left to finish."""
    store = window.services.conversations
    for pane in list(window.panes):
        conv_id = pane.conversation_id
        if conv_id is None or pane.busy:
            continue
        conv = store.get(conv_id)
        if conv is None or conv.deleted_at is not None:
            window.conversation_deleted_elsewhere(conv_id)


def watch_store(window: MainWindow) -> StoreWatch:
    """Start watching the window's database; stops when the window closes."""
    watch = StoreWatch(ChangeWatch(window.services.db.conn), window)
    watch.changed.connect(lambda: refresh_from_store(window))
    window.closed.connect(watch.stop)
    return watch
