"""The dashboard's two charts, painted with QPainter (no chart library: ``import pyqtgraph``
alone costs ~470 ms here, more than the dashboard's whole 300 ms budget, and QtCharts would
add pyside6-addons, ~200 MB).

``TimeChart``: one dot per call over time for one metric, one colour per agent, a legend,
readable axes, a tooltip on hover; clicking a dot emits that call's conversation and reply.
``CompareBars``: per agent, a bar to its p50 and a thin line on to its p95, for time to first
token and decode speed, with the values written out.

Both compute their geometry when their data or size changes (QPolygonF per agent, one
``drawPoints`` call each); a paint only draws. Text and axes take the widget's palette, so
both read in light and dark; agent colours come from ``agent_colors``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFontMetrics,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QPen,
    QPixmap,
    QPolygonF,
    QResizeEvent,
)
from PySide6.QtWidgets import QToolTip, QWidget

from desktop.ui.chart_axes import Metric, Point, metric, points_of, time_ticks, value_ticks
from desktop.ui.theme import current_colors

# Ten colours that stay apart from each other and from the background, per scheme.
LIGHT_SERIES = (
    "#3f5bd9", "#e0702b", "#1f9d8a", "#c7367a", "#8a6a12",
    "#7b4fd0", "#2f8fd6", "#c23b3b", "#4f8f1f", "#6b7280",
)  # fmt: skip
DARK_SERIES = (
    "#8ea0ff", "#ffa066", "#4fd1bd", "#ff7ab3", "#e0c04f",
    "#b79cff", "#6fc0ff", "#ff8080", "#9ad466", "#b4bac4",
)  # fmt: skip
HIT_RADIUS = 8.0
DOT = 7.0


def agent_colors(names: Sequence[str], dark: bool | None = None) -> dict[str, QColor]:
    """A colour per agent, in the given order (the 11th agent reuses the first colour)."""
    if dark is None:
        dark = current_colors().dark
    series = DARK_SERIES if dark else LIGHT_SERIES
    return {name: QColor(series[i % len(series)]) for i, name in enumerate(names)}


class TimeChart(QWidget):
    """Signals: point_clicked(object, object): the clicked call's (conversation_id,
    message_id); message_id is None when the reply was replaced since."""

    point_clicked = Signal(object, object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("TimeChart")
        self.setMouseTracking(True)
        self.setMinimumSize(280, 200)
        self.chart_metric: Metric = metric("ttft_ms")
        self.points: list[Point] = []
        self.colors: dict[str, QColor] = {}
        self.empty_text = "No calls to plot."
        self.hovered: int | None = None
        self._polys: dict[str, QPolygonF] = {}
        self._clipped: list[QPointF] = []
        self._hits: list[tuple[float, float]] = []
        self._plot = QRectF()
        self._y_max = 1.0
        self._y_ticks: list[float] = []
        self._x_range = (0.0, 1.0)
        self._legend: list[tuple[QRectF, str]] = []
        self._layer: QPixmap | None = None
        self._update_accessible()

    # data ------------------------------------------------------------------------------------
    def set_series(
        self, rows: Sequence[dict], chart_metric: Metric, colors: dict[str, QColor]
    ) -> None:
        """Show ``rows`` (``StatsStore.series`` dicts: agent, started_at, value, ids)."""
        self.set_points(points_of(rows), chart_metric, colors)

    def set_points(
        self, points: Sequence[Point], chart_metric: Metric, colors: dict[str, QColor]
    ) -> None:
        """Show ``points`` (made with ``points_of``, e.g. on a worker thread)."""
        self.chart_metric = chart_metric
        self.colors = dict(colors)
        self.points = list(points)
        self.hovered = None
        self._relayout()
        self._update_accessible()
        self.update()

    def _update_accessible(self) -> None:
        agents = len({p.agent for p in self.points})
        self.setAccessibleName(f"{self.chart_metric.label} over time")
        self.setAccessibleDescription(
            f"{len(self.points)} calls from {agents} agents, one dot per call; "
            "click a dot to open that reply."
            if self.points
            else self.empty_text
        )

    # geometry --------------------------------------------------------------------------------
    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._relayout()

    def _relayout(self) -> None:
        fm = QFontMetrics(self.font())
        line = fm.height()
        w, h = float(self.width()), float(self.height())
        legend_bottom = self._layout_legend(fm, w)
        values = sorted(p.value for p in self.points)
        top = values[-1] if values else 1.0
        if len(values) >= 20:  # one slow call must not flatten all the others
            p98 = values[int(0.98 * (len(values) - 1))]
            if p98 > 0 and top > 3 * p98:
                top = p98 * 1.25
        self._y_max, self._y_ticks = value_ticks(top * 1.04, max(2, int(h // (3 * line))))
        label_w = max(fm.horizontalAdvance(self.chart_metric.tick(t)) for t in self._y_ticks)
        self._plot = QRectF(label_w + 14, legend_bottom + 6, 0, 0)
        self._plot.setRight(w - 14)
        self._plot.setBottom(h - 2 * line - 10)
        if self.points:
            start = min(p.at for p in self.points)
            end = max(p.at for p in self.points)
            pad = max((end - start) * 0.03, 30.0)
            self._x_range = (start - pad, end + pad)
        x0, x1 = self._x_range
        left, bottom = self._plot.left(), self._plot.bottom()
        sx = self._plot.width() / (x1 - x0 or 1.0)
        y_max = self._y_max
        sy = self._plot.height() / (y_max or 1.0)
        coords: dict[str, list[QPointF]] = {}
        self._clipped = []
        hits = self._hits = []
        for p in self.points:  # inline arithmetic: this runs for up to 2,000 calls
            x = left + (p.at - x0) * sx
            y = bottom - (p.value if p.value < y_max else y_max) * sy
            point = QPointF(x, y)
            coords.setdefault(p.agent, []).append(point)
            if p.value > y_max:
                self._clipped.append(point)
            hits.append((x, y))
        self._polys = {agent: QPolygonF(pts) for agent, pts in coords.items()}
        self._layer = None

    def _layout_legend(self, fm: QFontMetrics, width: float) -> float:
        """Legend entries flow left to right under the top edge; returns their bottom."""
        self._legend = []
        agents = list(dict.fromkeys(p.agent for p in self.points))
        x, y, line = 14.0, 4.0, float(fm.height())
        for name in agents:
            item_w = 16 + fm.horizontalAdvance(name) + 16
            if x + item_w > width - 8 and x > 14:
                x, y = 14.0, y + line + 2
            self._legend.append((QRectF(x, y, item_w, line), name))
            x += item_w
        return y + line if agents else 4.0

    def _to_xy(self, at: float, value: float) -> tuple[float, float]:
        x0, x1 = self._x_range
        r = self._plot
        x = r.left() + (at - x0) / (x1 - x0 or 1.0) * r.width()
        y = r.bottom() - value / (self._y_max or 1.0) * r.height()
        return x, y

    def sizeHint(self) -> QSize:
        return QSize(640, 280)

    def point_pos(self, index: int) -> QPointF:
        """Where point ``index`` is drawn (widget coordinates)."""
        x, y = self._hits[index]
        return QPointF(x, y)

    def point_at(self, pos: QPointF) -> int | None:
        """The point nearest ``pos`` within a few pixels, or None."""
        best, best_d = None, HIT_RADIUS * HIT_RADIUS
        px, py = pos.x(), pos.y()
        for i, (x, y) in enumerate(self._hits):
            d = (x - px) ** 2 + (y - py) ** 2
            if d <= best_d:
                best, best_d = i, d
        return best

    # painting --------------------------------------------------------------------------------
    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        text = pal.color(QPalette.ColorRole.WindowText)
        muted = pal.color(QPalette.ColorRole.PlaceholderText)
        grid = pal.color(QPalette.ColorRole.Mid)
        painter.fillRect(self.rect(), pal.color(QPalette.ColorRole.Base))
        if not self.points:
            painter.setPen(muted)
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, self.empty_text)
            return
        fm = painter.fontMetrics()
        r = self._plot
        # y axis: grid lines with their values
        for tick in self._y_ticks:
            _, y = self._to_xy(self._x_range[0], tick)
            painter.setPen(QPen(grid, 1))
            painter.drawLine(QPointF(r.left(), y), QPointF(r.right(), y))
            painter.setPen(muted)
            label = self.chart_metric.tick(tick)
            painter.drawText(
                QRectF(0, y - fm.height() / 2, r.left() - 6, fm.height()),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                label,
            )
        # x axis: time ticks, with the date under the first time of each day
        max_ticks = max(2, int(r.width() // 90))
        for tick in time_ticks(*self._x_range, max_ticks):
            x, _ = self._to_xy(tick.at, 0)
            if x < r.left() - 1 or x > r.right() + 1:
                continue
            painter.setPen(QPen(grid, 1))
            painter.drawLine(QPointF(x, r.bottom()), QPointF(x, r.bottom() + 4))
            painter.setPen(muted)
            box = QRectF(x - 45, r.bottom() + 5, 90, fm.height())
            painter.drawText(box, Qt.AlignmentFlag.AlignHCenter, tick.label)
            if tick.date:
                painter.drawText(
                    box.translated(0, fm.height()), Qt.AlignmentFlag.AlignHCenter, tick.date
                )
        painter.setPen(QPen(grid, 1))
        painter.drawLine(r.bottomLeft(), r.bottomRight())
        # the dots: drawn once per answer or size into a layer (hovering only blits it)
        painter.drawPixmap(0, 0, self._dots_layer(text))
        if self._clipped:  # calls above the scale: an arrow on the top edge
            painter.setPen(QPen(text, 1.5))
            for p in self._clipped:
                painter.drawLine(QPointF(p.x(), p.y() + 5), QPointF(p.x(), p.y() - 4))
                painter.drawLine(QPointF(p.x() - 3, p.y() - 1), QPointF(p.x(), p.y() - 4))
                painter.drawLine(QPointF(p.x() + 3, p.y() - 1), QPointF(p.x(), p.y() - 4))
        if self.hovered is not None and self.hovered < len(self._hits):
            painter.setPen(QPen(text, 2))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawEllipse(self.point_pos(self.hovered), DOT, DOT)
        # legend
        for box, name in self._legend:
            pen = QPen(self.colors.get(name, text), DOT + 1)
            pen.setCapStyle(Qt.PenCapStyle.RoundCap)
            painter.setPen(pen)
            painter.drawPoint(QPointF(box.left() + 5, box.center().y()))
            painter.setPen(text)
            painter.drawText(box.adjusted(14, 0, 0, 0), Qt.AlignmentFlag.AlignVCenter, name)

    def _dots_layer(self, fallback: QColor) -> QPixmap:
        if self._layer is None or self._layer.deviceIndependentSize() != self.size().toSizeF():
            ratio = self.devicePixelRatioF()
            layer = QPixmap(self.size() * ratio)
            layer.setDevicePixelRatio(ratio)
            layer.fill(Qt.GlobalColor.transparent)
            painter = QPainter(layer)
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            for agent, poly in self._polys.items():  # one drawPoints per agent
                pen = QPen(self.colors.get(agent, fallback), DOT)
                pen.setCapStyle(Qt.PenCapStyle.RoundCap)
                painter.setPen(pen)
                painter.drawPoints(poly)
            painter.end()
            self._layer = layer
        return self._layer

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._layer = None

    # mouse -----------------------------------------------------------------------------------
    def tooltip_text(self, index: int) -> str:
        p = self.points[index]
        when = datetime.fromtimestamp(p.at).strftime("%d %b %Y, %H:%M:%S")
        action = (
            "Click to open this reply."
            if p.message_id is not None
            else "Click to open the conversation (this reply was replaced since)."
        )
        m = self.chart_metric
        return f"{p.agent}\n{when}\n{m.label}: {m.text(p.value)}\n{action}"

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        index = self.point_at(event.position())
        if index != self.hovered:
            self.hovered = index
            self.update()
        if index is None:
            self.unsetCursor()
            QToolTip.hideText()
        else:
            self.setCursor(Qt.CursorShape.PointingHandCursor)
            QToolTip.showText(event.globalPosition().toPoint(), self.tooltip_text(index), self)

    def leaveEvent(self, event: object) -> None:
        if self.hovered is not None:
            self.hovered = None
            self.update()

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return super().mousePressEvent(event)
        index = self.point_at(event.position())
        if index is not None:
            p = self.points[index]
            self.point_clicked.emit(p.conversation_id, p.message_id)


@dataclass(frozen=True, slots=True)
class Bar:
    agent: str
    p50: float | None
    p95: float | None


@dataclass(frozen=True, slots=True)
class BarGroup:
    metric: Metric
    bars: tuple[Bar, ...]


class CompareBars(QWidget):
    """Per metric a panel; per agent a bar to its p50, a thin line on to its p95."""

    ROW = 24.0

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("CompareBars")
        self.setMouseTracking(True)
        self.groups: list[BarGroup] = []
        self.colors: dict[str, QColor] = {}
        self._rows: list[tuple[QRectF, str]] = []  # hover areas and their tooltip
        self.setAccessibleName("Comparison of the chosen agents")
        self.setMinimumWidth(280)

    def set_groups(self, groups: Sequence[BarGroup], colors: dict[str, QColor]) -> None:
        self.groups = list(groups)
        self.colors = dict(colors)
        lines = []
        for g in self.groups:
            for b in g.bars:
                lines.append(
                    f"{b.agent}: {g.metric.label} p50 {g.metric.text(b.p50)}, "
                    f"p95 {g.metric.text(b.p95)}"
                )
        self.setAccessibleDescription("; ".join(lines))
        self.updateGeometry()
        self.update()

    def _side_by_side(self, width: float | None = None) -> bool:
        return (width if width is not None else self.width()) >= 720 and len(self.groups) > 1

    def _panel_height(self) -> float:
        bars = max((len(g.bars) for g in self.groups), default=0)
        line = QFontMetrics(self.font()).height()
        return 2 * line + 12 + bars * self.ROW

    def sizeHint(self) -> QSize:
        return QSize(640, int(self.heightForWidth(640)))

    def minimumSizeHint(self) -> QSize:
        return QSize(280, int(self.heightForWidth(280)))

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        panels = 1 if self._side_by_side(width) else max(1, len(self.groups))
        return int(panels * self._panel_height() + 8)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        painter.fillRect(self.rect(), pal.color(QPalette.ColorRole.Base))
        self._rows = []
        side = self._side_by_side()
        width = self.width() / len(self.groups) if side and self.groups else float(self.width())
        for i, group in enumerate(self.groups):
            x0 = i * width if side else 0.0
            y0 = 0.0 if side else i * self._panel_height()
            self._paint_group(painter, group, QRectF(x0, y0, width, self._panel_height()))

    def _paint_group(self, painter: QPainter, group: BarGroup, area: QRectF) -> None:
        pal = self.palette()
        text = pal.color(QPalette.ColorRole.WindowText)
        muted = pal.color(QPalette.ColorRole.PlaceholderText)
        fm = painter.fontMetrics()
        line = fm.height()
        m = group.metric
        better = "lower is better" if m.better == "lower" else "higher is better"
        bold = painter.font()
        bold.setBold(True)
        painter.setFont(bold)
        painter.setPen(text)
        title = QRectF(area.left() + 12, area.top() + 4, area.width() - 24, line)
        painter.drawText(title, Qt.AlignmentFlag.AlignLeft, f"{m.label} ({better})")
        painter.setFont(self.font())
        painter.setPen(muted)
        painter.drawText(
            title.translated(0, line),
            Qt.AlignmentFlag.AlignLeft,
            fm.elidedText(
                "bar: typical call (p50)  ·  line: on to p95 (1 call in 20 beyond)",
                Qt.TextElideMode.ElideRight,
                int(title.width()),
            ),
        )
        names_w = min(
            max((fm.horizontalAdvance(b.agent) for b in group.bars), default=0) + 8,
            area.width() * 0.3,
        )
        value_w = max(
            (fm.horizontalAdvance(self._value_label(m, b)) for b in group.bars), default=0
        )
        left = area.left() + 12 + names_w
        right = area.right() - 12 - value_w - 8
        top = max((b.p95 or b.p50 or 0.0 for b in group.bars), default=0.0)
        scale, _ = value_ticks(top, 4)
        y = area.top() + 2 * line + 10
        for bar in group.bars:
            color = self.colors.get(bar.agent, text)
            row = QRectF(area.left(), y, area.width(), self.ROW)
            painter.setPen(text)
            painter.drawText(
                QRectF(area.left() + 12, y, names_w - 8, self.ROW),
                Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                fm.elidedText(bar.agent, Qt.TextElideMode.ElideRight, int(names_w - 8)),
            )
            span = max(1.0, right - left)
            x50 = left + (bar.p50 or 0.0) / scale * span
            x95 = left + (bar.p95 or bar.p50 or 0.0) / scale * span
            mid = y + self.ROW / 2
            if bar.p50 is not None:
                painter.fillRect(QRectF(left, mid - 6, max(2.0, x50 - left), 12), color)
            if bar.p95 is not None and x95 > x50:
                light = QColor(color)
                light.setAlphaF(0.6)
                painter.setPen(QPen(light, 2))
                painter.drawLine(QPointF(x50, mid), QPointF(x95, mid))
                painter.drawLine(QPointF(x95, mid - 6), QPointF(x95, mid + 6))
            painter.setPen(muted if bar.p50 is None else text)
            painter.drawText(
                QRectF(max(x50, x95) + 8, y, value_w + 4, self.ROW),
                Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                self._value_label(m, bar),
            )
            self._rows.append((row, self._row_tooltip(m, bar)))
            y += self.ROW

    @staticmethod
    def _value_label(m: Metric, bar: Bar) -> str:
        if bar.p50 is None:
            return "no data"
        return f"{m.text(bar.p50)}  ·  p95 {m.text(bar.p95)}"

    @staticmethod
    def _row_tooltip(m: Metric, bar: Bar) -> str:
        if bar.p50 is None:
            return f"{bar.agent}: no call measured its {m.label.lower()}."
        if m.better == "lower":
            return (
                f"{bar.agent}: {m.label.lower()} within {m.text(bar.p50)} for half the "
                f"calls, within {m.text(bar.p95)} for 95 in 100."
            )
        return (
            f"{bar.agent}: {m.label.lower()} of {m.text(bar.p50)} or more for half the "
            f"calls; the fastest 1 in 20 reached {m.text(bar.p95)}."
        )

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        pos = event.position()
        tip = next((t for r, t in self._rows if r.contains(pos)), None)
        if tip:
            QToolTip.showText(event.globalPosition().toPoint(), tip, self)
        else:
            QToolTip.hideText()
