"""bench/frames.py (how long the real window's GUI thread is held), in its quick mode: it runs
end to end and prints exactly its eight figures, each a finite non-negative number with its
target, and a details entry per scenario. Speed is the bench's business, not this test's."""

from __future__ import annotations

import json
import math
import os
import sys

import pytest

from tests.helpers.cli import ROOT, run_text

KEYS = (
    "page_up_p99_ms",
    "compare_send_block_ms",
    "compare_end_block_ms",
    "first_remote_send_block_ms",
    "agent_switch_block_ms",
    "open_5k_conversation_ms",
    "first_paint_ratio",
    "worst_ms",
)
SCENARIOS = (
    "page_up",
    "compare",
    "first_remote_send",
    "agent_switch",
    "open_5k_conversation",
    "first_paint",
    "session",
)


@pytest.mark.slow
def test_quick_run_prints_the_eight_figures() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "QT_QPA_PLATFORM": "offscreen"}
    done = run_text(
        [sys.executable, str(ROOT / "bench" / "frames.py"), "--quick", "--session-seconds", "5"],
        env,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout)
    assert set(result) == {*KEYS, "targets", "met", "details"}
    for key in KEYS:
        value = result[key]
        assert isinstance(value, int | float) and not isinstance(value, bool), key
        assert math.isfinite(value) and value >= 0, (key, value)
        target = result["targets"][key]
        assert isinstance(target, int | float) and target > 0, key
        assert isinstance(result["met"][key], bool), key
    assert set(result["targets"]) == set(KEYS)
    details = result["details"]
    for scenario in SCENARIOS:
        assert isinstance(details.get(scenario), dict), scenario
    for scenario in ("page_up", "agent_switch", "open_5k_conversation", "first_remote_send"):
        assert details[scenario]["n"] >= 1, scenario
    assert details["session"]["worst_step"]["step"]
    assert details["first_remote_send"]["reply"]["status"] == "complete"
