"""tool_steps: every tool call an agentic reply made, in order (m010).

A reply that used tools is several model calls (each its own ``inference_stats`` row, with its
``call_index``) and the tool calls between them. A ``ToolStep`` is one of those tool calls: what
the model asked (tool, server, raw JSON arguments), what the person decided, what came back.
``text_offset`` is the reply's length when the model asked: the reply's text before that offset
was written before the call, the rest after (the view and the next request split it there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import sqlite_utils

from desktop.store.db import utc_now
from desktop.store.owners import recover, stamped

StepStatus = Literal[
    "asked",  # the model asked for it; nothing decided yet
    "waiting",  # for the person's approval
    "running",
    "done",  # the tool answered (``is_error``: with an error of its own)
    "error",  # the server could not run it (missing, crashed, refused)
    "timeout",
    "denied",  # the person said no: the model is told so
    "invalid",  # the model's call could not be run (unknown tool, malformed arguments)
    "refused",  # over the turn's tool-round limit, or no one could approve it
    "cancelled",  # Stop while it waited or ran
]
# How a call came to run (or not): "once", "always" (granted now), "granted" (an earlier
# "always"), "auto" (``simi ask --allow-tools``), "denied", "" (never asked: invalid, refused).
Approval = Literal["once", "always", "granted", "auto", "denied", ""]
FINAL_STATUSES = frozenset(
    {"done", "error", "timeout", "denied", "invalid", "refused", "cancelled"}
)

_COLUMNS = (
    "message_id",
    "call_index",
    "position",
    "call_id",
    "server",
    "tool",
    "arguments",
    "text_offset",
    "status",
    "approval",
    "result",
    "is_error",
    "size",
    "duration_ms",
    "truncated",
    "signature",
    "model_name",
)


@dataclass(frozen=True, slots=True)
class ToolStep:
    message_id: int
    call_index: int  # the model call (1-based) of the turn that asked for it
    position: int  # order within the turn, from 0
    call_id: str  # pairs the call with its result on the wire
    server: str
    tool: str  # the tool's own name on its server
    arguments: str  # the model's raw JSON text
    text_offset: int = 0
    status: StepStatus = "asked"
    approval: Approval = ""
    result: str = ""  # the text sent back to the model: the tool's answer, error or denial
    is_error: bool = False  # sent back as an error (the tool's own, or ours)
    size: int = 0  # the whole result's length in characters (``result`` may be cut)
    duration_ms: float | None = None  # the tool's run time (not the wait for approval)
    truncated: bool = False
    signature: str | None = None  # ``ToolCall.signature``, sent back with the call
    model_name: str = ""  # the name the model used (``server__tool`` when names clash)
    id: int | None = None

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES

    def with_changes(self, **changes: Any) -> ToolStep:
        return replace(self, **changes)


def _row_to_step(row: dict[str, Any]) -> ToolStep:
    fields = {k: row[k] for k in _COLUMNS}
    fields["is_error"] = bool(fields["is_error"])
    fields["truncated"] = bool(fields["truncated"])
    return ToolStep(id=row["id"], **fields)


class ToolStepStore:
    def __init__(self, db: sqlite_utils.Database, *, owner_id: int | None = None) -> None:
        self._db = db
        self.owner_id = owner_id  # stamped on every step this process saves (store/owners.py)

    def save(self, step: ToolStep) -> ToolStep:
        """Insert a new step (``id`` None) or update it; returns it with its id."""
        values = asdict(step)
        values.pop("id")
        values["is_error"] = int(step.is_error)
        values["truncated"] = int(step.truncated)
        if step.id is None:
            row = {k: values[k] for k in _COLUMNS}
            if self.owner_id is not None:
                row["owner_id"] = self.owner_id
            row["created_at"] = utc_now()
            cols, marks = ", ".join(row), ", ".join("?" for _ in row)
            cur = self._db.execute(
                f"INSERT INTO tool_steps ({cols}) VALUES ({marks})", list(row.values())
            )
            return replace(step, id=int(cur.lastrowid or 0))
        stamp, params = stamped("owner_id", self.owner_id)
        sets = ", ".join(f"{k} = ?" for k in _COLUMNS)
        self._db.execute(
            f"UPDATE tool_steps SET {sets}{stamp} WHERE id = ?",
            [*(values[k] for k in _COLUMNS), *params, step.id],
        )
        return step

    def for_message(self, message_id: int) -> list[ToolStep]:
        return self.for_messages([message_id]).get(message_id, [])

    def for_messages(self, message_ids: list[int]) -> dict[int, list[ToolStep]]:
        """Each message's steps in the order they were asked (messages without any: absent)."""
        if not message_ids:
            return {}
        marks = ", ".join("?" for _ in message_ids)
        cur = self._db.execute(
            f"SELECT * FROM tool_steps WHERE message_id IN ({marks}) ORDER BY message_id, position",
            list(message_ids),
        )
        names = [d[0] for d in cur.description]
        out: dict[int, list[ToolStep]] = {}
        for r in cur.fetchall():
            step = _row_to_step(dict(zip(names, r, strict=True)))
            out.setdefault(step.message_id, []).append(step)
        return out

    def mark_interrupted(self, dead_owners: Sequence[int] = ()) -> int:
        """At start-up: steps a crash left waiting or running are cancelled, those whose
        process is gone (``store/owners.py``), never a live one's."""
        return recover(
            self._db,
            "UPDATE tool_steps SET status = 'cancelled' "
            "WHERE status IN ('asked', 'waiting', 'running')",
            dead_owners,
        )
