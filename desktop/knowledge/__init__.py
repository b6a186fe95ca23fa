"""Knowledge: folders an agent can search. Qt-free, blocking, no network.

A *collection* is the folders and files a person chose; its index is one SQLite file of its
own (the caller says where), read in place, never copied. This package owns that file and
everything in it: the walk over the chosen folders (``scan.py``), a document's text cut into
line-numbered chunks (``read.py``, ``chunks.py``), the incremental, resumable, cancellable
indexing with its per-file transactions (``index.py``), the vectors an ``Embedder`` makes and
their in-memory matrix (``vectors.py``), and the hybrid search: SQLite FTS5's BM25 and cosine
similarity fused by reciprocal rank (``search.py``).

It imports only ``desktop.errors`` and ``desktop.attach`` (what a file is, its text).
"""

from __future__ import annotations

from desktop.knowledge.index import (
    IndexControl,
    IndexProgress,
    IndexReport,
    KnowledgeIndex,
)
from desktop.knowledge.scan import MAX_FILE_BYTES, Skipped
from desktop.knowledge.search import Chunk, Hit, SearchTimes
from desktop.knowledge.vectors import Embedder

__all__ = [
    "MAX_FILE_BYTES",
    "Chunk",
    "Embedder",
    "Hit",
    "IndexControl",
    "IndexProgress",
    "IndexReport",
    "KnowledgeIndex",
    "SearchTimes",
    "Skipped",
]
