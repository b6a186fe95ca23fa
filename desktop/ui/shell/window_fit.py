"""The main window's smallest size, and the sidebar's narrowest width, follow the text size.

At the normal text size the window may be as small as 720×480 and the sidebar as narrow as
220 px, and everything in them fits (labels elide, rows wrap or scroll). A larger text size
(Settings → Appearance) grows both by the same factor, so the layouts hold there too instead
of squeezing widgets over each other.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QMainWindow, QSplitter

from desktop.ui.kit.theme import current_text_scale

WINDOW_MIN = (720, 480)
SIDEBAR_MIN = 220


class MinimumSizes(QObject):
    """Re-applies the minimums when the window is shown and whenever its font changes."""

    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self._window = window
        window.installEventFilter(self)
        self.apply()

    def apply(self) -> None:
        scale = max(1.0, current_text_scale())
        width, height = (round(v * scale) for v in WINDOW_MIN)
        if (self._window.minimumWidth(), self._window.minimumHeight()) != (width, height):
            self._window.setMinimumSize(width, height)
        splitter = getattr(self._window, "splitter", None)
        if isinstance(splitter, QSplitter) and (side := splitter.widget(0)) is not None:
            side.setMinimumWidth(round(SIDEBAR_MIN * scale))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._window and event.type() in (QEvent.Type.Show, QEvent.Type.FontChange):
            self.apply()
        return False


def keep_minimum_sizes(window: QMainWindow) -> MinimumSizes:
    return MinimumSizes(window)
