"""One SQLite connection is never used by two threads (issue 25): each thread that touches the
store gets its own connection, so a worker thread's transaction (``run_blocking``) is its own,
beside the GUI thread's, and a connection touched from another thread raises."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop.store.db import Database, open_database, savepoint


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = open_database(tmp_path / "simi.db")
    database.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
    yield database
    database.close()


class _Run(threading.Thread):
    """``fn`` on a thread of its own; ``outcome`` is ("ok", what it returned) or ("raised",
    the exception)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__()
        self._fn = fn
        self.outcome: tuple[str, Any] = ("not run", None)

    def run(self) -> None:
        try:
            self.outcome = ("ok", self._fn())
        except BaseException as exc:
            self.outcome = ("raised", exc)


def _in_thread(fn: Callable[[], Any]) -> _Run:
    thread = _Run(fn)
    thread.start()
    return thread


def _texts(db: Database) -> list[str]:
    return [r[0] for r in db.execute("SELECT text FROM notes ORDER BY id")]


class Boom(Exception):
    pass


def test_a_worker_that_rolls_back_never_rolls_back_the_main_threads_writes(db: Database) -> None:
    db.execute("INSERT INTO notes (text) VALUES ('committed before')")
    in_transaction, main_writes = threading.Event(), threading.Event()

    def failing_store_call() -> None:
        with savepoint(db):
            db.execute("INSERT INTO notes (text) VALUES ('worker, rolled back')")
            in_transaction.set()
            main_writes.wait(5)
            main_writes.clear()
            threading.Event().wait(0.1)  # the main thread writes meanwhile
            raise Boom

    worker = _in_thread(failing_store_call)
    assert in_transaction.wait(5)
    main_writes.set()
    # on a shared connection this joined the worker's open transaction and was rolled back
    # with it; on the main thread's own it waits for the worker's write lock, then commits
    db.execute("INSERT INTO notes (text) VALUES ('main, while the worker was in a transaction')")
    with savepoint(db):
        db.execute("INSERT INTO notes (text) VALUES ('main, in a savepoint')")
    worker.join(10)
    assert worker.outcome[0] == "raised" and isinstance(worker.outcome[1], Boom)
    assert _texts(db) == [
        "committed before",
        "main, while the worker was in a transaction",
        "main, in a savepoint",
    ]


def test_savepoints_of_two_threads_interleaved_both_succeed(db: Database) -> None:
    worker_in, main_done = threading.Event(), threading.Event()

    def worker_store_call() -> None:
        with savepoint(db):
            db.execute("INSERT INTO notes (text) VALUES ('worker')")
            with savepoint(db):  # nested: a SAVEPOINT inside the worker's transaction
                db.execute("INSERT INTO notes (text) VALUES ('worker, nested')")
            worker_in.set()
            main_done.wait(5)

    with savepoint(db):
        db.execute("INSERT INTO notes (text) VALUES ('main')")
        worker = _in_thread(worker_store_call)
        # on a shared connection the worker's savepoint opens inside this one (and this
        # RELEASE takes it along: the worker's own RELEASE then fails); on its own connection
        # the worker waits for this transaction to end
        worker_in.wait(0.3)
    main_done.set()
    worker.join(10)
    assert worker.outcome == ("ok", None)
    assert sorted(_texts(db)) == ["main", "worker", "worker, nested"]


def test_a_failed_inner_savepoint_keeps_the_outer_transactions_writes(db: Database) -> None:
    with savepoint(db):
        db.execute("INSERT INTO notes (text) VALUES ('outer')")
        with pytest.raises(Boom), savepoint(db):
            db.execute("INSERT INTO notes (text) VALUES ('inner')")
            raise Boom
    assert _texts(db) == ["outer"]
    assert not db.conn.in_transaction


def test_each_thread_has_its_own_connection_with_the_same_pragmas(db: Database) -> None:
    main_conn = db.conn
    assert db.conn is main_conn  # the same one each time on one thread

    def pragmas() -> tuple[sqlite3.Connection, list[Any]]:
        conn = db.conn
        assert db.conn is conn
        names = ("journal_mode", "foreign_keys", "busy_timeout", "recursive_triggers")
        return conn, [db.execute(f"PRAGMA {name}").fetchone()[0] for name in names]

    worker = _in_thread(pragmas)
    worker.join(10)
    status, (conn, values) = worker.outcome
    assert status == "ok"
    assert conn is not main_conn
    assert values == ["wal", 1, 5000, 1]


def test_touching_another_threads_connection_or_cursor_raises(db: Database) -> None:
    main_conn = db.conn
    worker = _in_thread(lambda: main_conn.execute("SELECT 1").fetchone())
    worker.join(10)
    status, exc = worker.outcome
    assert status == "raised" and isinstance(exc, sqlite3.ProgrammingError)
    assert "thread" in str(exc)

    db.execute("INSERT INTO notes (text) VALUES ('a'), ('b')")
    made = _in_thread(lambda: db.execute("SELECT text FROM notes ORDER BY id"))
    made.join(10)
    status, cursor = made.outcome
    assert status == "ok"
    with pytest.raises(sqlite3.ProgrammingError, match="thread"):
        cursor.fetchall()  # a worker's cursor read on this thread


def _open_files(path: Path) -> int:
    fds = Path("/proc/self/fd")
    count = 0
    for fd in os.listdir(fds):
        try:
            target = os.readlink(fds / fd)
        except OSError:
            continue
        count += target == str(path)
    return count


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_close_closes_every_threads_connection_and_then_refuses(tmp_path: Path) -> None:
    path = tmp_path / "simi.db"
    db = open_database(path)
    released = threading.Event()

    def use_and_stay() -> None:  # a pool thread that lives on after its call
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        released.wait(10)

    worker = _in_thread(use_and_stay)
    while db.connections() < 2 and worker.is_alive():
        threading.Event().wait(0.01)
    assert db.connections() == 2
    assert _open_files(path) == 2
    db.close()
    assert _open_files(path) == 0  # the live worker's connection too
    after = _in_thread(lambda: db.conn)
    after.join(10)
    status, exc = after.outcome
    assert status == "raised" and isinstance(exc, sqlite3.ProgrammingError)
    released.set()
    worker.join(10)
    with pytest.raises(sqlite3.ProgrammingError):
        db.execute("SELECT 1")


def test_a_finished_threads_connection_is_let_go(db: Database) -> None:
    for _ in range(5):
        worker = _in_thread(lambda: db.execute("SELECT 1").fetchone())
        worker.join(10)
        assert worker.outcome == ("ok", (1,))
    worker = _in_thread(lambda: db.execute("SELECT 1").fetchone())
    worker.join(10)
    assert db.connections() <= 2  # this thread's and at most the last worker's
