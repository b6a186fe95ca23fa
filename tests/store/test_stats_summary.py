"""The dashboard's questions (summary, series, export) on a real SQLite file."""

from __future__ import annotations

import csv
import io
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from desktop.store.db import open_database
from desktop.store.stats import (
    EXPORT_COLUMNS,
    SUMMARY_KEYS,
    StatsFilter,
    StatsStore,
    rows_to_csv,
    rows_to_json,
)
from tests.helpers.stats_rows import fill_stats


@pytest.fixture
def db(tmp_path: Path):
    database = open_database(tmp_path / "simi.db")
    yield database
    database.conn.close()


@pytest.fixture
def stats(db) -> StatsStore:
    return StatsStore(db)


def _call(agent: str, at: str = "2026-11-15T12:00:00.000+00:00", **fields: Any) -> dict:
    return {
        "agent_name": agent,
        "provider_kind": "openai",
        "started_at": at,
        "finish_reason": "stop",
        **fields,
    }


def _by_agent(rows: list[dict]) -> dict[str, dict]:
    return {r["agent"]: r for r in rows}


def _nearest_rank(values: list[float], p: float) -> float | None:
    """The textbook definition, in Python, to check SQLite's answer against."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[math.ceil(p * len(ordered)) - 1]


def test_percentiles_are_nearest_rank_over_the_calls_that_have_the_figure(stats) -> None:
    ttfts = [10.0 * i for i in range(1, 21)]  # 10 … 200 ms, 20 calls
    random.Random(3).shuffle(ttfts)
    for i, ttft in enumerate(ttfts):
        stats.record(
            _call(
                "Box",
                f"2026-11-{i + 1:02d}T08:00:00.000+00:00",
                ttft_ms=ttft,
                decode_tok_s=float(i + 1),  # 1 … 20 tok/s
                prefill_tok_s=[5.0, 1.0, 9.0][i] if i < 3 else None,  # only 3 have one
            )
        )
    # a failed call has no figures and does not move them
    stats.record(_call("Box", finish_reason="error", error_kind="unavailable"))
    stats.record(_call("Other", ttft_ms=5000.0, decode_tok_s=1000.0))
    box = _by_agent(stats.summary())["Box"]
    # rank ceil(0.5·20) = 10 -> 100 ms; rank ceil(0.95·20) = 19 -> 190 ms
    assert (box["ttft_p50_ms"], box["ttft_p95_ms"]) == (100.0, 190.0)
    assert (box["decode_p50_tok_s"], box["decode_p95_tok_s"]) == (10.0, 19.0)
    # three values 1, 5, 9: rank 2 -> 5, rank ceil(2.85) = 3 -> 9
    assert (box["prefill_p50_tok_s"], box["prefill_p95_tok_s"]) == (5.0, 9.0)
    assert box["calls"] == 21
    other = _by_agent(stats.summary())["Other"]
    assert other["ttft_p50_ms"] == other["ttft_p95_ms"] == 5000.0
    assert other["prefill_p50_tok_s"] is None and other["prefill_p95_tok_s"] is None


def test_percentiles_of_21_calls_round_the_rank_up(stats) -> None:
    for v in range(1, 22):
        stats.record(_call("Odd", ttft_ms=float(v)))
    (odd,) = stats.summary()
    # rank ceil(10.5) = 11, rank ceil(19.95) = 20
    assert (odd["ttft_p50_ms"], odd["ttft_p95_ms"]) == (11.0, 20.0)


def test_percentiles_in_a_time_range_match_the_definition_over_a_generated_history(db) -> None:
    fill_stats(db, rows=3000, agents=6, seed=11)
    stats = StatsStore(db)
    picked = StatsFilter(since="2026-10-01", until="2026-11-10T12:00")
    rows = stats.export_rows(picked)
    assert rows and all("2026-10-01" <= r["started_at"] < "2026-11-10T12:00" for r in rows)
    summary = _by_agent(stats.summary(picked))
    assert sum(s["calls"] for s in summary.values()) == len(rows)
    for agent, got in summary.items():
        mine = [r for r in rows if r["agent_name"] == agent]
        for key, column in (
            ("ttft", "ttft_ms"),
            ("decode", "decode_tok_s"),
            ("prefill", "prefill_tok_s"),
        ):
            values = [r[column] for r in mine if r[column] is not None]
            unit = "ms" if key == "ttft" else "tok_s"
            assert got[f"{key}_p50_{unit}"] == _nearest_rank(values, 0.50), (agent, key)
            assert got[f"{key}_p95_{unit}"] == _nearest_rank(values, 0.95), (agent, key)


def test_since_is_inclusive_and_until_exclusive(stats) -> None:
    stats.record(_call("Box", "2026-10-31T23:59:59.999+00:00"))
    first = stats.record(_call("Box", "2026-11-01T00:00:00.000+00:00"))
    last = stats.record(_call("Box", "2026-11-30T23:59:59.999+00:00"))
    stats.record(_call("Box", "2026-12-01T00:00:00.000+00:00"))
    november = StatsFilter(since="2026-11-01", until="2026-12-01")
    assert [r["id"] for r in stats.export_rows(november)] == [first, last]
    (box,) = stats.summary(november)
    assert box["calls"] == 2
    assert (box["first_at"], box["last_at"]) == (
        "2026-11-01T00:00:00.000+00:00",
        "2026-11-30T23:59:59.999+00:00",
    )
    # a time with a zone is compared in UTC: 02:00 at +02:00 is midnight UTC
    assert len(stats.export_rows(StatsFilter(since="2026-11-01T02:00+02:00"))) == 3
    assert len(stats.export_rows(StatsFilter(until="2026-11-01"))) == 1
    assert stats.summary(StatsFilter(since="2027-01-01")) == []


def test_a_bad_date_is_refused_in_words() -> None:
    with pytest.raises(ValueError, match="expected a date like 2026-11-30"):
        StatsFilter(since="last week")
    with pytest.raises(ValueError, match="expected a date like"):
        StatsFilter(until="2026-02-30")


def test_agents_filter_matches_names_in_any_case(stats) -> None:
    stats.record(_call("Box"))
    stats.record(_call("box"))
    stats.record(_call("Other"))
    stats.record(_call("Third"))
    rows = stats.summary(StatsFilter(agents=("BOX", "third")))
    assert [(r["agent"].lower(), r["calls"]) for r in rows] == [("box", 2), ("third", 1)]
    assert [r["agent"] for r in stats.summary(StatsFilter(agents=("other",)))] == ["Other"]


def test_unpriced_calls_are_never_counted_as_free(stats) -> None:
    used = {"prompt_tokens": 100, "output_tokens": 20}  # tokens used, price unknown
    for _ in range(3):
        stats.record(_call("Unknown price", cost_usd=None, price_source=None, **used))
    stats.record(_call("Mixed", cost_usd=0.5, price_source="genai-prices"))
    stats.record(_call("Mixed", cost_usd=0.25, price_source="agent"))
    stats.record(_call("Mixed", cost_usd=None, price_source=None, **used))
    # refused before any reply (429): no tokens, nothing to price, not "unpriced"
    stats.record(
        _call(
            "Mixed",
            cost_usd=None,
            price_source=None,
            prompt_tokens=None,
            output_tokens=None,
            error_kind="rate_limited",
            finish_reason="error",
        )
    )
    stats.record(_call("Llama", provider_kind="local", cost_usd=0.0, price_source="local"))
    summary = _by_agent(stats.summary())
    unknown = summary["Unknown price"]
    assert unknown["cost_usd"] is None  # not 0: nobody knows what those calls cost
    assert (unknown["priced_calls"], unknown["unpriced_calls"]) == (0, 3)
    mixed = summary["Mixed"]
    assert mixed["cost_usd"] == pytest.approx(0.75)
    assert (mixed["priced_calls"], mixed["unpriced_calls"]) == (2, 1)
    assert not mixed["local"]
    llama = summary["Llama"]
    assert (llama["cost_usd"], llama["local"], llama["unpriced_calls"]) == (0.0, True, 0)


def test_error_rate_counts_failures_among_all_calls(stats) -> None:
    for _ in range(7):
        stats.record(_call("Box", ttft_ms=100.0))
    stats.record(_call("Box", finish_reason="cancelled", ttft_ms=90.0))
    stats.record(_call("Box", finish_reason="error", error_kind="rate_limited"))
    stats.record(_call("Box", finish_reason="error"))  # no kind recorded
    (box,) = stats.summary()
    assert (box["calls"], box["complete"], box["cancelled"], box["errors"]) == (10, 7, 1, 2)
    assert box["error_rate"] == pytest.approx(0.2)
    assert box["error_kinds"] == {"rate_limited": 1, "unknown": 1}
    stats.record(_call("Fine"))
    fine = _by_agent(stats.summary())["Fine"]
    assert (fine["error_rate"], fine["error_kinds"]) == (0.0, {})


def test_cached_share_is_cached_over_prompt_tokens(stats) -> None:
    stats.record(_call("Box", prompt_tokens=100, cached_tokens=0, output_tokens=10))
    stats.record(_call("Box", prompt_tokens=300, cached_tokens=100, output_tokens=20))
    stats.record(_call("Box", finish_reason="error", error_kind="unavailable"))  # no tokens
    stats.record(_call("Silent"))
    summary = _by_agent(stats.summary())
    box = summary["Box"]
    assert (box["prompt_tokens"], box["cached_tokens"], box["output_tokens"]) == (400, 100, 30)
    assert box["cached_share"] == pytest.approx(0.25)
    assert summary["Silent"]["cached_share"] is None  # no prompt tokens: no share, not 0 %


def test_summary_is_sorted_by_calls_then_name_and_has_every_key(stats) -> None:
    for name, n in (("b", 2), ("A", 2), ("c", 5)):
        for _ in range(n):
            stats.record(_call(name))
    rows = stats.summary()
    assert [r["agent"] for r in rows] == ["c", "A", "b"]
    assert all(list(r) == list(SUMMARY_KEYS) for r in rows)


def test_tool_calls_and_their_time_are_summed_per_agent(stats) -> None:
    """Rows as an agentic turn stores them (chat/turn_calls.call_stats): the call that asked for
    tools ends "tool_calls" with their count and run time; the answering call has neither."""
    stats.record(
        _call("Tooly", finish_reason="tool_calls", call_index=1, tool_calls=2, tool_ms=80.0)
    )
    stats.record(_call("Tooly", call_index=2))
    stats.record(
        _call("tooly", finish_reason="tool_calls", call_index=1, tool_calls=1, tool_ms=None)
    )
    stats.record(_call("tooly", call_index=2))
    stats.record(_call("Plain"))
    summary = _by_agent(stats.summary())
    tooly = summary["Tooly"]
    assert (tooly["calls"], tooly["tool_calls"], tooly["tool_ms"]) == (4, 3, 80.0)
    assert tooly["complete"] == 4  # a call that asked for tools did not fail
    plain = summary["Plain"]
    assert (plain["tool_calls"], plain["tool_ms"]) == (0, None)
    # the range applies to them too
    assert stats.summary(StatsFilter(since="2026-11-16")) == []


def test_tool_totals_read_only_m010s_index_of_the_calls_that_asked_for_tools(stats, db) -> None:
    stats.record(_call("Tooly", finish_reason="tool_calls", tool_calls=1, tool_ms=40.0))
    plans = _plans(db, stats.summary)
    tools = next(plan for sql, plan in plans if "TOTAL(tool_calls)" in sql)
    assert any("COVERING INDEX stats_tools" in line for line in tools), tools
    assert _by_agent(stats.summary())["Tooly"]["tool_ms"] == 40.0


def test_series_gives_the_most_recent_calls_oldest_first(stats) -> None:
    ids = {}
    for day, value in ((5, 50.0), (1, 10.0), (3, None), (4, 40.0), (2, 20.0)):
        ids[day] = stats.record(
            _call("Box", f"2026-11-0{day}T10:00:00.000+00:00", ttft_ms=value, message_id=None)
        )
    stats.record(_call("Other", "2026-11-06T10:00:00.000+00:00", ttft_ms=60.0))
    series = stats.series(StatsFilter(agents=("box",)), "ttft_ms", limit=3)
    # day 3 has no TTFT (a failed call): not a point; the 3 most recent are days 2, 4, 5
    assert [p["value"] for p in series] == [20.0, 40.0, 50.0]
    assert [p["id"] for p in series] == [ids[2], ids[4], ids[5]]
    assert set(series[0]) == {"id", "agent", "started_at", "value", "message_id", "conversation_id"}
    both = stats.series(StatsFilter(agents=("Box", "OTHER")), "ttft_ms", limit=2)
    assert [(p["agent"], p["value"]) for p in both] == [("Box", 50.0), ("Other", 60.0)]
    every = stats.series(StatsFilter(since="2026-11-02"), "ttft_ms")
    assert [p["value"] for p in every] == [20.0, 40.0, 50.0, 60.0]
    with pytest.raises(ValueError, match="unknown metric"):
        stats.series(StatsFilter(), "ttft_ms; DROP TABLE inference_stats")


def test_export_round_trips_through_csv_and_json(stats) -> None:
    stats.record(_call("Box", "2026-11-02T00:00:00.000+00:00", ttft_ms=12.5, prompt_tokens=7))
    stats.record(_call("Box, the “second”", "2026-11-01T00:00:00.000+00:00", cost_usd=None))
    rows = stats.export_rows()
    assert [r["started_at"][:10] for r in rows] == ["2026-11-01", "2026-11-02"]  # oldest first
    assert list(rows[0]) == EXPORT_COLUMNS

    text = io.StringIO()
    rows_to_csv(rows, text, EXPORT_COLUMNS)
    back = list(csv.DictReader(io.StringIO(text.getvalue())))
    assert list(back[0]) == EXPORT_COLUMNS
    assert back[0]["agent_name"] == "Box, the “second”"
    assert back[0]["cost_usd"] == ""  # NULL is an empty cell, not 0
    assert float(back[1]["ttft_ms"]) == 12.5 and int(back[1]["prompt_tokens"]) == 7

    text = io.StringIO()
    rows_to_json(rows, text)
    assert json.loads(text.getvalue()) == rows
    assert not {c for c in EXPORT_COLUMNS if "key" in c or "secret" in c}


def test_summary_exports_with_nested_error_kinds(stats) -> None:
    stats.record(_call("Box", finish_reason="error", error_kind="auth"))
    text = io.StringIO()
    rows_to_csv(stats.summary(), text, SUMMARY_KEYS)
    (back,) = list(csv.DictReader(io.StringIO(text.getvalue())))
    assert json.loads(back["error_kinds"]) == {"auth": 1}
    assert back["cost_usd"] == "" and back["local"] == "false"


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """100,000 generated calls across 50 agents (the issue's scale)."""
    database = open_database(tmp_path_factory.mktemp("big") / "simi.db")
    filled = fill_stats(database, rows=100_000, agents=50, seed=5)
    yield database, filled
    database.conn.close()


def _plans(db, run) -> list[tuple[str, list[str]]]:
    """Each statement ``run`` sent to SQLite, with its query plan."""
    sent: list[str] = []
    db.conn.set_trace_callback(sent.append)
    try:
        run()
    finally:
        db.conn.set_trace_callback(None)
    return [
        (sql, [r[3] for r in db.conn.execute(f"EXPLAIN QUERY PLAN {sql}")])
        for sql in sent
        if "inference_stats" in sql
    ]


def test_summary_of_100k_calls_is_answered_from_indexes_in_sqlite(big) -> None:
    db, filled = big
    stats = StatsStore(db)
    every = stats.summary()
    assert len(every) == 50 and sum(r["calls"] for r in every) == 100_000

    three = StatsFilter(agents=filled.agents[:3], since="2026-10-01")
    plans = _plans(db, lambda: stats.summary(three))
    # a fixed number of statements per agent, however many calls each has
    assert len(plans) <= 3 + 6 * 3
    for sql, plan in plans:
        touching = [line for line in plan if "inference_stats" in line]
        assert touching, sql
        for line in touching:
            # every read of the table goes through an index that holds what it needs (the
            # tool totals: m010's partial index of the calls that asked for tools)
            assert "COVERING INDEX" in line, (sql, plan)
            if "TOTAL(tool_calls)" in sql:
                assert "stats_tools" in line, (sql, plan)
    totals = next(plan for sql, plan in plans if "GROUP BY" in sql and "COUNT(price_source)" in sql)
    assert any("SEARCH" in line and "stats_summary" in line for line in totals)
    indexes = " ".join(line for _, plan in plans for line in plan)
    for index in ("stats_ttft", "stats_decode", "stats_prefill"):
        assert index in indexes


def test_series_of_100k_calls_reads_only_the_points_it_returns(big) -> None:
    db, filled = big
    stats = StatsStore(db)
    plans = _plans(db, lambda: stats.series(StatsFilter(), "decode_tok_s", limit=500))
    ((_, plan),) = plans
    assert any("stats_by_started" in line for line in plan)
    assert not any("TEMP B-TREE" in line for line in plan)  # newest first along the index
    points = stats.series(StatsFilter(agents=filled.agents[:2]), "ttft_ms", limit=500)
    assert len(points) == 500
    assert [p["started_at"] for p in points] == sorted(p["started_at"] for p in points)
    assert {p["agent"] for p in points} <= set(filled.agents[:2])
