"""Work after start-up waits for a quiet moment: never under a keystroke, never while a reply
streams; the pages are all built in the end, in order."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLineEdit

from desktop.ui.kit.idle import WhenIdle


def test_a_job_waits_while_the_person_types_and_while_busy(qtbot: Any) -> None:
    field = QLineEdit()
    qtbot.addWidget(field)
    field.show()
    busy = [False]
    ran: list[str] = []
    idle = WhenIdle(field, busy=lambda: busy[0], quiet_ms=120)
    idle.add(lambda: ran.append("first"))
    idle.add(lambda: ran.append("second"))

    field.setFocus()
    typing_until = time.monotonic() + 0.5
    while time.monotonic() < typing_until:  # a key every 30 ms: never quiet for 120 ms
        QTest.keyClick(field.windowHandle(), Qt.Key.Key_A)  # as the system sends it
        qtbot.wait(30)
    assert ran == []
    assert field.text().startswith("aaa")

    busy[0] = True  # a reply streams
    qtbot.wait(400)
    assert ran == []

    busy[0] = False
    ended = time.monotonic()
    qtbot.waitUntil(lambda: bool(ran), timeout=3_000)
    assert time.monotonic() - ended >= 0.08  # not as the reply ends: a quiet moment after it
    qtbot.waitUntil(lambda: ran == ["first", "second"], timeout=3_000)


def test_the_pages_are_built_when_the_window_is_left_alone(
    services: Any, make_window: Any, qtbot: Any
) -> None:
    window = make_window(services)
    later = ("models", "stats", "compare", "server")
    assert not any(window.page_built(name) for name in later)  # the start builds Chat only
    window.build_pages_when_idle(quiet_ms=50)
    qtbot.waitUntil(lambda: all(window.page_built(name) for name in later), timeout=20_000)
    window.show_page("stats")
    assert window.pages.currentWidget() is window.stats_page
    QApplication.processEvents()
