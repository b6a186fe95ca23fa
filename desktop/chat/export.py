"""A conversation to Markdown (to read) or JSON (to keep, or to import elsewhere), and back.

The JSON holds every branch and version with its inference statistics, and never a secret:
agents are named, not copied (no endpoint, no key reference); stats rows keep the endpoint
host (as the footer shows it) but no ids from this database.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, Protocol

from desktop.errors import UserError
from desktop.store.agents import Agent
from desktop.store.conversations import MESSAGE_STATUSES, ConversationStore, Message
from desktop.store.stats import STATS_COLUMNS, StatsStore

FORMAT = "simi-multi/conversation"
FORMAT_VERSION = 1
# Keys from this database that mean nothing in another one.
_LOCAL_STATS_KEYS = {"id", "message_id", "conversation_id", "agent_id"}


class _Agents(Protocol):
    def list(self) -> list[Agent]: ...


class ExportError(UserError):
    """The file is not a conversation this version can import, or there is no such
    conversation to export (``user_message``, also ``str``, is the person's text)."""

    kind = "export"


def _stats_public(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if not row:
        return None
    return {k: v for k, v in row.items() if k not in _LOCAL_STATS_KEYS and v is not None}


def to_json(
    conversations: ConversationStore, stats: StatsStore, conversation_id: int
) -> dict[str, Any]:
    conv = conversations.get(conversation_id)
    if conv is None:
        raise ExportError(f"There is no conversation {conversation_id}.")
    messages = conversations.all_messages(conversation_id)
    per_message = stats.for_messages([m.id for m in messages if m.role == "assistant"])
    active = [m.id for m in conversations.messages(conversation_id)]
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "conversation": {
            "title": conv.title,
            "pinned": conv.pinned,
            "created_at": conv.created_at,
            "updated_at": conv.updated_at,
            "active_root": conv.active_root_id,
        },
        "active_path": active,
        "messages": [
            {
                "id": m.id,
                "parent_id": m.parent_id,
                "active_child": m.active_child_id,
                "role": m.role,
                "content": m.content,
                "reasoning": m.reasoning or None,
                "status": m.status,
                "error_text": m.error_text,
                "error_kind": m.error_kind,
                "agent_name": m.agent_name,
                "model": m.model,
                "created_at": m.created_at,
                "updated_at": m.updated_at,
                "stats": _stats_public(per_message.get(m.id)),
            }
            for m in messages
        ],
    }


def _speaker(m: Message) -> str:
    if m.role == "user":
        return "You"
    name = m.agent_name or "Assistant"
    return f"{name} ({m.model})" if m.model and m.model not in name else name


def to_markdown(conversations: ConversationStore, stats: StatsStore, conversation_id: int) -> str:
    """The active branch as a readable document: headings per speaker, thinking folded."""
    from desktop.chat.format import stats_line  # Qt-free, shared with the window's footer

    conv = conversations.get(conversation_id)
    if conv is None:
        raise ExportError(f"There is no conversation {conversation_id}.")
    path = conversations.messages(conversation_id)
    per_message = stats.for_messages([m.id for m in path if m.role == "assistant"])
    out = [f"# {conv.title or 'Conversation'}", ""]
    for m in path:
        out += [f"## {_speaker(m)}", ""]
        if m.reasoning:
            out += [
                "<details><summary>Thinking</summary>",
                "",
                m.reasoning.strip(),
                "",
                "</details>",
                "",
            ]
        if m.content:
            out += [m.content.rstrip(), ""]
        if m.status in ("cancelled", "interrupted"):
            out += [f"*({m.status})*", ""]
        if m.status == "error":
            out += [f"> **Error:** {m.error_text or 'the reply failed'}", ""]
        line = stats_line(per_message.get(m.id))
        if line:
            out += [f"<sub>{line}</sub>", ""]
    return "\n".join(out).rstrip() + "\n"


def from_json(
    data: Any,
    conversations: ConversationStore,
    stats: StatsStore,
    agents: _Agents | None = None,
) -> int:
    """Import one conversation written by ``to_json``; returns the new conversation's id.
    All or nothing (``import_conversations``)."""
    return _import([data], conversations, stats, agents, several=False)[0]


def import_conversations(
    data: Any,
    conversations: ConversationStore,
    stats: StatsStore,
    agents: _Agents | None = None,
) -> list[int]:
    """Import a file's JSON: one conversation written by ``to_json``, or a list of them; returns
    the new conversations' ids in the file's order.

    One transaction around the whole file, on the calling thread's connection (the stats
    store must share the conversation store's ``Database``): a file with one broken
    conversation, or a write that fails (a full disk), leaves nothing in the database, and the
    ``ExportError`` says which conversation and why. Every conversation is checked and put in
    order before the first write, and the cost is linear in messages (one INSERT per message and
    stats row; a message listed before its parent waits for it, no pass over the rest).
    """
    if isinstance(data, list):
        if not data:
            raise ExportError("This file holds no conversation.")
        return _import(data, conversations, stats, agents, several=True)
    return _import([data], conversations, stats, agents, several=False)


@dataclass(frozen=True, slots=True)
class _Planned:
    """One conversation, checked: its messages with every parent before its children."""

    info: dict[str, Any]
    rows: list[dict[str, Any]]
    active_children: list[tuple[Any, Any]]  # (message key, its active child's key)
    active_path: list[Any]


def _import(
    exports: list[Any],
    conversations: ConversationStore,
    stats: StatsStore,
    agents: _Agents | None,
    *,
    several: bool,
) -> list[int]:
    def which(n: int) -> str:
        return f"Conversation {n} of {len(exports)} in the file" if several else "The conversation"

    plans = []
    for n, data in enumerate(exports, 1):
        try:
            plans.append(_plan(data))
        except ExportError as exc:
            if not several:
                raise
            raise ExportError(f"{which(n)}: {exc.user_message} Nothing was imported.") from exc
    known = {a.name.casefold(): a.id for a in agents.list()} if agents else {}
    ids: list[int] = []
    try:
        with conversations.transaction():
            for plan in plans:
                ids.append(_store(plan, conversations, stats, known))
    except sqlite3.Error as exc:  # a full disk, a locked or damaged file: all rolled back
        raise ExportError(
            f"{which(len(ids) + 1)} could not be stored ({exc}). Nothing was imported."
        ) from exc
    return ids


def _key(value: Any, what: str) -> Any:
    if value is None or (isinstance(value, (int, str)) and not isinstance(value, bool)):
        return value
    raise ExportError(f"The export has a message whose {what} is {value!r}, not an id.")


def _plan(data: Any) -> _Planned:
    """Check one export and order its messages (parents first, the file's order otherwise),
    in one pass: a message whose parent comes later waits for it."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ExportError("This file is not a SIMI Multi conversation export.")
    try:
        version = int(data.get("version", 0))
    except (TypeError, ValueError):
        raise ExportError("The export's version is not a number.") from None
    if version > FORMAT_VERSION:
        raise ExportError(
            "This conversation was exported by a newer SIMI Multi; update to import it."
        )
    info = data.get("conversation") or {}
    rows = data.get("messages")
    if not isinstance(info, dict) or not isinstance(rows, list):
        raise ExportError("The export has no message list.")
    ordered: list[dict[str, Any]] = []
    placed: set[Any] = set()
    waiting: dict[Any, list[dict[str, Any]]] = {}
    active_children = []
    for number, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise ExportError(f"Message {number} of the export is not a message.")
        key, parent = _key(row.get("id"), "id"), _key(row.get("parent_id"), "parent")
        status = str(row.get("status") or "complete")
        if status not in MESSAGE_STATUSES:
            raise ExportError(f"Message {number} of the export has an unknown status {status!r}.")
        child = _key(row.get("active_child"), "active child")
        if key is not None and child is not None:
            active_children.append((key, child))
        if parent is not None and parent not in placed:
            waiting.setdefault(parent, []).append(row)
            continue
        stack = [row]
        while stack:  # this message, then those that waited for it (file order)
            ready = stack.pop()
            ordered.append(ready)
            ready_key = ready.get("id")
            if ready_key is not None:
                if ready_key in placed:
                    raise ExportError(f"The export has two messages with the id {ready_key!r}.")
                placed.add(ready_key)
                stack.extend(reversed(waiting.pop(ready_key, [])))
    if waiting:
        raise ExportError("The export's messages refer to parents that are not in it.")
    path = data.get("active_path") or []
    if not isinstance(path, list):
        raise ExportError("The export's active path is not a list.")
    return _Planned(info, ordered, active_children, path)


def _store(
    plan: _Planned,
    conversations: ConversationStore,
    stats: StatsStore,
    known: dict[str, int | None],
) -> int:
    """Write one checked conversation (inside the caller's transaction): one INSERT per
    message and per stats row, then the branches on show in one go."""
    info = plan.info
    conv = conversations.create(None, str(info.get("title") or "Imported conversation"))
    if info.get("pinned"):
        conversations.set_pinned(conv.id, True)
    new_ids: dict[Any, int] = {}
    parent_of: dict[int, int | None] = {}
    # as if each message had been added in turn: the last one at each place is on show ...
    active: dict[int | None, int] = {}
    for row in plan.rows:
        parent = row.get("parent_id")
        status = str(row.get("status") or "complete")
        if status == "streaming":  # it was cut off when exported
            status = "interrupted"
        agent_name = row.get("agent_name")
        agent_id = known.get(str(agent_name).casefold()) if agent_name else None
        new_parent = new_ids[parent] if parent is not None else None
        msg_id = conversations.insert_message(
            conv.id,
            str(row.get("role") or "user"),
            str(row.get("content") or ""),
            status=status,
            error_text=row.get("error_text") if status == "error" else None,
            error_kind=row.get("error_kind") if status == "error" else None,
            agent_id=agent_id,
            agent_name=agent_name,
            model=row.get("model"),
            parent_id=new_parent,
            reasoning=str(row.get("reasoning") or ""),
        )
        parent_of[msg_id] = new_parent
        active[new_parent] = msg_id
        if row.get("id") is not None:
            new_ids[row["id"]] = msg_id
        record = row.get("stats")
        if isinstance(record, dict):
            clean = {k: v for k, v in record.items() if k in STATS_COLUMNS}
            clean.setdefault("agent_name", agent_name or "unknown")
            clean.setdefault("provider_kind", "unknown")
            clean.setdefault("started_at", row.get("created_at") or "")
            clean.update(message_id=msg_id, conversation_id=conv.id, agent_id=agent_id)
            stats.record(clean)
    # ... then the branch each message had on show, then the active path itself
    for key, child in plan.active_children:
        if child in new_ids:
            active[new_ids[key]] = new_ids[child]
    path = [new_ids[i] for i in plan.active_path if _hashable(i) and i in new_ids]
    if path:
        shown: int | None = path[-1]
        while shown is not None:
            active[parent_of[shown]] = shown
            shown = parent_of[shown]
    elif _hashable(info.get("active_root")) and info.get("active_root") in new_ids:
        active[None] = new_ids[info["active_root"]]
    conversations.point_all(conv.id, active)
    return conv.id


def _hashable(value: Any) -> bool:
    return value is None or isinstance(value, (int, str, float))


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"
