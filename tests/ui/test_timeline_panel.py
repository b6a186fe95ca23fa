"""The reply timeline panel, opened from a reply's footer: figures, scale, help, fit, dark."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import QRectF, Qt
from PySide6.QtWidgets import QApplication, QLabel

from desktop.store.agents import Agent
from desktop.ui.kit import theme
from desktop.ui.stats.timeline_chart import kind_color
from tests.helpers.timeline_rows import LOCAL_FIRST, REMOTE_SERVER
from tests.helpers.widget_checks import logical_image

OPENAI_BARE: dict[str, Any] = {
    "provider_kind": "openai",
    "endpoint_host": "api.openai.com",
    "model_requested": "gpt-4o-mini",
    "connect_ms": 0.0,
    "reused_connection": 1,
    "headers_ms": 210.0,
    "ttft_ms": 380.0,
    "stream_ms": 700.0,
    "decode_ms": 700.0,
    "total_ms": 1100.0,
    "prompt_tokens": 25,
    "output_tokens": 60,
    "decode_tok_s": 84.3,
    "token_source": "reported",
    "finish_reason": "stop",
}


def _reply(services: Any, agent: Any, row: dict[str, Any], **message: Any) -> tuple[int, int]:
    """A conversation whose reply has ``row`` as its stats: its id and the reply's."""
    store = services.conversations
    conv = store.create(agent.id, "Timeline")
    store.add_message(conv.id, "user", "What is a KV cache?")
    reply = store.add_message(
        conv.id,
        "assistant",
        "",
        status="streaming",
        agent_id=agent.id,
        agent_name=agent.name,
        model=agent.model,
    )
    store.finish_message(
        reply.id,
        content=message.get("content", "A KV cache keeps the keys and values of tokens read."),
        status=message.get("status", "complete"),
        error_text=message.get("error_text"),
        error_kind=message.get("error_kind"),
    )
    services.stats.record(
        {
            "agent_name": agent.name,
            "started_at": "2026-12-01T11:16:16.123+00:00",
            **row,
            "message_id": reply.id,
            "conversation_id": conv.id,
            "agent_id": agent.id,
        }
    )
    return conv.id, reply.id


def _open(qtbot: Any, window: Any, services: Any, row: dict[str, Any], **message: Any) -> Any:
    conv_id, reply_id = _reply(services, window.current_agent, row, **message)
    window.open_conversation(conv_id)
    bubble = window.pane.transcript.bubble(reply_id)
    assert bubble is not None
    button = bubble.footer.timeline_button
    assert not button.isHidden() and bubble.footer.isVisible()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    panel = bubble.footer.panel
    assert panel is not None
    qtbot.waitUntil(panel.isVisible)  # built at the click, shown a loop turn later
    qtbot.waitExposed(panel)
    return panel


def test_the_footers_timeline_opens_the_panel_with_every_parts_figure(
    qtbot: Any, window: Any, services: Any
) -> None:
    panel = _open(qtbot, window, services, LOCAL_FIRST)
    assert panel.isVisible() and not panel.isModal()
    legend = panel.legend_text()
    for part in (
        "starting the worker · 450 ms · SIMI Multi",
        "loading the model · 140 ms",
        "reading the prompt (prefill) · 80 ms · 500 tok/s · llama.cpp",
        "writing the reply (decode) · 1.99 s · 60 tok/s · 120 tokens",
        "first token · at 690 ms",
        "done · at 2.70 s",
    ):
        assert part in legend
    assert panel.fact_values["prompt"].text() == "40 = 0 cached + 40 newly evaluated"
    assert panel.fact_values["context"].text() == "160 of 2,048 tokens (8%)"
    assert panel.fact_values["kv_cache"].text() == "48 MiB (f16)"
    assert "Only the first call pays this" in panel.summary.text() and panel.summary.isVisible()
    # keyboard: the footer's button takes focus by Tab
    button = window.pane.transcript.bubbles()[-1].footer.timeline_button
    assert button.focusPolicy() & Qt.FocusPolicy.TabFocus


def test_clicking_the_footer_line_opens_the_panel_too(
    qtbot: Any, window: Any, services: Any
) -> None:
    conv_id, reply_id = _reply(services, window.current_agent, OPENAI_BARE)
    window.open_conversation(conv_id)
    footer = window.pane.transcript.bubble(reply_id).footer
    qtbot.mouseClick(footer.line, Qt.MouseButton.LeftButton)
    assert footer.panel is not None
    qtbot.waitUntil(footer.panel.isVisible)  # built at the click, shown a loop turn later


