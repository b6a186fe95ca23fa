"""m008: where a local call's cached prompt tokens came from (``cache_source``) and how long
restoring them took (``cache_restore_ms``): added to a database from before, old rows kept with
NULL; recorded, read back and exported (CSV, JSON, ``simi stats --rows``)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from desktop import cli
from desktop.store.db import open_database
from desktop.store.migrations import MIGRATIONS
from desktop.store.stats import EXPORT_COLUMNS, StatsStore, rows_to_csv, rows_to_json

OLD_ROW = {
    "agent_name": "Box",
    "provider_kind": "local",
    "started_at": "2026-11-30T10:00:00.000+00:00",
    "prompt_tokens": 3010,
    "cached_tokens": 2950,
    "ttft_ms": 55.0,
}


def test_a_database_from_before_gets_both_columns_and_its_rows_stay_unknown(
    tmp_path: Path,
) -> None:
    path = tmp_path / "simi.db"
    old = open_database(path, migrations=[m for m in MIGRATIONS if m[0] != "m008_cache_source"])
    assert "cache_source" not in old["inference_stats"].columns_dict
    kept = StatsStore(old).record(OLD_ROW)
    old.conn.close()

    db = open_database(path)
    columns = db["inference_stats"].columns_dict
    assert columns["cache_source"] is str and columns["cache_restore_ms"] is float
    (row,) = StatsStore(db).rows()
    assert row["id"] == kept and row["cached_tokens"] == 2950
    assert row["cache_source"] is None and row["cache_restore_ms"] is None  # not known
    db.conn.close()
    again = open_database(path)  # a second open runs nothing twice
    assert StatsStore(again).rows()[0]["id"] == kept
    again.conn.close()


def test_a_new_row_keeps_both_and_every_export_has_them(tmp_path: Path) -> None:
    db = open_database(tmp_path / "simi.db")
    stats = StatsStore(db)
    stats.record({**OLD_ROW, "cache_source": "memory", "cache_restore_ms": 41.25})
    rows = stats.export_rows()
    assert "cache_source" in EXPORT_COLUMNS and "cache_restore_ms" in EXPORT_COLUMNS
    assert (rows[0]["cache_source"], rows[0]["cache_restore_ms"]) == ("memory", 41.25)
    text = io.StringIO()
    rows_to_csv(rows, text, EXPORT_COLUMNS)
    back = list(csv.DictReader(io.StringIO(text.getvalue())))
    assert (back[0]["cache_source"], back[0]["cache_restore_ms"]) == ("memory", "41.25")
    text = io.StringIO()
    rows_to_json(rows, text)
    assert json.loads(text.getvalue())[0]["cache_source"] == "memory"
    db.conn.close()


def test_simi_stats_rows_lists_where_the_cached_tokens_came_from(simi_home, capsys) -> None:
    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths

    services = Services.open(AppPaths.from_env())
    try:
        services.stats.record({**OLD_ROW, "cache_source": "saved", "cache_restore_ms": 12.0})
        services.stats.record({**OLD_ROW, "started_at": "2026-11-30T11:00:00.000+00:00"})
    finally:
        services.close()
    assert cli.main(["stats", "--rows", "--json"]) == 0
    calls = json.loads(capsys.readouterr().out)
    assert [(c["cache_source"], c["cache_restore_ms"]) for c in calls] == [
        ("saved", 12.0),
        (None, None),
    ]
    assert cli.main(["stats", "--rows", "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["cache_source"], r["cache_restore_ms"]) for r in rows] == [
        ("saved", "12.0"),
        ("", ""),
    ]
