"""Work spread over turns of the event loop, so that no one turn holds the window longer than a
frame (bench/frames.py): between two steps the loop waits, takes input and paints.

* ``in_turns(context, *steps)``: a few steps, each in a later turn than the one before, on
  1 ms single-shot timers. Not 0 ms: Qt turns a zero single-shot into a posted call, which
  the loop runs before it waits again, in the same turn. None runs once ``context`` is gone.
  A page's first show, a timeline panel, the Stats chart.
* ``TurnQueue``: a queue of jobs, one per pass, that its owner can also run out at once
  (``run_all``) when something needs them done now. Compare's columns and the ends of its
  replies.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

STEP_MS = 1  # between two steps of in_turns


def in_turns(context: QObject, *steps: Callable[[], object]) -> None:
    """Run ``steps`` in order, the first in a later turn than this one, each in a turn of its
    own; those left are dropped when ``context`` is deleted."""
    if not steps:
        return
    first, *rest = steps

    def run() -> None:
        first()
        in_turns(context, *rest)

    QTimer.singleShot(STEP_MS, context, run)


class TurnQueue:
    """Jobs run one per pass of the event loop, in order: between two, Qt paints and answers
    input (a zero ``QTimer``, started again after each job, fires in the loop's next pass,
    after what was due before it: a timer, unlike a zero single-shot, lets the loop wait)."""

    def __init__(self, parent: QObject) -> None:
        self._jobs: deque[Callable[[], None]] = deque()
        self._timer = QTimer(parent)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._run_one)

    def __len__(self) -> int:
        return len(self._jobs)

    def add(self, job: Callable[[], None]) -> None:
        self._jobs.append(job)
        if not self._timer.isActive():
            self._timer.start()

    def _run_one(self) -> None:
        if self._jobs:
            self._jobs.popleft()()
        if self._jobs and not self._timer.isActive():
            self._timer.start()

    def run_all(self) -> None:
        """Every job left, now (and those they add)."""
        self._timer.stop()
        while self._jobs:
            self._jobs.popleft()()

    def clear(self) -> None:
        """Drop the jobs left."""
        self._timer.stop()
        self._jobs.clear()
