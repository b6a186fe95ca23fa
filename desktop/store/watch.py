"""Whether another connection (the ``simi`` command, a second window) committed to the
database since we last looked: SQLite's ``PRAGMA data_version``, which changes for every
commit of *another* connection and never for this connection's own. One pragma costs
microseconds, so it can be asked on a timer. Qt-free."""

from __future__ import annotations

import logging
import sqlite3

log = logging.getLogger("simi.store")


def data_version(conn: sqlite3.Connection) -> int:
    """This connection's view of the database's version (see the module docstring)."""
    row = conn.execute("PRAGMA data_version").fetchone()
    return int(row[0])


class ChangeWatch:
    """``changed()`` is True once for each look that finds commits by other connections."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._seen: int | None = None
        self._failed = False
        self._seen = self._version()

    def _version(self) -> int | None:
        try:
            version = data_version(self._conn)
        except sqlite3.Error as exc:  # closed at exit, or busy: look again next time
            if not self._failed:
                log.info("cannot read the database's data_version: %s", exc)
            self._failed = True
            return None
        self._failed = False
        return version

    def changed(self) -> bool:
        version = self._version()
        if version is None or version == self._seen:
            return False
        first, self._seen = self._seen is None, version
        return not first
