"""Every tooltip shows its text as typed, never as HTML.

Qt shows a tooltip as rich text whenever ``Qt.mightBeRichText`` says it may be, and lays it
out while showing it: a tooltip ``Model: <img src="/some/fifo">`` (a model's name, a tool's
error, a conversation title, a file name) makes Qt read that file on the GUI thread, and a
FIFO freezes the window for good. So no tooltip reaches Qt as the text a widget holds:
``install_plain_tooltips(app)`` puts an event filter on the widget under the pointer and on
each of its parents up to its window, so it takes every ``QEvent.ToolTip`` before its widget
does (Qt sends it to the widget under the pointer, then to each parent while it is ignored),
finds the text Qt would show, and shows it escaped (``plain_tip``) with ``QToolTip.showText``;
Qt's own handling never runs.

Which widget is under the pointer comes from ``input_watch``: at each move (seen at the window,
before the widget gets it), at a look every 250 ms, and again at once when a filtered widget
is entered or left. Qt sends ``ToolTip`` to the widget that got the last mouse move (then to
its parents), and a move reaches the window first, so that widget is armed before its tooltip
can be due; a widget shown under a still pointer gets no tooltip until the pointer moves.
Not one filter on the application: that one would be called for every event of every widget
(see ``input_watch``).

Where the text comes from, as Qt finds it:

- an item view's viewport: the item under the mouse (``Qt.ToolTipRole``), or a header
  section's ``headerData``; an item without one falls through to the view's own tooltip;
- a tab bar: the tab under the mouse, else the bar's tooltip;
- a menu that shows its actions' tooltips: the action under the mouse;
- a ``QTextEdit`` / ``QTextBrowser``: the character format's tooltip (an HTML ``title``);
- any other widget: ``toolTip()``; an empty one lets the event go on to the parent, as Qt does.

A widget whose tooltip is the app's own markup opts in with ``set_rich_tooltip`` (the dynamic
property ``richToolTip``); that markup must ``html.escape`` every string from outside. A widget
that shows a tooltip of its own (a chart's point) calls ``show_plain``, never
``QToolTip.showText`` (``tests/ui/test_plain_tooltips.py`` checks the source), and leaves its
``toolTip()`` empty (the filter would show that instead).

The filter sees every event of the widgets under the pointer, so its first test is one
identity check.
"""

from __future__ import annotations

import html

import shiboken6
from PySide6.QtCore import QEvent, QObject, QPoint, QRect, Qt, QTimer
from PySide6.QtGui import QHelpEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QHeaderView,
    QMenu,
    QTabBar,
    QTextEdit,
    QToolTip,
    QWidget,
)

from desktop.ui.kit.input_watch import InputWatch, input_watch

RICH = "richToolTip"  # a widget's dynamic property: its tooltip is the app's own markup
NAME = "plainToolTips"
_TOOLTIP = QEvent.Type.ToolTip
_CROSSED = frozenset({QEvent.Type.Enter, QEvent.Type.Leave})
_ROLE = Qt.ItemDataRole.ToolTipRole


def plain_tip(text: str) -> str:
    """``text`` as a tooltip shows it: every character as typed, line breaks kept."""
    return f'<p style="white-space:pre-wrap">{html.escape(text)}</p>' if text else ""


def show_plain(
    pos: QPoint, text: str, widget: QWidget | None = None, rect: QRect | None = None, ms: int = -1
) -> None:
    """``QToolTip.showText`` for text from anywhere: shown as typed (empty: hidden)."""
    if not text:
        QToolTip.hideText()
    elif widget is None:
        QToolTip.showText(pos, plain_tip(text))
    else:
        QToolTip.showText(pos, plain_tip(text), widget, rect or QRect(), ms)


def set_rich_tooltip(widget: QWidget, markup: str) -> None:
    """``widget`` shows ``markup`` as HTML: the app's own, every outside string escaped."""
    widget.setProperty(RICH, True)
    widget.setToolTip(markup)


