"""bench/knowledge.py (indexing speed, query time at scale, incremental reindex) in its quick
mode: it runs end to end and prints exactly its keys, each figure a number."""

from __future__ import annotations

from bench.knowledge import KEYS
from tests.helpers.benches import is_number, quick_run


def test_quick_run_prints_exactly_the_keys() -> None:
    result = quick_run("knowledge", timeout=60)
    assert tuple(result) == KEYS
    rates = result["index_chunks_per_s"]
    assert set(rates) == {"bm25", "embedder"}
    assert all(is_number(rates[key]) and rates[key] > 0 for key in rates)
    for key in ("query_p95_ms", "query_p95_ms_bm25", "incremental_reindex_s", "peak_rss_mb"):
        assert is_number(result[key]) and result[key] > 0, key
    assert "fake" in result["notes"]
