"""A vertical scroll area that scrolls by blitting what is on screen.

QScrollArea scrolls by moving its content widget, which repaints the whole view. Here the
viewport copies what it shows and paints only the strip that comes into view, and a view that
follows text growing at its bottom can be moved up *before* the text grows (``prescroll``),
so a streamed line costs the blit plus the new strip. Both the viewport and the content paint
opaquely: Qt blits only opaque widgets.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent
from PySide6.QtWidgets import QFrame, QScrollArea, QWidget

from desktop.ui.kit.theme import current_colors


def fill_surface(widget: QWidget, event: QPaintEvent) -> None:
    """The opaque background behind the rows (opaque, so Qt can blit when it scrolls)."""
    painter = QPainter(widget)
    painter.fillRect(event.rect(), QColor(current_colors().surface))
    painter.end()


class BlitContent(QWidget):
    """The scrolled content: opaque (so the view can blit it) and static when it grows.

    Give its layout ``QLayout.SizeConstraint.SetNoConstraint``: the scroll area sizes it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent, True)
        self.setAttribute(Qt.WidgetAttribute.WA_StaticContents, True)

    def minimumSizeHint(self) -> QSize:
        # The scroll area makes the content at least this tall. Qt's default is the height at
        # the *narrowest* width (word-wrapped rows are taller there), which left a blank gap
        # under the last row: use the height at the width the content has.
        layout = self.layout()
        if layout is None:
            return super().minimumSizeHint()
        if layout.hasHeightForWidth():
            return QSize(0, layout.totalHeightForWidth(self.width()))
        return QSize(0, layout.totalSizeHint().height())

    def paintEvent(self, event: QPaintEvent) -> None:
        fill_surface(self, event)


class BlitScrollArea(QScrollArea):
    """Scrolls its ``BlitContent`` vertically by blitting; the content takes the view's width.

    Subclasses say when the view follows the bottom (``may_prescroll``).
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.viewport().setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent, True)
        self._prescrolled = 0  # pixels the view was moved ahead of the scroll bar

    def scrollContentsBy(self, dx: int, dy: int) -> None:
        """Scroll by blitting the view (QScrollArea moves its widget, which repaints it all).

        Moving the content with ``viewport().scroll`` copies what is on screen and paints only
        the strip that comes into view; the content widget ends where QScrollArea would put it.
        """
        dy += self._prescrolled
        self._prescrolled = 0
        if dx or dy:
            self.viewport().scroll(dx, dy)

    def may_prescroll(self) -> bool:
        """True while the view follows the bottom of the content."""
        return True

    def prescroll(self, pixels: int) -> None:
        """The content is about to grow by ``pixels`` at the bottom: move the view up first.

        Called before the content marks anything dirty, so Qt can blit the view (a dirty area
        inside it forces a full repaint); the scroll bar catches up when the layout has grown,
        and scrollContentsBy then skips what was already moved.
        """
        bar = self.verticalScrollBar()
        if (
            not self.may_prescroll()
            or not self.viewport().isVisible()
            or bar.maximum() <= 0
            or bar.value() != bar.maximum()
        ):
            return
        # Anything still dirty in the view would make Qt repaint all of it instead of
        # blitting: paint it first (it was due anyway).
        QCoreApplication.sendPostedEvents(self.window(), QEvent.Type.UpdateRequest)
        self.viewport().scroll(0, -pixels)
        self._prescrolled += pixels

    def undo_prescroll(self) -> None:
        """The content did not grow as announced: put the view back."""
        if self._prescrolled:
            self.viewport().scroll(0, self._prescrolled)
            self._prescrolled = 0

    def relayout_now(self) -> None:
        """Positions and the scroll range up to date now, not after posted layout requests.

        The scroll area sizes the content first, then the content lays out its rows once, at
        that size. (Activating the content's layout first would squeeze the rows into the old
        height and move every one of them twice: a repaint of the whole view.)
        """
        QCoreApplication.sendEvent(self, QEvent(QEvent.Type.LayoutRequest))
        content = self.widget()
        layout = content.layout() if content is not None else None
        if layout is not None:
            layout.activate()

    def paintEvent(self, event: QPaintEvent) -> None:
        fill_surface(self.viewport(), event)
