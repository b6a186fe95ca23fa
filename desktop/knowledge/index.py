"""A collection's index: one SQLite file (WAL), brought up to date by ``sync`` and searched by
``search``.

Tables: ``files`` (path, size, mtime_ns, sha256, chunks, indexed_at), ``chunks`` (a file's
line ranges and text; ids only grow), ``chunks_fts`` (FTS5 over the chunks' text, external
content, kept by triggers), ``vectors`` (a float32 BLOB per chunk), ``skipped`` (the last
sync's), ``meta`` (schema, embedder, the generation counter, last sync).

The tokenizer is ``porter unicode61 remove_diacritics 2``: unicode61 splits any script and
folds case and accents ("café" finds "cafe"); porter stems English on top ("indexing" finds
"indexed"), which is what questions in words need more than exact forms; the vectors catch the
paraphrases stemming cannot.

``sync`` walks the roots first (so the total is known), then reads each file whose size or
mtime changed: its SHA-256 first (the same content only updates the row), then its text,
chunks and (with an ``Embedder``) vectors, and writes them with the file's row in ONE
transaction. A crash loses at most the file being read; the next sync resumes there. A file
that changed while it was read is not recorded (tried again next time). Pause and cancel are
looked at between files and between a PDF's pages.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from desktop.knowledge.chunks import Piece
from desktop.knowledge.read import Cancelled, Unreadable, read_pieces, sha256_of
from desktop.knowledge.scan import (
    CHANGED,
    EMPTY,
    MAX_FILE_BYTES,
    TOO_LARGE,
    Found,
    Skipped,
    scan,
)
from desktop.knowledge.search import (
    CANDIDATES,
    Chunk,
    Hit,
    SearchTimes,
    fts_query,
    fuse,
    query_terms,
)
from desktop.knowledge.vectors import F32, Embedder, VectorMatrix, normalised

__all__ = ["IndexControl", "IndexProgress", "IndexReport", "KnowledgeIndex"]

SCHEMA_VERSION = 1
EMBED_BATCH = 32
PROGRESS_EVERY_S = 0.1
# a word in more than this share of the chunks is left out of the BM25 query (big indexes)
COMMON_SHARE = 0.05
COMMON_MIN_CHUNKS = 2000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    chunks INTEGER NOT NULL,
    indexed_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    file_id INTEGER NOT NULL REFERENCES files(id),
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    page INTEGER,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_file ON chunks(file_id);
CREATE TABLE IF NOT EXISTS vectors (chunk_id INTEGER PRIMARY KEY, vec BLOB NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    text, content='chunks', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS chunks_added AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS chunks_dropped AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', old.id, old.text);
    DELETE FROM vectors WHERE chunk_id = old.id;
END;
CREATE TABLE IF NOT EXISTS skipped (path TEXT NOT NULL, reason TEXT NOT NULL);
INSERT OR IGNORE INTO meta(key, value)
    VALUES ('schema', '{schema}'), ('generation', '0'), ('vectors_epoch', '0');
"""


@dataclass(frozen=True, slots=True)
class IndexProgress:
    """Where a sync is: files read of those found, chunks written this run and their rate,
    the time left (None until it can be told) and the file being read."""

    files_done: int
    files_total: int
    chunks: int
    elapsed_s: float
    chunks_per_s: float
    eta_s: float | None
    current: str | None


@dataclass(frozen=True, slots=True)
class IndexReport:
    """A sync's outcome: ``files``/``chunks`` in the index after it; files ``added``,
    ``changed``, ``removed``, ``unchanged``; what was left out; ``chunks_indexed``: chunks
    written this run (with their vectors), and chunks whose vectors were made again."""

    files: int
    chunks: int
    added: int
    changed: int
    removed: int
    unchanged: int
    skipped: tuple[Skipped, ...]
    cancelled: bool
    seconds: float
    chunks_indexed: int


class IndexControl:
    """Pause, resume and cancel a sync from another thread (thread-safe)."""

    def __init__(self) -> None:
        self._go = threading.Event()
        self._go.set()
        self._cancel = threading.Event()

    def pause(self) -> None:
        self._go.clear()

    def resume(self) -> None:
        self._go.set()

    def cancel(self) -> None:
        self._cancel.set()
        self._go.set()  # a paused sync wakes to stop

    @property
    def paused(self) -> bool:
        return not self._go.is_set() and not self._cancel.is_set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def wait(self) -> bool:
        """Block while paused; True to go on, False when cancelled."""
        self._go.wait()
        return not self._cancel.is_set()


