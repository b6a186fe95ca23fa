"""A stdio server's stderr, kept as its last lines in memory (bounded, however much it writes).

The child writes into a pipe; a daemon thread reads it line by line (a line cut at
``MAX_LINE`` bytes) and keeps the last ``lines`` non-blank ones. A temporary file (the first
version) grew without bound when a server logged heavily.

Nothing here waits on the event loop: ``lines`` returns what has been read so far, and
``settled_lines`` (a failed start wants the lines written just before the exit) waits for the
reader to reach the pipe's end by sleeping on the loop, never by joining the thread there (a
grandchild that keeps the server's stderr open would hold the window that long).
"""

from __future__ import annotations

import asyncio
import collections
import os
import threading
import time
from typing import TextIO

MAX_LINE = 4096
SETTLE_S = 0.2  # how long a failed start waits for the last lines its process wrote


class StderrTail:
    def __init__(self, lines: int) -> None:
        read_fd, write_fd = os.pipe()
        # what the SDK hands the child as its stderr (the child gets its own copy of the fd)
        self.writer: TextIO = os.fdopen(write_fd, "w", encoding="utf-8")
        self._reader = os.fdopen(read_fd, "rb")
        self._lines: collections.deque[str] = collections.deque(maxlen=lines)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, name="mcp-stderr", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        rest_of_long_line = False  # the rest of a line cut at MAX_LINE is dropped
        try:
            while True:
                raw = self._reader.readline(MAX_LINE)
                if not raw:
                    return
                skip, rest_of_long_line = rest_of_long_line, not raw.endswith(b"\n")
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line.strip() and not skip:
                    with self._lock:
                        self._lines.append(line)
        except (OSError, ValueError):
            return
        finally:
            try:
                self._reader.close()
            except OSError:
                pass

    def lines(self) -> tuple[str, ...]:
        """The last lines read so far (never waits)."""
        with self._lock:
            return tuple(self._lines)

    @property
    def ended(self) -> bool:
        """The reader has reached the pipe's end (every copy of its write end is closed)."""
        return not self._thread.is_alive()

    async def settled_lines(self, timeout: float = SETTLE_S) -> tuple[str, ...]:
        """The last lines once the reader has reached the pipe's end (the process exited: what
        it wrote just before is in), or after ``timeout``; the loop runs meanwhile."""
        deadline = time.monotonic() + timeout
        while not self.ended and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return self.lines()

    def close_writer(self) -> None:
        """Our copy of the pipe's write end (the reader ends once the child's is closed too)."""
        try:
            self.writer.close()
        except OSError:
            pass
