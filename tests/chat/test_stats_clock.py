"""The stats clock computes every figure once: the stored row and the live status-line rate."""

from __future__ import annotations

from desktop.chat.stats_clock import StatsClock, token_rate
from desktop.llm.events import (
    Finished,
    Queued,
    ReasoningDelta,
    RunInfo,
    TextDelta,
    Timing,
    Usage,
)
from tests.helpers.stats_rows import clock_record as record


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_batched_deltas_count_their_tokens_in_the_live_rate_and_the_stored_row() -> None:
    clock = FakeClock()
    stats = StatsClock(clock)
    clock.now += 0.2
    stats.on_event(TextDelta("Hello", tokens=1))  # first token at 0.2 s
    for _ in range(4):  # a worker batches ~25 ms of tokens into one delta
        clock.now += 0.1
        stats.on_event(TextDelta(" a b c d e", tokens=5))
    # 21 tokens, the last 0.4 s after the first: 20 / 0.4 = 50 tok/s (5 deltas would say 10)
    assert stats.live_decode_tok_s() == 50.0
    stats.on_event(Finished("stop"))
    row = record(stats, "stop")
    assert row.output_tokens == 21 and row.token_source == "counted"
    assert row.decode_tok_s == stats.live_decode_tok_s() == 50.0
    assert row.ttft_ms == 200.0


def test_reported_usage_and_backend_timing_win_over_counting() -> None:
    clock = FakeClock()
    stats = StatsClock(clock)
    stats.on_event(TextDelta("x"))
    clock.now += 1.0
    stats.on_event(TextDelta("y"))
    stats.on_event(Usage(prompt_tokens=10, output_tokens=11))
    stats.on_event(Timing(decode_ms=500.0, prefill_ms=100.0, prompt_eval_tokens=10))
    row = record(stats, "stop")
    assert row.output_tokens == 11 and row.token_source == "reported"
    assert row.decode_tok_s == 20.0  # (11 - 1) / 0.5 s, the backend's own decode time
    assert row.prefill_tok_s == 100.0


def test_time_waiting_for_a_busy_local_model_is_recorded_as_queued() -> None:
    clock = FakeClock()
    stats = StatsClock(clock)
    stats.on_event(Queued(waiting=True, reason="the local model is answering another chat"))
    assert stats.waiting_in_queue and "another chat" in stats.queue_reason
    clock.now += 1.5
    stats.on_event(Queued(waiting=False))
    assert not stats.waiting_in_queue
    assert record(stats, "stop").queued_ms == 1500.0


def test_rates_need_two_tokens_and_some_time() -> None:
    assert token_rate(1, 1.0) is None
    assert token_rate(5, 0.0) is None
    assert token_rate(None, 1.0) is None
    assert token_rate(11, 2.0) == 5.0


def _streamed(stats: StatsClock, clock: FakeClock, deltas: int, every_s: float, **kw: int) -> None:
    for _ in range(deltas):
        stats.on_event(TextDelta("x", **kw))
        clock.now += every_s


def test_local_decode_speed_is_llama_cpps_eval_count_over_its_eval_time() -> None:
    clock = FakeClock()
    stats = StatsClock(clock)
    _streamed(stats, clock, 10, 0.1, tokens=5)  # 50 tokens in ~25 ms batches
    stats.on_event(Usage(prompt_tokens=20, output_tokens=50))
    stats.on_event(
        Timing(decode_ms=980.0, decode_tokens=49, prefill_ms=40.0, prompt_eval_tokens=20)
    )
    row = record(stats, "stop")
    assert row.decode_tok_s == 50.0  # 49 evaluations in 0.98 s, not (50 - 1) / 0.98
    assert row.prefill_tok_s == 500.0
    live = stats.live_decode_tok_s()
    assert live is not None and abs(live - row.decode_tok_s) / row.decode_tok_s < 0.10


