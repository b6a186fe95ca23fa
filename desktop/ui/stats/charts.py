"""The dashboard's two charts, painted with QPainter (no chart library: ``import pyqtgraph``
alone costs ~470 ms here, more than the dashboard's whole 300 ms budget, and QtCharts would
add pyside6-addons, ~200 MB).

``TimeChart``: one dot per call over time for one metric, one colour per agent, a legend,
readable axes, a tooltip on hover; clicking a dot emits that call's conversation and reply.
The keyboard works too: Tab to the chart, ←/→ step from call to call (Home/End: the first and
last), Enter opens the one shown. ``CompareBars`` (``chart_bars.py``): per agent, a bar to its
p50 and a thin line on to its p95, with the values written out.

Both compute their geometry when their data or size changes (QPolygonF per agent, one
``drawPoints`` call each); a paint only draws. Text and axes take the widget's palette, so
both read in light and dark; agent colours come from ``agent_colors``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFontMetrics,
    QKeyEvent,
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

from desktop.chat.format import date_text
from desktop.ui.kit.theme import current_colors
from desktop.ui.kit.tooltips import show_plain
from desktop.ui.stats.chart_axes import Metric, Point, metric, points_of, time_ticks, value_ticks
from desktop.ui.stats.chart_bars import Bar, BarGroup, CompareBars

__all__ = ["Bar", "BarGroup", "CompareBars", "TimeChart", "agent_colors"]

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
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
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
        for mark in time_ticks(*self._x_range, max_ticks):
            x, _ = self._to_xy(mark.at, 0)
            if x < r.left() - 1 or x > r.right() + 1:
                continue
            painter.setPen(QPen(grid, 1))
            painter.drawLine(QPointF(x, r.bottom()), QPointF(x, r.bottom() + 4))
            painter.setPen(muted)
            box = QRectF(x - 45, r.bottom() + 5, 90, fm.height())
            painter.drawText(box, Qt.AlignmentFlag.AlignHCenter, mark.label)
            if mark.date:
                painter.drawText(
                    box.translated(0, fm.height()), Qt.AlignmentFlag.AlignHCenter, mark.date
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
        if self.hasFocus():  # where the keyboard is
            painter.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 1))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5))
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
        when = date_text(datetime.fromtimestamp(p.at), "%d %b %Y, %H:%M:%S")
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
            show_plain(event.globalPosition().toPoint(), self.tooltip_text(index), self)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """←/→ (Home/End) step through the calls in time order; Enter opens the one shown."""
        key, n = event.key(), len(self.points)
        if n and key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and self.hovered is not None:
            p = self.points[self.hovered]
            self.point_clicked.emit(p.conversation_id, p.message_id)
            return
        # key() is an int; Qt.Key is an IntEnum, so its members are the same keys
        steps: dict[int, int] = {
            Qt.Key.Key_Left: -1,
            Qt.Key.Key_Right: 1,
            Qt.Key.Key_Home: -n,
            Qt.Key.Key_End: n,
        }
        if not n or key not in steps:
            return super().keyPressEvent(event)
        order = sorted(range(n), key=lambda i: self.points[i].at)
        at = order.index(self.hovered) if self.hovered in order else (-1 if steps[key] > 0 else n)
        self.hovered = order[max(0, min(n - 1, at + steps[key]))]
        self.setAccessibleDescription(self.tooltip_text(self.hovered))
        pos = self.mapToGlobal(self.point_pos(self.hovered).toPoint())
        show_plain(pos, self.tooltip_text(self.hovered), self)
        self.update()

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
