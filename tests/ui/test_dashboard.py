"""The Stats page as a person meets it in the window: real SQLite rows (StatsStore.record), the
real page and charts offscreen."""

from __future__ import annotations

import csv
import json
import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtWidgets import QApplication, QWidget

from desktop.ui.stats import dashboard
from desktop.ui.stats.dashboard_data import COLUMNS
from tests.helpers.shots import light_and_dark, save_grab

NOW = datetime.now(UTC)
HEADERS = [name.replace("\n", " ") for name, _ in COLUMNS]


def _at(days_ago: float) -> str:
    return (NOW - timedelta(days=days_ago)).isoformat(timespec="milliseconds")


def _call(
    services: Any,
    agent: str,
    ttft_ms: float,
    decode_tok_s: float | None,
    *,
    kind: str = "openai",
    days_ago: float = 1.0,
    cost: float | None = None,
    price_source: str | None = None,
    error_kind: str | None = None,
    prompt: int = 100,
    cached: int = 0,
    output: int = 50,
    message_id: int | None = None,
    conversation_id: int | None = None,
) -> int:
    failed = error_kind is not None
    return services.stats.record(
        {
            "agent_name": agent,
            "provider_kind": kind,
            "started_at": _at(days_ago),
            "ttft_ms": None if failed else ttft_ms,
            "decode_tok_s": None if failed else decode_tok_s,
            "prefill_tok_s": 900.0 if kind == "local" and not failed else None,
            "total_ms": ttft_ms + 1000,
            "prompt_tokens": prompt,
            "cached_tokens": cached,
            "output_tokens": 0 if failed else output,
            "finish_reason": "error" if failed else "stop",
            "error_kind": error_kind,
            "cost_usd": cost,
            "price_source": price_source,
            "message_id": message_id,
            "conversation_id": conversation_id,
        }
    )


def _three_agents(services: Any, days_ago: float = 1.0) -> None:
    """Quick local (fast, free), Cloud steady (priced, one failure), Cloud laggy (slow first
    token, two of its four calls without a known price)."""
    for i, ttft in enumerate((100, 110, 120, 130, 140)):
        _call(
            services,
            "Quick local",
            ttft,
            80 + i,
            kind="local",
            cost=0.0,
            price_source="local",
            days_ago=days_ago + i / 100,
        )
    for i, ttft in enumerate((380, 400, 420)):
        _call(
            services,
            "Cloud steady",
            ttft,
            60,
            cost=0.01,
            price_source="genai-prices",
            prompt=200,
            cached=100,
            days_ago=days_ago + i / 100,
        )
    _call(
        services,
        "Cloud steady",
        0,
        None,
        error_kind="rate_limited",
        prompt=200,
        cached=100,
        days_ago=days_ago,
    )  # no price recorded for the failed call: it counts as unpriced
    for i, ttft in enumerate((1800, 2000, 2200, 2400)):
        priced = i < 2
        _call(
            services,
            "Cloud laggy",
            ttft,
            20,
            kind="openai-compatible",
            cost=0.005 if priced else None,
            price_source="genai-prices" if priced else None,
            days_ago=days_ago + i / 100,
        )


def _open_page(window: Any, qtbot: Any) -> Any:
    page = window.stats_page
    with qtbot.waitSignal(page.refreshed, timeout=10_000):
        window.show_page("stats")
    return page


def _cells(page: Any) -> dict[str, dict[str, str]]:
    """Agent → column → text, as the table shows it."""
    out: dict[str, dict[str, str]] = {}
    for r in range(page.table.rowCount()):
        row = {HEADERS[c]: page.table.item(r, c).text() for c in range(len(HEADERS))}
        out[row["Agent"]] = row
    return out


