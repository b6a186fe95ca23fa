"""Work done when the person is not using the window: run one job at a time, each only after
``quiet_ms`` without a key, click or wheel and without ``busy()`` (a reply streaming), so a job
that holds the GUI thread for a while never lands under a keystroke or at a reply's end."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication

_INPUT = frozenset(
    {
        QEvent.Type.KeyPress,
        QEvent.Type.MouseButtonPress,
        QEvent.Type.MouseButtonDblClick,
        QEvent.Type.Wheel,
        QEvent.Type.MouseMove,
    }
)


class WhenIdle(QObject):
    """Jobs run in order, one per quiet moment; the input watch ends with the last job."""

    def __init__(self, parent: QObject, busy: Callable[[], bool], quiet_ms: int = 1500) -> None:
        super().__init__(parent)
        self._busy = busy
        self._quiet_s = quiet_ms / 1000
        self._jobs: deque[Callable[[], object]] = deque()
        self._last_input = time.monotonic()
        self._watching = False
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._try)

    def add(self, job: Callable[[], object]) -> None:
        self._jobs.append(job)
        if not self._watching:
            app = QApplication.instance()
            if app is not None:
                app.installEventFilter(self)
            self._watching = True
        if not self._timer.isActive():
            self._timer.start(int(self._quiet_s * 1000))

    def stop(self) -> None:
        self._jobs.clear()
        self._timer.stop()
        self._unwatch()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in _INPUT:
            self._last_input = time.monotonic()
        return False

    def _try(self) -> None:
        if not self._jobs:
            self._unwatch()
            return
        if self._busy():  # a reply streams: quiet counts from when it has ended (seen soon)
            self._last_input = time.monotonic()
            self._timer.start(max(1, int(self._quiet_s * 100)))
            return
        quiet_for = time.monotonic() - self._last_input
        if quiet_for < self._quiet_s:
            wait = max(self._quiet_s - quiet_for, self._quiet_s / 2)
            self._timer.start(int(wait * 1000))
            return
        self._jobs.popleft()()
        self._last_input = time.monotonic()  # the next one waits a quiet moment too
        if self._jobs:
            self._timer.start(int(self._quiet_s * 1000))
        else:
            self._unwatch()

    def _unwatch(self) -> None:
        if self._watching:
            app = QApplication.instance()
            if app is not None:
                app.removeEventFilter(self)
            self._watching = False
