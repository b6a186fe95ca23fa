"""Scale of the Stats page: 100,000 calls across 50 agents in a real SQLite file.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/stats.py

Prints one JSON object. ``open_ms``: from showing the page (the window's Stats button, which
asks afresh) until the table, the chart and the bars are painted with the answer; the page
opens on its default range (last 30 days). ``filter_redraw_ms``: from a filter change (date
range: 7 days, 90 days, all time, 24 hours, 30 days; agents: three picked, back to the
busiest five; the chart's figure) until the page is repainted with the new answer. Both are
medians over the runs (``*_max_ms`` the worst, ``runs`` every one), against ``target_ms``
(300). Both include the questions to SQLite, answered on a worker thread while the window
keeps painting.

The reference, in the same run and on the same file: the bare SQL of the page's questions
(``reference``): a per-agent ``COUNT(*)`` over the 30 days, and the store's own
``summary`` / ``series`` calls timed without the page, so a slow page tells whether the time
goes to SQLite or to the widgets.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")
os.environ["SIMI_HOME"] = tempfile.mkdtemp(prefix="simi-stats-")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtCore import QEvent, QEventLoop, QObject, QTimer
from PySide6.QtWidgets import QApplication

from desktop.chat.services import Services
from desktop.settings.paths import AppPaths
from desktop.store.stats import StatsFilter
from desktop.ui.kit import theme
from desktop.ui.kit.loop import drain, new_loop
from desktop.ui.shell.main_window import MainWindow
from tests.helpers.stats_rows import fill_stats

ROWS = 100_000
AGENTS = 50
REPEATS = 5
TARGET_MS = 300
TIMEOUT_S = 30.0


class Waiter(QObject):
    """Waits, idle as the app's event loop waits, until the page has shown a new answer and
    the chart has painted after it (a paint event on the chart once ``refreshed`` fired)."""

    def __init__(self, page: QObject, chart: QObject) -> None:
        super().__init__()
        self._loop = QEventLoop()
        self._answered = False
        self._done = False
        self._timeout = QTimer(self)
        self._timeout.setSingleShot(True)
        self._timeout.setInterval(int(TIMEOUT_S * 1000))
        self._timeout.timeout.connect(self._loop.quit)
        page.refreshed.connect(self._on_answer)  # type: ignore[attr-defined]
        chart.installEventFilter(self)

    def _on_answer(self) -> None:
        self._answered = True

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint and self._answered and not self._done:
            self._done = True
            QTimer.singleShot(0, self._loop.quit)  # once this paint is over
        return False

    def run(self, action: Callable[[], None], label: str) -> float:
        self._answered = self._done = False
        start = time.perf_counter()
        action()
        self._timeout.start()
        self._loop.exec()
        self._timeout.stop()
        if not self._done:
            raise TimeoutError(f"the Stats page showed no answer within 30 s ({label})")
        return ms_since(start)


def ms_since(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)


def summarise(runs: list[float]) -> dict[str, object]:
    return {"median": statistics.median(runs), "max": max(runs), "runs": runs}


def main() -> None:
    app = QApplication.instance() or QApplication([])
    theme.install(app, dark=False)
    loop = new_loop(app)
    asyncio.events._set_running_loop(loop)
    services = Services.open(AppPaths.from_env())
    now = datetime.now(UTC)
    began = time.perf_counter()
    filled = fill_stats(services.db, ROWS, AGENTS, seed=11, end=now.isoformat())
    fill_s = round(time.perf_counter() - began, 1)

    window = MainWindow(services)
    window.resize(1200, 800)
    window.show()
    app.processEvents()
    page = window.stats_page
    waiter = Waiter(page, page.chart)

    def timed(action: Callable[[], None], label: str = "open") -> float:
        """From ``action`` until the page shows a new answer and the chart has painted it."""
        return waiter.run(action, label)

    def reopen() -> float:
        window.show_page("chat")
        app.processEvents()
        return timed(lambda: window.show_page("stats"))

    first_open = reopen()  # the first open also builds and lays out the widgets
    open_runs = [reopen() for _ in range(REPEATS)]
    changes: list[tuple[str, Callable[[], None]]] = [
        ("range 7 days", lambda: page.set_range("7d")),
        ("range 90 days", lambda: page.set_range("90d")),
        ("range all time", lambda: page.set_range("all")),
        ("range 24 hours", lambda: page.set_range("24h")),
        ("range 30 days", lambda: page.set_range("30d")),
        ("three agents picked", lambda: page.picker.set_checked(filled.agents[3:6])),
        ("busiest five again", lambda: page.picker.picked.emit(None)),
        ("figure: decode speed", lambda: page.metric_box.setCurrentIndex(1)),
        ("figure: time to first token", lambda: page.metric_box.setCurrentIndex(0)),
    ]
    redraw: dict[str, list[float]] = {name: [] for name, _ in changes}
    for _ in range(REPEATS):
        for name, change in changes:
            redraw[name].append(timed(change, name))
    all_redraws = [ms for runs in redraw.values() for ms in runs]
    shown_calls = sum(int(r["calls"]) for r in page.snapshot.chosen_rows) if page.snapshot else 0

    # the reference: the same questions without the page
    since = (now - timedelta(days=30)).isoformat(timespec="milliseconds")
    month = StatsFilter(since=since)
    everything = StatsFilter()

    def sql_ms(fn: Callable[[], object]) -> float:
        runs = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            fn()
            runs.append(ms_since(start))
        return statistics.median(runs)

    busiest = tuple(str(r["agent"]) for r in services.stats.summary(month)[:5])
    reference = {
        "count_per_agent_30_days_sql_ms": sql_ms(
            lambda: services.db.execute(
                "SELECT agent_name, COUNT(*) FROM inference_stats WHERE started_at >= ? "
                "GROUP BY agent_name COLLATE NOCASE",
                [since],
            ).fetchall()
        ),
        "summary_30_days_ms": sql_ms(lambda: services.stats.summary(month)),
        "summary_all_time_ms": sql_ms(lambda: services.stats.summary(everything)),
        "series_5_agents_30_days_ms": sql_ms(
            lambda: services.stats.series(StatsFilter(agents=busiest, since=since), "ttft_ms", 2000)
        ),
    }
    result = {
        "rows": ROWS,
        "agents": AGENTS,
        "fill_s": fill_s,
        "target_ms": TARGET_MS,
        "open_ms": statistics.median(open_runs),
        "open_max_ms": max(open_runs),
        "filter_redraw_ms": statistics.median(all_redraws),
        "filter_redraw_max_ms": max(all_redraws),
        "first_open_ms": first_open,
        "open": summarise(open_runs),
        "filter_redraw": {name: summarise(runs) for name, runs in redraw.items()},
        "chart_points": len(page.chart.points),
        "calls_in_the_last_view": shown_calls,
        "reference": reference,
    }
    print(json.dumps(result, indent=2))
    window.close()
    drain(loop, app)
    services.close()


if __name__ == "__main__":
    main()
