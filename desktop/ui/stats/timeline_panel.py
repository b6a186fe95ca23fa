"""The reply timeline panel: one call drawn to scale, every part with its figure, then its facts.

A reply of several model calls (an agent that used tools: ``calls``, ``steps``) starts with
the turn: call 1 → each tool (its run time) → call 2 … to scale in the same chart, the turn's
totals, and a "Call 1 | Call 2" choice below it that shows one call's own lanes and facts (the
last call first).

Opened from a reply's footer ("Timeline"). A small non-modal window over the main one, sized to
fit it (down to the window's minimum, 720×480: the body scrolls). Everything in it is text a
person can select, and "Copy as text" copies all of it. "How to read this" explains the words.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.timeline import Marker, Segment, Timeline, build_timeline
from desktop.chat.timeline_facts import Fact
from desktop.chat.turn_timeline import STATUS_WORDS, TurnTimeline, build_turn_timeline
from desktop.ui.kit.theme import Colors, current_colors, current_text_scale, scale_font_sizes
from desktop.ui.kit.widgets import fit_over, push_button, scroll_column
from desktop.ui.stats.timeline_chart import SplitBar, Swatch, TimelineChart, kind_color
from desktop.ui.stats.timeline_help import TimelineHelp

PREFERRED_W, PREFERRED_H = 820, 900
SELECTABLE = (
    Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.TextSelectableByKeyboard
)


def _label(text: str, name: str = "", wrap: bool = True) -> QLabel:
    label = QLabel(text)
    if name:
        label.setObjectName(name)
    label.setWordWrap(wrap)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setTextInteractionFlags(SELECTABLE)
    return label


def _panel_style(c: Colors) -> str:
    return f"""
#TimelineTitle {{ font-size: 15px; font-weight: 700; color: {c.text}; }}
#TimelineMuted {{ color: {c.muted}; }}
#TimelineSummary {{ color: {c.warn_text}; background: {c.warn_bg};
                   border: 1px solid {c.warn_border}; border-radius: 6px; padding: 6px 8px; }}
#TimelineHeading {{ color: {c.muted}; font-size: 11px; font-weight: 700; letter-spacing: 1px; }}
#TimelineFactLabel {{ color: {c.muted}; font-weight: 600; }}
#TimelineValue {{ color: {c.text}; }}
#TimelineUnknown {{ color: {c.muted}; font-style: italic; }}
#TimelineCaption {{ color: {c.muted}; font-size: 11px; }}
QScrollArea#TimelineScroll, #TimelineBody {{ background: {c.window}; border: none; }}
QPushButton#TimelineCallChoice:checked {{ background: {c.selection}; color: {c.text};
                                         border: 1px solid {c.accent}; font-weight: 700; }}
