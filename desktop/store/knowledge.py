"""Knowledge collections, which agents search them, and the passages each reply was given
(m015). The collections' indexes are files of their own (``desktop/knowledge``); this table
keeps what the person chose: a name, the folders and files, the embedding model."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from desktop.store.db import read_back, savepoint, utc_now


@dataclass(frozen=True, slots=True)
class Collection:
    """A named set of folders and files, read where they are. ``embedder``: the GGUF file of
    the embedding model (None: keyword search only)."""

    name: str
    paths: tuple[str, ...]
    embedder: str | None = None
    id: int | None = None
    created_at: str | None = None
    updated_at: str | None = None


@dataclass(frozen=True, slots=True)
class Source:
    """A passage a reply was given, by the number the model was told to cite it by."""

    position: int
    collection: str
    path: str
    start_line: int | None
    end_line: int | None
    page: int | None
    score: float | None
    text: str

    def as_json(self, *, with_text: bool = True) -> dict[str, Any]:
        """The passage as JSON (exports, ``simi ask --json``, ``simi knowledge search``): its
        number as ``n``; ``with_text=False`` leaves the passage itself out."""
        out: dict[str, Any] = {
            "n": self.position,
            "collection": self.collection,
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "page": self.page,
            "score": self.score,
        }
        if with_text:
            out["text"] = self.text
        return out

    @property
    def place(self) -> str:
        """Where in the file: "page 3, lines 4–9", "lines 10–24", "line 7"."""
        parts = [f"page {self.page}"] if self.page is not None else []
        if self.start_line is not None:
            end = self.end_line if self.end_line is not None else self.start_line
            lines = (
                f"line {self.start_line}"
                if end == self.start_line
                else f"lines {self.start_line}–{end}"
            )
            parts.append(lines)
        return ", ".join(parts)


def _collection(row: dict[str, Any]) -> Collection:
    return Collection(
        id=row["id"],
        name=row["name"],
        paths=tuple(json.loads(row["paths"] or "[]")),
        embedder=row["embedder"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class KnowledgeStore:
    """Every method is one short transaction, like the other stores."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    def _tx(self) -> AbstractContextManager[None]:
        return savepoint(self._db)

    # collections ------------------------------------------------------------------------------
    def add(self, collection: Collection) -> Collection:
        now = utc_now()
        with self._tx():
            cur = self._db.execute(
                "INSERT INTO knowledge_collections (name, paths, embedder, created_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?)",
                [
                    collection.name,
                    json.dumps(list(collection.paths)),
                    collection.embedder,
                    now,
                    now,
                ],
            )
        return read_back(self.get(int(cur.lastrowid or 0)))

    def update(self, collection: Collection) -> Collection:
        if collection.id is None:
            raise ValueError("update needs a stored collection (with an id)")
        with self._tx():
            self._db.execute(
                "UPDATE knowledge_collections SET name = ?, paths = ?, embedder = ?, "
                "updated_at = ? WHERE id = ?",
                [
                    collection.name,
                    json.dumps(list(collection.paths)),
                    collection.embedder,
                    utc_now(),
                    collection.id,
                ],
            )
        return read_back(self.get(collection.id))

    def delete(self, collection_id: int) -> bool:
        """Removes the collection and which agents used it (replies keep their passages)."""
        with self._tx():
            self._db.execute("DELETE FROM agent_knowledge WHERE collection_id = ?", [collection_id])
            cur = self._db.execute(
                "DELETE FROM knowledge_collections WHERE id = ?", [collection_id]
            )
        return bool(cur.rowcount)

    def _one(self, where: str, params: list[Any]) -> Collection | None:
        rows = list(self._db.query(f"SELECT * FROM knowledge_collections WHERE {where}", params))
        return _collection(rows[0]) if rows else None

    def get(self, collection_id: int) -> Collection | None:
        return self._one("id = ?", [collection_id])

    def by_name(self, name: str) -> Collection | None:
        return self._one("name = ? COLLATE NOCASE", [name])

    def all(self) -> list[Collection]:
        rows = self._db.query("SELECT * FROM knowledge_collections ORDER BY name COLLATE NOCASE")
        return [_collection(r) for r in rows]

    # which agents search which ----------------------------------------------------------------
    def agent_collections(self, agent_id: int) -> list[Collection]:
        rows = self._db.query(
            "SELECT c.* FROM knowledge_collections c JOIN agent_knowledge a "
            "ON a.collection_id = c.id WHERE a.agent_id = ? ORDER BY c.name COLLATE NOCASE",
            [agent_id],
        )
        return [_collection(r) for r in rows]

    def set_agent_collections(self, agent_id: int, collection_ids: Iterable[int]) -> None:
        """Replaces the collections the agent searches (an empty list: none)."""
        with self._tx():
            self._db.execute("DELETE FROM agent_knowledge WHERE agent_id = ?", [agent_id])
            for cid in sorted(set(collection_ids)):
                self._db.execute(
                    "INSERT INTO agent_knowledge (agent_id, collection_id) VALUES (?, ?)",
                    [agent_id, cid],
                )

    def agents_using(self, collection_id: int) -> list[int]:
        rows = self._db.execute(
            "SELECT agent_id FROM agent_knowledge WHERE collection_id = ? ORDER BY agent_id",
            [collection_id],
        ).fetchall()
        return [int(r[0]) for r in rows]

    # the passages of replies ------------------------------------------------------------------
    def add_sources(self, message_id: int, sources: Sequence[Source]) -> None:
        """The passages a reply is given (replacing any it had: a retried call searched again)."""
        with self._tx():
            self._db.execute("DELETE FROM message_sources WHERE message_id = ?", [message_id])
            for s in sources:
                self._db.execute(
                    "INSERT INTO message_sources (message_id, position, collection, path, "
                    "start_line, end_line, page, score, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        message_id,
                        s.position,
                        s.collection,
                        s.path,
                        s.start_line,
                        s.end_line,
                        s.page,
                        s.score,
                        s.text,
                    ],
                )

    def sources_of(self, message_ids: Iterable[int]) -> dict[int, list[Source]]:
        """message id -> its passages by number (messages without any are left out)."""
        ids = list(dict.fromkeys(message_ids))
        found: dict[int, list[Source]] = {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ", ".join("?" for _ in part)
            rows = self._db.execute(
                "SELECT message_id, position, collection, path, start_line, end_line, page, "
                f"score, text FROM message_sources WHERE message_id IN ({marks}) "
                "ORDER BY message_id, position",
                part,
            ).fetchall()
            for row in rows:
                found.setdefault(int(row[0]), []).append(Source(*row[1:]))
        return found
