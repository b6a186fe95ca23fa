"""Full-text search over every message of every conversation (SQLite FTS5).

The index (``messages_fts``) is kept in step with ``messages`` by triggers (m003), so a
reply is findable while it streams (it is checkpointed every second) and after an import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlite_utils

# Marks around matched words in snippets; the UI turns them into highlighting.
HIT_START = "\x02"
HIT_END = "\x03"
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class SearchHit:
    message_id: int
    conversation_id: int
    conversation_title: str
    role: str
    snippet: str  # matched words between HIT_START and HIT_END
    created_at: str


def fts_query(text: str) -> str:
    """Words the person typed as an FTS5 query: all must match, the last as a prefix unless
    the text ends in whitespace (a finished word: "cat " finds "cat", not "catalogue").

    Quoting every word keeps FTS5 syntax (AND, NEAR, ``*``, quotes) out of a person's hands,
    so no input can be a syntax error.
    """
    words = _WORD.findall(text)
    if not words:
        return ""
    quoted = [f'"{w}"' for w in words]
    if not text[-1:].isspace():
        quoted[-1] += "*"
    return " ".join(quoted)


class SearchStore:
    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    def search(self, text: str, limit: int = 50) -> list[SearchHit]:
        """Newest matches first (FTS5 walks its index backwards and stops at ``limit``)."""
        query = fts_query(text)
        if not query:
            return []
        cur = self._db.execute(
            "SELECT m.id, m.conversation_id, c.title, m.role, "
            f"snippet(messages_fts, 0, '{HIT_START}', '{HIT_END}', '…', 16), m.created_at "
            "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
            "JOIN conversations c ON c.id = m.conversation_id "
            "WHERE messages_fts MATCH ? AND c.deleted_at IS NULL "
            "ORDER BY messages_fts.rowid DESC LIMIT ?",
            [query, limit],
        )
        return [SearchHit(int(r[0]), int(r[1]), r[2] or "", r[3], r[4], r[5]) for r in cur]