def test_segments_are_drawn_to_scale(qtbot: Any, window: Any, services: Any) -> None:
    row = {**LOCAL_FIRST, "load_ms": 900.0, "prefill_ms": 100.0, "ttft_ms": 1470.0}
    panel = _open(qtbot, window, services, row)
    rects = panel.chart.segment_rects()
    ratio = rects["load"].width() / rects["prefill"].width()
    assert 8.8 < ratio < 9.2
    assert rects["load"].left() == rects["worker_start"].right()  # one after another


def test_a_missing_figure_says_who_did_not_report_it(
    qtbot: Any, window: Any, services: Any
) -> None:
    panel = _open(qtbot, window, services, OPENAI_BARE)
    context = panel.fact_values["context"]
    assert context.text() == "context window: not reported by OpenAI"
    assert context.objectName() == "TimelineUnknown"
    assert "cached: not reported by OpenAI" in panel.fact_values["prompt"].text()
    assert "reused connection" in panel.legend_text()
    assert "not reported by OpenAI" in panel.timeline.as_text()


def test_server_timings_show_as_a_second_lane_with_network_and_queue(
    qtbot: Any, window: Any, services: Any
) -> None:
    panel = _open(qtbot, window, services, REMOTE_SERVER)
    rects = panel.chart.segment_rects()
    assert rects["server_prefill"].top() > rects["first_token_wait"].bottom()  # below it
    assert abs(rects["server_prefill"].right() - rects["first_token_wait"].right()) < 0.5
    legend = panel.legend_text()
    assert "network and queue · 120 ms · the rest of SIMI Multi's time" in legend
    assert "prefill (server) · 300 ms · 4,000 tok/s · gpu-box.lan" in legend
    cost = panel.fact_values["cost"].text()
    assert "cached input $0.00002" in cost and "genai-prices" in cost
    assert "cost" in panel.bars


