"""A page's first show from its button comes over turns of the loop (the click shows a stand-in,
a later turn builds the page out of sight, the next shows it): no one turn builds, lays out
and paints a whole page (the Stats page held the window 17-26 ms that way)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from desktop.ui.shell.page_bar import PageBar
from desktop.ui.shell.pages import Pages


class _Host(QWidget):
    """A bar and the pages, as the window has them; "stats" is built on first show."""

    def __init__(self) -> None:
        super().__init__()
        self.bar = PageBar()
        self.pages = Pages(self.bar)
        layout = QVBoxLayout(self)
        layout.addWidget(self.bar)
        layout.addWidget(self.pages)
        self.built: list[bool] = []  # each build: was the page on screen then?
        self.shown: list[QWidget] = []
        self.pages.add("chat", QLabel("the chat"), "Chat", lambda: self.show_named("chat"))
        self.pages.add("stats", self._build, "Stats", lambda: self.show_named("stats"))

    def _build(self) -> QWidget:
        page = QLabel("the figures", self.pages)
        self.built.append(page.isVisible())
        return page

    def show_named(self, name: str) -> None:
        self.pages.show_page(name, self.shown.append)


def _host(qtbot: Any) -> _Host:
    host = _Host()
    qtbot.addWidget(host)
    host.resize(400, 300)
    host.show()
    qtbot.waitExposed(host)
    return host


def test_the_click_shows_at_once_and_the_page_is_built_out_of_sight_then_shown(
    qtbot: Any,
) -> None:
    host = _host(qtbot)
    qtbot.mouseClick(host.pages.buttons["stats"], Qt.MouseButton.LeftButton)
    # the click itself: the button and a blank stand-in; nothing built yet
    assert host.pages.buttons["stats"].isChecked()
    assert host.built == [] and host.pages.current == "stats"
    assert not host.pages.built("stats")
    qtbot.waitUntil(lambda: bool(host.shown))
    page = host.pages.page("stats")
    assert host.built == [False]  # built while not on screen
    assert host.shown == [page] and host.pages.currentWidget() is page and page.isVisible()
    assert host.pages.built("stats")
    # shown again: at once, no second build
    qtbot.mouseClick(host.pages.buttons["chat"], Qt.MouseButton.LeftButton)
    qtbot.mouseClick(host.pages.buttons["stats"], Qt.MouseButton.LeftButton)
    assert host.shown == [page, host.pages.page("chat"), page] and host.built == [False]


def test_asked_for_during_its_first_show_the_page_is_ready_at_once_and_shown_once(
    qtbot: Any,
) -> None:
    host = _host(qtbot)
    qtbot.mouseClick(host.pages.buttons["stats"], Qt.MouseButton.LeftButton)
    page = host.pages.page("stats")  # code that needs it now (a test, a menu action)
    assert host.pages.currentWidget() is page and host.shown == [page]
    qtbot.wait(50)  # the first show's later turns find nothing left to do
    assert host.shown == [page] and host.built == [False]


def test_another_page_chosen_before_it_was_built_keeps_the_page_out_of_sight(
    qtbot: Any,
) -> None:
    host = _host(qtbot)
    qtbot.mouseClick(host.pages.buttons["stats"], Qt.MouseButton.LeftButton)
    qtbot.mouseClick(host.pages.buttons["chat"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: host.pages.built("stats"))
    qtbot.wait(20)
    assert host.pages.current == "chat" and host.pages.buttons["chat"].isChecked()
    assert host.shown == [host.pages.page("chat")]  # the stats page was never shown
