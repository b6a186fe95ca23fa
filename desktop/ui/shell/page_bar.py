"""The sidebar's page buttons (Chat, Models, Stats, Compare, Server): the fewest rows that fit,
each as even as it can be, one column when even two a row would cut their words.

A height-for-width layout (``FlowLayout``) in the sidebar upsets the main splitter's sizes, so
this one re-arranges a grid on resize instead, and reports the two-row width as its minimum:
the sidebar can still be dragged to its narrowest.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QGridLayout, QLayout, QToolButton, QWidget

SPACING = 4
MARGINS = (4, 4, 4, 0)


class PageBar(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("PageBar")
        self._grid = QGridLayout(self)
        self._grid.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self._grid.setContentsMargins(*MARGINS)
        self._grid.setSpacing(SPACING)
        self.buttons: list[QToolButton] = []
        self._columns = 0

    def add(self, button: QToolButton) -> None:
        self.buttons.append(button)
        self._arrange(force=True)

    @property
    def rows(self) -> int:
        return -(-len(self.buttons) // max(1, self._columns))

    def _width_for(self, columns: int) -> int:
        """The narrowest the bar can be with ``columns`` buttons a row."""
        widths = [0] * columns
        for index, button in enumerate(self.buttons):
            column = index % columns
            widths[column] = max(widths[column], button.sizeHint().width())
        return sum(widths) + SPACING * (columns - 1) + MARGINS[0] + MARGINS[2]

    def _arrange(self, force: bool = False) -> None:
        count = len(self.buttons)
        if not count:
            return
        # the fewest rows that fit, each as even as it can be (5: one row, 3 + 2, 2 + 2 + 1);
        # squeezed below two a row (a small window, large text, a wide font): one column
        columns = 1
        for rows in range(1, count):
            wanted = -(-count // rows)
            if wanted < 2:
                break
            if self.width() >= self._width_for(wanted):
                columns = wanted
                break
        if columns != self._columns or force:
            self._columns = columns
            for button in self.buttons:
                self._grid.removeWidget(button)
            for index, button in enumerate(self.buttons):
                self._grid.addWidget(button, index // columns, index % columns)
        height = max((b.sizeHint().height() for b in self.buttons), default=0)
        height = self.rows * height + (self.rows - 1) * SPACING + MARGINS[1]
        if height != self.height() or columns != self._columns or force:
            self.setFixedHeight(height)
            self.updateGeometry()

    def minimumSizeHint(self) -> QSize:
        count = len(self.buttons)
        return QSize(self._width_for(min(2, count)) if count else 0, self.height())

    def sizeHint(self) -> QSize:
        return QSize(self._width_for(len(self.buttons)) if self.buttons else 0, self.height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._arrange()

    def event(self, event: QEvent) -> bool:
        # the buttons' words changed size (the text size setting, the theme, another font):
        # the same width may now hold fewer of them a row
        if event.type() in (
            QEvent.Type.LayoutRequest,
            QEvent.Type.FontChange,
            QEvent.Type.StyleChange,
        ):
            self._arrange()
        return super().event(event)
