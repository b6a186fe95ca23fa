"""The image figures of a call (m014): tokens reported by the backend, or estimated from the
images' sizes and marked so; a local call's projector time, drawn as its own timeline lane."""

from __future__ import annotations

from desktop.chat.call import image_estimate
from desktop.chat.stats_clock import StatsClock
from desktop.chat.timeline import build_timeline
from desktop.llm.events import Finished, TextDelta, Timing, Usage
from desktop.llm.provider import ChatMessage, ChatRequest, ImagePart
from tests.helpers.stats_rows import clock_record as record
from tests.helpers.timeline_rows import LOCAL_FIRST


def _ended(clock: StatsClock, *events: object) -> StatsClock:
    for event in (TextDelta("ok", tokens=1), *events, Finished("stop")):
        clock.on_event(event)  # type: ignore[arg-type]
    return clock


def test_reported_image_tokens_win_over_the_estimate() -> None:
    clock = StatsClock()
    clock.images_sent(1_105)
    _ended(clock, Usage(prompt_tokens=1_300, output_tokens=1, image_tokens=1_032))
    row = record(clock, "stop")
    assert (row.image_tokens, row.image_tokens_estimated) == (1_032, 0)


def test_without_a_report_the_row_holds_the_estimate_marked_estimated() -> None:
    clock = StatsClock()
    clock.images_sent(1_105)
    _ended(clock, Usage(prompt_tokens=1_300, output_tokens=1, source="reported"))
    row = record(clock, "stop")
    assert (row.image_tokens, row.image_tokens_estimated) == (1_105, 1)
    plain = record(_ended(StatsClock()), "stop")
    assert (plain.image_tokens, plain.image_tokens_estimated, plain.image_encode_ms) == (
        None,
        None,
        None,
    )


def test_the_projector_time_is_kept() -> None:
    clock = StatsClock()
    clock.images_sent(576)
    _ended(clock, Timing(image_encode_ms=812.344, prefill_ms=90.0))
    assert record(clock, "stop").image_encode_ms == 812.34


def test_the_estimate_is_the_providers_formula_over_the_images_sent() -> None:
    image = ImagePart("image/png", b"", width=1024, height=1024)
    request = ChatRequest(
        model="m",
        messages=(
            ChatMessage("user", "a", images=(image,)),
            ChatMessage("assistant", "b"),
            ChatMessage("user", "c", images=(image, image)),
        ),
    )
    # OpenAI's tiles: 85 + 170 per 512-pixel tile, after the short side is cut to 768
    assert image_estimate(request, "openai") == 3 * (85 + 170 * 4)
    assert image_estimate(request, "local") == 3 * 576
    assert (
        image_estimate(ChatRequest(model="m", messages=(ChatMessage("user", "x"),)), "openai")
        is None
    )


def test_a_local_calls_image_encoding_is_a_lane_of_its_own() -> None:
    row = {**LOCAL_FIRST, "image_encode_ms": 300.0, "image_tokens": 576}
    row["image_tokens_estimated"] = 1
    timeline = build_timeline(row)
    assert timeline.server_lane_label.startswith("Image encoding")
    (segment,) = timeline.server_segments
    prefill = timeline.segment("prefill")
    assert segment.key == "image_encode" and segment.lane == "images"
    assert prefill is not None and segment.start_ms == prefill.start_ms
    assert segment.duration_ms == 300.0 and segment.measured_by == "llama.cpp"
    assert "about 576 tokens" in segment.description
    fact = timeline.fact("image_tokens")
    assert fact is not None and fact.value.startswith("about 576")
    assert "Image encoding" in timeline.as_text()

    without = build_timeline(LOCAL_FIRST)
    assert without.server_segments == () and without.server_lane_label == ""
    assert without.fact("image_tokens") is None
