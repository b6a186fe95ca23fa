"""The one named door for blocking calls made from the GUI thread, and a safe way to start
coroutines from slots.

A slot must never block: the keyring answers over D-Bus (and may sit behind an unlock prompt),
SQLite bulk work and file scans take as long as they take. ``run_blocking(fn, *args)`` runs
``fn`` on a worker thread (``asyncio.to_thread`` on the qasync loop) and hands its result, or
its exception, back on the loop, so the window keeps painting meanwhile.

``start(coro)`` turns a coroutine into a task from a slot and makes sure a bug inside it reaches
the loop's exception handler (the crash dialog) when it happens, not whenever the task happens
to be garbage-collected. ``UserError``s and cancellation are the caller's business.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger("simi.ui.async_door")

T = TypeVar("T")


def loop_running() -> bool:
    """Whether this thread runs an event loop (without one, work that needs it is skipped)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def run_blocking(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` on a worker thread and await its result on the loop.

    What ``fn`` touches must be safe to use from another thread (the keyring; the stores,
    whose ``Database`` gives the worker thread its own SQLite connection, so its transaction
    is never the GUI thread's); never a widget. Hand back values, never a connection or a
    cursor: one touched from another thread raises ``sqlite3.ProgrammingError``.
    """
    return await asyncio.to_thread(functools.partial(fn, *args, **kwargs))


def start(coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
    """Schedule ``coro`` on the running loop; an unexpected exception is reported at once."""
    task = asyncio.ensure_future(coro)
    if name:
        task.set_name(name)
    task.add_done_callback(_report_bug)
    return task


def _report_bug(task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        return
    exc = task.exception()  # marks it retrieved
    if exc is None:
        return
    task.get_loop().call_exception_handler(
        {"message": f"Unhandled exception in {task.get_name()}", "exception": exc, "task": task}
    )
