"""The Stats page: per-agent figures of every model call, over a date range.

A filter row (date range, agents, Refresh, Export CSV…/JSON…), then a table with one row per
chosen agent (calls, errors, TTFT and decode p50/p95, prefill, tokens, cached share, cost),
a chart of one figure per call over time (click a dot to open that reply) and bars comparing
the chosen agents' typical (p50) and slow (p95) calls. Until a person picks agents the page
shows the busiest ones of the range.

Every question goes to SQLite on a worker thread (``dashboard_data.load`` through
``run_blocking``); a filter change while one is answered asks again once it is done, and only
the newest answer is shown. The page refreshes when shown, on Refresh, and when it sees a new
call recorded while it is open (a cheap check every few seconds).

Signals: refreshed(): the page shows a new answer, its chart included (drawn a turn of the
loop after the table); status(str): a line for the window.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sqlite3
from collections.abc import Callable, Iterable
from datetime import date, datetime
from typing import Any

from PySide6.QtCore import QDate, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap, QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QDateEdit,
    QFrame,
    QLabel,
    QPushButton,
    QScrollArea,
    QStackedWidget,
    QTableWidget,
    QWidget,
)

from desktop.chat.services import Services
from desktop.errors import UserError
from desktop.store.stats import StatsFilter, StatsStore, rows_to_csv, rows_to_json
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.figures_table import figures_table, fill_figures, fit_rows_height, set_columns
from desktop.ui.kit.file_export import export_in_background, export_row
from desktop.ui.kit.turns import in_turns
from desktop.ui.kit.widgets import hbox, plain, vbox
from desktop.ui.stats.chart_axes import METRICS, metric
from desktop.ui.stats.charts import Bar, BarGroup, CompareBars, TimeChart, agent_colors
from desktop.ui.stats.dashboard_data import (
    COLUMNS,
    RANGES,
    DashboardQuery,
    Snapshot,
    headline,
    latest_id,
    load,
    range_bounds,
    range_words,
    summary_cells,
    table_columns,
    uses_tools,
)
from desktop.ui.stats.picker import AgentPicker
from desktop.ui.stats.rating_table import RatingSection

log = logging.getLogger("simi.ui.dashboard")

DEFAULT_RANGE = "30d"
WATCH_MS = 4000  # how often an open page checks for newly recorded calls
READING = "Reading the stats…"
NO_CALLS = "Send a message to any agent; every reply's timing, tokens and cost appear here."


def _day(edit: QDateEdit) -> date:
    """The day a date field shows (QDate.toPython, typed as object in PySide6's stubs)."""
    day = edit.date()
    return date(day.year(), day.month(), day.day())


def _write_export(stats: StatsStore, f: StatsFilter, fmt: str, path: str) -> int:
    rows = stats.export_rows(f)
    with open(path, "w", encoding="utf-8", newline="") as out:
        (rows_to_csv if fmt == "csv" else rows_to_json)(rows, out)
    return len(rows)


def _dot(color: QColor) -> QIcon:
    pix = QPixmap(12, 12)
    pix.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pix)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setBrush(color)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.drawEllipse(1, 1, 10, 10)
    painter.end()
    return QIcon(pix)


