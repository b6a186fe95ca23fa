"""Run something once a window has painted for the first time (start-up work that the first
screen does not need: it waits until the person sees the window)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QWidget


class _FirstPaint(QObject):
    def __init__(self, window: QWidget, callback: Callable[[], None]) -> None:
        super().__init__(window)
        self._window = window
        self._callback = callback

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if (
            event.type() == QEvent.Type.Paint
            and isinstance(obj, QWidget)
            and obj.window() is self._window
        ):
            app = QApplication.instance()
            if app is not None:
                app.removeEventFilter(self)
            # after this paint has been flushed to the screen, not inside it
            QTimer.singleShot(0, self._callback)
        return False


def after_first_paint(window: QWidget, callback: Callable[[], None]) -> None:
    """Call ``callback`` on the GUI thread once, just after ``window``'s first paint."""
    app = QApplication.instance()
    assert app is not None
    app.installEventFilter(_FirstPaint(window, callback))
