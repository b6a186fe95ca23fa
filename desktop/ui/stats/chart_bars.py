"""The dashboard's comparison bars: per metric a panel, per agent a bar to its p50 and a thin
line on to its p95, with the values written out and what is better (lower or higher) said in
the title. Painted with QPainter and the widget's palette; re-exported by ``charts``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QMouseEvent, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QToolTip, QWidget

from desktop.ui.kit.tooltips import show_plain
from desktop.ui.stats.chart_axes import Metric, value_ticks


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
            show_plain(event.globalPosition().toPoint(), tip, self)  # an agent's name
        else:
            QToolTip.hideText()
