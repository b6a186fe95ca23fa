"""process_owners: which app process owns what is live in the database (m011, issue 25).

Several processes open one database: the window, and ``simi stats`` / ``simi ask`` / ``simi
bench`` beside it. Each start recovers what a crash cut off (replies left streaming, tool calls
left waiting or running, prompt-set runs left running, trash whose Undo was not used), and must
touch only what no live process owns.

Each ``Services`` registers an owner (``OwnerStore.register``): its pid and, on Linux, the
process's start time from ``/proc/<pid>/stat`` (with the boot id), so a pid that a later process
reused is not taken for the first one; elsewhere a heartbeat (``Heartbeat``) every
``HEARTBEAT_S`` says it is still there. The live rows it writes carry the owner's id; its row
goes when it closes. ``dead_ids()`` names the owners whose process is gone; ``owner_gone``
selects the rows recovery may touch: no owner (written before m011), an owner judged dead, or
one whose row is gone (it closed, or was judged dead before). An owner registered after the
look is never among them. ``recover`` runs a store's recovery statement on those rows.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlite_utils

from desktop.store.db import read_back, utc_now

log = logging.getLogger("simi.store")

PROC = Path("/proc")
HEARTBEAT_S = 20.0
# without a start time to compare, an owner whose heartbeat is older than this is dead
STALE_AFTER_S = 90.0
_COLS = "id, pid, start_time, started_at, heartbeat_at"


@dataclass(frozen=True, slots=True)
class Owner:
    id: int
    pid: int
    start_time: str | None  # "<boot id>:<clock ticks>" (Linux), None where unknown
    started_at: str
    heartbeat_at: str


def process_start_time(pid: int) -> str | None:
    """The process's start as "<boot id>:<clock ticks since boot>" (``/proc/<pid>/stat``'s
    field 22), or None: no such process, or no ``/proc`` (not Linux)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces or ")": the fields
    # after the last ")" start with field 3
    fields = stat[stat.rfind(")") + 1 :].split()
    if len(fields) < 20:
        return None
    try:
        boot = (PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        boot = ""
    return f"{boot}:{fields[19]}"


def can_read_start_times() -> bool:
    return process_start_time(os.getpid()) is not None


def pid_exists(pid: int) -> bool | None:
    """Whether a process ``pid`` exists (POSIX: signal 0); None where that cannot be asked
    safely (Windows: ``os.kill`` would end it)."""
    if os.name != "posix":
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    except OSError:
        return None
    return True


def _age_s(stamp: str) -> float:
    try:
        then = datetime.fromisoformat(stamp)
    except ValueError:
        return float("inf")
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return (datetime.now(UTC) - then).total_seconds()


def owner_gone(column: str, dead: Sequence[int]) -> tuple[str, list[int]]:
    """A WHERE clause (and its parameters) selecting rows whose owner (``column``) is no live
    process: none, one of ``dead``, or one whose row is gone."""
    clause = f"{column} IS NULL OR {column} NOT IN (SELECT id FROM process_owners)"
    ids = list(dead)
    if ids:
        clause += f" OR {column} IN ({', '.join('?' for _ in ids)})"
    return f"({clause})", ids


def recover(
    db: sqlite_utils.Database,
    sql: str,
    dead: Sequence[int],
    params: Sequence[Any] = (),
    *,
    column: str = "owner_id",
) -> int:
    """Runs ``sql`` (an UPDATE or DELETE whose WHERE this ends with "AND <owner gone>") on the
    rows no live process owns (``owner_gone``); how many it touched."""
    gone, ids = owner_gone(column, dead)
    cur = db.execute(f"{sql} AND {gone}", [*params, *ids])
    return int(cur.rowcount or 0)


def stamped(column: str, owner_id: int | None) -> tuple[str, list[int]]:
    """``", column = ?"`` and its parameter for an UPDATE's SET list when a store has an owner;
    nothing when it has none (a store used without ``Services``, on any schema)."""
    return ("", []) if owner_id is None else (f", {column} = ?", [owner_id])


class OwnerStore:
    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    def register(self, pid: int | None = None) -> Owner:
        """This process (or ``pid``) as a new owner."""
        pid = os.getpid() if pid is None else pid
        now = utc_now()
        cur = self._db.execute(
            "INSERT INTO process_owners (pid, start_time, started_at, heartbeat_at) "
            "VALUES (?, ?, ?, ?)",
            [pid, process_start_time(pid), now, now],
        )
        return read_back(self.get(int(cur.lastrowid or 0)))

    def get(self, owner_id: int) -> Owner | None:
        row = self._db.execute(
            f"SELECT {_COLS} FROM process_owners WHERE id = ?", [owner_id]
        ).fetchone()
        return Owner(*row) if row else None

    def owners(self) -> list[Owner]:
        return [Owner(*r) for r in self._db.execute(f"SELECT {_COLS} FROM process_owners")]

    def end(self, owner_id: int) -> None:
        """The process closes: what it still stamped belongs to nobody."""
        self._db.execute("DELETE FROM process_owners WHERE id = ?", [owner_id])

    def alive(self, owner: Owner) -> bool:
        """Its process still runs: the same start time at its pid (Linux), else a pid that
        exists and a heartbeat newer than ``STALE_AFTER_S``."""
        if owner.start_time is not None and can_read_start_times():
            return process_start_time(owner.pid) == owner.start_time
        if pid_exists(owner.pid) is False:
            return False
        return _age_s(owner.heartbeat_at) < STALE_AFTER_S

    def dead_ids(self) -> list[int]:
        return [o.id for o in self.owners() if not self.alive(o)]

    def forget(self, owner_ids: Sequence[int]) -> None:
        """Drop dead owners' rows (after recovery: what they stamped reads as "owner gone")."""
        for owner_id in owner_ids:
            self.end(owner_id)


class Heartbeat:
    """Keeps an owner's ``heartbeat_at`` fresh from a daemon thread, over a connection of its
    own, where start times cannot be read (``needed``). An owner whose row another process
    dropped (it judged the heartbeat stale: a machine that slept) is written back."""

    def __init__(self, db_path: Path, owner: Owner, interval_s: float = HEARTBEAT_S) -> None:
        self._path = db_path
        self._owner = owner
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="simi-heartbeat", daemon=True)

    @staticmethod
    def needed(owner: Owner) -> bool:
        return owner.start_time is None or not can_read_start_times()

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def beat(self) -> None:
        o = self._owner
        try:
            conn = sqlite3.connect(self._path, timeout=5, isolation_level=None)
        except sqlite3.Error as exc:
            log.info("owner heartbeat: cannot open the database: %s", exc)
            return
        try:
            conn.execute(
                "INSERT INTO process_owners (id, pid, start_time, started_at, heartbeat_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "heartbeat_at = excluded.heartbeat_at",
                [o.id, o.pid, o.start_time, o.started_at, utc_now()],
            )
        except sqlite3.Error as exc:  # busy, or closing: the next beat tries again
            log.info("owner heartbeat not written: %s", exc)
        finally:
            conn.close()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.beat()
