"""inference_stats rows and per-agent aggregates on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop.store.db import open_database
from desktop.store.stats import StatsStore


@pytest.fixture
def stats(tmp_path: Path):
    database = open_database(tmp_path / "simi.db")
    yield StatsStore(database)
    database.conn.close()


def _call(
    agent: str, ttft_ms: float, *, error_kind: str | None = None, finish: str | None = None
) -> dict[str, object]:
    return {
        "finish_reason": finish or ("error" if error_kind else "stop"),
        "agent_name": agent,
        "provider_kind": "local",
        "started_at": f"2026-12-01T08:00:0{int(ttft_ms) % 10}.000+00:00",
        "ttft_ms": ttft_ms,
        "prompt_tokens": 10,
        "output_tokens": 5,
        "error_kind": error_kind,
    }


def test_rows_of_one_agent_match_its_name_in_any_case_newest_first(stats) -> None:
    first = stats.record(_call("Box", 100))
    stats.record(_call("Other", 200))
    last = stats.record(_call("box", 300))
    assert [r["id"] for r in stats.rows("BOX")] == [last, first]
    assert len(stats.rows()) == 3
    assert [r["id"] for r in stats.rows(limit=1)] == [stats.rows()[0]["id"]]


def test_per_agent_aggregates_every_agent_or_the_one_asked_for(stats) -> None:
    stats.record(_call("Box", 100))
    stats.record(_call("Box", 300, error_kind="rate_limited"))
    stats.record(_call("Other", 50))
    every = {row["agent"]: row for row in stats.per_agent()}
    assert set(every) == {"Box", "Other"}
    box = every["Box"]
    assert (box["calls"], box["errors"], box["avg_ttft_ms"]) == (2, 1, 200.0)
    assert (box["complete"], box["cancelled"], box["error_kinds"]) == (1, 0, {"rate_limited": 1})
    assert (box["prompt_tokens"], box["output_tokens"]) == (20, 10)
    only = stats.per_agent("box")
    assert [row["agent"] for row in only] == ["Box"] and only[0]["calls"] == 2


def test_unknown_fields_are_refused(stats) -> None:
    with pytest.raises(ValueError, match="unknown stats fields"):
        stats.record({**_call("Box", 1), "api_key": "sk-nope"})


def test_every_outcome_is_counted_as_itself_once(stats) -> None:
    stats.record(_call("Box", 100))  # finished on its own
    stats.record(_call("Box", 110, finish="length"))  # cut off by max tokens: still complete
    stats.record(_call("Box", 120, finish="cancelled"))  # Stop: not a success, not an error
    stats.record(_call("box", 130, finish="cancelled"))
    stats.record({**_call("Box", 0, error_kind="context_too_long"), "ttft_ms": None})
    stats.record(_call("Box", 140, error_kind="rate_limited"))
    stats.record(_call("Box", 150, error_kind="rate_limited"))
    # an error row written with a kind but another finish reason is still an error
    stats.record(_call("Box", 160, error_kind="unavailable", finish="stop"))
    stats.record(_call("Other", 50, finish="cancelled"))
    every = {row["agent"]: row for row in stats.per_agent()}
    box = every["Box"]
    assert (box["calls"], box["complete"], box["cancelled"], box["errors"]) == (8, 2, 2, 4)
    assert box["calls"] == box["complete"] + box["cancelled"] + box["errors"]
    assert box["error_kinds"] == {"rate_limited": 2, "context_too_long": 1, "unavailable": 1}
    assert next(iter(box["error_kinds"])) == "rate_limited"  # most frequent first
    other = every["Other"]
    assert (other["complete"], other["cancelled"], other["errors"]) == (0, 1, 0)
    assert other["error_kinds"] == {}
    (only,) = stats.per_agent("BOX")
    assert only["error_kinds"] == box["error_kinds"] and only["cancelled"] == 2
