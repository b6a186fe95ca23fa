"""The reply timeline drawn to scale (``TimelineChart``) and the small split bars beside its facts
(``SplitBar``: cached/new prompt, output/reasoning, context used, cost parts).

The chart lays itself out in ``layout()`` (pure geometry, no painting) so tests can check what
a person sees: a segment's width is its share of the call, labels never overlap and never leave
their segment; a label that does not fit is not drawn (the panel's legend lists every part).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetricsF,
    QHelpEvent,
    QPainter,
    QPaintEvent,
    QPen,
)
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from desktop.chat.timeline import Marker, Segment, Timeline
from desktop.chat.timeline_facts import ms_text
from desktop.ui.kit.theme import Colors, current_colors
from desktop.ui.kit.tooltips import show_plain

# Segment colours by kind, light and dark (the theme's accent family plus a few distinct hues).
_KIND_COLORS = {
    False: {
        "wait": "#e0a100",
        "startup": "#e07a3f",
        "load": "#d9467a",
        "restore": "#0891b2",
        "network": "#3b82f6",
        "prefill": "#8b5cf6",
        "other": "#9aa3b2",
        "decode": "#12a37f",
        "finish": "#c4c9d2",
        "gap": "#d5d9e0",
        # an agentic turn's lane (chat/turn_timeline.py): a model call, a tool call
        "call": "#4f46e5",
        "tool": "#0d9488",
        # a knowledge search before the call (chat/timeline_lanes.py retrieval_lane)
        "retrieval": "#b45309",
    },
    True: {
        "wait": "#d9a21b",
        "startup": "#e5834d",
        "load": "#e8679a",
        "restore": "#22b8d4",
        "network": "#5b9cf8",
        "prefill": "#a07cf8",
        "other": "#7d8594",
        "decode": "#2fbf93",
        "finish": "#4a505b",
        "gap": "#3a3f48",
        "call": "#8b8ff5",
        "tool": "#2cc4b4",
        "retrieval": "#f59e0b",
    },
}
LANE_TITLE_H = 18.0
MARKER_ROW_H = 15.0
MARKER_ROWS = 2
BAR_H = 26.0
LANE_GAP = 6.0
AXIS_H = 22.0
PAD = 8.0
LABEL_PAD = 4.0
MIN_TICK_GAP_PX = 70.0


def kind_color(kind: str, dark: bool) -> QColor:
    return QColor(_KIND_COLORS[dark].get(kind, _KIND_COLORS[dark]["other"]))


def text_on(background: QColor) -> QColor:
    """Black or white, whichever reads on ``background``."""
    return QColor("#111111") if background.lightnessF() > 0.6 else QColor("#ffffff")


@dataclass(frozen=True, slots=True)
class Placed:
    """Something the chart draws: its rect in widget pixels and the text drawn (if any)."""

    rect: QRectF
    text: str = ""


@dataclass(slots=True)
class ChartLayout:
    segments: dict[str, Placed]  # key -> the segment's bar rect (true proportions)
    labels: list[Placed]  # every text drawn inside a segment, or above a marker
    markers: dict[str, QRectF]  # key -> its tick
    ticks: list[tuple[float, str, QRectF]]  # x, text, the text's rect
    lanes: list[tuple[str, QRectF]]  # lane title, its rect
    height: float


def tick_text(ms: float) -> str:
    """ "0", "200 ms", "1 s", "1.5 s", "2 min"."""
    if ms == 0:
        return "0"
    if ms < 1000:
        return f"{ms:g} ms"
    if ms < 120_000:
        return f"{ms / 1000:g} s"
    return f"{ms / 60_000:g} min"


def nice_step(span_ms: float, width_px: float) -> float:
    """A 1-2-5 step in ms that keeps tick labels at least ``MIN_TICK_GAP_PX`` apart."""
    if span_ms <= 0 or width_px <= 0:
        return 1.0
    raw = span_ms * MIN_TICK_GAP_PX / width_px
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if factor * power >= raw:
            return float(factor * power)
    return float(10 * power)


class TimelineChart(QWidget):
    """The call as one bar per lane, to scale, with a time axis. Hover a part for what it was."""

    def __init__(self, timeline: Timeline, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("TimelineChart")
        self.timeline = timeline
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumWidth(320)
        self.setMouseTracking(True)
        self.setAccessibleName("Reply timeline chart")
        parts = [f"{s.label}: {s.figure}" for _, lane in self._lanes_of(timeline) for s in lane]
        parts += [f"{m.label} at {ms_text(m.at_ms)}" for m in timeline.markers]
        self.setAccessibleDescription("; ".join(parts) or "No times were recorded for this call.")
        self.setFixedHeight(round(self.layout_for(600).height))

    def sizeHint(self) -> QSize:
        return QSize(640, round(self.layout_for(640).height))

    # geometry ---------------------------------------------------------------------------------
    def _font(self, bold: bool = False, smaller: float = 1.0) -> QFont:
        font = QFont(self.font())
        font.setPointSizeF(max(font.pointSizeF() * smaller, 7.0))
        font.setBold(bold)
        return font

    def layout_for(self, width: float) -> ChartLayout:
        """Where everything goes at ``width`` pixels (what ``paintEvent`` draws)."""
        t = self.timeline
        left, right = PAD, max(width - PAD, PAD + 1)
        span = t.span_ms or 1.0

        def x_of(ms: float) -> float:
            return left + (right - left) * max(0.0, min(ms, span)) / span

        small = QFontMetricsF(self._font(smaller=0.9))
        y = PAD
        lanes: list[tuple[str, QRectF]] = []
        segments: dict[str, Placed] = {}
        labels: list[Placed] = []
        markers: dict[str, QRectF] = {}
        lanes.append((t.client_lane_label, QRectF(left, y, right - left, LANE_TITLE_H)))
        y += LANE_TITLE_H
        marker_top = y
        y += MARKER_ROW_H * MARKER_ROWS
        bars: list[tuple[tuple[Segment, ...], float]] = [(t.segments, y)]
        y += BAR_H
        for title, lane_segments in self._lanes_of(t)[1:]:  # the search's, the server's
            y += LANE_GAP
            lanes.append((title, QRectF(left, y, right - left, LANE_TITLE_H)))
            y += LANE_TITLE_H
            bars.append((lane_segments, y))
            y += BAR_H
        bars_bottom = y
        for lane_segments, top in bars:
            for segment in lane_segments:
                rect = QRectF(
                    x_of(segment.start_ms),
                    top,
                    x_of(segment.end_ms) - x_of(segment.start_ms),
                    BAR_H,
                )
                segments[segment.key] = Placed(rect)
                text = self._fitting_label(segment, rect.width() - 2 * LABEL_PAD, small)
                if text:
                    text_rect = QRectF(
                        rect.left() + LABEL_PAD, top, rect.width() - 2 * LABEL_PAD, BAR_H
                    )
                    labels.append(Placed(text_rect, text))
        taken: list[list[QRectF]] = [[] for _ in range(MARKER_ROWS)]
        for marker in t.markers:
            x = x_of(marker.at_ms)
            markers[marker.key] = QRectF(x - 0.5, marker_top, 1.0, bars_bottom - marker_top)
            text = self._marker_text(marker)
            text_w = small.horizontalAdvance(text) + 2
            # beside its tick, to the right (to the left when the right edge is near)
            tx = x + 4 if x + 4 + text_w <= right else max(x - 4 - text_w, left)
            for row in range(MARKER_ROWS):
                rect = QRectF(tx, marker_top + row * MARKER_ROW_H, text_w, MARKER_ROW_H)
                if not any(rect.adjusted(-4, 0, 4, 0).intersects(o) for o in taken[row]):
                    taken[row].append(rect)
                    labels.append(Placed(rect, text))
                    break
        ticks: list[tuple[float, str, QRectF]] = []
        if t.span_ms > 0:
            step = nice_step(t.span_ms, right - left)
            last_right = -math.inf
            k = 0
            while k * step <= t.span_ms + 1e-9:
                ms = k * step
                text = tick_text(ms)
                x = x_of(ms)
                text_w = small.horizontalAdvance(text) + 2
                rect = QRectF(min(max(x - text_w / 2, 0.0), width - text_w), y + 4, text_w, 16)
                if rect.left() > last_right + 6:
                    ticks.append((x, text, rect))
                    last_right = rect.right()
                k += 1
        return ChartLayout(segments, labels, markers, ticks, lanes, y + AXIS_H + PAD / 2)

    @staticmethod
    def _lanes_of(t: Timeline) -> list[tuple[str, tuple[Segment, ...]]]:
        """The bars top to bottom: the call on this computer, then (when there is one) the
        knowledge search before it, then the server's or the images' own lane."""
        lanes = [(t.client_lane_label, t.segments)]
        if t.retrieval_segments:
            lanes.append((t.retrieval_lane_label, t.retrieval_segments))
        if t.server_segments:
            lanes.append((t.server_lane_label, t.server_segments))
        return lanes

    @staticmethod
    def _fitting_label(segment: Segment, room: float, metrics: QFontMetricsF) -> str:
        for text in (f"{segment.label} · {segment.figure}", segment.label, segment.figure):
            if text and metrics.horizontalAdvance(text) <= room:
                return text
        return ""

    @staticmethod
    def _marker_text(marker: Marker) -> str:
        if marker.key == "reused":
            return marker.label
        return f"{marker.label} {marker.figure}"

    def current_layout(self) -> ChartLayout:
        return self.layout_for(self.width())

    def segment_rects(self) -> dict[str, QRectF]:
        """Each segment's bar as drawn now (true proportions), by key."""
        return {key: placed.rect for key, placed in self.current_layout().segments.items()}

    def segment_at(self, point: QPointF) -> Segment | None:
        for key, placed in self.current_layout().segments.items():
            if placed.rect.adjusted(-1, 0, 1, 0).contains(point):
                return self.timeline.segment(key)
        return None

    # painting ---------------------------------------------------------------------------------
    def paintEvent(self, event: QPaintEvent) -> None:
        colors = current_colors()
        layout = self.current_layout()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        small = self._font(smaller=0.9)
        painter.setFont(self._font(bold=True, smaller=0.9))
        painter.setPen(QColor(colors.muted))
        for title, rect in layout.lanes:
            painter.drawText(
                rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, title
            )
        self._paint_bars(painter, layout, colors)
        painter.setFont(small)
        for placed in layout.labels:
            segment_color = self._color_under(placed.rect, layout)
            painter.setPen(text_on(segment_color) if segment_color else QColor(colors.text))
            painter.drawText(
                placed.rect,
                Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextSingleLine,
                placed.text,
            )
        pen = QPen(QColor(colors.text))
        pen.setWidthF(1.5)
        painter.setPen(pen)
        for rect in layout.markers.values():
            painter.drawLine(
                QPointF(rect.center().x(), rect.top() + 2),
                QPointF(rect.center().x(), rect.bottom()),
            )
        painter.setPen(QColor(colors.border))
        axis_y = layout.height - AXIS_H - PAD / 2
        painter.drawLine(QPointF(PAD, axis_y), QPointF(self.width() - PAD, axis_y))
        painter.setPen(QColor(colors.muted))
        for x, text, rect in layout.ticks:
            painter.drawLine(QPointF(x, axis_y), QPointF(x, axis_y + 4))
            painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        painter.end()

    def _paint_bars(self, painter: QPainter, layout: ChartLayout, colors: Colors) -> None:
        painter.setPen(Qt.PenStyle.NoPen)
        for _, lane_segments in self._lanes_of(self.timeline):
            if not lane_segments:
                continue
            first = layout.segments[lane_segments[0].key].rect
            track = QRectF(PAD, first.top(), self.width() - 2 * PAD, BAR_H)
            painter.setBrush(QColor(colors.assistant_bubble))
            painter.drawRoundedRect(track, 4, 4)
            for segment in lane_segments:
                rect = QRectF(layout.segments[segment.key].rect)
                if rect.width() < 2:  # still visible; its figure is in the legend
                    rect.setWidth(2)
                color = kind_color(segment.kind, colors.dark)
                painter.setBrush(color)
                painter.drawRect(rect)
                if segment.kind == "gap":  # time nobody accounted for: hatched
                    hatch = color.lighter(140) if colors.dark else color.darker(125)
                    painter.setBrush(QBrush(hatch, Qt.BrushStyle.BDiagPattern))
                    painter.drawRect(rect)
            # a hairline between neighbours, so two parts of one colour still read as two
            painter.setBrush(QColor(colors.surface))
            for segment in lane_segments[1:]:
                x = layout.segments[segment.key].rect.left()
                painter.drawRect(QRectF(x - 0.5, first.top(), 1.0, BAR_H))

    def _color_under(self, rect: QRectF, layout: ChartLayout) -> QColor | None:
        for key, placed in layout.segments.items():
            if placed.rect.contains(rect.center()):
                segment = self.timeline.segment(key)
                if segment is not None:
                    return kind_color(segment.kind, current_colors().dark)
        return None

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            segment = self.segment_at(QPointF(event.pos()))
            if segment is not None:
                show_plain(
                    event.globalPos(),
                    f"{segment.label}: {segment.figure}\n{segment.description}",
                    self,
                )
            else:
                QToolTip.hideText()
            return True
        return super().event(event)


