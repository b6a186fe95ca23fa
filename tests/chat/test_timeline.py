"""The reply timeline model: one stats row as segments on the client's axis, and its facts."""

from __future__ import annotations

import itertools
from typing import Any

from desktop.chat.timeline import Timeline, build_timeline
from tests.helpers.timeline_rows import LOCAL_FIRST, REMOTE_SERVER

OPENAI: dict[str, Any] = {
    "agent_name": "GPT",
    "provider_kind": "openai",
    "endpoint_host": "api.openai.com",
    "model_requested": "gpt-4o-mini",
    "connect_ms": 120.0,
    "tls_ms": 80.0,
    "reused_connection": 0,
    "headers_ms": 300.0,
    "ttft_ms": 650.0,
    "stream_ms": 900.0,
    "decode_ms": 900.0,
    "total_ms": 1600.0,
    "prompt_tokens": 3000,
    "output_tokens": 200,
    "token_source": "reported",
    "decode_tok_s": 221.1,
    "prefill_tok_s": 5769.2,
    "prefill_source": "estimated",
    "finish_reason": "stop",
}


def keys(timeline: Timeline) -> list[str]:
    return [s.key for s in timeline.segments]


def assert_drawable(timeline: Timeline) -> None:
    """No negative segment, none before 0, each lane in order, all within the axis."""
    for lane in (timeline.segments, timeline.server_segments):
        for segment in lane:
            assert 0 <= segment.start_ms <= segment.end_ms <= timeline.span_ms + 1e-6
        for before, after in itertools.pairwise(lane):
            assert before.end_ms <= after.start_ms + 1e-6
    for marker in timeline.markers:
        assert 0 <= marker.at_ms <= timeline.span_ms + 1e-6


def test_local_first_call_draws_worker_start_load_prefill_then_decode_in_order() -> None:
    timeline = build_timeline(LOCAL_FIRST)
    assert keys(timeline) == ["worker_start", "load", "prefill", "other", "decode", "finishing"]
    worker, load, prefill, other, decode, _ = timeline.segments
    assert (worker.start_ms, worker.end_ms) == (0, 450)
    assert (load.start_ms, load.end_ms) == (450, 590)
    assert (prefill.start_ms, prefill.end_ms) == (590, 670)
    assert prefill.measured_by == "llama.cpp" and prefill.figure == "80 ms · 500 tok/s"
    # the 20 ms llama.cpp's counters do not cover, named honestly
    assert other.duration_ms == 20 and "do not" in other.description
    assert decode.start_ms == 690 and decode.figure == "1.99 s · 60 tok/s · 120 tokens"
    first = next(m for m in timeline.markers if m.key == "first_token")
    assert first.at_ms == 690
    assert timeline.markers[-1].key == "done" and timeline.markers[-1].at_ms == 2700
    assert timeline.summary.startswith(
        "Starting the worker and loading the model took 590 ms of the 690 ms wait for the "
        "first token (86%). Only the first call pays this"
    )
    assert_drawable(timeline)


def test_local_facts_split_the_prompt_and_show_context_kv_cache_and_no_cost() -> None:
    timeline = build_timeline(LOCAL_FIRST)
    assert timeline.fact("prompt").value == "40 = 0 cached + 40 newly evaluated"
    assert timeline.fact("context").value == "160 of 2,048 tokens (8%)"
    assert timeline.fact("kv_cache").value == "48 MiB (f16)"
    assert timeline.fact("prefill_speed").value == "500 tok/s, measured by llama.cpp"
    assert timeline.fact("decode_speed").value == "60 tok/s, measured by llama.cpp"
    assert timeline.fact("cost").value == "local model: no cost"
    assert timeline.context is not None and round(timeline.context.fraction, 3) == 0.078


def test_local_warm_call_has_no_load_and_reuses_the_cached_prompt() -> None:
    row = {
        **LOCAL_FIRST,
        "worker_start_ms": None,
        "load_ms": None,
        "prompt_tokens": 400,
        "cached_tokens": 380,
        "prompt_eval_tokens": 20,
        "prefill_ms": 30.0,
        "ttft_ms": 45.0,
        "total_ms": 2050.0,
    }
    timeline = build_timeline(row)
    assert keys(timeline)[:2] == ["prefill", "other"]
    assert timeline.segments[0].start_ms == 0
    assert timeline.fact("prompt").value == "400 = 380 cached + 20 newly evaluated"
    assert "380 more were reused from the cache" in timeline.segments[0].description
    assert "loading" not in timeline.summary


def test_a_busy_local_model_shows_the_queue_first() -> None:
    timeline = build_timeline({**LOCAL_FIRST, "queued_ms": 1200.0, "ttft_ms": 1890.0})
    assert keys(timeline)[0] == "queued"
    assert "another chat" in timeline.segments[0].description
    assert "queued" in timeline.summary


