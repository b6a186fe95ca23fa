"""Run something once a window has painted for the first time (start-up work that the first
screen does not need: it waits until the person sees the window)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QWidget


class _FirstPaint(QObject):
    """Installed on ``watched`` (the application, or the window itself): calls back once, just
    after the first paint of ``window`` or of a widget in it."""

    def __init__(self, watched: QObject, window: QWidget, callback: Callable[[], None]) -> None:
        super().__init__(window)
        self._watched = watched
        self._window = window
        self._callback = callback
        watched.installEventFilter(self)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if (
            event.type() == QEvent.Type.Paint
            and isinstance(obj, QWidget)
            and obj.window() is self._window
        ):
            self._watched.removeEventFilter(self)
            # after this paint has been flushed to the screen, not inside it
            QTimer.singleShot(0, self._callback)
        return False


def after_first_paint(window: QWidget, callback: Callable[[], None]) -> None:
    """Call ``callback`` on the GUI thread once, just after ``window``'s first paint."""
    app = QApplication.instance()
    assert app is not None
    _FirstPaint(app, window, callback)


def after_own_first_paint(window: QWidget, callback: Callable[[], None]) -> None:
    """``after_first_paint`` for a window not shown yet, watching only the window's own events.

    Cheaper at start-up: an application-wide Python filter makes PySide create the Python
    type of every object that gets an event (~130 enum types, ~10 ms before the first paint).
    A newly shown window gets a paint event of its own; a later repaint of its children alone
    may not reach it, so for those, ``after_first_paint``."""
    _FirstPaint(window, window, callback)
