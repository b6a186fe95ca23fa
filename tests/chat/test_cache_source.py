"""Where a local call's cached prompt tokens came from (the model's live context, the memory
cache, a saved system prompt) and how long restoring them took: from the stream's events into
the stats row, and from the row into the reply timeline and the footer's tooltip.

The stats-clock test feeds the events a local worker sends (``Usage.cache_source``,
``Timing.cache_restore_ms``) by hand: they stand in for the worker's engine, whose own test
(a real call) is in tests/local."""

from __future__ import annotations

from typing import Any

import pytest

from desktop.chat.format import cache_text, stats_tooltip_text
from desktop.chat.stats_clock import StatsClock
from desktop.chat.timeline import build_timeline
from desktop.llm.events import Finished, TextDelta, Timing, Usage
from tests.helpers.stats_rows import clock_record as record
from tests.helpers.timeline_rows import LOCAL_FIRST

# A warm local call returning to a 3,010-token conversation after visiting another one.
SWITCH_BACK: dict[str, Any] = {
    **LOCAL_FIRST,
    "worker_start_ms": None,
    "load_ms": None,
    "prompt_tokens": 3010,
    "cached_tokens": 2950,
    "prompt_eval_tokens": 60,
    "prefill_ms": 40.0,
    "prefill_tok_s": 1500.0,
    "cache_source": "memory",
    "cache_restore_ms": 41.0,
    "ttft_ms": 95.0,
    "total_ms": 2100.0,
    "context_window": 8192,
    "n_ctx": 8192,
    "context_fill": 0.3821,
    "kv_cache_bytes": 192 * 1024 * 1024,
}


class FakeClock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


def test_the_stats_row_takes_the_source_from_usage_and_the_restore_time_from_timing() -> None:
    clock = FakeClock()
    stats = StatsClock(clock)
    stats.on_event(Timing(cache_restore_ms=41.237))  # sent as the state is put back
    clock.now += 0.1
    stats.on_event(TextDelta("Hi", tokens=1))
    # a later Timing without the restore time (prefill and decode counters) keeps it
    stats.on_event(Timing(prefill_ms=40.0, prompt_eval_tokens=60, decode_ms=100.0))
    stats.on_event(
        Usage(prompt_tokens=3010, cached_tokens=2950, output_tokens=2, cache_source="memory")
    )
    stats.on_event(Finished("stop"))
    row = record(stats, "stop")
    assert row.cache_source == "memory"
    assert row.cache_restore_ms == 41.24
    assert row.prefill_ms == 40.0


def test_a_call_with_no_cache_events_records_neither() -> None:
    stats = StatsClock(FakeClock())
    stats.on_event(Usage(prompt_tokens=40, cached_tokens=0, output_tokens=3))
    row = record(stats, "stop")
    assert row.cache_source is None and row.cache_restore_ms is None


@pytest.mark.parametrize(
    ("source", "restore", "words"),
    [
        (
            "memory",
            41.0,
            "Cached 2,950 of 3,010 prompt tokens — restored from the memory cache in 41 ms",
        ),
        (
            "saved",
            12.4,
            "Cached 2,950 of 3,010 prompt tokens — from the saved system prompt (disk) in 12 ms",
        ),
        ("context", None, "Cached 2,950 of 3,010 prompt tokens — already in the model's context"),
    ],
)
def test_the_timeline_and_the_tooltip_say_where_the_cached_tokens_came_from(
    source: str, restore: float | None, words: str
) -> None:
    row = {**SWITCH_BACK, "cache_source": source, "cache_restore_ms": restore}
    timeline = build_timeline(row)
    fact = timeline.fact("cache")
    assert fact is not None and fact.label == "Prompt cache" and fact.value == words
    assert words in timeline.as_text()
    assert words in stats_tooltip_text(row, "Box", "SmolLM2")
    keys = [s.key for s in timeline.segments]
    if restore is None:
        assert "restore" not in keys
    else:  # a short segment before prefill, to scale, starting at Send (nothing before it)
        assert keys[:2] == ["restore", "prefill"]
        segment = timeline.segment("restore")
        assert segment is not None and segment.kind == "restore"
        assert (segment.start_ms, segment.duration_ms) == (0.0, restore)
        assert timeline.segment("prefill").start_ms == restore
        assert segment.label == "restoring the prompt cache"


def test_the_prefill_segment_says_where_the_reused_tokens_were() -> None:
    prefill = build_timeline(SWITCH_BACK).segment("prefill")
    assert prefill is not None
    assert "2,950 more were restored from the memory cache" in prefill.description


def test_the_restore_time_of_a_context_hit_is_not_drawn() -> None:
    """Tokens already in the live context need no restoring: a stray time is not a segment."""
    timeline = build_timeline({**SWITCH_BACK, "cache_source": "context"})
    assert timeline.segment("restore") is None
    assert timeline.fact("cache").value.endswith("already in the model's context")


def test_nothing_cached_and_an_old_row_say_so_in_words() -> None:
    fresh = build_timeline({**LOCAL_FIRST, "cache_source": None})
    assert fresh.fact("cache").value == "nothing cached: every prompt token was read for this call"
    old = build_timeline({**SWITCH_BACK, "cache_source": None, "cache_restore_ms": None})
    fact = old.fact("cache")
    assert fact is not None and not fact.known
    assert (
        fact.value
        == "2,950 of 3,010 prompt tokens cached; where from was not recorded for this call"
    )
    assert old.segment("restore") is None
    assert cache_text({**SWITCH_BACK, "cache_source": None}) == ""


def test_a_remote_call_has_no_prompt_cache_fact() -> None:
    """Hosted prompt caching is in the prompt tokens' split; the sources are llama.cpp's."""
    from tests.helpers.timeline_rows import REMOTE_SERVER

    assert build_timeline(REMOTE_SERVER).fact("cache") is None


def test_start_up_hands_the_saved_budgets_to_the_local_runtime(simi_home, monkeypatch) -> None:
    """A spy on ``LocalRuntime.set_cache_budgets`` (the real method still runs) records what
    ``Services.open`` applies from Settings' saved budgets."""
    from desktop.chat.services import Services
    from desktop.local.prompt_cache import PREF_PROMPT_CACHE_MB, PREF_SAVED_STATES_MB
    from desktop.local.provider import LocalRuntime
    from desktop.settings.paths import AppPaths
    from desktop.settings.prefs import Preferences

    paths = AppPaths.from_env()
    paths.ensure()
    Preferences(paths.settings_path).update({PREF_PROMPT_CACHE_MB: 256, PREF_SAVED_STATES_MB: 0})
    applied: list[tuple[int, int]] = []
    real = LocalRuntime.set_cache_budgets

    def spy(self: LocalRuntime, memory_mb: int, saved_mb: int) -> None:
        applied.append((memory_mb, saved_mb))
        real(self, memory_mb, saved_mb)

    monkeypatch.setattr(LocalRuntime, "set_cache_budgets", spy)
    services = Services.open(paths)
    services.close()
    assert applied == [(256, 0)]
