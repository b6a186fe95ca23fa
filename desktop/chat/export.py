"""A conversation to Markdown (to read) or JSON (to keep, or to import elsewhere), and back.

The JSON holds every branch and version with its inference statistics, and never a secret:
agents are named, not copied (no endpoint, no key reference); stats rows keep the endpoint
host (as the footer shows it) but no ids from this database.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from desktop.errors import UserError
from desktop.store.agents import Agent
from desktop.store.conversations import ConversationStore, Message
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
    """Import a conversation written by ``to_json``; returns the new conversation's id."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ExportError("This file is not a SIMI Multi conversation export.")
    if int(data.get("version", 0)) > FORMAT_VERSION:
        raise ExportError(
            "This conversation was exported by a newer SIMI Multi; update to import it."
        )
    info = data.get("conversation") or {}
    rows = data.get("messages")
    if not isinstance(rows, list):
        raise ExportError("The export has no message list.")
    known = {a.name.casefold(): a.id for a in agents.list()} if agents else {}
    conv = conversations.create(None, str(info.get("title") or "Imported conversation"))
    if info.get("pinned"):
        conversations.set_pinned(conv.id, True)
    new_ids: dict[Any, int] = {}
    pending = [r for r in rows if isinstance(r, dict)]
    while pending:
        progressed = False
        for row in list(pending):
            parent = row.get("parent_id")
            if parent is not None and parent not in new_ids:
                continue
            status = str(row.get("status") or "complete")
            if status == "streaming":  # it was cut off when exported
                status = "interrupted"
            agent_name = row.get("agent_name")
            msg = conversations.add_message(
                conv.id,
                str(row.get("role") or "user"),
                str(row.get("content") or ""),
                status=status if status != "error" else "complete",
                agent_id=known.get(str(agent_name).casefold()) if agent_name else None,
                agent_name=agent_name,
                model=row.get("model"),
                parent_id=new_ids[parent] if parent is not None else None,
                reasoning=str(row.get("reasoning") or ""),
            )
            if status == "error":
                conversations.finish_message(
                    msg.id,
                    content=msg.content,
                    status="error",
                    error_text=row.get("error_text"),
                    error_kind=row.get("error_kind"),
                )
            new_ids[row.get("id")] = msg.id
            record = row.get("stats")
            if isinstance(record, dict):
                clean = {k: v for k, v in record.items() if k in STATS_COLUMNS}
                clean.setdefault("agent_name", agent_name or "unknown")
                clean.setdefault("provider_kind", "unknown")
                clean.setdefault("started_at", row.get("created_at") or "")
                clean.update(message_id=msg.id, conversation_id=conv.id, agent_id=msg.agent_id)
                stats.record(clean)
            pending.remove(row)
            progressed = True
        if not progressed:
            raise ExportError("The export's messages refer to parents that are not in it.")
    # the branch each message had on show, then the active path itself
    for row in rows:
        child = row.get("active_child") if isinstance(row, dict) else None
        if child in new_ids and row.get("id") in new_ids:
            conversations.point_at(conv.id, new_ids[row["id"]], new_ids[child])
    path = [new_ids[i] for i in data.get("active_path") or [] if i in new_ids]
    if path:
        conversations.activate(path[-1])
    elif info.get("active_root") in new_ids:
        conversations.point_at(conv.id, None, new_ids[info["active_root"]])
    return conv.id


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"
