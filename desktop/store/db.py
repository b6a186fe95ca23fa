"""Open the one SQLite file (WAL, foreign keys on) and bring its schema up to date.

A database that a newer SIMI Multi wrote is refused and left untouched; a damaged file is
reported by name and never silently recreated; each schema step runs in its own transaction,
so a failing one leaves the database as the step before left it.

One connection is never used by two threads: ``Database.conn`` is the calling thread's own
connection, opened on its first use there with the same pragmas (WAL, foreign keys,
busy_timeout), and sqlite3's ``check_same_thread`` makes touching it from any other thread raise
``sqlite3.ProgrammingError``. So a store call on a ``run_blocking`` worker is its own
transaction beside the GUI thread's: rolling it back never rolls back the GUI's writes, and
their savepoints never interleave. ``Database.close()`` closes them all.
"""

from __future__ import annotations

import gc
import itertools
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import sqlite_utils

from desktop.store.errors import StoreUnavailable
from desktop.store.migrations import MIGRATIONS, Migration

log = logging.getLogger("simi.store")

MIGRATIONS_TABLE = "_migrations"


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


_Row = TypeVar("_Row")


def read_back(found: _Row | None) -> _Row:
    """A row this connection has just written, as a store's getter read it back: it is there."""
    assert found is not None
    return found


_savepoints = itertools.count()


@contextmanager
def savepoint(db: sqlite_utils.Database) -> Iterator[None]:
    """All or nothing, on this thread's connection (autocommit mode otherwise); nests.

    The outermost one is ``BEGIN IMMEDIATE``: it waits (busy_timeout) for another connection's
    write to end and then holds the write lock, so a read inside it is never followed by a
    write that fails at once because another thread's connection committed meanwhile (a
    deferred transaction gets SQLITE_BUSY there, with no wait). Inner ones are SAVEPOINTs.
    An error that already ended the transaction (SQLite rolls back by itself for some) is
    raised as it is.
    """
    conn = db.conn
    if not conn.in_transaction:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return
    name = f"sp{next(_savepoints)}"
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
        raise
    conn.execute(f"RELEASE {name}")


def _connect(path: Path) -> sqlite3.Connection:
    """One connection to ``path`` for the calling thread only (``check_same_thread``), in
    autocommit mode; ``_prepare`` gives it the pragmas."""
    return sqlite3.connect(path, check_same_thread=True, isolation_level=None)


def _prepare(conn: sqlite3.Connection) -> None:
    """The pragmas every connection of the app has."""
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=5000")
    conn.execute("PRAGMA recursive_triggers=ON")  # as sqlite_utils.Database sets it


