"""The dashboard's and ``simi stats``' filter by who made the calls: the app itself, or API
clients through the local server (``source`` 'api'), and which client (the key's name)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from desktop.store.db import open_database
from desktop.store.stats import StatsFilter, StatsStore


def _call(agent: str, ttft: float, **fields: object) -> dict:
    return {
        "agent_name": agent,
        "provider_kind": "local",
        "started_at": "2026-11-15T12:00:00.000+00:00",
        "finish_reason": "stop",
        "ttft_ms": ttft,
        **fields,
    }


@pytest.fixture
def stats(tmp_path: Path):
    db = open_database(tmp_path / "simi.db")
    store = StatsStore(db)
    store.record(_call("Coder", 100))  # the window's
    store.record(_call("Coder", 200, source="api", api_client="editor"))
    store.record(_call("Coder", 300, source="api", api_client="Script"))
    store.record(_call("Writer", 400, source="api"))  # a client without a key
    yield store
    db.conn.close()


def _calls(store: StatsStore, f: StatsFilter) -> dict[str, int]:
    return {r["agent"]: r["calls"] for r in store.summary(f)}


def test_calls_are_picked_by_source_and_client(stats: StatsStore) -> None:
    assert _calls(stats, StatsFilter()) == {"Coder": 3, "Writer": 1}
    assert _calls(stats, StatsFilter(source="app")) == {"Coder": 1}
    assert _calls(stats, StatsFilter(source="api")) == {"Coder": 2, "Writer": 1}
    assert _calls(stats, StatsFilter(source="api", clients=("EDITOR",))) == {"Coder": 1}
    assert _calls(stats, StatsFilter(clients=("editor", "script"))) == {"Coder": 2}
    # the percentiles and the series follow the same filter
    (coder,) = stats.summary(StatsFilter(("Coder",), source="api"))
    assert coder["ttft_p50_ms"] == 200 and coder["ttft_p95_ms"] == 300
    series = stats.series(StatsFilter(("Coder",), clients=("script",)), "ttft_ms", 10)
    assert [r["value"] for r in series] == [300]
    rows = stats.export_rows(StatsFilter(source="api"))
    assert sorted((r["agent_name"], r["api_client"]) for r in rows) == [
        ("Coder", "Script"),
        ("Coder", "editor"),
        ("Writer", None),
    ]


def test_an_unknown_source_is_refused() -> None:
    with pytest.raises(ValueError, match="api, app"):
        StatsFilter(source="web")


def test_simi_stats_filters_by_source_and_client(cli_env: dict[str, str]) -> None:
    from desktop.settings.paths import AppPaths

    paths = AppPaths.from_env()
    paths.ensure()
    db = open_database(paths.db_path)
    store = StatsStore(db)
    store.record(_call("Coder", 100))
    store.record(_call("Coder", 200, source="api", api_client="editor"))
    store.record(_call("Writer", 400, source="api"))
    db.conn.close()

    def agents(*flags: str) -> dict[str, int]:
        out = subprocess.run(
            [sys.executable, "-m", "desktop", "stats", "--json", *flags],
            env=cli_env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return {r["agent"]: r["calls"] for r in json.loads(out.stdout)}

    assert agents() == {"Coder": 2, "Writer": 1}
    assert agents("--source", "api") == {"Coder": 1, "Writer": 1}
    assert agents("--source", "app") == {"Coder": 1}
    assert agents("--client", "editor") == {"Coder": 1}
