"""The stats clock computes every figure once: the stored row and the live status-line rate."""

from __future__ import annotations

from desktop.chat.stats_clock import StatsClock, token_rate
from desktop.llm.events import Finished, Queued, TextDelta, Timing, Usage


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
    row = stats.row("stop")
    assert row["output_tokens"] == 21 and row["token_source"] == "counted"
    assert row["decode_tok_s"] == stats.live_decode_tok_s() == 50.0
    assert row["ttft_ms"] == 200.0


def test_reported_usage_and_backend_timing_win_over_counting() -> None:
    clock = FakeClock()
    stats = StatsClock(clock)
    stats.on_event(TextDelta("x"))
    clock.now += 1.0
    stats.on_event(TextDelta("y"))
    stats.on_event(Usage(prompt_tokens=10, output_tokens=11))
    stats.on_event(Timing(decode_ms=500.0, prefill_ms=100.0, prompt_eval_tokens=10))
    row = stats.row("stop")
    assert row["output_tokens"] == 11 and row["token_source"] == "reported"
    assert row["decode_tok_s"] == 20.0  # (11 - 1) / 0.5 s, the backend's own decode time
    assert row["prefill_tok_s"] == 100.0


def test_time_waiting_for_a_busy_local_model_is_recorded_as_queued() -> None:
    clock = FakeClock()
    stats = StatsClock(clock)
    stats.on_event(Queued(waiting=True, reason="the local model is answering another chat"))
    assert stats.waiting_in_queue and "another chat" in stats.queue_reason
    clock.now += 1.5
    stats.on_event(Queued(waiting=False))
    assert not stats.waiting_in_queue
    assert stats.row("stop")["queued_ms"] == 1500.0


def test_rates_need_two_tokens_and_some_time() -> None:
    assert token_rate(1, 1.0) is None
    assert token_rate(5, 0.0) is None
    assert token_rate(None, 1.0) is None
    assert token_rate(11, 2.0) == 5.0