def test_a_knowledge_search_is_a_lane_of_its_own_before_the_call(
    qtbot: Any, window: Any, services: Any, qapp: QApplication, tmp_path: Path
) -> None:
    """An agent that searched its knowledge collections: the search's parts in their own
    lane from Send, the call's parts after it, both in the legend; a picture to look at."""
    row = {
        **LOCAL_FIRST,
        "retrieval_ms": 180.0,
        "retrieval_embed_ms": 120.0,
        "retrieval_search_ms": 45.0,
        "retrieval_read_ms": 15.0,
        "retrieval_chunks": 5,
        "retrieval_tokens": 1450,
    }
    row["ttft_ms"] = LOCAL_FIRST["ttft_ms"] + 180.0
    row["total_ms"] = LOCAL_FIRST["total_ms"] + 180.0
    panel = _open(qtbot, window, services, row)
    rects = panel.chart.segment_rects()
    call_lane = panel.chart.current_layout().lanes
    assert [title for title, _ in call_lane][1].startswith("Knowledge search")
    assert rects["retrieval_embed"].top() > rects["worker_start"].bottom()  # its own lane
    assert rects["retrieval_embed"].left() < rects["retrieval_search"].left()
    assert abs(rects["worker_start"].left() - rects["retrieval_read"].right()) < 0.5
    legend = panel.legend_text()
    assert "embedding the question · 120 ms" in legend and "reading the passages" in legend
    assert panel.fact_values["retrieval"].text().startswith("5 passages, about 1,450")
    _no_overlap([label.rect for label in panel.chart.current_layout().labels])
    out = Path(os.environ.get("SIMI_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    panel.resize(panel.width(), panel.scroll_area.widget().sizeHint().height() + 72)
    qapp.processEvents()
    panel.grab().save(str(out / "timeline_knowledge.png"))


def test_how_to_read_this_opens_the_help_with_the_definitions(
    qtbot: Any, window: Any, services: Any
) -> None:
    panel = _open(qtbot, window, services, LOCAL_FIRST)
    qtbot.mouseClick(panel.help_button, Qt.MouseButton.LeftButton)
    assert panel.help is not None and panel.help.isVisible()
    text = panel.help.plain_text()
    for words in ("Prefill", "KV cache", "TTFT", "Decode", "Batching", "estimated from TTFT"):
        assert words in text
    assert "from the request being sent to the first content token received" in text


def test_copy_as_text_copies_every_figure(
    qtbot: Any, window: Any, services: Any, qapp: QApplication
) -> None:
    panel = _open(qtbot, window, services, REMOTE_SERVER)
    qtbot.mouseClick(panel.copy_button, Qt.MouseButton.LeftButton)
    copied = qapp.clipboard().text()
    assert copied.startswith("Reply timeline:")
    assert "prefill (server): 300 ms" in copied and "Time to first token: 420 ms" in copied


def test_a_failed_reply_still_offers_its_timeline(qtbot: Any, window: Any, services: Any) -> None:
    row = {
        "provider_kind": "openai",
        "connect_ms": 40.0,
        "reused_connection": 0,
        "total_ms": 5000.0,
        "finish_reason": "error",
        "error_kind": "unavailable",
    }
    panel = _open(
        qtbot,
        window,
        services,
        row,
        content="",
        status="error",
        error_text="The server cannot be reached.",
        error_kind="unavailable",
    )
    assert panel.timeline.outcome == "Failed after 5.00 s: the server could not be reached."
    assert "waiting for the first token" in panel.legend_text()


def _no_overlap(rects: list[QRectF]) -> None:
    for a, b in itertools.combinations(rects, 2):
        assert not a.intersects(b), (a, b)


def test_nothing_overlaps_at_the_smallest_window(
    qtbot: Any, window: Any, services: Any, qapp: QApplication
) -> None:
    window.resize(720, 480)
    qapp.processEvents()
    for row in (LOCAL_FIRST, REMOTE_SERVER):
        panel = _open(qtbot, window, services, row)
        assert panel.width() <= 720 and panel.height() <= 480
        qapp.processEvents()
        # the chart fits the scroll area's width: nothing cut at the right
        assert panel.chart.width() <= panel.scroll_area.viewport().width()
        layout = panel.chart.current_layout()
        _no_overlap([label.rect for label in layout.labels])
        for label in layout.labels:
            assert label.rect.left() >= 0 and label.rect.right() <= panel.chart.width()
        inside = [
            p
            for p in layout.labels
            if any(p.rect.intersects(s.rect) for s in layout.segments.values())
        ]
        for label in inside:  # a label on a bar stays inside its own segment
            assert any(s.rect.contains(label.rect.center()) for s in layout.segments.values())
            host = next(s for s in layout.segments.values() if s.rect.contains(label.rect.center()))
            assert host.rect.left() <= label.rect.left() and label.rect.right() <= host.rect.right()
        _no_overlap([rect for _, _, rect in layout.ticks])
        body = panel.scroll_area.widget()
        labels = [w for w in body.findChildren(QLabel) if w.isVisible()]
        _no_overlap(
            [
                QRectF(w.geometry().translated(w.mapTo(body, w.rect().topLeft()) - w.pos()))
                for w in labels
            ]
        )
        panel.close()


def test_dark_theme_draws_with_dark_colours(
    qtbot: Any, window: Any, services: Any, qapp: QApplication
) -> None:
    try:
        theme.install(qapp, dark=True)
        panel = _open(qtbot, window, services, LOCAL_FIRST)
        qapp.processEvents()
        image = logical_image(panel)
        assert image.pixelColor(4, 4).lightnessF() < 0.3  # the window behind
        load = panel.chart.segment_rects()["load"]
        chart = logical_image(panel.chart)
        at = load.center().toPoint()
        assert chart.pixelColor(at.x(), load.top() + 2) == kind_color("load", True)
        assert panel.fact_values["prompt"].palette().windowText().color().lightnessF() > 0.6
    finally:
        theme.install(qapp, dark=False)


def test_render_timeline_screenshots_light_and_dark(
    qtbot: Any, window: Any, services: Any, qapp: QApplication, tmp_path: Path
) -> None:
    """Shots for people to look at: ``$SIMI_SCREENSHOT_DIR`` when set, else the tmp dir."""
    out = Path(os.environ.get("SIMI_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    window.resize(1280, 960)
    box = services.agents.create(
        Agent(
            name="GPU box (llama.cpp server)",
            kind="openai-compatible",
            base_url="http://gpu-box.lan:8080/v1",
            model="qwen2.5-7b-instruct",
        )
    )
    try:
        for name, row, agent in (
            ("local", LOCAL_FIRST, window.current_agent),
            ("remote", REMOTE_SERVER, box),
        ):
            conv_id, reply_id = _reply(services, agent, row)
            for shade, dark in (("light", False), ("dark", True)):
                theme.install(qapp, dark=dark)
                window.open_conversation(conv_id)
                bubble = window.pane.transcript.bubble(reply_id)
                panel = bubble.footer.open_timeline()
                qtbot.waitExposed(panel)
                # the whole panel in one picture: as tall as its content (it scrolls otherwise)
                panel.resize(panel.width(), panel.scroll_area.widget().sizeHint().height() + 72)
                qapp.processEvents()
                path = out / f"timeline_{name}_{shade}.png"
                assert panel.grab().save(str(path))
                assert path.stat().st_size > 10_000
                panel.close()
    finally:
        theme.install(qapp, dark=False)