class Database(sqlite_utils.Database):
    """A ``sqlite_utils.Database`` whose ``conn`` is the calling thread's own connection.

    The thread that opens it gets the connection it was made with; any other thread gets one
    of its own on first use (same file, same pragmas), so each thread's transactions and
    savepoints are its own. Each connection raises ``sqlite3.ProgrammingError`` when another
    thread touches it (a cursor too): nothing of one thread's connection can leak into another.
    ``close()`` closes them all (the calling thread's with ``close()``; another thread's, which
    sqlite3 refuses to close from here, by freeing it), and from then on ``conn`` raises in
    every thread.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self._path = path
        self._lock = threading.Lock()
        # thread ident -> (the thread, its connection); a dead thread's is dropped
        self._conns: dict[int, tuple[threading.Thread, sqlite3.Connection]] = {}
        self._closed = False
        super().__init__(conn)  # sets ``conn``: the opening thread's

    @property
    def conn(self) -> sqlite3.Connection:
        held = self._conns.get(threading.get_ident())
        if held is not None and held[0] is threading.current_thread():
            return held[1]
        return self._open_here()  # first use here (or a new thread with an old one's id)

    @conn.setter
    def conn(self, value: sqlite3.Connection) -> None:
        with self._lock:
            self._conns[threading.get_ident()] = (threading.current_thread(), value)

    def _open_here(self) -> sqlite3.Connection:
        if self._closed:
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        conn = _connect(self._path)
        try:
            _prepare(conn)
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if self._closed:
                conn.close()
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            # a thread that ended freed nothing: its connection goes now (freed, so closed)
            for ident in [i for i, (t, _c) in self._conns.items() if not t.is_alive()]:
                del self._conns[ident]
            self._conns[threading.get_ident()] = (threading.current_thread(), conn)
        return conn

    def executescript(self, sql: str) -> sqlite3.Cursor:
        """Run several statements. Inside a transaction (a migration step) statement by
        statement, as sqlite-utils does (``sqlite3``'s own would COMMIT first), but cut at each
        ``;`` that completes a statement rather than testing every character (that made a new
        database's migrations take ~100 ms of the first start)."""
        conn = self.conn
        if not conn.in_transaction:
            return conn.executescript(sql)
        cursor = conn.cursor()
        start, end = 0, sql.find(";")
        while end != -1:
            statement = sql[start : end + 1].strip()
            if sqlite3.complete_statement(statement):
                cursor.execute(statement)
                start = end + 1
            end = sql.find(";", end + 1)
        rest = sql[start:].strip()
        if rest:
            cursor.execute(rest)
        return cursor

    def connections(self) -> int:
        """How many threads hold a connection now (for tests and logs)."""
        with self._lock:
            return len(self._conns)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            held, self._conns = self._conns, {}
        mine = held.pop(threading.get_ident(), None)
        if held:
            # sqlite3 refuses to close another thread's connection but closes one when it is
            # freed, and a connection is in a cycle with its statement cache: collect it
            held.clear()
            gc.collect()
        if mine is not None:
            mine[1].close()


def _corrupt(path: Path, exc: BaseException) -> StoreUnavailable:
    return StoreUnavailable(
        f"The database file {path} cannot be read ({exc}). It may be damaged or not a SIMI "
        "Multi database. Your data was left as it is. Move the file aside to start with a "
        f"fresh database (the old one is kept next to it), e.g. `simi db move-aside`.",
        path=str(path),
        corrupt=True,
    )


def _is_write_failure(exc: sqlite3.DatabaseError) -> bool:
    text = str(exc)
    return "readonly" in text or "disk" in text or "full" in text


def _unwritable(path: Path, exc: sqlite3.DatabaseError) -> StoreUnavailable:
    return StoreUnavailable(
        f"SIMI Multi cannot write to its database {path} ({exc}). Free some space or fix the "
        "folder's permissions.",
        path=str(path),
    )


def _applied(conn: sqlite3.Connection) -> list[str]:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (MIGRATIONS_TABLE,)
    ).fetchone()
    if not exists:
        return []
    return [row[0] for row in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY id")]


def _check_known(path: Path, applied: list[str], migrations: list[Migration]) -> None:
    known = {name for name, _ in migrations}
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise StoreUnavailable(
            f"The database {path} was written by a newer version of SIMI Multi (it has schema "
            f"steps this version does not know: {', '.join(unknown)}). It was left untouched. "
            "Install the newer SIMI Multi again, or point SIMI_HOME at another folder.",
            path=str(path),
        )


def _inspect_read_only(path: Path, migrations: list[Migration]) -> None:
    """Look at an existing file without changing a byte of it."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise _corrupt(path, exc) from exc
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        applied = _applied(conn)
    except sqlite3.DatabaseError as exc:
        raise _corrupt(path, exc) from exc
    finally:
        conn.close()
    _check_known(path, applied, migrations)


class MigrationFailed(Exception):
    """A schema step failed in SQLite; its transaction was rolled back (the database is as it
    was after the step before). ``step`` names it; the cause is chained."""

    def __init__(self, step: str, cause: BaseException) -> None:
        super().__init__(f"{step}: {cause}")
        self.step = step
        self.cause = cause


def migrate(db: sqlite_utils.Database, migrations: list[Migration] | None = None) -> list[str]:
    """Apply every step not yet recorded; returns the names applied now.

    Each step and its record in ``_migrations`` run in one transaction (``BEGIN IMMEDIATE``:
    no other connection writes meanwhile), so a step that fails leaves nothing of itself
    behind (whatever it raised). ``sqlite_utils`` runs a step's ``executescript`` statement by
    statement inside it (``sqlite3``'s own would COMMIT first). Raises ``MigrationFailed`` for
    an SQLite error; anything else is a bug in the step and is raised as it is.
    """
    steps = MIGRATIONS if migrations is None else migrations
    db.execute(
        f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
        "id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, applied_at TEXT NOT NULL)"
    )
    done = set(_applied(db.conn))
    applied_now = []
    for name, step in steps:
        if name in done:
            continue
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            step(db)
            db.conn.execute(
                f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (?, ?)",
                [name, utc_now()],
            )
            db.conn.execute("COMMIT")
        except BaseException as exc:
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            log.error("migration %s failed and was rolled back: %r", name, exc)
            if not isinstance(exc, sqlite3.Error):
                raise  # a bug in the step: rolled back, and it surfaces as one
            raise MigrationFailed(name, exc) from exc
        applied_now.append(name)
        log.info("applied migration %s", name)
    return applied_now


def open_database(path: Path, migrations: list[Migration] | None = None) -> Database:
    """Open (creating if absent) and migrate the database at ``path``; the calling thread's
    connection is open, every other thread opens its own on first use (``Database``).

    Raises ``StoreUnavailable`` for a damaged file, a newer schema, or an unwritable folder.
    """
    steps = MIGRATIONS if migrations is None else migrations
    if path.exists():
        if not os.access(path, os.R_OK):
            raise StoreUnavailable(
                f"SIMI Multi cannot read its database {path} (permission denied). Fix the "
                "file's permissions or point SIMI_HOME at another folder.",
                path=str(path),
            )
        if path.stat().st_size > 0:
            _inspect_read_only(path, steps)
    try:
        conn = _connect(path)
    except sqlite3.Error as exc:
        raise StoreUnavailable(
            f"SIMI Multi cannot open its database {path} ({exc}). Check that the folder is "
            "writable, or point SIMI_HOME at another folder.",
            path=str(path),
        ) from exc
    try:
        _prepare(conn)
        db = Database(path, conn)
        migrate(db, steps)
    except MigrationFailed as failed:
        conn.close()
        if isinstance(failed.cause, sqlite3.DatabaseError) and _is_write_failure(failed.cause):
            raise _unwritable(path, failed.cause) from failed.cause
        raise StoreUnavailable(
            f"SIMI Multi could not bring its database {path} up to date (schema step "
            f"{failed.step} failed: {failed.cause}). The database was left as it was, and "
            "the version that wrote it can still open it.",
            path=str(path),
        ) from failed.cause
    except sqlite3.DatabaseError as exc:
        conn.close()
        if _is_write_failure(exc):
            raise _unwritable(path, exc) from exc
        raise _corrupt(path, exc) from exc
    except BaseException:
        conn.close()
        raise
    return db


def move_aside(path: Path) -> Path:
    """Rename a damaged database (and its -wal/-shm) out of the way; returns the new name."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.broken-{stamp}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.broken-{stamp}-{n}")
        n += 1
    os.replace(path, target)
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.replace(side, target.with_name(target.name + suffix))
    return target
