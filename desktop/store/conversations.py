"""Conversations and their messages."""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any, Literal

import sqlite_utils

from desktop.store.db import utc_now

MessageStatus = Literal["streaming", "complete", "cancelled", "error"]
MESSAGE_STATUSES: tuple[str, ...] = ("streaming", "complete", "cancelled", "error")


@dataclass(frozen=True, slots=True)
class Conversation:
    id: int
    title: str
    agent_id: int | None
    pinned: bool
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class Message:
    id: int
    conversation_id: int
    role: str
    content: str
    status: str
    error_text: str | None
    error_kind: str | None
    agent_id: int | None
    agent_name: str | None
    model: str | None
    created_at: str
    updated_at: str


def _rows(cur: Any) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


class ConversationStore:
    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    # conversations ---------------------------------------------------------------------------
    def create(self, agent_id: int | None, title: str = "") -> Conversation:
        now = utc_now()
        cur = self._db.execute(
            "INSERT INTO conversations (title, agent_id, created_at, updated_at) "
            "VALUES (?, ?, ?, ?)",
            [title, agent_id, now, now],
        )
        conv = self.get(int(cur.lastrowid or 0))
        assert conv is not None
        return conv

    def get(self, conversation_id: int) -> Conversation | None:
        rows = _rows(
            self._db.execute("SELECT * FROM conversations WHERE id = ?", [conversation_id])
        )
        return self._conv(rows[0]) if rows else None

    @staticmethod
    def _conv(row: dict[str, Any]) -> Conversation:
        row["pinned"] = bool(row["pinned"])
        return Conversation(**row)

    def list(self, agent_id: int | None = None) -> list[Conversation]:
        where, params = ("WHERE agent_id = ?", [agent_id]) if agent_id is not None else ("", [])
        rows = _rows(
            self._db.execute(
                f"SELECT * FROM conversations {where} ORDER BY pinned DESC, updated_at DESC, "
                "id DESC",
                params,
            )
        )
        return [self._conv(r) for r in rows]

    def rename(self, conversation_id: int, title: str) -> None:
        self._db.execute(
            "UPDATE conversations SET title = ?, updated_at = ? WHERE id = ?",
            [title, utc_now(), conversation_id],
        )

    def set_agent(self, conversation_id: int, agent_id: int | None) -> None:
        self._db.execute(
            "UPDATE conversations SET agent_id = ? WHERE id = ?", [agent_id, conversation_id]
        )

    def touch(self, conversation_id: int) -> None:
        self._db.execute(
            "UPDATE conversations SET updated_at = ? WHERE id = ?", [utc_now(), conversation_id]
        )

    def delete(self, conversation_id: int) -> None:
        self._db.execute("DELETE FROM conversations WHERE id = ?", [conversation_id])

    # messages --------------------------------------------------------------------------------
    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        *,
        status: str = "complete",
        agent_id: int | None = None,
        agent_name: str | None = None,
        model: str | None = None,
    ) -> Message:
        if status not in MESSAGE_STATUSES:
            raise ValueError(f"unknown message status {status!r}")
        now = utc_now()
        cur = self._db.execute(
            "INSERT INTO messages (conversation_id, role, content, status, agent_id, agent_name,"
            " model, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [conversation_id, role, content, status, agent_id, agent_name, model, now, now],
        )
        self.touch(conversation_id)
        msg = self.message(int(cur.lastrowid or 0))
        assert msg is not None
        return msg

    def message(self, message_id: int) -> Message | None:
        rows = _rows(self._db.execute("SELECT * FROM messages WHERE id = ?", [message_id]))
        return Message(**rows[0]) if rows else None

    def messages(self, conversation_id: int) -> builtins.list[Message]:
        rows = _rows(
            self._db.execute(
                "SELECT * FROM messages WHERE conversation_id = ? ORDER BY id", [conversation_id]
            )
        )
        return [Message(**r) for r in rows]

    def checkpoint(self, message_id: int, content: str) -> None:
        """Save partial text of a streaming reply (crash safety)."""
        self._db.execute(
            "UPDATE messages SET content = ?, updated_at = ? WHERE id = ?",
            [content, utc_now(), message_id],
        )

    def finish_message(
        self,
        message_id: int,
        *,
        content: str,
        status: str,
        error_text: str | None = None,
        error_kind: str | None = None,
    ) -> None:
        if status not in MESSAGE_STATUSES:
            raise ValueError(f"unknown message status {status!r}")
        self._db.execute(
            "UPDATE messages SET content = ?, status = ?, error_text = ?, error_kind = ?, "
            "updated_at = ? WHERE id = ?",
            [content, status, error_text, error_kind, utc_now(), message_id],
        )

    def delete_message(self, message_id: int) -> None:
        self._db.execute("DELETE FROM messages WHERE id = ?", [message_id])

    def mark_stale_streaming(self) -> int:
        """Messages left 'streaming' by a crash become 'cancelled' (text kept). Returns count."""
        cur = self._db.execute(
            "UPDATE messages SET status = 'cancelled', error_text = COALESCE(error_text, "
            "'Interrupted: SIMI Multi stopped while this reply was streaming.'), updated_at = ? "
            "WHERE status = 'streaming'",
            [utc_now()],
        )
        return int(cur.rowcount or 0)