def _section(text: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName("SectionLabel")
    return label


class StatsPage(QWidget):
    refreshed = Signal()
    status = Signal(str)

    def __init__(
        self,
        services: Services,
        *,
        open_reply: Callable[[int, int | None], None] | None = None,
        ask_save_path: Callable[[str, str, str], str | None] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("StatsPage")
        self._services = services
        self._open_reply = open_reply
        self._ask_save_path = ask_save_path
        self.snapshot: Snapshot | None = None
        self._picked: tuple[str, ...] | None = None
        self._want: DashboardQuery | None = None
        self._task: asyncio.Task[None] | None = None
        self._fresh = False
        self.export_task: asyncio.Task[None] | None = None

        layout = vbox(self, (16, 12, 16, 8), 8)
        layout.addLayout(self._build_filters())
        actions, self.csv_button, self.json_button, self.message = export_row(
            "Save every call of the chosen agents in the date range, all columns", self.export
        )
        layout.addLayout(actions)
        self.body = QStackedWidget()
        layout.addWidget(self.body, 1)  # in place before it fills (see _build_content)
        self.body.addWidget(self._build_empty())
        self.body.addWidget(self._build_content())

        self._watch = QTimer(self)
        self._watch.setInterval(WATCH_MS)
        self._watch.timeout.connect(self._check_new_calls)

    # building --------------------------------------------------------------------------------
    def _build_filters(self) -> Any:
        row = hbox(spacing=6)
        self.range_box = QComboBox()
        self.range_box.setAccessibleName("Date range")
        for r in RANGES:
            self.range_box.addItem(r.label, r.key)
        self.range_box.setCurrentIndex(self.range_box.findData(DEFAULT_RANGE))
        today = QDate.currentDate()
        self.from_edit = QDateEdit(today.addDays(-30))
        self.to_edit = QDateEdit(today)
        for edit, name in ((self.from_edit, "From date"), (self.to_edit, "To date")):
            edit.setCalendarPopup(True)
            edit.setDisplayFormat("d MMM yyyy")
            edit.setAccessibleName(name)
            edit.setVisible(False)
            edit.dateChanged.connect(lambda _d: self.reload())
        self.to_label = QLabel("to")
        self.to_label.setVisible(False)
        self.picker = AgentPicker()
        self.picker.picked.connect(self._agents_picked)
        self.source_box = QComboBox()
        self.source_box.setAccessibleName("Who made the calls")
        self.source_box.setToolTip(
            "All calls, the app's own, or those other apps made through the API server"
        )
        self.source_box.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.source_box.setMinimumContentsLength(10)
        self._fill_sources(None)
        self.source_box.currentIndexChanged.connect(lambda _i: self.reload())
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setToolTip("Read the stats again (new calls show up by themselves)")
        row.addWidget(self.range_box)
        row.addWidget(self.from_edit)
        row.addWidget(self.to_label)
        row.addWidget(self.to_edit)
        row.addWidget(self.picker)
        row.addWidget(self.source_box)
        row.addStretch(1)
        row.addWidget(self.refresh_button)
        self.range_box.currentIndexChanged.connect(self._range_changed)
        self.refresh_button.clicked.connect(lambda: self.refresh())
        return row

    def _build_empty(self) -> QWidget:
        page = QWidget()
        layout = vbox(page, (24, 24, 24, 24), 10)
        layout.addStretch(1)
        # until the first answer (a moment): not "No calls yet" to someone with 100,000
        self.empty_title = QLabel(READING)
        self.empty_title.setObjectName("EmptyTitle")
        self.empty_hint = QLabel("")
        self.empty_hint.setObjectName("EmptyHint")
        self.empty_hint.setWordWrap(True)
        self.all_time_button = QPushButton("Show all time")
        self.all_time_button.setVisible(False)
        self.all_time_button.clicked.connect(
            lambda: self.range_box.setCurrentIndex(self.range_box.findData("all"))
        )
        for w in (self.empty_title, self.empty_hint):
            w.setAlignment(Qt.AlignmentFlag.AlignCenter)
            layout.addWidget(w)
        layout.addWidget(self.all_time_button, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addStretch(2)
        return page

    def _build_content(self) -> QWidget:
        """The figures, built top-down: each container is in place before its children come,
        so a child is styled once as it is added, not again with a finished subtree moved in
        (the Stats page's first show held the window 24-38 ms)."""
        self.scroll_area = QScrollArea(self.body)
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        inner = QWidget()
        inner.setObjectName("StatsContent")
        self.scroll_area.setWidget(inner)
        layout = vbox(inner, (0, 0, 4, 8), 6)
        self.headline = plain(QLabel(""))  # names the agents
        self.headline.setObjectName("DashboardHeadline")
        self.headline.setWordWrap(True)
        layout.addWidget(self.headline)
        layout.addWidget(_section("PER AGENT"))
        # the last column is not stretched: never cut a cost short, scroll instead
        self.table = figures_table(QTableWidget(), "Figures per agent", COLUMNS, 40)
        self.table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        layout.addWidget(self.table)
        chart_row = hbox(spacing=8)
        chart_row.addWidget(_section("OVER TIME"))
        self.metric_box = QComboBox()
        self.metric_box.setAccessibleName("Figure shown over time")
        for m in METRICS:
            self.metric_box.addItem(m.label, m.key)
        self.metric_box.currentIndexChanged.connect(lambda _i: self.reload())
        chart_row.addWidget(self.metric_box)
        self.chart_note = ElidedLabel("")
        self.chart_note.setObjectName("EmptyHint")
        chart_row.addWidget(self.chart_note, 1)
        layout.addLayout(chart_row)
        self.chart = TimeChart()
        self.chart.point_clicked.connect(self.open_point)
        layout.addWidget(self.chart)
        layout.addWidget(_section("SIDE BY SIDE"))
        self.bars = CompareBars()
        layout.addWidget(self.bars)
        self.ratings = RatingSection(self._services)  # hidden until a vote is stored
        layout.addWidget(self.ratings)
        self.refreshed.connect(self.ratings.refresh)
        layout.addStretch(1)
        return self.scroll_area

    # asking ----------------------------------------------------------------------------------
    @property
    def range_key(self) -> str:
        return str(self.range_box.currentData())

    def set_range(self, key: str, custom: tuple[date, date] | None = None) -> None:
        """Choose a date range as the combo box would (custom: local days, both included)."""
        if custom is not None:
            for edit, day in zip((self.from_edit, self.to_edit), custom, strict=True):
                edit.blockSignals(True)
                edit.setDate(QDate(day.year, day.month, day.day))
                edit.blockSignals(False)
        index = self.range_box.findData(key)
        if index == self.range_box.currentIndex():
            self.reload()
        else:
            self.range_box.setCurrentIndex(index)

    def _range_changed(self) -> None:
        custom = self.range_key == "custom"
        for w in (self.from_edit, self.to_label, self.to_edit):
            w.setVisible(custom)
        self.reload()

    def _agents_picked(self, names: Iterable[str] | None) -> None:
        self._picked = tuple(names) if names is not None else None
        self.reload()

    def query(self) -> DashboardQuery:
        custom = None
        if self.range_key == "custom":
            custom = (_day(self.from_edit), _day(self.to_edit))
        since, until = range_bounds(self.range_key, datetime.now().astimezone(), custom)
        source, clients = self.source_box.currentData() or (None, ())
        return DashboardQuery(
            since,
            until,
            self._picked,
            str(self.metric_box.currentData()),
            source,
            tuple(clients),
        )

    def _fill_sources(self, clients: tuple[str, ...] | None) -> None:
        """The caller choices: everyone, the app, API clients, and each API key seen; shown
        once a call came through the API server (None: never)."""
        box = self.source_box
        box.setVisible(clients is not None)
        clients = clients or ()
        current = box.currentData()
        choices: list[tuple[str, tuple[str | None, tuple[str, ...]]]] = [
            ("All callers", (None, ())),
            ("This app", ("app", ())),
            ("API clients", ("api", ())),
            *((f"API key: {name}", ("api", (name,))) for name in clients),
        ]
        if [box.itemText(i) for i in range(box.count())] == [c[0] for c in choices]:
            return
        box.blockSignals(True)
        box.clear()
        for text, data in choices:
            box.addItem(text, data)
        found = box.findData(current) if current is not None else 0
        box.setCurrentIndex(max(found, 0))
        box.blockSignals(False)

    def refresh(self) -> None:
        """Ask again, counting calls recorded since (MainWindow calls this on show)."""
        self._fresh = True  # never reuse the last summary
        self.reload()

    def reload(self) -> None:
        """Ask for what the filter shows now; one question at a time, the newest wins."""
        self._want = self.query()
        if self._task is None or self._task.done():
            self._task = start(self._answer(), name="stats-dashboard")

    async def _answer(self) -> None:
        while self._want is not None:
            want, self._want = self._want, None
            cached = None if self._fresh else self.snapshot
            self._fresh = False
            try:
                snap = await run_blocking(load, self._services.stats, want, cached)
            except (sqlite3.Error, UserError) as exc:  # locked or broken: say so, keep the page
                log.warning("stats query failed: %s", exc)
                self._say(f"Could not read the stats ({exc}). Try Refresh.")
                if self.snapshot is None:  # nothing shown yet: not "Reading…" for ever
                    self.empty_title.setText("Could not read the stats")
                return
            if self._want is None:
                self._show(snap)

    # showing ---------------------------------------------------------------------------------
    def _show(self, snap: Snapshot) -> None:
        self.snapshot = snap
        self._fill_sources(snap.api_clients)
        self.picker.set_agents(snap.agents, snap.chosen, picked=self._picked is not None)
        if not snap.agents:
            if snap.any_calls:
                q = snap.query
                self.empty_title.setText("Nothing in this date range")
                self.empty_hint.setText(
                    f"No calls {range_words(q.since, q.until)} — widen the date range."
                )
            else:
                self.empty_title.setText("No calls yet")
                self.empty_hint.setText(NO_CALLS)
            self.all_time_button.setVisible(snap.any_calls and self.range_key != "all")
            self.body.setCurrentIndex(0)
            self.message.setText("")
        else:
            self.body.setCurrentIndex(1)
            self._fill(snap)
            # the chart a turn of the loop later: the table's and the chart's first layout
            # and paint in one turn held the window 20-22 ms
            in_turns(self, lambda: self._fill_chart(snap))
            return
        self.refreshed.emit()

    def _fill(self, snap: Snapshot) -> None:
        """The figures in words: the table, the headline and the count."""
        rows = snap.chosen_rows
        self._fill_table(rows, agent_colors(snap.chosen))
        said = headline(rows)
        self.headline.setText(said)
        self.headline.setVisible(bool(said))
        calls = sum(int(r["calls"]) for r in rows)
        total = sum(int(r["calls"]) for r in snap.agents)
        self.message.setText(
            f"{calls:,} of {total:,} calls in the range ({len(rows)} of {len(snap.agents)} agents)"
        )

    def _fill_chart(self, snap: Snapshot) -> None:
        """The chart and the bars of ``snap``, unless a newer answer came meanwhile."""
        if snap is not self.snapshot:
            return
        colors = agent_colors(snap.chosen)
        rows = snap.chosen_rows
        m = metric(snap.query.metric)
        if not snap.chosen:
            self.chart.empty_text = "No agent chosen: pick some with the Agents button."
        else:
            self.chart.empty_text = f"None of these calls has a {m.label.lower()}."
        self.chart.set_points(snap.points, m, colors)
        self.bars.set_groups(
            [
                BarGroup(
                    metric("ttft_ms"),
                    tuple(Bar(r["agent"], r["ttft_p50_ms"], r["ttft_p95_ms"]) for r in rows),
                ),
                BarGroup(
                    metric("decode_tok_s"),
                    tuple(
                        Bar(r["agent"], r["decode_p50_tok_s"], r["decode_p95_tok_s"]) for r in rows
                    ),
                ),
            ],
            colors,
        )
        self.chart_note.setText(
            f"the latest {len(snap.series):,} calls; a dot per call"
            if snap.series_capped
            else "a dot per call; click one to open it"
        )
        self.refreshed.emit()

    def _fill_table(self, rows: list[dict[str, Any]], colors: dict[str, QColor]) -> None:
        tools = uses_tools(rows)  # the tool columns only when an agent here used tools
        columns = table_columns(tools)
        if self.table.columnCount() != len(columns):
            set_columns(self.table, columns)
        cells = [summary_cells(row, tools) for row in rows]
        icons = [_dot(colors.get(str(row["agent"]), QColor("gray"))) for row in rows]
        fill_figures(self.table, cells, icons)
        fit_rows_height(self.table, 60)

    # the dots --------------------------------------------------------------------------------
    def open_point(self, conversation_id: int | None, message_id: int | None) -> None:
        """Open the reply of a chart dot (or its conversation, or say why neither)."""
        conversations = self._services.conversations
        conv = conversations.get(conversation_id) if conversation_id is not None else None
        if conv is None or conv.deleted_at is not None:
            self._say("The conversation of that call was deleted; its stats stay here.")
            return
        focus = message_id if isinstance(message_id, int) else None
        if focus is not None and conversations.message(focus) is None:
            focus = None
        if self._open_reply is not None:
            self._open_reply(conv.id, focus)
        if focus is None:
            self._say(f"That reply was replaced since; showing “{conv.title}”.")

    def _say(self, text: str) -> None:
        self.message.setText(text)
        self.status.emit(text)

    # export ----------------------------------------------------------------------------------
    def export_filter(self) -> StatsFilter | None:
        snap = self.snapshot
        if snap is None or not snap.chosen:
            return None
        return snap.query.stats_filter(snap.chosen)

    def export(self, fmt: str) -> asyncio.Task[None] | None:
        """Export CSV… / Export JSON…: every call the page shows, all columns."""
        f = self.export_filter()
        if f is None or self._ask_save_path is None:
            self._say("Nothing to export: choose a date range and agents with calls.")
            return None
        suffix, filters = (".csv", "CSV (*.csv)") if fmt == "csv" else (".json", "JSON (*.json)")
        suggested = f"simi-stats-{date.today().isoformat()}{suffix}"
        path = self._ask_save_path("Export stats", suggested, filters)
        if not path:
            return None
        write = functools.partial(_write_export, self._services.stats, f, fmt)
        self.export_task = export_in_background(
            path, write, lambda count: f"{count:,} calls", self._say, "stats-export"
        )
        return self.export_task

    # watching for new calls ------------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._watch.start()

    def hideEvent(self, event: Any) -> None:
        super().hideEvent(event)
        self._watch.stop()

    def _check_new_calls(self) -> None:
        if self._task is not None and not self._task.done():
            return
        self._task = start(self._check(), name="stats-watch")

    async def _check(self) -> None:
        last = await run_blocking(latest_id, self._services.stats)
        if self.snapshot is not None and last != self.snapshot.last_id and self._want is None:
            self._want = self.query()
        await self._answer()  # also what was asked for meanwhile