class Swatch(QWidget):
    """A part's colour in a legend (12×12, rounded), or a marker's line for ``kind`` None.
    Painted, not styled: a style sheet per swatch made each one re-polish (~0.6 ms)."""

    def __init__(self, kind: str | None) -> None:
        super().__init__()
        self.kind = kind
        self.setFixedSize(12, 12)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if self.kind is None:
            painter.setPen(self.palette().windowText().color())
            x = self.width() / 2
            painter.drawLine(QPointF(x, 0), QPointF(x, self.height()))
            return
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(kind_color(self.kind, current_colors().dark))
        painter.drawRoundedRect(QRectF(self.rect()), 2, 2)


class SplitBar(QWidget):
    """A thin bar split into coloured parts (value, kind), scaled to ``total``."""

    def __init__(self, parts: list[tuple[float, str]], total: float, name: str) -> None:
        super().__init__()
        self.setObjectName("TimelineSplitBar")
        self.parts = [(max(v, 0.0), kind) for v, kind in parts]
        self.total = max(total, sum(v for v, _ in self.parts), 1e-9)
        self.setFixedHeight(10)
        self.setMinimumWidth(120)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setAccessibleName(name)

    def part_rects(self) -> list[QRectF]:
        width = float(self.width())
        x, rects = 0.0, []
        for value, _ in self.parts:
            w = width * value / self.total
            rects.append(QRectF(x, 0, w, self.height()))
            x += w
        return rects

    def paintEvent(self, event: QPaintEvent) -> None:
        colors = current_colors()
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(colors.border))
        painter.drawRoundedRect(QRectF(self.rect()), 3, 3)
        for rect, (_, kind) in zip(self.part_rects(), self.parts, strict=True):
            painter.setBrush(kind_color(kind, colors.dark))
            painter.drawRect(rect)
        painter.end()
