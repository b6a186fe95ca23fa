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
    """Run Python's cycle collector only on the GUI thread, in passes that fit in a frame.

    Otherwise a collection triggered by an allocation on a background thread (the llama.cpp
    worker's pipe reader, ``asyncio.to_thread``) can delete a Qt object there and Qt complains
    "Timers cannot be stopped from another thread". qutebrowser does the same.

    Young generations every second. A pass over the old generation walks every tracked object
    the window holds (a 5,000-message conversation: 100-400 ms on a loaded 2-core machine, a
    stutter every 10 s), so after each one the survivors are frozen (``gc.freeze``: left out of
    later passes) and the 10-second pass walks only what was made since; the first one only
    freezes what start-up made. Every ``thaw_s`` (and at ``stop``) the frozen ones are thawed
    and walked once, so cyclic garbage among objects alive at a freeze is still reclaimed.
    """

    def __init__(
        self, app: QApplication, interval_ms: int = 1000, *, thaw_s: float = 300.0
    ) -> None:
        import gc
        import time

        from PySide6.QtCore import QTimer

        self._gc = gc
        self._clock = time.monotonic
        self._thaw_s = thaw_s
        self._thawed_at = self._clock()
        gc.disable()
        self._ticks = 0
        self._timer = QTimer(app)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._collect)
        self._timer.start()

    def _collect(self) -> None:
        self._ticks += 1
        if self._ticks % 10:
            self._gc.collect(0)
            return
        if self._ticks == 10:
            # The first one only freezes: what start-up made (modules, the window, its pages)
            # lives as long as the window, and walking it all was the longest hold of a session.
            self._gc.freeze()
            return
        if self._clock() - self._thawed_at >= self._thaw_s:
            self._gc.unfreeze()  # everything once more, the long-lived too
            self._thawed_at = self._clock()
        self._gc.collect(2)
        self._gc.freeze()

    def freeze_long_lived(self) -> None:
        """What exists now lives as long as the window (the modules start-up imported, the
        window and its pages): leave it out of later passes (``gc.freeze``, no walk). Start-up
        calls it once the window is open and again after the modules loaded behind it; until
        then each 1-second pass walked all start-up had made since the last (20-60 ms holds
        in the first seconds, whatever the person clicked)."""
        self._gc.freeze()

    def stop(self) -> None:
        self._timer.stop()
        self._gc.unfreeze()
        self._gc.enable()
