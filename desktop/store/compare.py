"""Compare mode in SQLite (m007): sessions of side-by-side columns, pairwise votes, saved agent
sets, and prompt-set runs. Qt-free. Each column of a session is an ordinary conversation (its
messages and stats rows are the usual ones), so "Continue with this one" is that conversation.

Agents are kept by id and by name: deleting an agent sets its ids to NULL (foreign keys, and
m007's triggers for the JSON lists of sets and runs) and keeps the names, so old sessions,
votes and runs still say who answered. A saved set forgets a deleted agent.

A prompt-set call's stats row is an ordinary ``inference_stats`` row tagged with
``prompt_run_id`` (no message, no conversation); ``prompt_run_calls.stats_id`` points at it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from desktop.store.db import read_back, savepoint, utc_now
from desktop.store.owners import recover, stamped

OUTCOMES = ("left", "right", "tie", "both_bad")
RUN_STATUSES = ("running", "paused", "cancelled", "complete", "interrupted")
CALL_STATUSES = ("complete", "error", "cancelled")


def column_label(position: int) -> str:
    """ "A", "B", … "Z", then "AA", "AB", … (compare shows at most six columns)."""
    label = ""
    n = position
    while True:
        label = chr(ord("A") + n % 26) + label
        n = n // 26 - 1
        if n < 0:
            return label


@dataclass(frozen=True, slots=True)
class Column:
    position: int  # left to right as shown
    label: str  # "A", "B", ...
    agent_id: int | None
    agent_name: str
    conversation_id: int | None


@dataclass(frozen=True, slots=True)
class CompareSession:
    id: int
    title: str
    blind: bool
    revealed: bool
    fair_seed: int | None
    fair_temperature: float | None
    columns: tuple[Column, ...]
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class Vote:
    id: int
    session_id: int | None
    prompt: str
    left_agent_id: int | None
    left_agent_name: str
    left_message_id: int | None
    right_agent_id: int | None
    right_agent_name: str
    right_message_id: int | None
    outcome: str  # one of OUTCOMES
    blind: bool
    created_at: str


@dataclass(frozen=True, slots=True)
class AgentSet:
    id: int
    name: str
    agent_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PromptRun:
    id: int
    title: str
    prompts: tuple[str, ...]
    agent_ids: tuple[int | None, ...]  # None: that agent was deleted since (its name stays)
    agent_names: tuple[str, ...]
    repeat: int
    status: str  # one of RUN_STATUSES
    created_at: str
    updated_at: str
    # per prompt, the files sent with it (absolute paths; a prompt set's "attachments")
    attachments: tuple[tuple[str, ...], ...] = ()

    def attachments_of(self, prompt_index: int) -> tuple[str, ...]:
        return self.attachments[prompt_index] if prompt_index < len(self.attachments) else ()

    @property
    def total_calls(self) -> int:
        return len(self.prompts) * len(self.agent_names) * self.repeat


@dataclass(frozen=True, slots=True)
class RunCall:
    id: int
    run_id: int
    prompt_index: int
    agent_id: int | None
    agent_name: str
    repetition: int
    status: str  # complete / error / cancelled
    error_text: str | None
    reply: str
    stats_id: int | None


_SESSION_COLS = "id, title, blind, revealed, fair_seed, fair_temperature, created_at, updated_at"
_COLUMN_COLS = "session_id, position, label, agent_id, agent_name, conversation_id"
_VOTE_COLS = (
    "id, session_id, prompt, left_agent_id, left_agent_name, left_message_id, right_agent_id, "
    "right_agent_name, right_message_id, outcome, blind, created_at"
)
_RUN_COLS = "id, title, prompts, agent_ids, agent_names, repeat, status, created_at, updated_at"
_CALL_COLS = (
    "id, run_id, prompt_index, agent_id, agent_name, repetition, status, error_text, reply, "
    "stats_id"
)


def _same_agent(left: tuple[int | None, str, Any], right: tuple[int | None, str, Any]) -> bool:
    """By id, or by name (agent names are unique without regard to case)."""
    if left[0] is not None and left[0] == right[0]:
        return True
    return left[1].strip().casefold() == right[1].strip().casefold()


class CompareStore:
    """``services.compare``: every method is one short transaction (thread-safe like the other
    stores: callers use it from a worker thread or the GUI thread)."""

    def __init__(self, db: sqlite_utils.Database, *, owner_id: int | None = None) -> None:
        self._db = db
        self.owner_id = owner_id  # stamped on runs this process runs (store/owners.py)

    def _tx(self) -> AbstractContextManager[None]:
        return savepoint(self._db)

    # sessions ---------------------------------------------------------------------------------
    def create_session(
        self,
        agents: list[tuple[int | None, str]],  # (agent id, agent name) in column order
        conversation_ids: list[int | None],  # parallel to agents (None: created on first send)
        blind: bool = False,
        title: str = "",
        fair_seed: int | None = None,
        fair_temperature: float | None = None,
    ) -> CompareSession:
        if len(agents) != len(conversation_ids):
            raise ValueError("one conversation id (or None) per agent")
        now = utc_now()
        with self._tx():
            cur = self._db.execute(
                "INSERT INTO compare_sessions (title, blind, revealed, fair_seed, "
                "fair_temperature, created_at, updated_at) VALUES (?, ?, 0, ?, ?, ?, ?)",
                [title, int(blind), fair_seed, fair_temperature, now, now],
            )
            session_id = int(cur.lastrowid or 0)
            for position, ((agent_id, name), conv_id) in enumerate(
                zip(agents, conversation_ids, strict=True)
            ):
                self._db.execute(
                    f"INSERT INTO compare_columns ({_COLUMN_COLS}) VALUES (?, ?, ?, ?, ?, ?)",
                    [session_id, position, column_label(position), agent_id, name, conv_id],
                )
        return read_back(self.session(session_id))

    def session(self, session_id: int) -> CompareSession | None:
        found = self._sessions("WHERE id = ?", [session_id])
        return found[0] if found else None

    def sessions(self, limit: int = 200) -> list[CompareSession]:
        """Newest (updated) first."""
        return self._sessions("ORDER BY updated_at DESC, id DESC LIMIT ?", [limit])

    def _sessions(self, tail: str, params: list[Any]) -> list[CompareSession]:
        rows = self._db.execute(f"SELECT {_SESSION_COLS} FROM compare_sessions {tail}", params)
        heads = rows.fetchall()
        if not heads:
            return []
        ids = [r[0] for r in heads]
        marks = ", ".join("?" for _ in ids)
        columns: dict[int, list[Column]] = {i: [] for i in ids}
        for r in self._db.execute(
            f"SELECT {_COLUMN_COLS} FROM compare_columns WHERE session_id IN ({marks}) "
            "ORDER BY session_id, position",
            ids,
        ):
            columns[r[0]].append(Column(r[1], r[2], r[3], r[4], r[5]))
        return [
            CompareSession(
                id=r[0],
                title=r[1],
                blind=bool(r[2]),
                revealed=bool(r[3]),
                fair_seed=r[4],
                fair_temperature=r[5],
                columns=tuple(columns[r[0]]),
                created_at=r[6],
                updated_at=r[7],
            )
            for r in heads
        ]

    def set_column_conversation(self, session_id: int, position: int, conversation_id: int) -> None:
        with self._tx():
            cur = self._db.execute(
                "UPDATE compare_columns SET conversation_id = ? "
                "WHERE session_id = ? AND position = ?",
                [conversation_id, session_id, position],
            )
            if cur.rowcount != 1:
                raise ValueError(f"session {session_id} has no column {position}")
            self.touch(session_id)

    def rename_session(self, session_id: int, title: str) -> None:
        self._db.execute(
            "UPDATE compare_sessions SET title = ?, updated_at = ? WHERE id = ?",
            [title.strip(), utc_now(), session_id],
        )

    def reveal(self, session_id: int) -> None:
        """A blind session's agent names are shown from now on."""
        self._db.execute(
            "UPDATE compare_sessions SET revealed = 1, updated_at = ? WHERE id = ?",
            [utc_now(), session_id],
        )

    def touch(self, session_id: int) -> None:
        self._db.execute(
            "UPDATE compare_sessions SET updated_at = ? WHERE id = ?", [utc_now(), session_id]
        )

    def delete_session(self, session_id: int) -> None:
        """The session and its columns; its conversations and votes stay."""
        with self._tx():
            # explicit, so it holds even on a connection without foreign keys
            self._db.execute(
                "UPDATE compare_votes SET session_id = NULL WHERE session_id = ?", [session_id]
            )
            self._db.execute("DELETE FROM compare_columns WHERE session_id = ?", [session_id])
            self._db.execute("DELETE FROM compare_sessions WHERE id = ?", [session_id])

    # votes ------------------------------------------------------------------------------------
    def add_vote(
        self,
        session_id: int | None,
        prompt: str,
        left: tuple[int | None, str, int | None],  # (agent id, agent name, reply message id)
        right: tuple[int | None, str, int | None],
        outcome: str,
        blind: bool,
    ) -> Vote:
        """ValueError for an outcome not in OUTCOMES or an agent against itself."""
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown vote outcome {outcome!r} (one of {', '.join(OUTCOMES)})")
        if _same_agent(left, right):
            raise ValueError(f"a vote compares two agents, not {left[1]!r} with itself")
        now = utc_now()
        with self._tx():
            cur = self._db.execute(
                f"INSERT INTO compare_votes ({_VOTE_COLS}) "
                "VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [session_id, prompt, *left, *right, outcome, int(blind), now],
            )
            vote_id = int(cur.lastrowid or 0)
            if session_id is not None:
                self.touch(session_id)
        row = self._db.execute(
            f"SELECT {_VOTE_COLS} FROM compare_votes WHERE id = ?", [vote_id]
        ).fetchone()
        return self._vote(row)

    def votes(self, session_id: int | None = None) -> list[Vote]:
        """Oldest first; all votes when ``session_id`` is None."""
        where, params = ("", []) if session_id is None else ("WHERE session_id = ?", [session_id])
        rows = self._db.execute(
            f"SELECT {_VOTE_COLS} FROM compare_votes {where} ORDER BY id", params
        )
        return [self._vote(r) for r in rows]

    @staticmethod
    def _vote(r: Sequence[Any]) -> Vote:
        return Vote(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], bool(r[10]), r[11])

    # agent sets -------------------------------------------------------------------------------
    def save_set(self, name: str, agent_ids: list[int]) -> AgentSet:
        """Create or replace the set of that name (case-insensitive)."""
        clean = name.strip()
        if not clean:
            raise ValueError("an agent set needs a name")
        ids = list(dict.fromkeys(int(i) for i in agent_ids))  # order kept, repeats dropped
        if not ids:
            raise ValueError("an agent set needs at least one agent")
        with self._tx():
            self._db.execute(
                "INSERT INTO agent_sets (name, agent_ids, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET name = excluded.name, "
                "agent_ids = excluded.agent_ids",
                [clean, json.dumps(ids), utc_now()],
            )
            row = self._db.execute(
                "SELECT id, name, agent_ids FROM agent_sets WHERE name = ?", [clean]
            ).fetchone()
        return AgentSet(row[0], row[1], tuple(json.loads(row[2])))

    def sets(self) -> list[AgentSet]:
        rows = self._db.execute(
            "SELECT id, name, agent_ids FROM agent_sets ORDER BY name COLLATE NOCASE, id"
        )
        return [AgentSet(r[0], r[1], tuple(json.loads(r[2]))) for r in rows]

    def delete_set(self, set_id: int) -> None:
        self._db.execute("DELETE FROM agent_sets WHERE id = ?", [set_id])

    # prompt-set runs --------------------------------------------------------------------------
    def create_run(
        self,
        prompts: list[str],
        agents: list[tuple[int | None, str]],
        repeat: int = 1,
        title: str = "",
        attachments: Sequence[Sequence[str]] | None = None,
    ) -> PromptRun:
        """``attachments``: per prompt, the paths of the files that go with it (stored in the
        prompts' JSON: a prompt with files is ``{"prompt": ..., "attachments": [...]}``)."""
        if not prompts:
            raise ValueError("a prompt-set run needs at least one prompt")
        if not agents:
            raise ValueError("a prompt-set run needs at least one agent")
        if repeat < 1:
            raise ValueError("repeat is at least 1")
        names = [name for _, name in agents]
        if len({n.casefold() for n in names}) != len(names):
            raise ValueError("each agent once per run")
        now = utc_now()
        owner = [] if self.owner_id is None else [self.owner_id]
        cur = self._db.execute(
            "INSERT INTO prompt_runs (title, prompts, agent_ids, agent_names, repeat, status, "
            f"created_at, updated_at{', owner_id' if owner else ''}) "
            f"VALUES (?, ?, ?, ?, ?, 'running', ?, ?{', ?' if owner else ''})",
            [
                title,
                json.dumps(_prompt_entries(prompts, attachments)),
                json.dumps([agent_id for agent_id, _ in agents]),
                json.dumps(names),
                repeat,
                now,
                now,
                *owner,
            ],
        )
        return read_back(self.run(int(cur.lastrowid or 0)))

    def run(self, run_id: int) -> PromptRun | None:
        row = self._db.execute(
            f"SELECT {_RUN_COLS} FROM prompt_runs WHERE id = ?", [run_id]
        ).fetchone()
        return self._run(row) if row else None

    def runs(self, limit: int = 200) -> list[PromptRun]:
        """Newest first."""
        rows = self._db.execute(
            f"SELECT {_RUN_COLS} FROM prompt_runs ORDER BY created_at DESC, id DESC LIMIT ?",
            [limit],
        )
        return [self._run(r) for r in rows]

    @staticmethod
    def _run(r: Sequence[Any]) -> PromptRun:
        entries = json.loads(r[2])
        files = tuple(
            tuple(str(p) for p in e.get("attachments") or ()) if isinstance(e, dict) else ()
            for e in entries
        )
        return PromptRun(
            id=r[0],
            title=r[1],
            prompts=tuple(str(e.get("prompt", "")) if isinstance(e, dict) else e for e in entries),
            attachments=files if any(files) else (),
            agent_ids=tuple(json.loads(r[3])),
            agent_names=tuple(json.loads(r[4])),
            repeat=r[5],
            status=r[6],
            created_at=r[7],
            updated_at=r[8],
        )

    def set_run_status(self, run_id: int, status: str) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        stamp, params = stamped("owner_id", self.owner_id)
        self._db.execute(
            f"UPDATE prompt_runs SET status = ?, updated_at = ?{stamp} WHERE id = ?",
            [status, utc_now(), *params, run_id],
        )

    def rename_run(self, run_id: int, title: str) -> None:
        self._db.execute(
            "UPDATE prompt_runs SET title = ?, updated_at = ? WHERE id = ?",
            [title.strip(), utc_now(), run_id],
        )

    def delete_run(self, run_id: int) -> None:
        """The run and its calls; the calls' stats rows stay (they are calls that were made)."""
        with self._tx():
            self._db.execute("DELETE FROM prompt_run_calls WHERE run_id = ?", [run_id])
            self._db.execute("DELETE FROM prompt_runs WHERE id = ?", [run_id])

    def add_call(
        self,
        run_id: int,
        prompt_index: int,
        agent: tuple[int | None, str],
        repetition: int,
        status: str,
        reply: str = "",
        error_text: str | None = None,
        stats_id: int | None = None,
    ) -> RunCall:
        """Replaces an earlier row for the same (run, prompt, agent, repetition): a resumed run
        that redoes a cancelled call keeps one row."""
        if status not in CALL_STATUSES:
            raise ValueError(f"unknown call status {status!r}")
        agent_id, agent_name = agent
        now = utc_now()
        with self._tx():
            self._db.execute(
                "INSERT INTO prompt_run_calls (run_id, prompt_index, agent_id, agent_name, "
                "repetition, status, error_text, reply, stats_id, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id, prompt_index, agent_name, repetition) DO UPDATE SET "
                "agent_id = excluded.agent_id, status = excluded.status, "
                "error_text = excluded.error_text, reply = excluded.reply, "
                "stats_id = excluded.stats_id, created_at = excluded.created_at",
                [
                    run_id,
                    prompt_index,
                    agent_id,
                    agent_name,
                    repetition,
                    status,
                    error_text,
                    reply,
                    stats_id,
                    now,
                ],
            )
            self._db.execute("UPDATE prompt_runs SET updated_at = ? WHERE id = ?", [now, run_id])
            row = self._db.execute(
                f"SELECT {_CALL_COLS} FROM prompt_run_calls WHERE run_id = ? "
                "AND prompt_index = ? AND agent_name = ? AND repetition = ?",
                [run_id, prompt_index, agent_name, repetition],
            ).fetchone()
        return RunCall(*row)

    def calls(self, run_id: int) -> list[RunCall]:
        """In the order a run makes them: by prompt, then agent (the run's order), then
        repetition."""
        run = self.run(run_id)
        order = {n: i for i, n in enumerate(run.agent_names)} if run else {}
        rows = self._db.execute(
            f"SELECT {_CALL_COLS} FROM prompt_run_calls WHERE run_id = ?", [run_id]
        )
        found = [RunCall(*r) for r in rows]
        found.sort(
            key=lambda c: (c.prompt_index, order.get(c.agent_name, len(order)), c.repetition, c.id)
        )
        return found

    def mark_interrupted_runs(self, dead_owners: Sequence[int] = ()) -> int:
        """Runs a crash left 'running' become 'interrupted' (called at start-up): those whose
        process is gone (``store/owners.py``), never a live one's."""
        return recover(
            self._db,
            "UPDATE prompt_runs SET status = 'interrupted', updated_at = ? "
            "WHERE status = 'running'",
            dead_owners,
            [utc_now()],
        )


def _prompt_entries(
    prompts: Sequence[str], attachments: Sequence[Sequence[str]] | None
) -> list[Any]:
    """The prompts as stored: a string each, or an object where files go with the prompt."""
    files = list(attachments or ())
    return [
        {"prompt": p, "attachments": [str(f) for f in files[i]]}
        if i < len(files) and files[i]
        else p
        for i, p in enumerate(prompts)
    ]