def test_server_timings_are_an_inner_lane_with_the_rest_called_network_and_queue() -> None:
    timeline = build_timeline(REMOTE_SERVER)
    assert keys(timeline) == ["connect", "headers", "first_token_wait", "decode", "finishing"]
    server = {s.key: s for s in timeline.server_segments}
    assert list(server) == [
        "server_network",
        "server_prefill",
        "server_decode",
        "server_network_end",
    ]
    prefill = server["server_prefill"]
    assert (prefill.start_ms, prefill.end_ms) == (120, 420)  # ends at the first token
    assert prefill.measured_by == "server" and prefill.lane == "server"
    assert server["server_network"].label == "network and queue"
    assert server["server_network"].figure == "120 ms"
    assert "gpu-box.lan" in timeline.server_lane_label
    assert "300 ms of that was reading the prompt" in timeline.summary
    assert (
        timeline.fact("prefill_speed").value == "4,000 tok/s, reported by the server (gpu-box.lan)"
    )
    assert_drawable(timeline)


def test_remote_cost_lists_its_parts_and_where_the_price_came_from() -> None:
    cost = build_timeline(REMOTE_SERVER).fact("cost").value
    assert cost.startswith("$0.0004 = input $0.0003 + cached input $0.00002 + output $0.0001")
    assert cost.endswith("price from the genai-prices dataset")
    reported = {**REMOTE_SERVER, "endpoint_host": "openrouter.ai", "price_source": "reported"}
    assert build_timeline(reported).fact("cost").value.endswith("reported by OpenRouter")
    agent = build_timeline({**REMOTE_SERVER, "price_source": "agent"}).fact("cost").value
    assert agent.endswith("your price for this agent")


def test_unknown_price_says_so_and_is_never_zero() -> None:
    row = {**OPENAI, "model_reported": "gpt-9-preview"}
    cost = build_timeline(row).fact("cost")
    assert cost.value.startswith("unknown price for gpt-9-preview") and not cost.known
    assert "give the agent a price" in cost.value  # what to do about it


def test_a_server_of_ones_own_has_no_price_and_a_counted_prompt_is_an_estimate() -> None:
    row = {
        **OPENAI,
        "provider_kind": "openai-compatible",
        "endpoint_host": "192.168.1.20",
        "token_source": "counted",
        "cached_tokens": None,
    }
    timeline = build_timeline(row)
    cost = timeline.fact("cost")
    assert cost.value.startswith("no price: 192.168.1.20 is a server of your own")
    assert "$" not in cost.value and not cost.known
    prompt = timeline.fact("prompt").value
    assert prompt.startswith("about ") and "estimated from the text's length" in prompt
    assert "$0" not in build_timeline(row).as_text()


def test_reused_connection_is_a_marker_with_no_width() -> None:
    row = {**REMOTE_SERVER, "connect_ms": 0.0, "reused_connection": 1}
    timeline = build_timeline(row)
    assert "connect" not in keys(timeline)
    reused = next(m for m in timeline.markers if m.key == "reused")
    assert reused.at_ms == 0 and reused.label == "reused connection"
    assert timeline.segments[0].key == "headers" and timeline.segments[0].start_ms == 0


def test_openai_without_timings_splits_tcp_and_tls_and_estimates_prefill() -> None:
    timeline = build_timeline(OPENAI)
    assert keys(timeline)[:4] == ["connect", "tls", "headers", "first_token_wait"]
    connect, tls, headers, wait = timeline.segments[:4]
    assert connect.duration_ms == 40 and tls.duration_ms == 80
    assert headers.duration_ms == 180 and wait.duration_ms == 350
    assert "does not report how this splits" in wait.description
    assert not timeline.server_segments
    prefill = timeline.fact("prefill_speed").value
    assert prefill.startswith("at least 5,769 tok/s, estimated from TTFT")
    assert timeline.fact("decode_speed").value == "221 tok/s, measured by SIMI Multi"
    # what OpenAI did not say is said to be missing, in its name
    assert "cached: not reported by OpenAI" in timeline.fact("prompt").value
    assert timeline.fact("context").value == "context window: not reported by OpenAI"
    assert timeline.fact("kv_cache") is None  # a local-only figure
    assert_drawable(timeline)


def test_a_short_prompt_without_server_timings_has_no_prefill_speed() -> None:
    row = {**OPENAI, "prompt_tokens": 30, "prefill_tok_s": None, "prefill_source": None}
    fact = build_timeline(row).fact("prefill_speed")
    assert not fact.known
    assert fact.value == "not reported by OpenAI; the prompt is too short to estimate it from TTFT"


