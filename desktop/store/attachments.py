"""Files attached to messages: content-addressed files in the app's data folder, and rows.

A file is stored once, named by the SHA-256 of its bytes (``<folder>/ab/abcdef…``), however
many messages use it: ``attachment_files`` has a row per file, ``message_attachments`` a row
per use (message, position, the name the person gave it). A copy made from a document (its
text) or an image (sized for a provider) sits beside it as ``<sha256>.<suffix>``, made once
and read back after. Deleting the last message that uses a file lets ``collect`` remove it and
its copies. Blocking (file copies, hashing): off the GUI thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import sqlite_utils

from desktop.store.db import utc_now

Kind = Literal["image", "document"]
CHUNK = 1024 * 1024
STRAY_AGE_S = 3600  # a temporary file older than this is a copy that never finished

# Files stored by this process and not attached to a message yet (a composer's chips), with
# how many chips hold each (the same bytes may sit on two): not collected while held. Shared
# by every store of the process.
_pending: Counter[str] = Counter()


def _let_go(sha256: str) -> None:
    if _pending[sha256] <= 1:
        del _pending[sha256]
    else:
        _pending[sha256] -= 1


@dataclass(frozen=True, slots=True)
class Attachment:
    """One attachment of one message (or of a message being written): which stored file,
    under which name, what it is."""

    sha256: str
    name: str
    kind: Kind
    mime: str
    size: int
    # a document sent in part (it did not fit the agent's context): the characters of its
    # text that go to the model; None: all of it
    text_limit: int | None = None


class AttachmentStore:
    """The rows (``db``) and the files (``folder``, the data folder's ``attachments``)."""

    def __init__(self, db: sqlite_utils.Database, folder: Path) -> None:
        self._db = db
        self.folder = folder

    # files -------------------------------------------------------------------------------
    def path(self, sha256: str, suffix: str = "") -> Path:
        """Where a stored file (or its copy with ``suffix``, e.g. ``text``) lives."""
        name = f"{sha256}.{suffix}" if suffix else sha256
        return self.folder / sha256[:2] / name

    def put_file(self, source: Path, *, kind: Kind, mime: str) -> tuple[str, int]:
        """Copy ``source`` in (hashing as it copies), unless a file with its bytes is here
        already; returns (sha256, size). The copy goes to a temporary name first, so a full
        disk or a vanished file leaves nothing half-written under a real name."""
        self.folder.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        size = 0
        fd, temp_name = tempfile.mkstemp(dir=self.folder, prefix=".incoming-")
        temp = Path(temp_name)
        try:
            with source.open("rb") as src, os.fdopen(fd, "wb") as out:
                while chunk := src.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
            sha = digest.hexdigest()
            target = self.path(sha)
            if target.exists() and target.stat().st_size == size:
                temp.unlink()
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(temp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise
        _pending[sha] += 1
        self._db.execute(
            "INSERT OR IGNORE INTO attachment_files (sha256, size, mime, kind, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            [sha, size, mime, kind, utc_now()],
        )
        return sha, size

    def release(self, sha256: str) -> None:
        """A stored file that will not be sent after all (its chip was removed): ``collect``
        may take it if no message uses it."""
        _let_go(sha256)

    def put_bytes(self, data: bytes, *, kind: Kind, mime: str) -> tuple[str, int]:
        """``put_file`` for bytes in memory (an image pasted from the clipboard, an import)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(dir=self.folder, prefix=".pasted-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            return self.put_file(Path(temp_name), kind=kind, mime=mime)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temp_name)

    def write_copy(self, sha256: str, suffix: str, data: bytes) -> Path:
        """Keep a copy made from a stored file (its text, a resized image) beside it."""
        target = self.path(sha256, suffix)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=".copy-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(temp_name, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp_name)
            raise
        return target

    def has(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def remove_files(self, sha256: str) -> None:
        """Delete a stored file and every copy made from it (its rows are the caller's)."""
        folder = self.path(sha256).parent
        for path in folder.glob(f"{sha256}*") if folder.is_dir() else ():
            with contextlib.suppress(OSError):
                path.unlink()

    # rows --------------------------------------------------------------------------------
    def attach(self, message_id: int, attachments: Sequence[Attachment]) -> None:
        """Record ``attachments`` (already stored) as the message's, in order."""
        for position, a in enumerate(attachments):
            _let_go(a.sha256)
            self._db.execute(
                "INSERT OR IGNORE INTO attachment_files (sha256, size, mime, kind, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [a.sha256, a.size, a.mime, a.kind, utc_now()],
            )
            self._db.execute(
                "INSERT INTO message_attachments (message_id, position, sha256, name, text_limit) "
                "VALUES (?, ?, ?, ?, ?)",
                [message_id, position, a.sha256, a.name, a.text_limit],
            )

    def copy(self, from_message_id: int, to_message_id: int) -> list[Attachment]:
        """Give ``to_message_id`` the attachments of ``from_message_id`` (an edited question
        keeps them); returns them."""
        found = self.of_message(from_message_id)
        self.attach(to_message_id, found)
        return found

    def of_message(self, message_id: int) -> list[Attachment]:
        return self.of_messages([message_id]).get(message_id, [])

    def of_messages(self, message_ids: Iterable[int]) -> dict[int, list[Attachment]]:
        """message id -> its attachments in order (messages without any are left out)."""
        ids = list(message_ids)
        out: dict[int, list[Attachment]] = {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = self._db.execute(
                "SELECT m.message_id, m.sha256, m.name, f.kind, f.mime, f.size, m.text_limit "
                "FROM message_attachments m JOIN attachment_files f ON f.sha256 = m.sha256 "
                f"WHERE m.message_id IN ({marks}) ORDER BY m.message_id, m.position",
                part,
            ).fetchall()
            for message_id, sha, name, kind, mime, size, limit in rows:
                out.setdefault(int(message_id), []).append(
                    Attachment(sha, name, kind, mime, int(size), limit)
                )
        return out

    # clean-up ----------------------------------------------------------------------------
    def collect(self) -> int:
        """Remove every stored file no message uses any more (a deleted conversation's),
        with its copies; returns how many. Stray temporary files go too."""
        rows = self._db.execute(
            "SELECT sha256 FROM attachment_files WHERE sha256 NOT IN "
            "(SELECT sha256 FROM message_attachments)"
        ).fetchall()
        removed = 0
        for (sha,) in rows:
            if _pending[sha] > 0:
                continue
            try:
                self._db.execute("DELETE FROM attachment_files WHERE sha256 = ?", [sha])
            except sqlite3.Error:  # used again meanwhile (another connection): kept, next one
                continue
            self.remove_files(sha)
            removed += 1
        if self.folder.is_dir():
            old = time.time() - STRAY_AGE_S
            for stray in [*self.folder.glob(".*-*"), *self.folder.glob("*/.copy-*")]:
                with contextlib.suppress(OSError):
                    if stray.is_file() and stray.stat().st_mtime < old:
                        stray.unlink()
        return removed
