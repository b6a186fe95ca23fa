"""Work done when the person is not using the window: run one job at a time, each only after
``quiet_ms`` without a key, click, wheel or move (``input_watch``) and without ``busy()`` (a
reply streaming), so a job that holds the GUI thread for a while never lands under a keystroke
or at a reply's end."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QApplication

from desktop.ui.kit.input_watch import input_watch


class WhenIdle(QObject):
    """Jobs run in order, one per quiet moment. The person's input is what ``input_watch``
    sees at the windows (no filter on the application: see there)."""

    def __init__(self, parent: QObject, busy: Callable[[], bool], quiet_ms: int = 1500) -> None:
        super().__init__(parent)
        self._busy = busy
        self._quiet_s = quiet_ms / 1000
        self._jobs: deque[Callable[[], object]] = deque()
        app = QApplication.instance()
        self._watch = input_watch(app) if isinstance(app, QApplication) else None  # from now
        self._active_at = time.monotonic()  # a job ran, or a reply was seen streaming
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._try)

    def add(self, job: Callable[[], object]) -> None:
        self._jobs.append(job)
        if not self._timer.isActive():
            self._timer.start(int(self._quiet_s * 1000))

    def stop(self) -> None:
        self._jobs.clear()
        self._timer.stop()

    def _last_input(self) -> float:
        typed = self._watch.last_input if self._watch is not None else 0.0
        return max(typed, self._active_at)

    def _try(self) -> None:
        if not self._jobs:
            return
        if self._busy():  # a reply streams: quiet counts from when it has ended (seen soon)
            self._active_at = time.monotonic()
            self._timer.start(max(1, int(self._quiet_s * 100)))
            return
        quiet_for = time.monotonic() - self._last_input()
        if quiet_for < self._quiet_s:
            wait = max(self._quiet_s - quiet_for, self._quiet_s / 2)
            self._timer.start(int(wait * 1000))
            return
        self._jobs.popleft()()
        self._active_at = time.monotonic()  # the next one waits a quiet moment too
        if self._jobs:
            self._timer.start(int(self._quiet_s * 1000))