@dataclass(slots=True)
class _Known:
    id: int
    size: int
    mtime_ns: int
    sha256: str


@dataclass(slots=True)
class _Pending:
    """A file read, waiting for its vectors (they are made 32 chunks at a time)."""

    path: str
    size: int
    mtime_ns: int
    sha256: str
    pieces: list[Piece]
    new: bool


@dataclass(slots=True)
class _Run:
    progress: Callable[[IndexProgress], None] | None
    started: float = field(default_factory=time.monotonic)
    last: float = -1.0
    files_total: int = 0
    files_done: int = 0
    chunks: int = 0
    embedding_left: int = 0
    current: str | None = None
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: list[Skipped] = field(default_factory=list)

    def tick(self, *, final: bool = False) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        if not final and self.last >= 0 and now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        elapsed = now - self.started
        rate = self.chunks / elapsed if elapsed > 0 else 0.0
        eta: float | None = None
        if final:
            eta = 0.0
        elif self.embedding_left and rate > 0:
            eta = self.embedding_left / rate
        elif self.files_done and self.files_total:
            eta = elapsed / self.files_done * (self.files_total - self.files_done)
        current = None if final else self.current
        self.progress(
            IndexProgress(
                self.files_done, self.files_total, self.chunks, elapsed, rate, eta, current
            )
        )


