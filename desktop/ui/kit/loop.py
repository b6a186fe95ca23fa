"""asyncio on the Qt event loop (qasync), with the async-generator hooks qasync leaves out.

Without the hooks a half-read async generator (an httpx stream left early) is finalised with
no loop ("no running event loop"); see docs/PLATFORM_NOTES.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys

os.environ["QT_API"] = "pyside6"  # qasync picks PyQt first when both are installed

import qasync
from PySide6.QtWidgets import QApplication

log = logging.getLogger("simi.ui.loop")


def install_asyncgen_hooks(loop: asyncio.AbstractEventLoop) -> None:
    """What ``BaseEventLoop.run_forever`` does and qasync's ``run_forever`` does not."""
    sys.set_asyncgen_hooks(
        firstiter=loop._asyncgen_firstiter_hook,  # type: ignore[attr-defined]
        finalizer=loop._asyncgen_finalizer_hook,  # type: ignore[attr-defined]
    )


def new_loop(app: QApplication) -> asyncio.AbstractEventLoop:
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    install_asyncgen_hooks(loop)
    return loop


def drain(loop: asyncio.AbstractEventLoop, app: QApplication, timeout_s: float = 10.0) -> None:
    """Cancel what is left, finalise async generators while pumping Qt, then close the loop.

    Never ``loop.stop()`` here: outside ``exec()`` it calls ``QApplication.exit()`` and every
    later wait returns at once (PLATFORM_NOTES.md).
    """
    import time

    deadline = time.monotonic() + timeout_s
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    while any(not t.done() for t in tasks) and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.001)
    stuck = [t for t in tasks if not t.done()]
    if stuck:
        log.warning("tasks still running at shutdown: %s", stuck)
    closing = loop.create_task(loop.shutdown_asyncgens())
    while not closing.done() and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.001)
    if not closing.done():
        log.warning("async generators still open at shutdown")
    sys.set_asyncgen_hooks(firstiter=None, finalizer=None)
    loop.close()


class GuiThreadGarbageCollector:
    """Run Python's cycle collector only on the GUI thread.

    Otherwise a collection triggered by an allocation on a background thread (the llama.cpp
    worker's pipe reader, ``asyncio.to_thread``) can delete a Qt object there and Qt complains
    "Timers cannot be stopped from another thread". qutebrowser does the same.
    """

    def __init__(self, app: QApplication, interval_ms: int = 1000) -> None:
        import gc

        from PySide6.QtCore import QTimer

        self._gc = gc
        gc.disable()
        self._ticks = 0
        self._timer = QTimer(app)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._collect)
        self._timer.start()

    def _collect(self) -> None:
        self._ticks += 1
        # Young generations every second; a full pass every 10 s.
        self._gc.collect(2 if self._ticks % 10 == 0 else 0)

    def stop(self) -> None:
        self._timer.stop()
        self._gc.enable()
