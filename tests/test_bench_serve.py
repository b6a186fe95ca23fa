"""bench/serve.py (``simi serve`` against the same backend called directly), in its quick mode:
it runs end to end and prints exactly its keys, each figure a number."""

from __future__ import annotations

import pytest

from bench.serve import KEYS
from tests.helpers.benches import is_number, quick_run

FIGURES = (
    "ttft_overhead_ms",
    "decode_ratio",
    "concurrent_8_vs_1",
    "ttft_served_ms_median",
    "ttft_direct_ms_median",
    "decode_served_tok_s_median",
    "decode_direct_tok_s_median",
    "ttft_overhead_instant_backend_ms",
)


@pytest.mark.slow
def test_quick_run_prints_exactly_the_keys() -> None:
    result = quick_run("serve", timeout=240)
    assert tuple(result) == KEYS
    for key in FIGURES:
        assert is_number(result[key]), key
    for key in ("ttft_overhead_target_ms", "decode_ratio_target", "concurrent_8_vs_1_target"):
        assert isinstance(result[key], float), key
    # both paths generated the same text (temperature 0, same seed, same body)
    assert result["same_text"] is True
    assert all(1 < n <= result["max_tokens"] for n in result["deltas_per_reply"])
    assert result["decode_served_tok_s_median"] > 0 and result["decode_direct_tok_s_median"] > 0
    concurrent = result["concurrent"]
    assert concurrent["streams"] == 8 and concurrent["single_tok_s_median"] > 0
