"""The window's right-hand pages (Chat, Models, Stats, Compare, Server): a stack with a button
each in the sidebar's page bar. A page given as a builder is built when first shown or asked
for (a plain widget stands in until then), or in a quiet moment (``build_when_idle``): only
the chat page is built before the window's first paint.

A page's first show from its button is spread over three turns of the event loop, so that no
turn holds the window longer than a frame (the Stats page's build, its first layout and paint
took 17-26 ms in one turn): the click shows the stand-in; the next turn builds the page out of
sight (its widgets are styled only when shown); the one after shows it. Asked for by code
(``page``), a page is built and put in place at once."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Generic, Protocol, TypeVar, cast

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QStackedWidget, QToolButton, QWidget

from desktop.ui.kit.idle import WhenIdle
from desktop.ui.kit.turns import in_turns
from desktop.ui.shell.page_bar import PageBar

PageBuilder = Callable[[], QWidget]
Shown = Callable[[QWidget], None]
P = TypeVar("P", bound=QWidget)


class Pages(QStackedWidget):
    def __init__(self, bar: PageBar, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Pages")
        self.bar = bar
        self.buttons: dict[str, QToolButton] = {}
        self._widgets: dict[str, QWidget] = {}
        self._builders: dict[str, PageBuilder] = {}  # pages not built yet
        self._built: dict[str, QWidget] = {}  # built, not in place of their stand-in yet
        self._on_shown: dict[str, Shown | None] = {}  # first shows under way

    def add(
        self, name: str, page: QWidget | PageBuilder, label: str, show: Callable[[], None]
    ) -> None:
        """A page and its button (``show`` is what the button does); the bar appears once
        there is more than one page."""
        if name in self._widgets:
            raise ValueError(f"a page called {name!r} exists")
        if isinstance(page, QWidget):
            widget = page
        else:
            widget = QWidget()  # stands in until the page is built
            self._builders[name] = page
        self._widgets[name] = widget
        self.addWidget(widget)
        button = QToolButton()
        button.setObjectName("PageButton")
        button.setText(label)
        button.setCheckable(True)
        button.setAutoExclusive(True)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(show)
        self.bar.add(button)
        self.buttons[name] = button
        self.bar.setVisible(len(self._widgets) > 1)
        if len(self._widgets) == 1:
            button.setChecked(True)

    def page(self, name: str) -> QWidget:
        """The page called ``name``, built and in place now if it was not yet."""
        self._build(name)
        self._put_in_place(name)
        return self._widgets[name]

    def _build(self, name: str) -> None:
        """Build the page beside its stand-in, hidden (styled when first shown)."""
        builder = self._builders.pop(name, None)
        if builder is not None:
            widget = builder()
            self.insertWidget(self.indexOf(self._widgets[name]), widget)
            self._built[name] = widget

    def _put_in_place(self, name: str) -> None:
        """The built page takes its stand-in's place (and shows, if the stand-in did); a first
        show under way is then finished."""
        widget = self._built.pop(name, None)
        if widget is not None:
            stand_in = self._widgets[name]
            if self.currentWidget() is stand_in:
                self.setCurrentWidget(widget)
            self.removeWidget(stand_in)
            stand_in.deleteLater()
            self._widgets[name] = widget
        if name in self._on_shown:
            shown = self._on_shown.pop(name)
            widget = self._widgets[name]
            if shown is not None and self.currentWidget() is widget:
                shown(widget)

    def built(self, name: str) -> bool:
        return name in self._widgets and name not in self._builders and name not in self._built

    def show_page(self, name: str, shown: Shown | None = None) -> None:
        """Show the page and check its button; ``shown(page)`` once it shows (not called
        if another page was chosen before it was built). A page's first show in a window on
        screen comes over the next turns of the loop (see the module's text)."""
        self.buttons[name].setChecked(True)
        if name in self._builders and self.isVisible():
            self.setCurrentWidget(self._widgets[name])  # the stand-in, at once
            self._on_shown[name] = shown
            # each a no-op when something asked for the page meanwhile (``page``)
            in_turns(self, partial(self._build, name), partial(self._put_in_place, name))
            return
        widget = self.page(name)
        self.setCurrentWidget(widget)
        if shown is not None:
            shown(widget)

    @property
    def current(self) -> str:
        shown = self.currentWidget()
        return next((n for n, w in self._widgets.items() if w is shown), "chat")

    def build_when_idle(self, busy: Callable[[], bool], quiet_ms: int) -> WhenIdle:
        """Build the pages not built yet, one per quiet moment (``quiet_ms`` without input,
        ``busy()`` false), so that the first click on one shows it at once."""
        idle = WhenIdle(self, busy=busy, quiet_ms=quiet_ms)
        for name in list(self._builders):
            idle.add(partial(self.page, name))
        return idle


class _HasPages(Protocol):
    pages: Pages


class LazyPage(Generic[P]):
    """``window.stats_page`` and the like: that page, built when first asked for."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, window: _HasPages, owner: object) -> P:
        return cast(P, window.pages.page(self.name))
