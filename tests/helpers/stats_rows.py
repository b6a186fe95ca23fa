"""Realistic ``inference_stats`` rows in bulk, for the dashboard's tests and ``bench/stats.py``.

``fill_stats(db, rows=100_000, agents=50, seed=7)`` inserts the rows with one ``executemany``
inside one transaction (a few seconds for 100,000; the generated values are kept for the next
call with the same arguments). The mix is what a person who uses many models sees: about a
third local agents (llama.cpp, cost 0, measured prefill and decode), the rest remote (OpenAI,
OpenAI-compatible, Anthropic, Gemini) with slower first tokens, a few percent of errors and
cancels, and some calls without a price (``price_source`` NULL, never a cost of 0).
``started_at`` is spread over ``days`` days before ``end`` (in time order, as a real history is
written); each agent has its own speed, so the percentiles differ per agent.
Same seed, same rows.

``record_reply_stats(services, reply, kind, **figures)`` stores one row: the figures of a reply
a test wrote into a conversation itself.
"""

from __future__ import annotations

import functools
import random
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from desktop.chat.call_stats import CallStats
from desktop.chat.stats_clock import StatsClock
from desktop.store.stats import STATS_COLUMNS

_REMOTE = (
    ("openai", "api.openai.com", "gpt-4o-mini"),
    ("openai-compatible", "127.0.0.1", "qwen2.5-7b-instruct"),
    ("anthropic", "api.anthropic.com", "claude-3-5-haiku-latest"),
    ("gemini", "generativelanguage.googleapis.com", "gemini-2.0-flash"),
)
_ERROR_KINDS = ("rate_limited", "unavailable", "context_too_long", "auth", "stalled")


@dataclass(frozen=True, slots=True)
class FilledStats:
    """What ``fill_stats`` wrote: the agents' names (in creation order) and the time span."""

    agents: tuple[str, ...]
    rows: int
    first_at: str
    last_at: str
    ids: tuple[int, int]  # first and last inserted row id


@dataclass(frozen=True, slots=True)
class _AgentProfile:
    name: str
    kind: str
    host: str | None
    model: str
    ttft_ms: float  # median TTFT
    decode_tok_s: float
    prefill_tok_s: float
    price_in_per_m: float
    price_out_per_m: float
    price_source: str | None  # how this agent's calls are usually priced


def _profiles(agents: int, rnd: random.Random) -> list[_AgentProfile]:
    out = []
    for i in range(agents):
        if i % 3 == 0:
            out.append(
                _AgentProfile(
                    name=f"Local {i:02d}",
                    kind="local",
                    host=None,
                    model=f"model-{i:02d}-Q4_K_M.gguf",
                    ttft_ms=rnd.uniform(80, 900),
                    decode_tok_s=rnd.uniform(8, 120),
                    prefill_tok_s=rnd.uniform(150, 3000),
                    price_in_per_m=0.0,
                    price_out_per_m=0.0,
                    price_source="local",
                )
            )
            continue
        kind, host, model = _REMOTE[i % len(_REMOTE)]
        source = rnd.choice(("reported", "genai-prices", "genai-prices", "agent", None))
        out.append(
            _AgentProfile(
                name=f"Remote {i:02d} ({kind})",
                kind=kind,
                host=host,
                model=model,
                ttft_ms=rnd.uniform(250, 2500),
                decode_tok_s=rnd.uniform(30, 250),
                prefill_tok_s=rnd.uniform(1000, 20000),
                price_in_per_m=rnd.choice((0.15, 0.5, 1.0, 3.0)),
                price_out_per_m=rnd.choice((0.6, 1.5, 4.0, 15.0)),
                price_source=source,
            )
        )
    return out


