"""bench/attach.py (PDF extraction speed, event-loop lag while attaching) in its quick mode:
it runs end to end and prints exactly its keys, each figure a number."""

from __future__ import annotations

from bench.attach import KEYS
from tests.helpers.benches import is_number, quick_run

FIGURES = (
    "extract_pdf_mb_per_s",
    "extract_pdf_reference_mb_per_s",
    "extract_vs_pypdf",
    "loop_lag_p99_ms",
    "loop_lag_target_ms",
)


def test_quick_run_prints_exactly_the_keys() -> None:
    result = quick_run("attach", timeout=60)
    assert tuple(result) == KEYS
    for key in FIGURES:
        assert is_number(result[key]) and result[key] > 0, key
    assert isinstance(result["pass"], bool)
    assert result["pdf"]["pages"] == 10 and result["pdf"]["progress_calls"] == 10
    assert result["pdf"]["same_words"] is True  # SIMI's text is pypdf's text
    assert result["lag"]["ticks"] > 0 and result["lag"]["progress_calls"] >= 4
    for key in ("p50_ms", "p99_ms", "max_ms", "seconds"):
        assert is_number(result["lag"][key]) and is_number(result["image"][key]), key
    assert is_number(result["cpus"])