def test_reasoning_that_never_streamed_is_left_out_of_the_decode_speed() -> None:
    clock = FakeClock()
    stats = StatsClock(clock)
    _streamed(stats, clock, 11, 0.1)  # 11 visible tokens over 1.0 s (+ the last step)
    stats.on_event(Usage(prompt_tokens=5, output_tokens=111, reasoning_tokens=100))
    row = record(stats, "stop")
    assert row.reasoning_tokens == 100 and row.output_tokens == 111
    assert row.decode_tok_s == 10.0  # (11 - 1) / 1.0 s, not (111 - 1) / 1.0 s


def test_streamed_reasoning_counts_in_the_decode_speed() -> None:
    clock = FakeClock()
    stats = StatsClock(clock)
    for _ in range(6):
        stats.on_event(ReasoningDelta("hm"))
        clock.now += 0.1
    for _ in range(5):
        stats.on_event(TextDelta("x"))
        clock.now += 0.1
    clock.now -= 0.1
    stats.on_event(Usage(output_tokens=11, reasoning_tokens=6))
    assert record(stats, "stop").decode_tok_s == 10.0  # 10 / 1.0 s, thinking included


def test_a_one_token_reply_has_a_ttft_and_no_decode_speed() -> None:
    clock = FakeClock()
    stats = StatsClock(clock)
    clock.now += 0.3
    stats.on_event(TextDelta("Yes"))
    clock.now += 0.05
    stats.on_event(Finished("stop"))
    row = record(stats, "stop")
    assert row.ttft_ms == 300.0 and row.total_ms == 350.0
    assert row.output_tokens == 1 and row.decode_tok_s is None
    assert stats.live_decode_tok_s() is None


def test_a_reply_that_arrives_in_one_piece_reports_no_made_up_speed() -> None:
    clock = FakeClock()
    stats = StatsClock(clock)
    clock.now += 2.0
    stats.on_event(TextDelta("the whole answer at once"))  # a server that does not stream
    stats.on_event(Usage(prompt_tokens=12, output_tokens=40))
    row = record(stats, "stop")
    assert row.ttft_ms == 2000.0 and row.output_tokens == 40
    assert row.decode_tok_s is None and row.decode_ms == 0.0


def test_context_fill_and_an_error_row() -> None:
    from desktop.llm.events import RunInfo

    clock = FakeClock()
    stats = StatsClock(clock)
    stats.on_event(RunInfo(context_window=2048, backend="CPU"))
    stats.on_event(Usage(prompt_tokens=1000, output_tokens=24))
    row = record(stats, "error", "context_too_long")
    assert row.context_window == 2048 and row.context_fill == 0.5
    assert (row.finish_reason, row.error_kind, row.backend) == (
        "error",
        "context_too_long",
        "CPU",
    )
    assert row.ttft_ms is None and row.decode_tok_s is None


def test_before_the_first_token_the_clock_says_what_the_call_waits_for() -> None:
    from desktop.llm.events import PrefillProgress

    clock = FakeClock()
    remote = StatsClock(clock)
    assert remote.waiting_for(remote=True) == "connecting"
    clock.now += 2.4
    assert remote.waiting_for(remote=True) == "connecting · 2 s"
    remote.on_event(Timing(connect_ms=3.0, headers_ms=40.0))
    clock.now += 10.0
    assert remote.waiting_for(remote=True) == "waiting for the first token · 12 s"
    remote.on_event(TextDelta("Hi"))
    assert remote.waiting_for(remote=True) is None

    local = StatsClock(clock)
    assert local.waiting_for(remote=False, loading_model=True) == "loading the model"
    local.on_event(Queued(waiting=True, reason="the local model is answering another chat"))
    clock.now += 3.0
    assert local.waiting_for(remote=False) == (
        "queued: the local model is answering another chat · 3 s"
    )
    local.on_event(Queued(waiting=False))
    local.on_event(PrefillProgress(evaluated=512, total=2048))
    clock.now += 1.0
    local.on_event(PrefillProgress(evaluated=1024, total=2048))
    # 512 more tokens took 1 s: the other 1,024 take about 2 s more
    assert local.waiting_for(remote=False) == (
        "reading the prompt: 1,024 of 2,048 tokens · about 2 s left · 4 s"
    )