def test_the_table_shows_each_agents_figures_in_words(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    _three_agents(services)
    _call(services, "Mystery model", 700, 30, cost=None, price_source=None)
    page = _open_page(make_window(services), qtbot)
    cells = _cells(page)
    # most calls first; equal counts by name
    assert list(cells) == ["Quick local", "Cloud laggy", "Cloud steady", "Mystery model"]
    local, steady, laggy = cells["Quick local"], cells["Cloud steady"], cells["Cloud laggy"]
    assert (local["Calls"], local["TTFT p50 / p95"]) == ("5", "120 ms / 140 ms")
    assert local["Decode p50 / p95"] == "82.0 / 84.0 tok/s"
    assert (local["Prefill p50"], local["Tokens in / out"]) == ("900 tok/s", "500 / 250")
    assert local["Cost"] == "local"
    assert steady["Errors"] == "1 (25%)"
    errors_tip = page.table.item(2, HEADERS.index("Errors")).toolTip()
    assert "1 × rate limited" in errors_tip  # words, not the error's key
    assert (steady["TTFT p50 / p95"], steady["Cached"]) == ("400 ms / 420 ms", "50%")
    assert steady["Cost"] == "$0.03 + 1 unpriced"  # the failed call has no price recorded
    assert laggy["TTFT p50 / p95"] == "2.00 s / 2.40 s"
    assert laggy["Cost"] == "$0.01 + 2 unpriced"  # unknown prices are never counted as $0
    assert cells["Mystery model"]["Cost"] == "—"
    assert page.headline.text().startswith(
        "Cloud laggy is slowest to start: its first token typically comes after 2.00 s, "
        "17× Quick local's 120 ms."
    )
    # the bars compare the same agents with the same figures
    text = page.bars.accessibleDescription()
    assert "Quick local: Time to first token p50 120 ms, p95 140 ms" in text
    assert "Cloud laggy: Decode speed p50 20.0 tok/s" in text


def test_tool_columns_show_only_when_an_agent_used_tools(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    """Rows as an agentic turn stores them: the call that asked for tools ends "tool_calls"
    with their count and run time (chat/turn_calls.call_stats), the answering call without."""
    _three_agents(services)
    window = make_window(services)
    page = _open_page(window, qtbot)
    assert page.table.columnCount() == len(COLUMNS)  # no tools: the table as before
    for days_ago in (0.5, 0.6):
        services.stats.record(
            {
                "agent_name": "Tooly",
                "provider_kind": "openai",
                "started_at": _at(days_ago),
                "ttft_ms": 300.0,
                "total_ms": 800.0,
                "finish_reason": "tool_calls",
                "call_index": 1,
                "tool_calls": 2,
                "tool_ms": 60.0,
            }
        )
        _call(services, "Tooly", 250, 50, days_ago=days_ago - 0.01)
    with qtbot.waitSignal(page.refreshed, timeout=10_000):
        page.reload()
    headers = [page.table.horizontalHeaderItem(c).text() for c in range(page.table.columnCount())]
    assert headers[-3:] == ["Tool\ncalls", "Tool\ntime", "Cost"]
    by_agent = {
        page.table.item(r, 0).text(): [
            page.table.item(r, c).text() for c in range(page.table.columnCount())
        ]
        for r in range(page.table.rowCount())
    }
    assert by_agent["Tooly"][1] == "4"  # model calls: every row
    assert by_agent["Tooly"][-3:-1] == ["4", "120 ms"]
    assert by_agent["Cloud steady"][-3:-1] == ["0", "—"]


def test_the_date_range_changes_what_is_shown(qtbot: Any, services: Any, make_window: Any) -> None:
    _call(services, "Recent agent", 300, 40, days_ago=2)
    _call(services, "Old agent", 500, 30, days_ago=20)
    _call(services, "Ancient agent", 500, 30, days_ago=200)
    page = _open_page(make_window(services), qtbot)
    assert set(_cells(page)) == {"Old agent", "Recent agent"}  # the last 30 days by default
    with qtbot.waitSignal(page.refreshed, timeout=10_000):
        page.set_range("7d")
    assert set(_cells(page)) == {"Recent agent"}
    assert len(page.chart.points) == 1
    with qtbot.waitSignal(page.refreshed, timeout=10_000):
        page.set_range("all")
    assert set(_cells(page)) == {"Recent agent", "Old agent", "Ancient agent"}
    day = (NOW - timedelta(days=20)).astimezone().date()
    with qtbot.waitSignal(page.refreshed, timeout=10_000):
        page.set_range("custom", (day - timedelta(days=1), day + timedelta(days=1)))
    assert set(_cells(page)) == {"Old agent"}
    assert page.from_edit.isVisible() and page.to_edit.isVisible()


def test_the_caller_choice_shows_the_apps_calls_or_an_api_clients(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    _call(services, "In the window", 300, 40)
    for client in ("editor", "script"):
        row = _call(services, f"Served to {client}", 200, 50)
        services.db.execute(
            "UPDATE inference_stats SET source = 'api', api_client = ? WHERE id = ?",
            [client, row],
        )
    page = _open_page(make_window(services), qtbot)
    box = page.source_box
    choices = [box.itemText(i) for i in range(box.count())]
    assert choices == [
        "All callers",
        "This app",
        "API clients",
        "API key: editor",
        "API key: script",
    ]
    assert set(_cells(page)) == {"In the window", "Served to editor", "Served to script"}
    for choice, agents in (
        ("This app", {"In the window"}),
        ("API clients", {"Served to editor", "Served to script"}),
        ("API key: script", {"Served to script"}),
    ):
        with qtbot.waitSignal(page.refreshed, timeout=10_000):
            box.setCurrentIndex(box.findText(choice))
        assert set(_cells(page)) == agents, choice
    # the export takes the same callers
    export = page.export_filter()
    assert export is not None and (export.source, export.clients) == ("api", ("script",))


def test_clicking_a_dot_opens_that_reply_revealed(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    store = services.conversations
    conv = store.create(None, "Why so slow?")
    for i in range(30):  # enough messages that the reply is not on the first screen
        store.add_message(conv.id, "user", f"question {i}")
        store.add_message(conv.id, "assistant", f"answer {i}", agent_name="Cloud laggy")
    target = store.messages(conv.id)[9]  # an early reply
    _call(services, "Cloud laggy", 2500, 20, message_id=target.id, conversation_id=conv.id)
    _call(services, "Cloud laggy", 900, 25, days_ago=3)  # another dot, elsewhere
    window = make_window(services)
    page = _open_page(window, qtbot)
    index = next(i for i, p in enumerate(page.chart.points) if p.message_id == target.id)
    assert "Cloud laggy" in page.chart.tooltip_text(index)
    assert "2.50 s" in page.chart.tooltip_text(index)
    page.scroll_area.ensureWidgetVisible(page.chart)
    qtbot.mouseClick(
        page.chart, Qt.MouseButton.LeftButton, pos=page.chart.point_pos(index).toPoint()
    )
    assert window.current_page == "chat"
    assert window.conversation_id == conv.id
    bubble = window.pane.transcript.bubble(target.id)
    assert bubble is not None and bubble.property("found") == "true"


def test_a_dot_whose_reply_was_replaced_opens_its_conversation_and_says_so(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    conv = services.conversations.create(None, "Replaced one")
    services.conversations.add_message(conv.id, "user", "hello")
    _call(services, "Cloud steady", 400, 60, conversation_id=conv.id, message_id=None)
    _call(services, "Cloud steady", 300, 60, conversation_id=None, message_id=None, days_ago=2)
    window = make_window(services)
    page = _open_page(window, qtbot)
    gone = next(i for i, p in enumerate(page.chart.points) if p.conversation_id is None)
    qtbot.mouseClick(
        page.chart, Qt.MouseButton.LeftButton, pos=page.chart.point_pos(gone).toPoint()
    )
    assert window.current_page == "stats"
    assert "deleted" in window.status_label.text()
    kept = next(i for i, p in enumerate(page.chart.points) if p.conversation_id == conv.id)
    qtbot.mouseClick(
        page.chart, Qt.MouseButton.LeftButton, pos=page.chart.point_pos(kept).toPoint()
    )
    assert window.current_page == "chat" and window.conversation_id == conv.id
    assert window.status_label.text() == "That reply was replaced since; showing “Replaced one”."


def test_export_writes_the_filtered_calls_as_csv_and_json(
    qtbot: Any, services: Any, make_window: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    _three_agents(services)
    _call(services, "Quick local", 90, 85, kind="local", days_ago=60)  # outside the range
    window = make_window(services)
    page = _open_page(window, qtbot)
    page.picker.set_checked(["Quick local", "Cloud laggy"])
    qtbot.waitUntil(lambda: set(_cells(page)) == {"Quick local", "Cloud laggy"})
    writers: list[bool] = []
    real_csv = dashboard.rows_to_csv

    def rows_to_csv(*args: Any) -> None:
        writers.append(threading.current_thread() is threading.main_thread())
        real_csv(*args)

    monkeypatch.setattr(dashboard, "rows_to_csv", rows_to_csv)
    asked: list[str] = []
    target = tmp_path / "stats.csv"
    window.ask_save_path = lambda _t, suggested, _f: asked.append(suggested) or str(target)
    qtbot.waitUntil(page.export("csv").done, timeout=10_000)
    assert asked[0].startswith("simi-stats-") and asked[0].endswith(".csv")
    with target.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 9  # 5 local + 4 laggy, none from 60 days ago, none of Cloud steady
    assert {r["agent_name"] for r in rows} == {"Quick local", "Cloud laggy"}
    assert sorted(r["cost_usd"] for r in rows if r["agent_name"] == "Cloud laggy") == [
        "",
        "",
        "0.005",
        "0.005",
    ]  # unpriced stays empty, never 0
    assert window.status_label.text() == "Exported 9 calls to stats.csv"
    assert writers == [False]  # written on a worker thread
    target = tmp_path / "stats.json"
    window.ask_save_path = lambda *_a: str(target)
    qtbot.waitUntil(page.export("json").done, timeout=10_000)
    data = json.loads(target.read_text(encoding="utf-8"))
    assert len(data) == 9 and {r["agent_name"] for r in data} == {"Quick local", "Cloud laggy"}
    assert any(r["cost_usd"] is None for r in data)


def test_empty_states_tell_a_new_user_what_to_do(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    window = make_window(services)
    before = window.stats_page  # built; its first answer not read yet
    assert before.empty_title.text() == "Reading the stats…" and not before.empty_hint.text()
    assert before.all_time_button.isHidden()
    page = _open_page(window, qtbot)
    assert page.body.currentIndex() == 0
    assert page.empty_title.text() == "No calls yet"
    assert "Send a message to any agent" in page.empty_hint.text()
    assert not page.all_time_button.isVisible()
    _call(services, "Old agent", 500, 30, days_ago=45)
    with qtbot.waitSignal(page.refreshed, timeout=10_000):
        page.refresh_button.click()
    assert page.empty_title.text() == "Nothing in this date range"
    assert "widen the date range" in page.empty_hint.text()
    assert page.all_time_button.isVisible()
    with qtbot.waitSignal(page.refreshed, timeout=10_000):
        page.all_time_button.click()
    assert page.body.currentIndex() == 1 and set(_cells(page)) == {"Old agent"}


def test_a_call_recorded_while_the_page_is_open_shows_up(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    _call(services, "Cloud steady", 400, 60)
    page = _open_page(make_window(services), qtbot)
    assert _cells(page)["Cloud steady"]["Calls"] == "1"
    _call(services, "Cloud steady", 500, 60, days_ago=0.01)
    page._watch.setInterval(50)  # the page's own check for new calls, sooner
    qtbot.waitUntil(lambda: _cells(page)["Cloud steady"]["Calls"] == "2", timeout=10_000)


def test_the_agent_picker_chooses_what_the_table_and_charts_show(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    for i in range(7):
        for _ in range(7 - i):
            _call(services, f"Agent {i}", 100 * (i + 1), 50)
    page = _open_page(make_window(services), qtbot)
    assert list(_cells(page)) == [f"Agent {i}" for i in range(5)]  # the busiest five
    assert page.picker.text() == "Agents: 5 of 7 ▾"
    with qtbot.waitSignal(page.refreshed, timeout=10_000):
        page.picker.set_checked(["Agent 6"])
    assert list(_cells(page)) == ["Agent 6"]
    assert {p.agent for p in page.chart.points} == {"Agent 6"}
    with qtbot.waitSignal(page.refreshed, timeout=10_000):
        page.picker.set_checked([])
    assert page.table.rowCount() == 0
    assert "pick some" in page.chart.empty_text


def _overlaps(root: QWidget) -> list[str]:
    """Visible sibling widgets whose rectangles intersect, anywhere under ``root``."""
    found = []
    for parent in [root, *root.findChildren(QWidget)]:
        if not parent.isVisible():
            continue
        kids = [
            w
            for w in parent.children()
            if isinstance(w, QWidget) and w.isVisible() and not w.isWindow()
        ]
        for i, a in enumerate(kids):
            for b in kids[i + 1 :]:
                if a.geometry().intersects(b.geometry()):
                    found.append(
                        f"{a.objectName() or type(a).__name__} / "
                        f"{b.objectName() or type(b).__name__} in {type(parent).__name__}"
                    )
    return found


def test_nothing_overlaps_at_the_smallest_window(
    qtbot: Any, services: Any, make_window: Any, qapp: QApplication
) -> None:
    _three_agents(services)
    window = make_window(services)
    window.resize(720, 480)
    page = _open_page(window, qtbot)
    qapp.processEvents()
    assert window.width() == 720 and window.height() == 480
    assert _overlaps(page) == []
    if os.environ.get("SIMI_SCREENSHOT_DIR"):
        window.grab().save(str(Path(os.environ["SIMI_SCREENSHOT_DIR"]) / "dashboard_small.png"))
    visible = QRect(QPoint(0, 0), page.size())
    for w in (page.range_box, page.picker, page.refresh_button, page.csv_button, page.json_button):
        top_left = w.mapTo(page, QPoint(0, 0))
        assert visible.contains(QRect(top_left, w.size())), w.text() if hasattr(w, "text") else w


def test_screenshots_of_three_agents_light_and_dark(
    qtbot: Any, services: Any, make_window: Any, qapp: QApplication, shot_dir: Path
) -> None:
    for day in range(12):  # a dozen days of use, each agent at its own pace
        for k in range(3):
            ago = day + k / 4 + 0.05
            _call(
                services,
                "Quick local",
                140 + 25 * k + 3 * day,
                75 + 5 * k,
                kind="local",
                cost=0.0,
                price_source="local",
                days_ago=ago,
            )
            _call(
                services,
                "Cloud steady",
                420 + 40 * k,
                58 + 2 * k,
                cost=0.002,
                price_source="genai-prices",
                cached=60 * k,
                days_ago=ago + 0.02,
            )
            _call(
                services,
                "Cloud laggy",
                1500 + 700 * k + (2500 if day % 5 == 0 else 0),  # some days it queues
                22 + k,
                kind="openai-compatible",
                cost=0.004 if k else None,
                price_source="genai-prices" if k else None,
                days_ago=ago + 0.04,
            )
    window = make_window(services, size=(1200, 860), list_width=260)
    page = _open_page(window, qtbot)
    for shade in light_and_dark(qapp):
        with qtbot.waitSignal(page.refreshed, timeout=10_000):
            page.refresh()  # the chart colours follow the scheme
        qapp.processEvents()
        save_grab(window, shot_dir / f"dashboard_{shade}.png", 10_000)


def test_view_stats_opens_the_page_and_has_a_shortcut(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    _call(services, "Cloud steady", 400, 60)
    window = make_window(services)
    view = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    action = next(a for a in view.actions() if a.text() == "Stats dashboard")
    assert action.shortcut().toString() == "Ctrl+Shift+S"
    with qtbot.waitSignal(window.stats_page.refreshed, timeout=10_000):
        action.trigger()
    assert window.current_page == "stats"
    assert set(_cells(window.stats_page)) == {"Cloud steady"}
    sheet = window.show_shortcuts()
    assert dict(sheet.rows())["Stats dashboard"] == "Ctrl+Shift+S"
    sheet.close()


def test_a_database_that_cannot_be_read_is_said_in_words_and_refresh_recovers(
    qtbot: Any, services: Any, make_window: Any, monkeypatch: Any
) -> None:
    import sqlite3

    _call(services, "Cloud steady", 400, 60)
    window = make_window(services)
    real = services.stats.summary

    def locked(*_args: Any) -> None:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(services.stats, "summary", locked)
    page = window.stats_page
    window.show_page("stats")
    qtbot.waitUntil(lambda: "Could not read the stats" in page.message.text())
    assert page.message.text() == "Could not read the stats (database is locked). Try Refresh."
    assert page.empty_title.text() == "Could not read the stats"  # not "Reading…" for ever
    monkeypatch.setattr(services.stats, "summary", real)
    with qtbot.waitSignal(page.refreshed, timeout=10_000):
        page.refresh_button.click()
    assert set(_cells(page)) == {"Cloud steady"}
