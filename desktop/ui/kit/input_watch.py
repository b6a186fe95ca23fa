"""What the person does, watched where it arrives: at each top-level window.

An event filter on the application is called for every event of every object, and a Python one
costs ~4 µs a call: showing a widget is ~20 events, so building a dialog of 60 labels took
9.4 ms bare and 18.5 ms under the two such filters the app used to have (plain tooltips and
work for quiet moments). A window (``QWindow``) gets only what the system sends it: keys, the
mouse, the wheel, expose, resize, focus. ``InputWatch`` filters those instead and keeps:

* ``last_input``: when the last key, click, wheel or move arrived (``idle.WhenIdle``);
* ``hovered``: the widget under the pointer, told to each ``on_hover`` listener when it
  changes (``tooltips``): at a move, before Qt hands the move to that widget.

New windows (a dialog, a menu, a popup) are watched when one takes the focus and at a look
every 250 ms; the look also finds what came under a still pointer (a tooltip waits 700 ms of
rest first). Input that skips the windows (``QTest.keyClick`` on a widget) is not seen: a test
or a bench that stands for a person sends it to the window, as the system does.

One per application: ``input_watch(app)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import shiboken6
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtGui import QCursor, QGuiApplication, QMouseEvent
from PySide6.QtWidgets import QApplication, QWidget

NAME = "inputWatch"
LOOK_MS = 250
_MOVE = QEvent.Type.MouseMove
_INPUT = frozenset(
    {
        QEvent.Type.KeyPress,
        QEvent.Type.MouseButtonPress,
        QEvent.Type.MouseButtonDblClick,
        QEvent.Type.Wheel,
        _MOVE,
    }
)


class InputWatch(QObject):
    """The application's input, seen at its windows (see the module's text)."""

    def __init__(self, app: QApplication) -> None:
        super().__init__(app)
        self.setObjectName(NAME)
        self.last_input = time.monotonic()
        self.hovered: QWidget | None = None
        self._listeners: list[Callable[[QWidget | None], None]] = []
        app.focusWindowChanged.connect(self._watch_windows)
        self._look = QTimer(self)
        self._look.setInterval(LOOK_MS)
        self._look.timeout.connect(self.look)
        self._look.start()
        self.look()

    def on_hover(self, listener: Callable[[QWidget | None], None]) -> None:
        """Call ``listener`` with the widget under the pointer now and whenever it changes."""
        self._listeners.append(listener)
        listener(self.hovered)

    def look(self) -> None:
        """Watch the windows shown since the last look; see what is under the pointer now."""
        self._watch_windows()
        self._hover(QApplication.widgetAt(QCursor.pos()))

    def _watch_windows(self, *_: object) -> None:
        for window in QGuiApplication.topLevelWindows():
            window.installEventFilter(self)  # again on one already watched: still one call

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind in _INPUT:
            self.last_input = time.monotonic()
            if kind is _MOVE and isinstance(event, QMouseEvent):
                self._hover(QApplication.widgetAt(event.globalPosition().toPoint()))
        return False

    def _hover(self, widget: QWidget | None) -> None:
        if widget is self.hovered and (widget is None or shiboken6.isValid(widget)):
            return
        self.hovered = widget
        for listener in self._listeners:
            listener(widget)


def input_watch(app: QApplication) -> InputWatch:
    """The application's watch, made on first use."""
    found = app.findChild(InputWatch, NAME)
    return found if isinstance(found, InputWatch) else InputWatch(app)
