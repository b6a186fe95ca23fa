"""Conversations and their messages, as trees: versions and branches, soft delete, pins.

A message's ``parent_id`` is the message it follows; its siblings are its other versions
(regenerated replies, edited questions). ``active_child_id`` (and the conversation's
``active_root_id``) mark the branch on show, so loading the active path is one recursive
walk over primary keys however many branches exist (see migrations.m003_branches_search).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal

import sqlite_utils

from desktop.store.db import read_back, savepoint, utc_now
from desktop.store.owners import recover, stamped

log = logging.getLogger("simi.store")

MessageStatus = Literal["streaming", "complete", "cancelled", "interrupted", "error"]
MESSAGE_STATUSES: tuple[str, ...] = ("streaming", "complete", "cancelled", "interrupted", "error")
INTERRUPTED_TEXT = "Interrupted: SIMI Multi stopped while this reply was streaming."


@dataclass(frozen=True, slots=True)
class Conversation:
    id: int
    title: str
    agent_id: int | None
    pinned: bool
    created_at: str
    updated_at: str
    active_root_id: int | None = None
    deleted_at: str | None = None


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
    parent_id: int | None = None
    active_child_id: int | None = None
    reasoning: str = ""


@dataclass(frozen=True, slots=True)
class Versions:
    """Where a message stands among its siblings: ``index`` is 0-based, ids in order."""

    index: int
    ids: tuple[int, ...]

    @property
    def count(self) -> int:
        return len(self.ids)


_CONV_COLS = "id, title, agent_id, pinned, created_at, updated_at, active_root_id, deleted_at"
_MSG_COLS = (
    "id, conversation_id, role, content, status, error_text, error_kind, agent_id, agent_name, "
    "model, created_at, updated_at, parent_id, active_child_id, reasoning"
)
_M_MSG_COLS = ", ".join("m." + c for c in _MSG_COLS.split(", "))  # for joins aliasing m


def _chain(start: str, link: str) -> str:
    """A recursive walk ``chain(id, depth)`` over messages: from the id that ``start`` selects
    (with its depth), along the ``link`` column, until it is NULL."""
    return (
        "WITH RECURSIVE chain(id, depth) AS ("
        f" {start}"
        " UNION ALL"
        f" SELECT m.{link}, chain.depth + 1 FROM messages m JOIN chain ON m.id = chain.id"
        f" WHERE m.{link} IS NOT NULL)"
    )


# The branch on show, from the conversation's first message down its active children.
_ACTIVE_PATH = _chain("SELECT active_root_id, 0 FROM conversations WHERE id = ?", "active_child_id")
# The messages a message follows, from its parent up to the first message.
_ANCESTRY = _chain("SELECT parent_id, 1 FROM messages WHERE id = ?", "parent_id")
_CHAIN_MESSAGES = f" SELECT {_M_MSG_COLS} FROM chain JOIN messages m ON m.id = chain.id"


def _check_status(status: str) -> None:
    if status not in MESSAGE_STATUSES:
        raise ValueError(f"unknown message status {status!r}")


class ConversationStore:
    def __init__(self, db: sqlite_utils.Database, *, owner_id: int | None = None) -> None:
        self._db = db
        # this process's ``process_owners`` row (store/owners.py): stamped on streaming
        # replies and on trash, so another process's start-up leaves them alone
        self.owner_id = owner_id
        # called after messages were deleted for good (a conversation, the trash, a question):
        # files attached to them that nothing else uses may go (``chat/services.py``)
        self.on_deleted: builtins.list[Callable[[], None]] = []

    def _deleted(self) -> None:
        for hook in self.on_deleted:
            try:
                hook()
            except Exception:  # the deletion stands; what follows it is not its business
                log.exception("a hook after deleting messages failed")

    def _tx(self) -> AbstractContextManager[None]:
        return savepoint(self._db)

    def transaction(self) -> AbstractContextManager[None]:
        """All or nothing for several calls on this thread's connection (every store built
        on the same ``Database`` writes into it: an import's stats rows too)."""
        return savepoint(self._db)

    # an import (chat/export.py): rows first, the branches on show after ------------------------
    def insert_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        *,
        status: str = "complete",
        error_text: str | None = None,
        error_kind: str | None = None,
        agent_id: int | None = None,
        agent_name: str | None = None,
        model: str | None = None,
        parent_id: int | None = None,
        reasoning: str = "",
    ) -> int:
        """A finished message's row alone, one INSERT (no branch moves to it, the conversation
        is not touched): many of them, then ``point_all`` once. Returns its id."""
        _check_status(status)
        if status == "streaming":
            raise ValueError("insert_message stores finished messages; add_message streams")
        now = utc_now()
        cur = self._db.execute(
            "INSERT INTO messages (conversation_id, role, content, status, error_text, "
            "error_kind, agent_id, agent_name, model, created_at, updated_at, parent_id, "
            "reasoning) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                conversation_id,
                role,
                content,
                status,
                error_text,
                error_kind,
                agent_id,
                agent_name,
                model,
                now,
                now,
                parent_id,
                reasoning,
            ],
        )
        return int(cur.lastrowid or 0)

    def point_all(self, conversation_id: int, active: dict[int | None, int]) -> None:
        """``point_at`` for many parents at once: ``active`` maps a message (None: the
        conversation's start) to the child on show after it."""
        if None in active:
            self.point_at(conversation_id, None, active[None])
        self._db.conn.executemany(
            "UPDATE messages SET active_child_id = ? WHERE id = ? AND conversation_id = ?",
            [(child, parent, conversation_id) for parent, child in active.items() if parent],
        )

    # conversations ---------------------------------------------------------------------------
    def create(self, agent_id: int | None, title: str = "") -> Conversation:
        now = utc_now()
        cur = self._db.execute(
            "INSERT INTO conversations (title, agent_id, created_at, updated_at) "
            "VALUES (?, ?, ?, ?)",
            [title, agent_id, now, now],
        )
        return read_back(self.get(int(cur.lastrowid or 0)))

    def get(self, conversation_id: int) -> Conversation | None:
        cur = self._db.execute(
            f"SELECT {_CONV_COLS} FROM conversations WHERE id = ?", [conversation_id]
        )
        row = cur.fetchone()
        return self._conv(row) if row else None

    @staticmethod
    def _conv(row: tuple[Any, ...]) -> Conversation:
        return Conversation(row[0], row[1], row[2], bool(row[3]), row[4], row[5], row[6], row[7])

    def list(self, agent_id: int | None = None) -> list[Conversation]:
        """Pinned first, then most recently active. Deleted (pending undo) ones are left out."""
        where, params = "WHERE deleted_at IS NULL", []
        if agent_id is not None:
            where += " AND agent_id = ?"
            params.append(agent_id)
        cur = self._db.execute(
            f"SELECT {_CONV_COLS} FROM conversations {where} "
            "ORDER BY pinned DESC, updated_at DESC, id DESC",
            params,
        )
        return [self._conv(r) for r in cur.fetchall()]

    def find(self, text: str, limit: int = 50) -> builtins.list[Conversation]:
        """Conversations whose title contains ``text`` (the quick switcher)."""
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        cur = self._db.execute(
            f"SELECT {_CONV_COLS} FROM conversations WHERE deleted_at IS NULL AND "
            "title LIKE ? ESCAPE '\\' ORDER BY pinned DESC, updated_at DESC LIMIT ?",
            [pattern, limit],
        )
        return [self._conv(r) for r in cur.fetchall()]

    def rename(self, conversation_id: int, title: str) -> None:
        self._db.execute(
            "UPDATE conversations SET title = ?, updated_at = ? WHERE id = ?",
            [title, utc_now(), conversation_id],
        )

    def set_agent(self, conversation_id: int, agent_id: int | None) -> None:
        self._db.execute(
            "UPDATE conversations SET agent_id = ? WHERE id = ?", [agent_id, conversation_id]
        )

    def set_pinned(self, conversation_id: int, pinned: bool) -> None:
        self._db.execute(
            "UPDATE conversations SET pinned = ? WHERE id = ?", [int(pinned), conversation_id]
        )

    def touch(self, conversation_id: int) -> None:
        self._db.execute(
            "UPDATE conversations SET updated_at = ? WHERE id = ?", [utc_now(), conversation_id]
        )

    def delete(self, conversation_id: int) -> None:
        """Delete for good (messages, their attachments' rows and stats cascade)."""
        self._db.execute("DELETE FROM conversations WHERE id = ?", [conversation_id])
        self._deleted()

    def trash(self, conversation_id: int) -> None:
        """Hide the conversation; ``restore`` undoes it, ``purge_trash`` makes it final."""
        stamp, params = stamped("trashed_by", self.owner_id)
        self._db.execute(
            f"UPDATE conversations SET deleted_at = ?{stamp} WHERE id = ?",
            [utc_now(), *params, conversation_id],
        )

    def restore(self, conversation_id: int) -> None:
        self._db.execute(
            "UPDATE conversations SET deleted_at = NULL WHERE id = ?", [conversation_id]
        )

    def purge_trash(self, dead_owners: Sequence[int] = ()) -> int:
        """At start-up: delete for good the trash of processes that are gone (their Undo
        went with them); a live process's trash is still in its Undo window."""
        purged = recover(
            self._db,
            "DELETE FROM conversations WHERE deleted_at IS NOT NULL",
            dead_owners,
            column="trashed_by",
        )
        if purged:
            self._deleted()
        return purged

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
        parent_id: int | Literal["leaf"] | None = "leaf",
        reasoning: str = "",
    ) -> Message:
        """Add a message and make it the active one at its place.

        ``parent_id="leaf"`` (default) appends to the end of the active path; an explicit
        parent adds a new version beside that parent's other children (None: a new first
        message, beside the existing first ones).
        """
        _check_status(status)
        parent = self.active_leaf_id(conversation_id) if parent_id == "leaf" else parent_id
        now = utc_now()
        owner = [] if self.owner_id is None else [self.owner_id]
        with self._tx():
            cur = self._db.execute(
                "INSERT INTO messages (conversation_id, role, content, status, agent_id, "
                f"agent_name, model, created_at, updated_at, parent_id, reasoning"
                f"{', owner_id' if owner else ''}) "
                f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?{', ?' if owner else ''})",
                [
                    conversation_id,
                    role,
                    content,
                    status,
                    agent_id,
                    agent_name,
                    model,
                    now,
                    now,
                    parent,
                    reasoning,
                    *owner,
                ],
            )
            message_id = int(cur.lastrowid or 0)
            self.point_at(conversation_id, parent, message_id)
            self.touch(conversation_id)
        return read_back(self.message(message_id))

    def point_at(self, conversation_id: int, parent_id: int | None, child_id: int | None) -> None:
        """Make ``child_id`` the active child of ``parent_id`` (None: the first message)."""
        if parent_id is None:
            self._db.execute(
                "UPDATE conversations SET active_root_id = ? WHERE id = ?",
                [child_id, conversation_id],
            )
        else:
            self._db.execute(
                "UPDATE messages SET active_child_id = ? WHERE id = ?", [child_id, parent_id]
            )

    def message(self, message_id: int) -> Message | None:
        cur = self._db.execute(f"SELECT {_MSG_COLS} FROM messages WHERE id = ?", [message_id])
        row = cur.fetchone()
        return Message(*row) if row else None

    def messages(self, conversation_id: int) -> builtins.list[Message]:
        """The active path: what the conversation shows, first message first."""
        return self._messages(
            f"{_ACTIVE_PATH}{_CHAIN_MESSAGES} ORDER BY chain.depth", conversation_id
        )

    def message_count(self, conversation_id: int) -> int:
        """How many messages the conversation holds, every branch counted (an index lookup)."""
        row = self._db.execute(
            "SELECT count(*) FROM messages WHERE conversation_id = ?", [conversation_id]
        ).fetchone()
        return int(row[0])

    def agents_newest_first(self, conversation_id: int) -> builtins.list[int]:
        """The agents that wrote in the conversation, the one of its newest message first."""
        rows = self._db.execute(
            "SELECT agent_id FROM messages WHERE conversation_id = ? AND agent_id IS NOT NULL "
            "GROUP BY agent_id ORDER BY max(id) DESC",
            [conversation_id],
        ).fetchall()
        return [int(r[0]) for r in rows]

    def all_messages(self, conversation_id: int) -> builtins.list[Message]:
        """Every message of every branch, in id order (export)."""
        return self._messages(
            f"SELECT {_MSG_COLS} FROM messages WHERE conversation_id = ? ORDER BY id",
            conversation_id,
        )

    def ancestors(self, message_id: int) -> builtins.list[Message]:
        """The messages before ``message_id`` on its branch, first message first."""
        return self._messages(f"{_ANCESTRY}{_CHAIN_MESSAGES} ORDER BY chain.depth DESC", message_id)

    def _messages(self, sql: str, key: int) -> builtins.list[Message]:
        return [Message(*r) for r in self._db.execute(sql, [key]).fetchall()]

    def active_leaf_id(self, conversation_id: int) -> int | None:
        return self._id(
            f"{_ACTIVE_PATH} SELECT id FROM chain WHERE id IS NOT NULL ORDER BY depth DESC LIMIT 1",
            [conversation_id],
        )

    def versions(self, message_id: int) -> Versions:
        msg = self.message(message_id)
        if msg is None:
            return Versions(0, ())
        ids = tuple(self._children(msg.conversation_id, msg.parent_id))
        return Versions(ids.index(message_id) if message_id in ids else 0, ids)

    def _children(self, conversation_id: int, parent_id: int | None) -> builtins.list[int]:
        """The ids of ``parent_id``'s children (None: the first messages), oldest first."""
        if parent_id is None:
            cur = self._db.execute(
                "SELECT id FROM messages WHERE conversation_id = ? AND parent_id IS NULL "
                "ORDER BY id",
                [conversation_id],
            )
        else:
            cur = self._db.execute(
                "SELECT id FROM messages WHERE parent_id = ? ORDER BY id", [parent_id]
            )
        return [int(r[0]) for r in cur.fetchall()]

    def versions_for(self, messages: builtins.list[Message]) -> dict[int, Versions]:
        """``versions`` for many messages of one path in two queries (only those with >1)."""
        if not messages:
            return {}
        conv = messages[0].conversation_id
        parents = [m.parent_id for m in messages if m.parent_id is not None]
        by_parent: dict[int | None, builtins.list[int]] = {}
        for start in range(0, len(parents), 500):
            chunk = parents[start : start + 500]
            marks = ", ".join("?" for _ in chunk)
            cur = self._db.execute(
                f"SELECT parent_id, id FROM messages WHERE parent_id IN ({marks}) ORDER BY id",
                chunk,
            )
            for parent, mid in cur.fetchall():
                by_parent.setdefault(parent, []).append(int(mid))
        by_parent[None] = self._children(conv, None)
        out: dict[int, Versions] = {}
        for m in messages:
            ids = by_parent.get(m.parent_id, [m.id])
            if len(ids) > 1 and m.id in ids:
                out[m.id] = Versions(ids.index(m.id), tuple(ids))
        return out

    def activate(self, message_id: int) -> None:
        """Make the branch through ``message_id`` the active one (search hits, versions)."""
        msg = self.message(message_id)
        if msg is None:
            return
        with self._tx():
            self.point_at(msg.conversation_id, msg.parent_id, msg.id)
            for ancestor in self.ancestors(message_id):
                self.point_at(msg.conversation_id, ancestor.parent_id, ancestor.id)

    def switch_version(self, message_id: int, step: int) -> int | None:
        """Show the sibling ``step`` places away (‹ -1, › +1); returns its id."""
        versions = self.versions(message_id)
        target = versions.index + step
        if not 0 <= target < versions.count:
            return None
        new_id = versions.ids[target]
        self.activate(new_id)
        return new_id

    def checkpoint(self, message_id: int, content: str, reasoning: str | None = None) -> None:
        """Save partial text of a streaming reply (crash safety)."""
        if reasoning is None:
            self._db.execute(
                "UPDATE messages SET content = ?, updated_at = ? WHERE id = ?",
                [content, utc_now(), message_id],
            )
        else:
            self._db.execute(
                "UPDATE messages SET content = ?, reasoning = ?, updated_at = ? WHERE id = ?",
                [content, reasoning, utc_now(), message_id],
            )

    def set_status(self, message_id: int, status: str) -> None:
        _check_status(status)
        stamp, params = stamped("owner_id", self.owner_id)
        self._db.execute(
            "UPDATE messages SET status = ?, error_text = NULL, error_kind = NULL, "
            f"updated_at = ?{stamp} WHERE id = ?",
            [status, utc_now(), *params, message_id],
        )

    def finish_message(
        self,
        message_id: int,
        *,
        content: str,
        status: str,
        error_text: str | None = None,
        error_kind: str | None = None,
        reasoning: str | None = None,
    ) -> None:
        _check_status(status)
        self._db.execute(
            "UPDATE messages SET content = ?, status = ?, error_text = ?, error_kind = ?, "
            "reasoning = COALESCE(?, reasoning), updated_at = ? WHERE id = ?",
            [content, status, error_text, error_kind, reasoning, utc_now(), message_id],
        )

    def delete_message(self, message_id: int) -> None:
        """Remove one message; what followed it moves up to its parent (stays reachable)."""
        msg = self.message(message_id)
        if msg is None:
            return
        with self._tx():
            self._db.execute(
                "UPDATE messages SET parent_id = ? WHERE parent_id = ?", [msg.parent_id, msg.id]
            )
            active = self._active_child_of(msg.conversation_id, msg.parent_id)
            self._db.execute("DELETE FROM messages WHERE id = ?", [message_id])
            if active == msg.id or active is None:
                replacement = msg.active_child_id
                if replacement is None:
                    replacement = self._last_child(msg.conversation_id, msg.parent_id)
                self.point_at(msg.conversation_id, msg.parent_id, replacement)
        if msg.role == "user":  # a question may have had attachments
            self._deleted()

    def _active_child_of(self, conversation_id: int, parent_id: int | None) -> int | None:
        if parent_id is None:
            return self._id(
                "SELECT active_root_id FROM conversations WHERE id = ?", [conversation_id]
            )
        return self._id("SELECT active_child_id FROM messages WHERE id = ?", [parent_id])

    def _last_child(self, conversation_id: int, parent_id: int | None) -> int | None:
        children = self._children(conversation_id, parent_id)
        return children[-1] if children else None

    def _id(self, sql: str, params: builtins.list[Any]) -> int | None:
        """The one id ``sql`` selects, or None (no row, or NULL)."""
        row = self._db.execute(sql, params).fetchone()
        return int(row[0]) if row and row[0] is not None else None

    def mark_stale_streaming(self, dead_owners: Sequence[int] = ()) -> int:
        """Messages a crash left 'streaming' become 'interrupted' (text kept): those whose
        process is gone (``store/owners.py``), never a live one's. Returns count."""
        return recover(
            self._db,
            "UPDATE messages SET status = 'interrupted', error_text = COALESCE(error_text, ?), "
            "updated_at = ? WHERE status = 'streaming'",
            dead_owners,
            [INTERRUPTED_TEXT, utc_now()],
        )