"""


class TimelinePanel(QDialog):
    """One stats row as a timeline with its legend and facts (no signals)."""

    def __init__(
        self,
        stats: dict[str, Any] | None,
        parent: QWidget | None = None,
        *,
        calls: Sequence[dict[str, Any]] = (),
        steps: Sequence[Any] = (),
    ) -> None:
        super().__init__(parent)
        self.setObjectName("TimelinePanel")
        self.setModal(False)
        self.setWindowTitle("Reply timeline")
        self.setAccessibleName("Reply timeline")
        # several model calls: the turn on top, then one call's own timeline (the last first)
        self.turn: TurnTimeline | None = (
            build_turn_timeline(calls, steps) if len(calls) > 1 else None
        )
        self.selected_call = len(self.turn.call_timelines) if self.turn else 1
        self.timeline: Timeline = (
            self.turn.call_timelines[-1] if self.turn else build_timeline(stats)
        )
        self.turn_chart: TimelineChart | None = None
        self.turn_rows: list[tuple[str, str, str]] = []  # label, figure, what happened
        self.call_buttons: list[QPushButton] = []
        self.help: TimelineHelp | None = None
        self._styled_dark: bool | None = None
        self.legend_rows: list[tuple[str, str, str]] = []  # label, figure, who measured
        self.fact_values: dict[str, QLabel] = {}
        self.bars: dict[str, SplitBar] = {}
        self._captions: list[tuple[QLabel, list[tuple[str, str]]]] = []

        self._apply_colors()  # before the children: set after, it re-polishes each of them
        outer = QVBoxLayout(self)
        outer.setContentsMargins(10, 10, 10, 10)
        self.scroll_area, self.body = scroll_column(
            "TimelineScroll", "TimelineBody", (4, 0, 8, 0), 8
        )
        outer.addWidget(self.scroll_area, 1)  # in the panel before it fills: each child is
        # styled as it comes, not all again when the filled column would move in
        self._into = self.body  # where the _build_* methods add
        self.call_host: QWidget | None = None
        if self.turn is None:
            self._build_call(with_title=True)
        else:
            self._build_turn(self.turn)
            self.call_host = self._call_section()
            self.body.addWidget(self.call_host)
        self.body.addStretch(1)

        buttons = QHBoxLayout()
        self.help_button = push_button(
            "How to read this",
            self.show_help,
            tip="What tokens, prefill, KV cache, TTFT and decode mean",
        )
        self.copy_button = push_button(
            "Copy as text", self.copy_text, tip="Copy every figure of this timeline"
        )
        self.close_button = push_button("Close", self.close)
        buttons.addWidget(self.help_button)
        buttons.addStretch(1)
        buttons.addWidget(self.copy_button)
        buttons.addWidget(self.close_button)
        outer.addLayout(buttons)
        self._copy_reset = QTimer(self)
        self._copy_reset.setSingleShot(True)
        self._copy_reset.setInterval(1500)
        self._copy_reset.timeout.connect(lambda: self.copy_button.setText("Copy as text"))
        fit_over(self, parent, PREFERRED_W, PREFERRED_H, 16)

    # building ---------------------------------------------------------------------------------
    def _build_call(self, with_title: bool) -> None:
        """One call's header, chart, legend, facts and notes (into ``self._into``)."""
        self._build_header(with_title)
        self.chart = TimelineChart(self.timeline)
        self._into.addWidget(self.chart)
        self._build_legend()
        self._build_facts()
        if self.timeline.notes:
            self.notes = _label("\n".join(self.timeline.notes), "TimelineMuted")
            self._into.addWidget(self.notes)

    def _build_header(self, with_title: bool = True) -> None:
        t = self.timeline
        if with_title:
            self.title = _label(t.title, "TimelineTitle")
            self._into.addWidget(self.title)
        for text in (t.subtitle, t.outcome):
            if text:
                self._into.addWidget(_label(text, "TimelineMuted"))
        self.summary = _label(t.summary, "TimelineSummary")
        self.summary.setVisible(bool(t.summary))
        self._into.addWidget(self.summary)
        if not (t.segments or t.markers):
            self._into.addWidget(_label("No times were recorded for this call.", "TimelineUnknown"))

    def _heading(self, text: str) -> None:
        self._into.addWidget(_label(text.upper(), "TimelineHeading"))

    def _build_turn(self, turn: TurnTimeline) -> None:
        """The turn to scale (calls and tools), its totals, what each part was, the choice."""
        self.title = _label(turn.title, "TimelineTitle")
        self.body.addWidget(self.title)
        self._heading("The turn")
        self.turn_totals = _label(turn.totals.text(), "TimelineValue")
        self.body.addWidget(self.turn_totals)
        self.turn_tokens = _label(turn.totals.tokens_text(), "TimelineMuted")
        self.body.addWidget(self.turn_tokens)
        self.turn_chart = TimelineChart(turn.chart)
        self.turn_chart.setObjectName("TurnChart")
        self.turn_chart.setAccessibleName("The turn's model calls and tool calls, to scale")
        self.body.addWidget(self.turn_chart)
        grid = QGridLayout()
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(3)
        grid.setColumnStretch(1, 3)
        grid.setColumnStretch(3, 2)
        for column, text in ((1, "part"), (2, "time"), (3, "what happened")):
            grid.addWidget(_label(text, "TimelineCaption"), 0, column)
        for n, part in enumerate(turn.parts, start=1):
            swatch = Swatch(None if part.instant else part.kind)
            happened = _happened(part.kind, part.status)
            name = _label(part.label, "TimelineValue")
            value = _label(part.figure, "TimelineValue", wrap=False)
            what = _label(happened, "TimelineMuted")
            cells: tuple[QWidget, ...] = (swatch, name, value, what)
            for column, cell in enumerate(cells):
                cell.setToolTip(part.description)
                grid.addWidget(cell, n, column)
            name.setAccessibleName(f"{part.label}: {part.figure}, {happened}")
            self.turn_rows.append((part.label, part.figure, happened))
        self.body.addLayout(grid)
        row = QHBoxLayout()
        row.setSpacing(4)
        row.addWidget(_label("Each call's own timeline:", "TimelineFactLabel", wrap=False))
        for n in range(1, len(turn.call_timelines) + 1):
            button = QPushButton(f"Call {n}")
            button.setObjectName("TimelineCallChoice")
            button.setCheckable(True)
            button.setAutoExclusive(True)
            button.setChecked(n == self.selected_call)
            button.setAccessibleName(f"Show call {n}'s own timeline")
            button.setToolTip(f"Call {n} of {len(turn.call_timelines)}: its parts and figures")
            button.clicked.connect(self._call_slot(n))
            row.addWidget(button)
            self.call_buttons.append(button)
        row.addStretch(1)
        self.body.addLayout(row)

    def _call_slot(self, n: int) -> Any:
        return lambda: self.show_call(n)

    def _call_section(self) -> QWidget:
        """The chosen call's own timeline, in a widget of its own (replaced on a new choice)."""
        assert self.turn is not None
        host = QWidget()
        host.setObjectName("TimelineCall")
        layout = QVBoxLayout(host)
        layout.setContentsMargins(0, 6, 0, 0)
        layout.setSpacing(8)
        self._into = layout
        count = len(self.turn.call_timelines)
        self._heading(f"Call {self.selected_call} of {count}")
        asked = [
            f"{p.label} ({p.figure})"
            for p in self.turn.parts
            if p.kind == "tool" and p.call_index == self.selected_call
        ]
        if asked:
            self.call_asked = _label("It asked for " + ", ".join(asked) + ".", "TimelineValue")
            layout.addWidget(self.call_asked)
        self._build_call(with_title=False)
        self._into = self.body
        return host

    def show_call(self, n: int) -> None:
        """Show call ``n``'s own timeline (1-based) under the turn."""
        if self.turn is None or self.call_host is None:
            return
        n = max(1, min(n, len(self.turn.call_timelines)))
        self.selected_call = n
        self.timeline = self.turn.call_timelines[n - 1]
        self.legend_rows, self.fact_values, self.bars, self._captions = [], {}, {}, []
        old = self.call_host
        self.call_host = self._call_section()
        self.body.replaceWidget(old, self.call_host)
        old.hide()
        old.deleteLater()
        for k, button in enumerate(self.call_buttons, start=1):
            button.setChecked(k == n)

    def _build_legend(self) -> None:
        t = self.timeline
        if not (t.segments or t.server_segments or t.retrieval_segments or t.markers):
            return
        self._heading("Each part")
        grid = QGridLayout()
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(3)
        grid.setColumnStretch(1, 3)
        grid.setColumnStretch(3, 2)
        client: list[Segment | Marker] = [*t.segments, *t.markers]
        client.sort(key=lambda item: item.start_ms if isinstance(item, Segment) else item.at_ms)
        rows: list[Segment | Marker | str] = [*client]
        if t.retrieval_segments:
            rows += [t.retrieval_lane_label, *t.retrieval_segments]
        if t.server_segments:
            rows += [t.server_lane_label, *t.server_segments]
        for column, text in ((1, "part"), (2, "time"), (3, "measured by")):
            grid.addWidget(_label(text, "TimelineCaption"), 0, column)
        for n, item in enumerate(rows, start=1):
            if isinstance(item, str):  # a second lane's own heading
                grid.addWidget(_label(item, "TimelineFactLabel"), n, 0, 1, 4)
                continue
            if isinstance(item, Segment):
                swatch = Swatch(item.kind)
                label, figure, who, tip = item.label, item.figure, self._who(item), item.description
            else:
                swatch = Swatch(None)
                label, figure, who, tip = item.label, f"at {item.figure}", "", item.description
            name = _label(label, "TimelineValue")
            value = _label(figure, "TimelineValue", wrap=False)
            by = _label(who, "TimelineMuted")
            for widget in (swatch, name, value, by):
                widget.setToolTip(tip)
            name.setAccessibleName(f"{label}: {figure}" + (f", {who}" if who else ""))
            grid.addWidget(swatch, n, 0)
            grid.addWidget(name, n, 1)
            grid.addWidget(value, n, 2)
            grid.addWidget(by, n, 3)
            self.legend_rows.append((label, figure, who))
        self._into.addLayout(grid)

    def _who(self, segment: Segment) -> str:
        """Who measured a part, in a word or two (the column is headed "measured by")."""
        if segment.kind == "gap":
            return "the rest of SIMI Multi's time"
        if segment.measured_by == "llama.cpp":
            return "llama.cpp"
        if segment.measured_by == "server":
            return self.timeline.provider
        return "SIMI Multi"

    def _build_facts(self) -> None:
        self._heading("Tokens, memory and cost")
        grid = QGridLayout()
        grid.setHorizontalSpacing(12)
        grid.setVerticalSpacing(6)
        grid.setColumnStretch(1, 1)
        for n, fact in enumerate(self.timeline.facts):
            label = _label(fact.label, "TimelineFactLabel", wrap=False)
            label.setToolTip(fact.description)
            value = _label(fact.value, "TimelineValue" if fact.known else "TimelineUnknown")
            value.setToolTip(fact.description)
            value.setAccessibleName(f"{fact.label}: {fact.value}")
            cell = QVBoxLayout()
            cell.setSpacing(3)
            cell.addWidget(value)
            self._add_bar(cell, fact)
            grid.addWidget(label, n, 0, Qt.AlignmentFlag.AlignTop)
            grid.addLayout(cell, n, 1)
            self.fact_values[fact.key] = value
        self._into.addLayout(grid)

    def _add_bar(self, cell: QVBoxLayout, fact: Fact) -> None:
        """The split bar under a fact that has parts: prompt, output, context, cost."""
        t = self.timeline
        parts: list[tuple[float, str, str]] = []
        total = 0.0
        if fact.key == "prompt" and t.tokens.prompt and t.tokens.cached is not None:
            new = t.tokens.prompt - t.tokens.cached
            parts = [(t.tokens.cached, "other", "cached"), (new, "prefill", "newly evaluated")]
            total = float(t.tokens.prompt)
        elif fact.key == "output" and t.tokens.output and t.tokens.reasoning:
            text = t.tokens.output - t.tokens.reasoning
            parts = [(text, "decode", "reply text"), (t.tokens.reasoning, "wait", "reasoning")]
            total = float(t.tokens.output)
        elif fact.key == "context" and t.context is not None:
            parts = [(t.context.used, "network", "used")]
            total = float(t.context.window)
        elif fact.key == "cost" and t.cost.total:
            named = (
                (t.cost.input, "prefill", "input"),
                (t.cost.cached, "other", "cached input"),
                (t.cost.output, "decode", "output"),
            )
            parts = [(v, kind, name) for v, kind, name in named if v is not None]
            total = t.cost.total
            if len(parts) < 2:
                parts = []
        if not parts:
            return
        bar = SplitBar([(v, kind) for v, kind, _ in parts], total, f"{fact.label}: {fact.value}")
        bar.setToolTip(fact.value)
        self.bars[fact.key] = bar
        cell.addWidget(bar)
        caption = QLabel()
        caption.setObjectName("TimelineCaption")
        caption.setTextFormat(Qt.TextFormat.RichText)
        keyed = [(kind, name) for _, kind, name in parts]
        if fact.key == "context":
            keyed.append(("", "free"))
        self._captions.append((caption, keyed))
        self._color_caption(caption, keyed)
        cell.addWidget(caption)

    @staticmethod
    def _color_caption(caption: QLabel, keyed: list[tuple[str, str]]) -> None:
        """ "■ cached   ■ newly evaluated", each square in its part's colour."""
        colors = current_colors()

        def square(kind: str) -> str:
            color = kind_color(kind, colors.dark).name() if kind else colors.border
            return f'<span style="color:{color}">■</span>'

        caption.setText("   ".join(f"{square(kind)} {escape(name)}" for kind, name in keyed))

    # colours ----------------------------------------------------------------------------------
    def _apply_colors(self) -> None:
        colors = current_colors()
        if self._styled_dark == colors.dark:
            return
        self._styled_dark = colors.dark
        self.setStyleSheet(scale_font_sizes(_panel_style(colors), current_text_scale()))
        for caption, keyed in self._captions:
            self._color_caption(caption, keyed)
        for painted in self.findChildren(QWidget):  # charts, bars, swatches: colours by theme
            if isinstance(painted, TimelineChart | SplitBar | Swatch):
                painted.update()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.StyleChange):
            self._apply_colors()

    # actions ----------------------------------------------------------------------------------
    def show_help(self) -> TimelineHelp:
        if self.help is None:
            self.help = TimelineHelp(self)
        self.help.show()
        return self.help

    def copy_text(self) -> None:
        text = self.turn.as_text() if self.turn else self.timeline.as_text()
        QGuiApplication.clipboard().setText(text)
        self.copy_button.setText("Copied")
        self._copy_reset.start()

    def legend_text(self) -> str:
        return "\n".join(" · ".join(p for p in row if p) for row in self.legend_rows)

    def turn_text(self) -> str:
        """The turn's parts as listed under its chart, one a line ("" for one call)."""
        return "\n".join(" · ".join(p for p in row if p) for row in self.turn_rows)


def _happened(kind: str, status: str) -> str:
    if kind == "call":
        return {"tool_calls": "asked for tools", "stop": "answered"}.get(
            status, status.replace("_", " ") or "model call"
        )
    if kind == "tool":
        return STATUS_WORDS.get(status, status)
    return "you decided" if kind == "wait" else "results saved and sent"
