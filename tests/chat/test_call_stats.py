"""A model call's record (``CallStats``): one typed field per ``inference_stats`` column, and
what a real call hands its caller is what it stored."""

from __future__ import annotations

import asyncio
import types
import typing
from dataclasses import FrozenInstanceError, fields
from pathlib import Path
from typing import Any

import pytest

from desktop.chat.call_stats import FIELDS, CallStats
from desktop.local.starter import STARTER_AGENT_NAME
from desktop.store.db import open_database
from desktop.store.stats import STATS_COLUMNS

SQL_TYPES = {"INTEGER": int, "REAL": float, "TEXT": str}


def test_the_fields_are_the_stats_columns_in_order() -> None:
    assert [f.name for f in fields(CallStats)] == STATS_COLUMNS
    assert list(FIELDS) == STATS_COLUMNS


def test_each_field_has_its_columns_type_and_may_be_none_where_the_column_may_be_null(
    tmp_path: Path,
) -> None:
    """The table the migrations build, less the id it gives each row itself."""
    db = open_database(tmp_path / "simi.db")
    try:
        table = db.execute("PRAGMA table_info(inference_stats)").fetchall()
    finally:
        db.conn.close()
    hints = typing.get_type_hints(CallStats)
    columns = {name: (sql_type, notnull) for _cid, name, sql_type, notnull, *_ in table}
    assert columns.pop("id") == ("INTEGER", 0)
    assert set(columns) == set(FIELDS)
    for name, (sql_type, notnull) in columns.items():
        expected: Any = SQL_TYPES[sql_type]
        if not notnull:
            expected = expected | None
        got = hints[name]
        assert got == expected or (
            isinstance(got, types.UnionType) and set(typing.get_args(got)) == {expected, None}
        ), (name, got, sql_type, notnull)


def _record() -> CallStats:
    return CallStats(**{**dict.fromkeys(FIELDS), "agent_name": "Box", "provider_kind": "local"})


def test_the_record_is_frozen_and_its_row_has_every_column() -> None:
    record = _record()
    with pytest.raises(FrozenInstanceError):
        record.ttft_ms = 1.0
    with pytest.raises(TypeError):
        CallStats(**{**record.as_row(), "not_a_column": 1})
    row = record.as_row()
    assert list(row) == STATS_COLUMNS and row["agent_name"] == "Box"


@pytest.mark.slow
def test_a_local_replys_record_is_the_row_it_stored(services: Any) -> None:
    agent = services.agents.by_name(STARTER_AGENT_NAME).with_changes(max_tokens=8, seed=1)
    conv = services.conversations.create(agent.id)
    turn = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "Hi!")))
    assert turn.status == "complete"
    assert isinstance(turn.stats, CallStats) and turn.calls == [turn.stats]
    stored = services.stats.for_message(turn.assistant_message_id)
    stored_id = stored.pop("id")
    assert stored == turn.stats.as_row()
    assert turn.stats.message_id == turn.assistant_message_id
    assert turn.stats.call_index == 1 and turn.stats.price_source == "local"

    # a prompt-set call (no conversation): the same record, with its stored id
    one = asyncio.run(services.chat.ask_once(agent, "Hi!"))
    assert isinstance(one.stats, CallStats) and one.stats_id not in (None, stored_id)
    (row,) = [r for r in services.stats.rows(STARTER_AGENT_NAME) if r["id"] == one.stats_id]
    del row["id"]
    assert row == one.stats.as_row() and one.finish_reason == one.stats.finish_reason