def test_a_reply_in_one_piece_has_no_decode_segment_and_no_speed() -> None:
    row = {**OPENAI, "stream_ms": 0.0, "decode_ms": 0.0, "decode_tok_s": None, "total_ms": 700.0}
    timeline = build_timeline(row)
    assert "decode" not in keys(timeline)
    fact = timeline.fact("decode_speed")
    assert not fact.known and "came in one piece" in fact.value
    assert "tok/s" not in fact.value


def test_a_one_token_reply_has_no_speed() -> None:
    row = {**LOCAL_FIRST, "output_tokens": 1, "stream_ms": 0.0, "decode_tok_s": None}
    fact = build_timeline(row).fact("decode_speed")
    assert fact.value == "not measured: the reply was a single token"


def test_cancelled_before_the_first_token_shows_the_wait_until_stopped() -> None:
    row = {
        "provider_kind": "local",
        "worker_start_ms": 450.0,
        "load_ms": 900.0,
        "ttft_ms": None,
        "total_ms": 3000.0,
        "finish_reason": "cancelled",
    }
    timeline = build_timeline(row)
    assert keys(timeline) == ["worker_start", "load", "no_first_token"]
    assert timeline.segments[-1].end_ms == 3000
    assert "until you stopped it" in timeline.segments[-1].description
    assert timeline.markers[-1].key == "stopped"
    assert timeline.fact("ttft").value == "none: you stopped the call before the first token"
    assert timeline.outcome == "Stopped by you after 3.00 s."
    assert_drawable(timeline)


def test_cancelled_mid_reply_keeps_the_part_that_streamed() -> None:
    row = {**LOCAL_FIRST, "finish_reason": "cancelled", "stream_ms": 500.0, "total_ms": 1200.0}
    timeline = build_timeline(row)
    decode = timeline.segment("decode")
    assert decode is not None and decode.duration_ms == 500
    assert timeline.markers[-1].key == "stopped" and timeline.markers[-1].at_ms == 1200


def test_an_error_before_the_first_token_is_a_partial_timeline() -> None:
    row = {
        "provider_kind": "anthropic",
        "connect_ms": 35.0,
        "reused_connection": 0,
        "headers_ms": 90.0,
        "total_ms": 95.0,
        "finish_reason": "error",
        "error_kind": "auth",
    }
    timeline = build_timeline(row)
    assert keys(timeline) == ["connect", "headers", "no_first_token"]
    assert timeline.markers[-1].key == "failed"
    assert timeline.outcome == "Failed after 95 ms: the key was refused."
    assert timeline.fact("decode_speed").value == "not measured: no reply text arrived"
    assert timeline.fact("output").value == "not reported by Anthropic"


def test_an_old_row_without_the_new_columns_still_draws() -> None:
    row = {
        "provider_kind": "openai",
        "ttft_ms": 300.0,
        "decode_ms": 1000.0,  # before stream_ms existed: the client's first→last span
        "total_ms": 1320.0,
        "prompt_tokens": 12,
        "output_tokens": 40,
        "decode_tok_s": 39.0,
        "finish_reason": "stop",
    }
    timeline = build_timeline(row)
    assert keys(timeline) == ["first_token_wait", "decode", "finishing"]
    assert timeline.segment("decode").duration_ms == 1000
    assert "not reported by OpenAI" in timeline.fact("context").value
    assert_drawable(timeline)
    assert build_timeline({}).segments == () and build_timeline(None).span_ms == 0


def test_absurd_inputs_never_draw_a_negative_segment() -> None:
    row = {
        "provider_kind": "openai-compatible",
        "endpoint_host": "box",
        "connect_ms": -5.0,
        "headers_ms": 2.0,
        "ttft_ms": 1.0,  # before the headers
        "stream_ms": -30.0,
        "total_ms": 0.5,
        "prefill_ms": 900.0,  # longer than the whole call
        "decode_ms": 50.0,
        "timing_source": "server",
        "finish_reason": "stop",
    }
    timeline = build_timeline(row)
    assert_drawable(timeline)
    assert all(s.duration_ms >= 0 for s in timeline.segments + timeline.server_segments)
    local = build_timeline(
        {**LOCAL_FIRST, "ttft_ms": 100.0, "stream_ms": 10.0, "total_ms": 50.0}
    )  # the measured parts are longer than TTFT
    assert_drawable(local)
    assert any("more than the time to first token" in note for note in local.notes)


def test_copy_as_text_holds_every_figure_and_fact() -> None:
    text = build_timeline(REMOTE_SERVER).as_text()
    for part in (
        "Box llama · qwen2.5-7b-instruct",
        "connecting: 3 ms",
        "prefill (server): 300 ms",
        "network and queue: 120 ms",
        "Time to first token: 420 ms",
        "Prompt tokens: 1,450 = 250 cached + 1,200 newly evaluated",
    ):
        assert part in text
