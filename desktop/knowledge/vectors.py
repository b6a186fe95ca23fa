"""Vectors: the ``Embedder`` protocol, and each chunk's vector as a BLOB in SQLite with the
whole matrix in memory for the search.

Why not sqlite-vec: Python's ``sqlite3`` here (and macOS's system Python) is built without
``enable_load_extension``, so no SQLite extension can load. Each chunk's L2-normalised
float32 vector is a BLOB in the ``vectors`` table; the search holds them as one numpy matrix,
so cosine similarity is a matrix-vector product and the best 50 come from
``numpy.argpartition``: the flat scan sqlite-vec's ``vec0`` does too. At 100,000 chunks of
576 dimensions the matrix is 230 MB and a query's product a few tens of milliseconds.

The matrix is loaded once and kept fresh by the index's generation counter: new vectors
(their chunk ids only grow) are appended; a vector dropped or replaced below the highest id
loaded, or a new embedder, reloads it whole.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """What makes vectors of texts (in the app: ``local/embedder.py`` ``LocalEmbedder``, an
    embedding model run by llama.cpp in its own process, which has this shape).

    ``name`` is the model's identity, stored in the index: another name means every vector is
    made again. ``embed`` is blocking and returns float32 ``(len(texts), dims)``."""

    name: str
    dims: int

    def embed(self, texts: Sequence[str]) -> F32: ...


def normalised(matrix: npt.ArrayLike, dims: int) -> F32:
    """Rows of ``matrix`` as float32 of length 1 (a zero row stays zero)."""
    out = np.asarray(matrix, dtype=np.float32)
    if out.ndim != 2 or out.shape[1] != dims:
        raise ValueError(f"the embedder returned shape {out.shape}, not (n, {dims})")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(out / norms, dtype=np.float32)


class VectorMatrix:
    """The vectors of one index in memory: ``ids`` (chunk ids, ascending) and ``matrix``."""

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self.ids: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.matrix: F32 = np.zeros((0, dims), dtype=np.float32)
        self.generation: int | None = None
        self.epoch: str | None = None

    def refresh(self, conn: sqlite3.Connection, generation: int, epoch: str) -> None:
        """Bring the matrix up to the index's ``generation`` (``epoch``: which embedder)."""
        if generation == self.generation and epoch == self.epoch:
            return
        top = int(self.ids[-1]) if len(self.ids) else 0
        whole = epoch != self.epoch or not len(self.ids)
        if not whole:
            (below,) = conn.execute(
                "SELECT count(*) FROM vectors WHERE chunk_id <= ?", (top,)
            ).fetchone()
            whole = below != len(self.ids)
        if whole:
            self.ids, self.matrix = self._load(conn, 0)
        else:
            ids, matrix = self._load(conn, top)
            if len(ids):
                self.ids = np.concatenate([self.ids, ids])
                self.matrix = np.concatenate([self.matrix, matrix])
        self.generation, self.epoch = generation, epoch

    def _load(self, conn: sqlite3.Connection, after: int) -> tuple[npt.NDArray[np.int64], F32]:
        rows = conn.execute(
            "SELECT chunk_id, vec FROM vectors WHERE chunk_id > ? ORDER BY chunk_id", (after,)
        ).fetchall()
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        blob = b"".join(row[1] for row in rows)
        matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), self.dims)
        return ids, matrix

    def top(self, query: F32, limit: int) -> list[int]:
        """The chunk ids of the ``limit`` vectors nearest ``query`` (normalised), best first."""
        count = len(self.ids)
        if not count:
            return []
        scores = self.matrix @ query
        if count > limit:
            best = np.argpartition(scores, count - limit)[count - limit :]
        else:
            best = np.arange(count)
        ordered = best[np.argsort(-scores[best], kind="stable")]
        return [int(i) for i in self.ids[ordered]]