def test_a_reply_that_came_in_one_piece_has_no_decode_speed() -> None:
    """Non-streamed (one chunk) or buffered by a proxy (two chunks 2 ms apart): a decode
    speed from such arrivals would read thousands of tok/s. None is shown instead."""
    for gaps in ([], [0.002]):
        clock = FakeClock()
        stats = StatsClock(clock)
        clock.now += 0.8
        stats.on_event(TextDelta("The whole answer at once."))
        for gap in gaps:
            clock.now += gap
            stats.on_event(TextDelta(" And the rest."))
        stats.on_event(Usage(prompt_tokens=20, output_tokens=500))
        row = record(stats, "stop")
        assert row.decode_tok_s is None and stats.live_decode_tok_s() is None
        assert row.output_tokens == 500 and row.ttft_ms == 800.0


def test_one_token_reply_has_no_decode_speed() -> None:
    clock = FakeClock()
    stats = StatsClock(clock)
    stats.on_event(TextDelta("Yes"))
    stats.on_event(Usage(prompt_tokens=20, output_tokens=1))
    assert record(stats, "stop").decode_tok_s is None


def test_remote_prefill_speed_is_estimated_from_ttft_and_says_so() -> None:
    clock = FakeClock()
    stats = StatsClock(clock)
    stats.on_event(Timing(connect_ms=100.0, headers_ms=150.0))
    clock.now += 1.0  # first token 1 s after sending: 100 ms of it connecting
    stats.on_event(TextDelta("a"))
    stats.on_event(Usage(prompt_tokens=2_000, cached_tokens=200, output_tokens=1))
    row = record(stats, "stop")
    # the 1,800 new prompt tokens over the 0.9 s not spent connecting: a lower bound
    assert row.prefill_tok_s == 2_000.0 and row.prefill_source == "estimated"
    assert row.timing_source is None


def test_short_or_counted_prompts_get_no_prefill_estimate() -> None:
    for usage in (Usage(prompt_tokens=40, output_tokens=3), Usage(source="counted")):
        clock = FakeClock()
        stats = StatsClock(clock)
        clock.now += 0.5
        stats.on_event(TextDelta("a"))
        stats.on_event(usage)
        row = record(stats, "stop")
        assert row.prefill_tok_s is None and row.prefill_source is None


def test_backend_counters_make_prefill_measured_and_the_timeline_figures_are_kept() -> None:
    clock = FakeClock()
    stats = StatsClock(clock)
    stats.on_event(Timing(worker_start_ms=260.0))  # the worker had to start
    stats.on_event(RunInfo(context_window=2048, kv_cache_bytes=48 << 20))
    clock.now += 0.7
    stats.on_event(TextDelta("Hi", tokens=1))
    for _ in range(3):
        clock.now += 0.1
        stats.on_event(TextDelta(" there", tokens=4))
    stats.on_event(Usage(prompt_tokens=40, cached_tokens=0, output_tokens=13))
    stats.on_event(
        Timing(
            prefill_ms=80.0,
            prompt_eval_tokens=40,
            decode_ms=290.0,
            decode_tokens=12,
            load_ms=140.0,
            reported_by="llama.cpp",
        )
    )
    row = record(stats, "stop")
    assert row.worker_start_ms == 260.0  # an earlier Timing's figure survives the merge
    assert row.load_ms == 140.0 and row.timing_source == "llama.cpp"
    assert row.prefill_tok_s == 500.0 and row.prefill_source == "measured"
    assert row.stream_ms == 300.0 and row.decode_ms == 290.0
    assert row.kv_cache_bytes == 48 << 20