def _row(p: _AgentProfile, started_at: str, rnd: random.Random) -> dict[str, Any]:
    local = p.kind == "local"
    roll = rnd.random()
    finish = "error" if roll < 0.04 else "cancelled" if roll < 0.09 else "stop"
    if finish == "stop" and rnd.random() < 0.05:
        finish = "length"
    prompt = int(rnd.lognormvariate(6.0, 1.2)) + 8
    cached = int(prompt * rnd.uniform(0.3, 0.95)) if rnd.random() < 0.4 else 0
    row: dict[str, Any] = {
        "agent_name": p.name,
        "provider_kind": p.kind,
        "endpoint_host": p.host,
        "model_requested": p.model,
        "model_reported": p.model,
        "started_at": started_at,
        "finish_reason": finish,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "token_source": "reported",
        "backend": "cuda" if local else None,
    }
    if finish == "error":
        kind = rnd.choice(_ERROR_KINDS)
        total = rnd.uniform(50, 3000)
        row |= {"error_kind": kind, "total_ms": round(total, 1), "output_tokens": 0}
        if local:  # a local call costs nothing, failed or not
            row |= {"cost_usd": 0.0, "price_source": "local"}
        row |= {"headers_ms": None if local else round(total * 0.9, 1)}
        return row
    ttft = p.ttft_ms * rnd.lognormvariate(0.0, 0.35)
    output = max(1, int(rnd.lognormvariate(5.0, 0.9)))
    if finish == "cancelled":
        output = max(1, output // 3)
    decode_speed = p.decode_tok_s * rnd.uniform(0.8, 1.15)
    decode_ms = (output - 1) / decode_speed * 1000 if output > 1 else None
    evaluated = prompt - cached
    prefill_speed = p.prefill_tok_s * rnd.uniform(0.7, 1.2)
    prefill_ms = evaluated / prefill_speed * 1000
    reasoning = int(output * 0.3) if p.kind in ("openai", "gemini") and rnd.random() < 0.2 else 0
    cost, source = _cost(p, evaluated, cached, output, rnd)
    row |= {
        "queued_ms": round(rnd.uniform(0, 800), 1) if local and rnd.random() < 0.05 else 0.0,
        "worker_start_ms": round(rnd.uniform(300, 900), 1)
        if local and rnd.random() < 0.01
        else None,
        "load_ms": round(rnd.uniform(800, 9000), 1) if local and rnd.random() < 0.02 else None,
        "connect_ms": None
        if local
        else (0.0 if rnd.random() < 0.8 else round(rnd.uniform(30, 200), 1)),
        "reused_connection": None if local else int(rnd.random() < 0.8),
        "headers_ms": None if local else round(ttft * 0.7, 1),
        "ttft_ms": round(ttft, 1),
        "stream_ms": round(decode_ms, 1) if decode_ms else None,
        "prefill_ms": round(prefill_ms, 1) if local else None,
        "decode_ms": round(decode_ms, 1) if decode_ms else None,
        "timing_source": "llama.cpp" if local else None,
        "total_ms": round(ttft + (decode_ms or 0.0) + rnd.uniform(1, 20), 1),
        "prompt_eval_tokens": evaluated if local else None,
        "output_tokens": output,
        "reasoning_tokens": reasoning or None,
        "decode_tok_s": round(decode_speed, 2) if decode_ms else None,
        "prefill_tok_s": round(prefill_speed if local else evaluated / (ttft / 1000), 2)
        if local or evaluated > 512
        else None,
        "prefill_source": ("measured" if local else "estimated")
        if local or evaluated > 512
        else None,
        "cost_usd": cost,
        "price_source": source,
        "context_window": 8192 if local else 128000,
        "context_fill": round(min(1.0, (prompt + output) / (8192 if local else 128000)), 4),
    }
    if local:
        row |= {
            "n_ctx": 8192,
            "n_gpu_layers": -1,
            "n_threads": 8,
            "kv_type": "f16",
            "flash_attn": 1,
            "model_file_size": 4_500_000_000,
            "quantization": "Q4_K_M",
            "kv_cache_bytes": 1_073_741_824,
        }
    if cost is not None:
        row |= {
            "cost_input_usd": round(evaluated * p.price_in_per_m / 1e6, 8),
            "cost_cached_usd": round(cached * p.price_in_per_m * 0.5 / 1e6, 8),
            "cost_output_usd": round(output * p.price_out_per_m / 1e6, 8),
        }
    return row


def _cost(
    p: _AgentProfile, evaluated: int, cached: int, output: int, rnd: random.Random
) -> tuple[float | None, str | None]:
    if p.price_source == "local":
        return 0.0, "local"
    if p.price_source is None or rnd.random() < 0.05:  # a model the dataset does not know
        return None, None
    cost = (evaluated + cached * 0.5) * p.price_in_per_m / 1e6 + output * p.price_out_per_m / 1e6
    return round(cost, 8), p.price_source


_COLUMNS = [c for c in STATS_COLUMNS if c not in ("message_id", "conversation_id", "agent_id")]


@functools.lru_cache(maxsize=1)
def _generated(
    rows: int, agents: int, seed: int, days: int, end: str
) -> tuple[tuple[str, ...], tuple[tuple[Any, ...], ...]]:
    """The agents' names and every row's values (in ``_COLUMNS`` order), in time order. Kept
    for the next call with the same arguments (a test session fills many databases alike)."""
    rnd = random.Random(seed)
    profiles = _profiles(agents, rnd)
    stop = datetime.fromisoformat(end).astimezone(UTC)
    span_ms = days * 86_400_000
    offsets = sorted(rnd.randrange(span_ms) for _ in range(rows))
    start = stop - timedelta(milliseconds=span_ms)
    # Some agents are used far more than others (as people have favourites).
    weights = [1.0 / (1 + i % 10) for i in range(agents)]
    chosen = rnd.choices(profiles, weights=weights, k=rows)
    blank = dict.fromkeys(_COLUMNS)
    values = []
    for offset, profile in zip(offsets, chosen, strict=True):
        at = (start + timedelta(milliseconds=offset)).isoformat(timespec="milliseconds")
        values.append(tuple((blank | _row(profile, at, rnd)).values()))  # every column
    return tuple(p.name for p in profiles), tuple(values)


def _drop_indexes(conn: sqlite3.Connection) -> list[str]:
    """Drop inference_stats' own indexes; their CREATE statements, to build them again."""
    found = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
        "AND tbl_name = 'inference_stats' AND sql IS NOT NULL"
    ).fetchall()
    for name, _ in found:
        conn.execute(f'DROP INDEX "{name}"')
    return [sql for _, sql in found]