class KnowledgeIndex:
    """One collection's index file. A connection per instance: use an instance from one
    thread at a time (one per thread); WAL lets a searching instance and the indexing one
    share the file."""

    def __init__(self, db_path: Path, embedder: Embedder | None = None) -> None:
        self.db_path = Path(db_path)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self._embedder = embedder
        self._conn = sqlite3.connect(
            self.db_path, isolation_level=None, check_same_thread=False, timeout=10.0
        )
        conn = self._conn
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=10000")
        # one script, one transaction: two instances opening a new file race harmlessly
        schema = _SCHEMA.replace("{schema}", str(SCHEMA_VERSION))
        conn.executescript(f"BEGIN IMMEDIATE;{schema}COMMIT;")
        self._matrix = VectorMatrix(embedder.dims) if embedder is not None else None
        # the words of a question as the index stems them, to look up how common each is
        conn.executescript(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.probe USING fts5("
            "text, tokenize='porter unicode61 remove_diacritics 2');"
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.probe_terms "
            "USING fts5vocab(temp, probe, 'instance');"
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_terms "
            "USING fts5vocab(main, chunks_fts, 'row');"
        )
        self._chunk_count: tuple[int, int] | None = None  # (generation, chunks)

    # transactions -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: the writer's lock at once)."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        self._conn.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def _bump(self) -> None:
        self._conn.execute(
            "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'"
        )

    # writing ------------------------------------------------------------------------------

    def _write_file(
        self,
        path: str,
        size: int,
        mtime_ns: int,
        sha256: str,
        pieces: Sequence[Piece],
        vectors: F32 | None = None,
    ) -> None:
        """A file's row, chunks and vectors, replacing what it had, in one transaction."""
        now = _now()
        with self._tx() as conn:
            row = conn.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
            if row is not None:
                conn.execute("DELETE FROM chunks WHERE file_id = ?", (row[0],))
            (file_id,) = conn.execute(
                "INSERT INTO files(path, size, mtime_ns, sha256, chunks, indexed_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(path) DO UPDATE SET size = excluded.size, "
                "mtime_ns = excluded.mtime_ns, sha256 = excluded.sha256, "
                "chunks = excluded.chunks, indexed_at = excluded.indexed_at RETURNING id",
                (path, size, mtime_ns, sha256, len(pieces), now),
            ).fetchone()
            ids = []
            for piece in pieces:
                cursor = conn.execute(
                    "INSERT INTO chunks(file_id, start_line, end_line, page, text) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (file_id, piece.start_line, piece.end_line, piece.page, piece.text),
                )
                ids.append(cursor.lastrowid)
            if vectors is not None:
                conn.executemany(
                    "INSERT INTO vectors(chunk_id, vec) VALUES (?, ?)",
                    [(chunk_id, vectors[i].tobytes()) for i, chunk_id in enumerate(ids)],
                )
            self._bump()

    def _touch_file(self, path: str, size: int, mtime_ns: int) -> None:
        """A file whose mtime moved but whose content is the same: only its row."""
        with self._tx() as conn:
            conn.execute(
                "UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", (size, mtime_ns, path)
            )

    def _drop_file(self, path: str) -> None:
        with self._tx() as conn:
            row = conn.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
            if row is None:
                return
            conn.execute("DELETE FROM chunks WHERE file_id = ?", (row[0],))
            conn.execute("DELETE FROM files WHERE id = ?", (row[0],))
            self._bump()

    def _embed(self, texts: Sequence[str]) -> F32:
        assert self._embedder is not None
        parts = [
            normalised(self._embedder.embed(texts[at : at + EMBED_BATCH]), self._embedder.dims)
            for at in range(0, len(texts), EMBED_BATCH)
        ]
        if not parts:
            return np.zeros((0, self._embedder.dims), dtype=np.float32)
        return np.concatenate(parts)

    def _embedder_identity(self) -> str | None:
        if self._embedder is None:
            return None
        return f"{self._embedder.name}\t{self._embedder.dims}"

    def _adopt_embedder(self) -> None:
        """Another embedder than the vectors were made with: drop them (the chunks stay)."""
        identity = self._embedder_identity()
        if identity is None or self._meta("embedder") == identity:
            return
        with self._tx() as conn:
            conn.execute("DELETE FROM vectors")
            self._set_meta("embedder", identity)
            conn.execute(
                "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vectors_epoch'"
            )
            self._bump()

    # sync ---------------------------------------------------------------------------------

    def sync(
        self,
        roots: Sequence[Path],
        control: IndexControl | None = None,
        progress: Callable[[IndexProgress], None] | None = None,
    ) -> IndexReport:
        """Bring the index up to date with ``roots`` (folders or files). Blocking."""
        control = control or IndexControl()
        run = _Run(progress)
        self._adopt_embedder()
        found = scan(roots, cancelled=lambda: control.cancelled)
        run.skipped.extend(found.skipped)
        run.files_total = len(found.files)
        known = {
            str(path): _Known(int(i), int(size), int(mtime), str(sha))
            for i, path, size, mtime, sha in self._conn.execute(
                "SELECT id, path, size, mtime_ns, sha256 FROM files"
            )
        }
        cancelled = found.cancelled
        if not cancelled:
            seen = {f.path for f in found.files}
            for path in known:
                if path not in seen and not found.is_kept(path):
                    self._drop_file(path)
                    run.removed += 1
        pending: list[_Pending] = []
        run.tick()
        for file in found.files if not cancelled else []:
            if not control.wait():
                cancelled = True
                break
            run.current = file.path
            run.tick()
            try:
                item = self._read(file, known.get(file.path), run, control)
            except Cancelled:
                cancelled = True
                break
            if item is not None:
                pending.append(item)
                if self._embedder is None or sum(len(p.pieces) for p in pending) >= EMBED_BATCH:
                    self._flush(pending, run)
            run.files_done += 1
        self._flush(pending, run)
        if not cancelled and self._embedder is not None:
            cancelled = not self._embed_missing(run, control)
        now = _now()
        with self._tx() as conn:
            conn.execute("DELETE FROM skipped")
            conn.executemany(
                "INSERT INTO skipped(path, reason) VALUES (?, ?)",
                [(s.path, s.reason) for s in run.skipped],
            )
            if not cancelled:
                self._set_meta("last_indexed_at", now)
        run.tick(final=True)
        files, chunks = self.counts()
        return IndexReport(
            files=files,
            chunks=chunks,
            added=run.added,
            changed=run.changed,
            removed=run.removed,
            unchanged=run.unchanged,
            skipped=tuple(run.skipped),
            cancelled=cancelled,
            seconds=time.monotonic() - run.started,
            chunks_indexed=run.chunks,
        )

    def _read(
        self, file: Found, old: _Known | None, run: _Run, control: IndexControl
    ) -> _Pending | None:
        """The file read into a ``_Pending``, or None (unchanged, touched or left out)."""
        if old is not None and old.size == file.size and old.mtime_ns == file.mtime_ns:
            run.unchanged += 1
            return None
        reason = EMPTY if file.size == 0 else TOO_LARGE if file.size > MAX_FILE_BYTES else None
        if reason is not None:
            self._leave_out(file.path, reason, old, run, keep=False)
            return None
        try:
            before = os.stat(file.path)
            sha256 = sha256_of(file.path)
            if old is not None and old.sha256 == sha256:
                self._touch_file(file.path, before.st_size, before.st_mtime_ns)
                run.unchanged += 1
                return None
            pieces = read_pieces(file.path, cancel=lambda: control.cancelled)
            after = os.stat(file.path)
        except Unreadable as exc:
            self._leave_out(file.path, exc.reason, old, run, keep=exc.keep)
            return None
        except FileNotFoundError:
            self._leave_out(file.path, CHANGED, old, run, keep=True)
            return None
        if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
            self._leave_out(file.path, CHANGED, old, run, keep=True)
            return None
        return _Pending(
            file.path, before.st_size, before.st_mtime_ns, sha256, pieces, new=old is None
        )

    def _leave_out(
        self, path: str, reason: str, old: _Known | None, run: _Run, *, keep: bool
    ) -> None:
        run.skipped.append(Skipped(path, reason))
        if old is not None and not keep:
            self._drop_file(path)
            run.removed += 1

    def _flush(self, pending: list[_Pending], run: _Run) -> None:
        """Write the files read so far, each in its own transaction (vectors made first)."""
        if not pending:
            return
        vectors: F32 | None = None
        if self._embedder is not None:
            vectors = self._embed([piece.text for item in pending for piece in item.pieces])
        at = 0
        for item in pending:
            count = len(item.pieces)
            mine = None if vectors is None else vectors[at : at + count]
            at += count
            self._write_file(item.path, item.size, item.mtime_ns, item.sha256, item.pieces, mine)
            run.chunks += count
            if item.new:
                run.added += 1
            else:
                run.changed += 1
        pending.clear()
        run.tick()

    def _embed_missing(self, run: _Run, control: IndexControl) -> bool:
        """Vectors for the chunks without one (a new embedder, a sync stopped before);
        False when cancelled."""
        missing = [
            int(row[0])
            for row in self._conn.execute(
                "SELECT c.id FROM chunks c LEFT JOIN vectors v ON v.chunk_id = c.id "
                "WHERE v.chunk_id IS NULL ORDER BY c.id"
            )
        ]
        for at in range(0, len(missing), EMBED_BATCH):
            if not control.wait():
                return False
            batch = missing[at : at + EMBED_BATCH]
            marks = ",".join("?" * len(batch))
            rows = self._conn.execute(
                f"SELECT c.id, c.text, f.path FROM chunks c JOIN files f ON f.id = c.file_id "
                f"WHERE c.id IN ({marks}) ORDER BY c.id",
                batch,
            ).fetchall()
            if not rows:
                continue
            vectors = self._embed([row[1] for row in rows])
            with self._tx() as conn:
                conn.executemany(
                    "INSERT OR REPLACE INTO vectors(chunk_id, vec) VALUES (?, ?)",
                    [(row[0], vectors[i].tobytes()) for i, row in enumerate(rows)],
                )
                self._bump()
            run.chunks += len(rows)
            run.embedding_left = len(missing) - at - len(batch)
            run.current = str(rows[-1][2])
            run.tick()
        return True

    # reading ------------------------------------------------------------------------------

    def search(self, query: str, k: int = 5) -> list[Hit]:
        """The ``k`` chunks that answer ``query`` best: BM25, fused with vector similarity
        when the index has vectors of this embedder. Blocking."""
        return self.search_timed(query, k)[0]

    def search_timed(self, query: str, k: int = 5) -> tuple[list[Hit], SearchTimes]:
        """``search``, with where its time went."""
        terms = query_terms(query)
        if not terms or k <= 0:
            return [], SearchTimes(0.0, 0.0, 0.0)
        started = time.perf_counter()
        expression = fts_query(" ".join(self._selective(terms)))
        matrix = self._fresh_matrix()
        query_vector: F32 | None = None
        embedded = time.perf_counter()
        if matrix is not None and len(matrix.ids) and self._embedder is not None:
            query_vector = normalised(self._embedder.embed([query]), self._embedder.dims)[0]
            embedded = time.perf_counter()
        bm25 = [
            int(row[0])
            for row in self._conn.execute(
                "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
                (expression, CANDIDATES),
            )
        ]
        nearest = (
            [] if query_vector is None or matrix is None else matrix.top(query_vector, CANDIDATES)
        )
        fused = fuse(bm25, nearest, k)
        ranked = time.perf_counter()
        chunks = self._chunks([chunk_id for chunk_id, *_ in fused])
        hits = [
            Hit(chunks[chunk_id], score, b, v)
            for chunk_id, score, b, v in fused
            if chunk_id in chunks
        ]
        done = time.perf_counter()
        return hits, SearchTimes(
            embed_ms=(embedded - started) * 1000 if query_vector is not None else 0.0,
            search_ms=(ranked - embedded) * 1000
            + (0.0 if query_vector is not None else (embedded - started) * 1000),
            read_ms=(done - ranked) * 1000,
        )

    def _selective(self, terms: list[str]) -> list[str]:
        """``terms`` without those in more than ``COMMON_SHARE`` of the chunks (in a big
        index): BM25 gives them almost no weight, yet scoring every chunk that holds them is
        what makes a query slow. When every word is that common, the two rarest stay."""
        generation = int(self._meta("generation") or 0)
        if self._chunk_count is None or self._chunk_count[0] != generation:
            self._chunk_count = (generation, self.counts()[1])
        chunks = self._chunk_count[1]
        if chunks < COMMON_MIN_CHUNKS or len(terms) < 2:
            return terms
        conn = self._conn
        conn.executemany(
            "INSERT INTO temp.probe(rowid, text) VALUES (?, ?)", list(enumerate(terms))
        )
        stems: dict[int, list[str]] = {}
        for term, row in conn.execute("SELECT term, doc FROM temp.probe_terms"):
            stems.setdefault(int(row), []).append(str(term))
        conn.execute("DELETE FROM temp.probe")
        common: dict[str, int] = {}
        for row, words in stems.items():
            for word in words:
                found = conn.execute(
                    "SELECT doc FROM temp.chunk_terms WHERE term = ?", (word,)
                ).fetchone()
                docs = int(found[0]) if found else 0
                common[terms[row]] = max(common.get(terms[row], 0), docs)
        kept = [t for t in terms if common.get(t, 0) <= COMMON_SHARE * chunks]
        if not kept:
            kept = sorted(terms, key=lambda t: common.get(t, 0))[:2]
        return kept

    def _fresh_matrix(self) -> VectorMatrix | None:
        """The vectors in memory, up to date; None when there are none of this embedder."""
        identity = self._embedder_identity()
        if self._matrix is None or identity is None:
            return None
        rows = dict(
            self._conn.execute(
                "SELECT key, value FROM meta WHERE key IN "
                "('embedder', 'generation', 'vectors_epoch')"
            ).fetchall()
        )
        if rows.get("embedder") != identity:
            return None
        self._matrix.refresh(
            self._conn, int(rows["generation"]), f"{identity}\t{rows['vectors_epoch']}"
        )
        return self._matrix

    def _chunks(self, ids: Sequence[int]) -> dict[int, Chunk]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        rows = self._conn.execute(
            f"SELECT c.id, f.path, c.start_line, c.end_line, c.page, c.text FROM chunks c "
            f"JOIN files f ON f.id = c.file_id WHERE c.id IN ({marks})",
            list(ids),
        ).fetchall()
        return {int(row[0]): Chunk(*row) for row in rows}

    def skipped(self) -> list[Skipped]:
        """What the last sync left out, and why."""
        return [
            Skipped(str(path), str(reason))
            for path, reason in self._conn.execute(
                "SELECT path, reason FROM skipped ORDER BY rowid"
            )
        ]

    def folders(self) -> list[str]:
        """The folders that hold indexed files, sorted (what a watcher of the collection
        looks at besides its roots)."""
        rows = self._conn.execute("SELECT path FROM files").fetchall()
        return sorted({os.path.dirname(str(row[0])) for row in rows})

    def counts(self) -> tuple[int, int]:
        """(files, chunks) in the index."""
        (files,) = self._conn.execute("SELECT count(*) FROM files").fetchone()
        (chunks,) = self._conn.execute("SELECT count(*) FROM chunks").fetchone()
        return int(files), int(chunks)

    def last_indexed_at(self) -> str | None:
        """When the last sync that finished ended (ISO 8601, UTC)."""
        return self._meta("last_indexed_at")

    def close(self) -> None:
        self._conn.close()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
