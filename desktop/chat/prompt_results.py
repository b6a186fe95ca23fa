"""The results of a prompt-set run (``chat/prompt_runs.py``): the per-agent summary and the
rows CSV/JSON export writes, from the stored calls and their ``inference_stats`` rows. Qt-free.

Figures (TTFT, decode, prefill, output tokens) are taken over the calls that completed: a
failed or stopped call is counted (``errors``, ``cancelled``), not measured. Percentiles are
nearest-rank, as ``desktop/store/stats_query.py`` takes them: among n values sorted ascending,
p50 is the one at rank ceil(0.5·n), p95 at ceil(0.95·n) (ranks from 1). Cost: the sum over the
calls that have a price (local calls cost 0); None when no call is priced, or when any call
used tokens without a known price (never a partial sum shown as the whole).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from desktop.errors import UserError


@dataclass(frozen=True, slots=True)
class AgentSummary:
    agent_name: str
    calls: int
    errors: int
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    decode_tok_s_p50: float | None
    prefill_tok_s_p50: float | None
    output_tokens_p50: float | None
    cost_usd: float | None
    cancelled: int = 0
    decode_tok_s_p95: float | None = None
    prefill_tok_s_p95: float | None = None
    local: bool = False  # every call of the agent ran on this machine


SUMMARY_KEYS = tuple(f.name for f in fields(AgentSummary))
# a call's figures, as its ``inference_stats`` row and the export name them
_FIGURES = ("ttft_ms", "decode_tok_s", "prefill_tok_s", "prompt_tokens", "output_tokens")
EXPORT_KEYS = (
    "prompt_index",
    "prompt",
    "agent",
    "repetition",
    "status",
    *_FIGURES,
    "cost_usd",
    "error",
)


_STATS_FIELDS = ("id", *_FIGURES, "cost_usd", "price_source", "provider_kind")


def _key(name: str) -> str:
    return name.casefold()


def _stats_rows(services: Any, ids: list[int]) -> dict[int, dict[str, Any]]:
    rows: dict[int, dict[str, Any]] = {}
    cols = ", ".join(_STATS_FIELDS)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        cur = services.db.execute(
            f"SELECT {cols} FROM inference_stats WHERE id IN ({marks})", chunk
        )
        for values in cur.fetchall():
            row = dict(zip(_STATS_FIELDS, values, strict=True))
            rows[int(row["id"])] = row
    return rows


def _run_and_calls(services: Any, run_id: int) -> tuple[Any, list[Any], dict[int, dict]]:
    run = services.compare.run(run_id)
    if run is None:
        raise UserError(f"There is no prompt-set run {run_id}.")
    calls = services.compare.calls(run_id)
    stats = _stats_rows(services, [c.stats_id for c in calls if c.stats_id is not None])
    return run, calls, stats


def nearest_rank_value(values: list[float], p_percent: int) -> float | None:
    """The p-th percentile by nearest rank (as stats_query): None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-p_percent * len(ordered) // 100))
    return float(ordered[rank - 1])


def summarise(services: Any, run_id: int) -> list[AgentSummary]:
    """Per agent of the run, in the run's order (then any other name its calls carry)."""
    run, calls, stats = _run_and_calls(services, run_id)
    order = list(dict.fromkeys([*run.agent_names, *(c.agent_name for c in calls)]))
    by_agent: dict[str, list[Any]] = {_key(n): [] for n in order}
    for c in calls:
        by_agent[_key(c.agent_name)].append(c)
    out: list[AgentSummary] = []
    seen: set[str] = set()
    for name in order:
        key = _key(name)
        if key in seen:
            continue
        seen.add(key)
        mine = by_agent[key]
        rows = [stats.get(c.stats_id) if c.stats_id is not None else None for c in mine]
        complete = [r for c, r in zip(mine, rows, strict=True) if c.status == "complete" and r]

        def figure(column: str, p: int, among: list[dict[str, Any]] = complete) -> float | None:
            return nearest_rank_value([r[column] for r in among if r[column] is not None], p)

        out.append(
            AgentSummary(
                agent_name=name,
                calls=len(mine),
                errors=sum(c.status == "error" for c in mine),
                ttft_p50_ms=figure("ttft_ms", 50),
                ttft_p95_ms=figure("ttft_ms", 95),
                decode_tok_s_p50=figure("decode_tok_s", 50),
                prefill_tok_s_p50=figure("prefill_tok_s", 50),
                output_tokens_p50=figure("output_tokens", 50),
                cost_usd=_total_cost([r for r in rows if r]),
                cancelled=sum(c.status == "cancelled" for c in mine),
                decode_tok_s_p95=figure("decode_tok_s", 95),
                prefill_tok_s_p95=figure("prefill_tok_s", 95),
                local=bool(rows) and all(_is_local(r) for r in rows if r),
            )
        )
    return out


def _is_local(row: dict[str, Any]) -> bool:
    return row.get("provider_kind") == "local" or row.get("price_source") == "local"


def _total_cost(rows: list[dict[str, Any]]) -> float | None:
    """The sum over priced calls; None when none is priced or one used tokens unpriced."""
    total, priced = 0.0, 0
    for r in rows:
        if r.get("price_source") is not None and r.get("cost_usd") is not None:
            total += float(r["cost_usd"])
            priced += 1
        elif r.get("prompt_tokens") is not None or r.get("output_tokens") is not None:
            return None
    return round(total, 9) if priced else None


def export_rows(services: Any, run_id: int) -> list[dict[str, Any]]:
    """One dict per stored call (keys ``EXPORT_KEYS``), in run order: prompt, repetition, the
    run's agent order."""
    run, calls, stats = _run_and_calls(services, run_id)
    rank = {_key(n): i for i, n in enumerate(run.agent_names)}
    ordered = sorted(
        calls,
        key=lambda c: (c.prompt_index, c.repetition, rank.get(_key(c.agent_name), len(rank))),
    )
    rows: list[dict[str, Any]] = []
    for c in ordered:
        s = stats.get(c.stats_id) if c.stats_id is not None else None
        s = s or {}
        prompt = run.prompts[c.prompt_index] if 0 <= c.prompt_index < len(run.prompts) else ""
        cost = s.get("cost_usd") if s.get("price_source") is not None else None
        rows.append(
            {
                "prompt_index": c.prompt_index + 1,
                "prompt": prompt,
                "agent": c.agent_name,
                "repetition": c.repetition + 1,
                "status": c.status,
                **{k: s.get(k) for k in _FIGURES},
                "cost_usd": cost,
                "error": c.error_text,
            }
        )
    return rows


def summary_dicts(summaries: list[AgentSummary]) -> list[dict[str, Any]]:
    """Each summary as a dict, keys ``SUMMARY_KEYS`` in that order."""
    return [asdict(s) for s in summaries]