def fill_stats(
    db: Any,
    rows: int = 100_000,
    agents: int = 50,
    seed: int = 7,
    *,
    days: int = 90,
    end: str = "2026-12-01T00:00:00+00:00",
) -> FilledStats:
    """Insert ``rows`` stats rows across ``agents`` agents, spread over the ``days`` days
    before ``end``, in one transaction. ``db`` is a ``sqlite_utils.Database`` (e.g.
    ``services.db``) or an ``sqlite3.Connection``. The rows have no message or conversation
    (``message_id`` NULL, as a reply that was replaced): tests that open a reply from a point
    record their own row for a real message."""
    conn: sqlite3.Connection = getattr(db, "conn", db)
    names, values = _generated(rows, agents, seed, days, end)
    columns = _COLUMNS
    sql = (
        f"INSERT INTO inference_stats ({', '.join(columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)})"
    )
    at = columns.index("started_at")
    first_id = (conn.execute("SELECT COALESCE(MAX(id), 0) FROM inference_stats").fetchone()[0]) + 1
    began = not conn.in_transaction
    if began:
        conn.execute("BEGIN")
    try:
        # Many rows: the table's indexes are dropped and built again after the insert (in
        # the same transaction, so a failure leaves them as they were): building an index
        # from sorted rows is far quicker than 100,000 inserts into nine B-trees.
        indexes = [] if rows < 5000 else _drop_indexes(conn)
        conn.executemany(sql, values)
        for index_sql in indexes:
            conn.execute(index_sql)
        if began:
            conn.execute("COMMIT")
    except BaseException:
        if began and conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return FilledStats(
        agents=names,
        rows=rows,
        first_at=values[0][at] if values else end,
        last_at=values[-1][at] if values else end,
        ids=(first_id, first_id + rows - 1),
    )


def record_reply_stats(services: Any, reply: Any, provider_kind: str, **figures: Any) -> int:
    """Store ``figures`` as the stats row of the assistant message ``reply`` (a stored
    ``Message``), for its conversation and the agent it names; returns the row's id."""
    return services.stats.record(
        {
            **figures,
            "message_id": reply.id,
            "conversation_id": reply.conversation_id,
            "agent_id": reply.agent_id,
            "agent_name": reply.agent_name,
            "provider_kind": provider_kind,
        }
    )


def clock_record(clock: StatsClock, finish_reason: str, error_kind: str | None = None) -> CallStats:
    """The clock's record of a call (``StatsClock.stats``) by a test agent."""
    return clock.stats(
        finish_reason,
        error_kind,
        agent_id=None,
        agent_name="Box",
        provider_kind="local",
        endpoint_host=None,
        model_requested=None,
    )
