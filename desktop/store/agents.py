"""Agents and endpoints in SQLite. No secret is ever stored here (keys live in the keyring)."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, ClassVar

import sqlite_utils

from desktop.store.db import read_back, utc_now

KV_TYPES = ("f16", "q8_0", "q4_0")


@dataclass(frozen=True, slots=True)
class Agent:
    """A complete, bound profile: provider + endpoint + model + prompt + sampling (+ load)."""

    name: str
    kind: str  # a provider kind's name (desktop.chat.kinds)
    model: str = ""
    base_url: str | None = None
    system_prompt: str = ""
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    # remote endpoint options
    preset: str | None = None  # the desktop.llm.presets id it was made from (display only)
    stall_timeout_s: float | None = None  # max silence between chunks; None = default (60 s)
    ca_bundle: str | None = None  # PEM file of a private CA; TLS verification stays on
    # local (llama.cpp) load parameters
    model_path: str | None = None
    n_ctx: int | None = None
    n_gpu_layers: int | None = None
    n_threads: int | None = None
    flash_attn: bool = False
    kv_type: str | None = None
    main_gpu: int | None = None
    n_batch: int | None = None
    # the vision projector (a GGUF "mmproj" file) that lets a local model see images
    mmproj_path: str | None = None
    # price override, USD per million tokens; wins over the price dataset (remote agents)
    price_input_per_m: float | None = None
    price_output_per_m: float | None = None
    # bookkeeping
    id: int | None = None
    endpoint_id: int | None = None
    key_ref: str | None = None  # the endpoint's keyring entry name (from the endpoints table)
    sort_order: int = 0
    created_at: str | None = None
    updated_at: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def is_local(self) -> bool:
        return self.kind == "local"

    def with_changes(self, **changes: Any) -> Agent:
        return replace(self, **changes)

    def to_public_dict(self) -> dict[str, Any]:
        """A JSON-ready view (CLI, exports). Contains no secret."""
        data = asdict(self)
        data.pop("extra", None)
        data["stop"] = list(self.stop)
        return data


_COLUMNS = [
    f.name
    for f in fields(Agent)
    if f.name not in ("id", "base_url", "key_ref", "extra", "created_at", "updated_at")
]


class AgentStore:
    # Writes through any AgentStore of this process: with ``PRAGMA data_version`` (other
    # connections' commits) it tells a reader whether the agents may have changed since it
    # looked (``serve/app.py`` keeps the model list between requests).
    writes: ClassVar[int] = 0

    def __init__(self, db: sqlite_utils.Database) -> None:
        self._db = db

    # endpoints -----------------------------------------------------------------------------
    def endpoint_for(self, kind: str, base_url: str) -> int:
        row = self._db.execute(
            "SELECT id FROM endpoints WHERE kind = ? AND base_url = ?", [kind, base_url]
        ).fetchone()
        if row:
            return int(row[0])
        AgentStore.writes += 1
        cur = self._db.execute(
            "INSERT INTO endpoints (kind, base_url, key_ref, created_at) VALUES (?, ?, ?, ?)",
            [kind, base_url, uuid.uuid4().hex, utc_now()],
        )
        return int(cur.lastrowid or 0)

    def endpoint_in_use(self, endpoint_id: int) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM agents WHERE endpoint_id = ? LIMIT 1", [endpoint_id]
        ).fetchone()
        return row is not None

    def delete_endpoint(self, endpoint_id: int) -> None:
        AgentStore.writes += 1
        self._db.execute("DELETE FROM endpoints WHERE id = ?", [endpoint_id])

    # agents --------------------------------------------------------------------------------
    def _from_row(self, row: dict[str, Any]) -> Agent:
        data = dict(row)
        data["stop"] = tuple(json.loads(data.get("stop") or "[]"))
        data["flash_attn"] = bool(data.get("flash_attn"))
        base_url = data.pop("endpoint_base_url", None)
        key_ref = data.pop("endpoint_key_ref", None)
        return Agent(base_url=base_url, key_ref=key_ref, **data)

    def _select(self, where: str = "", params: list[Any] | None = None) -> list[Agent]:
        sql = (
            "SELECT agents.*, endpoints.base_url AS endpoint_base_url, "
            "endpoints.key_ref AS endpoint_key_ref FROM agents "
            "LEFT JOIN endpoints ON endpoints.id = agents.endpoint_id "
            f"{where} ORDER BY agents.sort_order, agents.name COLLATE NOCASE"
        )
        cur = self._db.execute(sql, params or [])
        names = [d[0] for d in cur.description]
        return [self._from_row(dict(zip(names, r, strict=True))) for r in cur.fetchall()]

    def list(self) -> list[Agent]:
        return self._select()

    def get(self, agent_id: int) -> Agent | None:
        found = self._select("WHERE agents.id = ?", [agent_id])
        return found[0] if found else None

    def by_name(self, name: str) -> Agent | None:
        found = self._select("WHERE agents.name = ? COLLATE NOCASE", [name.strip()])
        return found[0] if found else None

    def _row(self, agent: Agent) -> dict[str, Any]:
        row = {name: getattr(agent, name) for name in _COLUMNS}
        row["stop"] = json.dumps(list(agent.stop))
        row["flash_attn"] = 1 if agent.flash_attn else 0
        return row

    def insert(self, agent: Agent) -> Agent:
        now = utc_now()
        endpoint_id = self.endpoint_for(agent.kind, agent.base_url) if agent.base_url else None
        row = self._row(agent.with_changes(endpoint_id=endpoint_id))
        row.update(created_at=now, updated_at=now)
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        AgentStore.writes += 1
        cur = self._db.execute(f"INSERT INTO agents ({cols}) VALUES ({marks})", list(row.values()))
        return read_back(self.get(int(cur.lastrowid or 0)))

    def update(self, agent: Agent) -> Agent:
        assert agent.id is not None
        endpoint_id = self.endpoint_for(agent.kind, agent.base_url) if agent.base_url else None
        row = self._row(agent.with_changes(endpoint_id=endpoint_id))
        row["updated_at"] = utc_now()
        sets = ", ".join(f"{k} = ?" for k in row)
        AgentStore.writes += 1
        self._db.execute(f"UPDATE agents SET {sets} WHERE id = ?", [*row.values(), agent.id])
        return read_back(self.get(agent.id))

    def delete(self, agent_id: int) -> None:
        AgentStore.writes += 1
        self._db.execute("DELETE FROM agents WHERE id = ?", [agent_id])