def _text(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _stripped(text: str) -> str:
    """An action's tooltip when none was set: its text without ``&`` marks or "..."."""
    text = text.replace("&&", "\0").replace("&", "").replace("\0", "&")
    return text.removesuffix("...").removesuffix("…").strip()


def _rich(widget: QWidget) -> bool:
    return bool(widget.property(RICH))


class PlainToolTips(QObject):
    """The event filter on the widgets under the pointer (see the module's text)."""

    def __init__(self, watch: InputWatch) -> None:
        super().__init__(watch)
        self._watch = watch
        self._armed: list[QWidget] = []
        watch.on_hover(self._arm)

    @property
    def armed(self) -> list[QWidget]:
        """The widgets filtered now: the one under the pointer, then its parents."""
        return [w for w in self._armed if shiboken6.isValid(w)]

    def _arm(self, widget: QWidget | None) -> None:
        for old in self.armed:
            old.removeEventFilter(self)
        self._armed = []
        while widget is not None and shiboken6.isValid(widget):
            widget.installEventFilter(self)
            self._armed.append(widget)
            if widget.isWindow():
                break
            widget = widget.parentWidget()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind is not _TOOLTIP:
            if kind in _CROSSED:  # something came or went under the pointer: look now
                QTimer.singleShot(0, self._watch.look)
            return False
        if not isinstance(watched, QWidget) or not isinstance(event, QHelpEvent):
            return False
        if _rich(watched):
            return False  # the app's own markup: Qt shows it
        text, widget, rect = _tip(watched, event.pos())
        if not text:
            return False  # nothing here: Qt ignores the event and asks the parent
        show_plain(event.globalPos(), text, widget, rect, widget.toolTipDuration())
        event.accept()
        return True


def _tip(widget: QWidget, pos: QPoint) -> tuple[str, QWidget, QRect | None]:
    """The text Qt would show for a tooltip at ``pos``, where to show it, and the rectangle
    the mouse may move in before it goes."""
    view = widget.parentWidget()
    if isinstance(view, QAbstractItemView) and view.viewport() is widget:
        if _rich(view):
            return "", widget, None  # the items' own markup: Qt shows it
        item = _item_tip(view, widget, pos)
        if item is not None:
            return item
    elif isinstance(widget, QTabBar):
        tab = widget.tabAt(pos)
        tip = widget.tabToolTip(tab) if tab >= 0 else ""
        if tip:
            return tip, widget, widget.tabRect(tab)
    elif isinstance(widget, QMenu) and widget.toolTipsVisible():
        action = widget.actionAt(pos)
        tip = action.toolTip() if action is not None else ""
        if action is not None and tip != _stripped(action.iconText()):  # set, not made
            return tip, widget, widget.actionGeometry(action)
    elif isinstance(widget, QTextEdit):
        at = widget.viewport().mapFrom(widget, pos)
        tip = widget.cursorForPosition(at).charFormat().toolTip()
        if tip:
            return tip, widget, None
    return widget.toolTip(), widget, None


def _item_tip(
    view: QAbstractItemView, viewport: QWidget, pos: QPoint
) -> tuple[str, QWidget, QRect | None] | None:
    model = view.model()
    if model is None:
        return None
    if isinstance(view, QHeaderView):
        section = view.logicalIndexAt(pos)
        if section < 0:
            return None
        tip = _text(model.headerData(section, view.orientation(), _ROLE))
        return (tip, viewport, None) if tip else None
    index = view.indexAt(pos)
    if not index.isValid():
        return None
    tip = _text(index.data(_ROLE))
    return (tip, viewport, view.visualRect(index)) if tip else None


def install_plain_tooltips(app: QApplication) -> PlainToolTips:
    """Show every tooltip of ``app`` as plain text (once per application)."""
    found = app.findChild(PlainToolTips, NAME)
    if isinstance(found, PlainToolTips):
        return found
    tips = PlainToolTips(input_watch(app))
    tips.setObjectName(NAME)
    return tips
