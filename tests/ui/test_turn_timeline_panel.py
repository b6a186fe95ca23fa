"""The reply timeline of an agentic reply (several model calls and tool calls between them):
the turn drawn to scale on top, its totals, a "Call 1 | Call 2" choice showing one call's own
lanes and facts; a one-call reply's panel exactly as before; the footer's line and tooltip;
light and dark screenshots checked for overlaps, cut labels and unnamed controls.

The rows and steps are hand-built as ``ChatService.run`` stores them (tests/chat/
test_turn_timeline.py; a real two-call turn's are checked there): they stand in for a reply
of gpt-4o-mini that called the MCP test server's ``add`` once."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QApplication, QLabel, QPushButton

from desktop.ui.conversation.bubble_parts import StatsFooter
from desktop.ui.kit import theme
from desktop.ui.stats.timeline_chart import Swatch, kind_color
from desktop.ui.stats.timeline_panel import TimelinePanel
from tests.chat.test_tool_turns import always, answer, call, run_turn
from tests.chat.test_turn_timeline import CALL1, CALL2, step
from tests.helpers.fault_server import FaultServer
from tests.helpers.tool_turns import add_mcp_server, tool_agent
from tests.helpers.widget_checks import cut_labels, logical_image, overlaps, unnamed_controls


def settle(qapp: QApplication) -> None:
    for _ in range(5):
        qapp.processEvents()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    qapp.processEvents()


def two_call_panel(qtbot: Any) -> TimelinePanel:
    panel = TimelinePanel(CALL2, None, calls=[CALL1, CALL2], steps=[step()])
    qtbot.addWidget(panel)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


def texts(panel: TimelinePanel) -> list[str]:
    return [w.text() for w in panel.scroll_area.widget().findChildren(QLabel) if w.isVisible()]


def test_two_calls_show_the_turn_to_scale_with_its_totals(qtbot: Any, qapp: Any) -> None:
    panel = two_call_panel(qtbot)
    assert panel.turn_chart is not None and panel.turn_chart.isVisible()
    rects = panel.turn_chart.segment_rects()
    # call 1 → approval → add → call 2, one after another, to scale
    assert rects["call1"].right() <= rects["approval1"].left() + 0.5
    assert rects["approval1"].right() <= rects["tool0"].left() + 0.5
    assert rects["tool0"].right() <= rects["call2"].left() + 0.5
    assert 2.9 < rects["call2"].width() / rects["call1"].width() < 3.1
    assert panel.turn_totals.text() == (
        "2 model calls · 1 tool call · 4.78 s in all: 3.20 s model, 80 ms tools, "
        "1.50 s waiting for your approval"
    )
    listed = panel.turn_text()
    assert "add on tools · 80 ms · done" in listed and "call 2 · 2.40 s · answered" in listed
    # the tool is a colour of its own, in the chart and in its legend swatch
    others = {kind_color(k, False).name() for k in ("call", "wait", "gap")}
    assert kind_color("tool", False).name() not in others
    chart = logical_image(panel.turn_chart)
    at = rects["tool0"].center().toPoint()
    assert chart.pixelColor(at.x(), int(rects["tool0"].top()) + 2) == kind_color("tool", False)
    swatches = [w for w in panel.findChildren(Swatch) if w.kind == "tool"]
    assert swatches and swatches[0].isVisible()
    painted = logical_image(swatches[0])
    assert painted.pixelColor(6, 6) == kind_color("tool", False)  # its colour, drawn


def test_the_last_call_shows_first_and_the_choice_switches_calls(qtbot: Any, qapp: Any) -> None:
    panel = two_call_panel(qtbot)
    one, two = panel.call_buttons
    assert (one.text(), two.text()) == ("Call 1", "Call 2")
    assert two.isChecked() and not one.isChecked()
    assert "CALL 2 OF 2" in texts(panel)
    assert panel.fact_values["ttft"].text() == "300 ms"
    assert not any(t.startswith("It asked for") for t in texts(panel))  # call 2 answered
    qtbot.mouseClick(one, Qt.MouseButton.LeftButton)
    settle(qapp)
    assert one.isChecked() and not two.isChecked() and panel.selected_call == 1
    assert "CALL 1 OF 2" in texts(panel) and "CALL 2 OF 2" not in texts(panel)
    assert "It asked for add on tools (80 ms)." in texts(panel)
    assert panel.fact_values["ttft"].text() == "350 ms"
    assert panel.chart.isVisible() and panel.chart.timeline is panel.turn.call_timelines[0]
    # Copy as text holds the turn and every call
    qtbot.mouseClick(panel.copy_button, Qt.MouseButton.LeftButton)
    copied = qapp.clipboard().text()
    assert "add on tools: 80 ms (done)" in copied
    assert "— Call 1 of 2 —" in copied and "— Call 2 of 2 —" in copied


def test_a_one_call_reply_looks_exactly_as_before(qtbot: Any) -> None:
    before = TimelinePanel(CALL2, None)
    with_one = TimelinePanel(CALL2, None, calls=[CALL2], steps=[])
    for panel in (before, with_one):
        qtbot.addWidget(panel)
        panel.show()
    assert with_one.turn is None and with_one.turn_chart is None
    assert not with_one.findChildren(QPushButton, "TimelineCallChoice")
    assert texts(with_one) == texts(before)
    assert with_one.legend_text() == before.legend_text()


def test_the_footer_says_the_calls_and_the_tools_time(qtbot: Any) -> None:
    footer = StatsFooter()
    qtbot.addWidget(footer)
    footer.resize(900, 30)
    footer.show()
    footer.set_stats("Tooly · gpt-4o-mini · TTFT 300 ms", "the last call", CALL2)
    assert footer.text() == "Tooly · gpt-4o-mini · TTFT 300 ms"
    footer.set_calls([CALL1, CALL2], [step()])
    assert footer.text() == "Tooly · gpt-4o-mini · TTFT 300 ms · 2 calls · tools 80 ms"
    tip = footer.line.toolTip()
    assert "Call 1: 800 ms" in tip and "→ add (80 ms)" in tip and "Call 2: 2.40 s" in tip
    assert tip.endswith("the last call")
    # a later set_stats (the row re-read) keeps the calls' words
    footer.set_stats("Tooly · TTFT 300 ms", "again", CALL2)
    assert footer.text().endswith("· 2 calls · tools 80 ms")
    panel = footer.open_timeline()
    qtbot.addWidget(panel)
    assert panel.turn is not None and len(panel.call_buttons) == 2
    # one call again: the line as set_stats gave it
    footer.set_calls([], [])
    assert footer.text() == "Tooly · TTFT 300 ms"


def test_render_two_call_timeline_screenshots_light_and_dark(
    qtbot: Any, qapp: QApplication, tmp_path: Path
) -> None:
    """Shots for people to look at: ``$SIMI_SCREENSHOT_DIR`` when set, else the tmp dir."""
    out = Path(os.environ.get("SIMI_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    try:
        for shade, dark in (("light", False), ("dark", True)):
            theme.install(qapp, dark=dark)
            panel = two_call_panel(qtbot)
            panel.resize(820, panel.scroll_area.widget().sizeHint().height() + 72)
            settle(qapp)
            body = panel.scroll_area.widget()
            assert overlaps(panel) == [], shade
            assert cut_labels(body) == [], shade
            assert unnamed_controls(panel) == [], shade
            path = out / f"timeline_two_calls_{shade}.png"
            assert panel.grab().save(str(path))
            assert path.stat().st_size > 10_000
            # over the smallest window (720×480, less the margin): it scrolls, nothing is cut
            panel.resize(704, 464)
            settle(qapp)
            assert panel.turn_chart.width() <= panel.scroll_area.viewport().width()
            assert overlaps(panel) == [] and cut_labels(body) == [], shade
            drawn = panel.turn_chart.current_layout().labels  # texts drawn on the bars
            for a, b in itertools.combinations([p.rect for p in drawn], 2):
                assert not a.intersects(b), (a, b)
            width = panel.turn_chart.width()
            assert all(p.rect.left() >= 0 and p.rect.right() <= width for p in drawn)
            panel.close()
    finally:
        theme.install(qapp, dark=False)


def test_a_real_two_call_turns_rows_open_the_turn_panel(
    qtbot: Any, qapp: QApplication, services: Any, tmp_path: Path
) -> None:
    """A turn recorded by ``ChatService.run``: a loopback OpenAI-compatible server (stands in
    for a model that calls tools) and the SDK's MCP test server over stdio."""
    add_mcp_server(services)
    with FaultServer([call("add", {"a": 2, "b": 3}), answer("It is 5.")]) as server:
        agent = tool_agent(services, server.url + "/v1", tools="tools:add")
        turn, _ = run_turn(services, agent, "2+3?", always("once"))
    message = turn.assistant_message_id
    rows = services.stats.calls_for_messages([message])[message]
    steps = services.tools.steps.for_message(message)
    panel = TimelinePanel(rows[-1], None, calls=rows, steps=steps)
    qtbot.addWidget(panel)
    panel.show()
    panel.resize(820, panel.scroll_area.widget().sizeHint().height() + 72)
    settle(qapp)
    assert panel.turn is not None and [b.text() for b in panel.call_buttons] == ["Call 1", "Call 2"]
    assert set(panel.turn_chart.segment_rects()) >= {"call1", "tool0", "call2"}
    assert panel.turn_totals.text().startswith("2 model calls · 1 tool call · ")
    assert "add on tools" in panel.turn_text()
    out = Path(os.environ.get("SIMI_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    assert panel.grab().save(str(out / "timeline_two_calls_real_turn_light.png"))
