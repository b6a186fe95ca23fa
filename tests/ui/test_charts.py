"""The dashboard's QPainter charts on their own: axes a person can read, dots that answer a
hover and a click, bars with their values, colours for light and dark."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QImage

from desktop.ui.kit.theme import DARK, LIGHT
from desktop.ui.stats.chart_axes import metric, ms_text, ms_tick, time_ticks, value_ticks
from desktop.ui.stats.charts import (
    DARK_SERIES,
    LIGHT_SERIES,
    Bar,
    BarGroup,
    CompareBars,
    TimeChart,
    agent_colors,
)
from tests.helpers.widget_checks import logical_image

START = datetime(2026, 11, 20, 9, 0).astimezone()


def _rows(agents: dict[str, list[float]], step_min: float = 30) -> list[dict[str, Any]]:
    rows = []
    i = 0
    for agent, values in agents.items():
        for value in values:
            at = START + timedelta(minutes=step_min * i)
            rows.append(
                {
                    "agent": agent,
                    "started_at": at.isoformat(timespec="milliseconds"),
                    "value": value,
                    "conversation_id": 100 + i,
                    "message_id": 1000 + i if i % 2 == 0 else None,
                }
            )
            i += 1
    return rows


def _chart(qtbot: Any, rows: list[dict[str, Any]], key: str = "ttft_ms") -> TimeChart:
    chart = TimeChart()
    qtbot.addWidget(chart)
    chart.resize(640, 300)
    chart.show()
    qtbot.waitExposed(chart)
    names = list(dict.fromkeys(r["agent"] for r in rows))
    chart.set_series(rows, metric(key), agent_colors(names, dark=False))
    return chart


def test_value_ticks_are_round_numbers_that_cover_the_data() -> None:
    top, ticks = value_ticks(2340, 5)
    assert top >= 2340 and ticks[0] == 0 and ticks[-1] == top
    assert ticks == [0, 500, 1000, 1500, 2000, 2500]
    assert [ms_tick(t) for t in ticks] == ["0 ms", "500 ms", "1 s", "1.5 s", "2 s", "2.5 s"]
    assert ms_text(2345) == "2.35 s" and ms_text(85.2) == "85 ms"


def test_time_ticks_fall_on_whole_local_hours_and_days() -> None:
    start = START.timestamp()
    hours = time_ticks(start + 600, start + 10 * 3600, 6)
    assert all(datetime.fromtimestamp(t.at).minute == 0 for t in hours)
    assert hours[0].date  # the first tick says which day
    assert hours[0].label.endswith(":00")
    days = time_ticks(start, start + 12 * 86400, 6)
    assert all(datetime.fromtimestamp(t.at).hour == 0 for t in days)
    assert days[0].label.split()[1] == "Nov"
    months = time_ticks(start, start + 400 * 86400, 6)
    assert all(datetime.fromtimestamp(t.at).day == 1 for t in months)


# the tooltip window: the offscreen platform cannot raise windows (xcb, wayland, cocoa can)
@pytest.mark.qt_log_ignore("This plugin does not support raise")
def test_hovering_a_dot_names_agent_time_and_value_and_a_click_opens_it(qtbot: Any) -> None:
    chart = _chart(qtbot, _rows({"Fast": [120, 140, 130], "Slow": [2200, 2500, 1900]}))
    assert len(chart.points) == 6
    index = next(i for i, p in enumerate(chart.points) if p.value == 2500)
    pos = chart.point_pos(index)
    assert chart.point_at(pos + QPointF(3, 2)) == index  # a few pixels off still hits
    tip = chart.tooltip_text(index)
    assert tip.splitlines()[0] == "Slow"
    assert "Time to first token: 2.50 s" in tip and "Nov 2026" in tip
    qtbot.mouseMove(chart, pos.toPoint())
    assert chart.hovered == index
    with qtbot.waitSignal(chart.point_clicked) as clicked:
        qtbot.mouseClick(chart, Qt.MouseButton.LeftButton, pos=pos.toPoint())
    assert clicked.args == [chart.points[index].conversation_id, chart.points[index].message_id]
    # away from every dot nothing happens
    with qtbot.assertNotEmitted(chart.point_clicked):
        qtbot.mouseClick(chart, Qt.MouseButton.LeftButton, pos=chart.rect().topLeft())


def test_slower_calls_are_drawn_higher_and_later_ones_further_right(qtbot: Any) -> None:
    chart = _chart(qtbot, _rows({"Fast": [100, 100], "Slow": [2000, 2000]}))
    fast = chart.point_pos(0)
    slow = chart.point_pos(2)
    assert slow.y() < fast.y()  # higher on screen
    assert chart.point_pos(1).x() > fast.x()
    assert chart.accessibleName() == "Time to first token over time"
    assert "4 calls from 2 agents" in chart.accessibleDescription()


def test_one_huge_outlier_does_not_flatten_the_other_calls(qtbot: Any) -> None:
    values = [300 + 10 * i for i in range(40)] + [60_000]
    chart = _chart(qtbot, _rows({"Agent": values}, step_min=5))
    spread = chart.point_pos(0).y() - chart.point_pos(39).y()
    assert spread > 0.3 * chart._plot.height()  # not squashed to a line by the outlier
    tip = chart.tooltip_text(40)
    assert "60.0 s" in tip  # the outlier keeps its true value


def test_dots_are_painted_in_their_agents_colours(qtbot: Any) -> None:
    rows = _rows({"A": [500.0] * 5, "B": [1500.0] * 5})
    chart = _chart(qtbot, rows)
    image: QImage = logical_image(chart)
    colors = agent_colors(["A", "B"], dark=False)
    for index, name in ((0, "A"), (7, "B")):
        p = chart.point_pos(index).toPoint()
        assert QColor(image.pixel(p)).name() == colors[name].name()


def test_empty_chart_says_so(qtbot: Any) -> None:
    chart = _chart(qtbot, [])
    chart.empty_text = "No agent chosen: pick some with the Agents button."
    chart.set_series([], metric("decode_tok_s"), {})
    assert chart.points == []
    assert chart.accessibleDescription() == chart.empty_text
    chart.grab()  # paints without data


def test_series_colours_stand_apart_from_the_background_in_light_and_dark() -> None:
    for series, colors in ((LIGHT_SERIES, LIGHT), (DARK_SERIES, DARK)):
        background = QColor(colors.surface)
        for name in series:
            diff = abs(QColor(name).lightness() - background.lightness())
            assert diff > 60, (name, colors.surface)
    assert agent_colors(["x"], dark=True)["x"] != agent_colors(["x"], dark=False)["x"]


def test_bars_write_p50_and_p95_with_units_and_grow_with_agents(qtbot: Any) -> None:
    bars = CompareBars()
    qtbot.addWidget(bars)
    groups = [
        BarGroup(metric("ttft_ms"), (Bar("Fast", 120, 180), Bar("Slow", 2200, 5400))),
        BarGroup(metric("decode_tok_s"), (Bar("Fast", 80, 85), Bar("Slow", None, None))),
    ]
    bars.set_groups(groups, agent_colors(["Fast", "Slow"], dark=False))
    text = bars.accessibleDescription()
    assert "Slow: Time to first token p50 2.20 s, p95 5.40 s" in text
    assert "Fast: Decode speed p50 80.0 tok/s, p95 85.0 tok/s" in text
    two = bars.heightForWidth(400)
    bars.set_groups(
        [BarGroup(g.metric, (*g.bars, Bar("Third", 500, 900))) for g in groups],
        agent_colors(["Fast", "Slow", "Third"], dark=False),
    )
    assert bars.heightForWidth(400) > two
    assert bars.heightForWidth(1000) < bars.heightForWidth(400)  # side by side when wide
    bars.resize(400, bars.heightForWidth(400))
    bars.show()
    bars.grab()


@pytest.mark.qt_log_ignore("This plugin does not support raise")
def test_the_keyboard_steps_through_calls_in_time_order_and_enter_opens_one(
    qtbot: Any,
) -> None:
    rows = _rows({"A": [500.0, 700.0], "B": [1500.0]})
    chart = _chart(qtbot, list(reversed(rows)))  # handed newest first: still stepped by time
    chart.setFocus()
    qtbot.keyClick(chart, Qt.Key.Key_Right)
    first = chart.points[chart.hovered]
    assert first.value == 500.0  # the earliest call
    qtbot.keyClick(chart, Qt.Key.Key_Right)
    assert chart.points[chart.hovered].value == 700.0
    assert "A" in chart.accessibleDescription() and "700 ms" in chart.accessibleDescription()
    qtbot.keyClick(chart, Qt.Key.Key_End)
    last = chart.points[chart.hovered]
    assert last.value == 1500.0
    with qtbot.waitSignal(chart.point_clicked) as opened:
        qtbot.keyClick(chart, Qt.Key.Key_Return)
    assert opened.args == [last.conversation_id, last.message_id]
