"""The person's input is watched at the windows, never by a filter on the application.

A Python filter on the application runs for every event of every widget (~4 us a call): it
made building and showing widgets about twice as slow (a reply's timeline, a Compare column,
a new chat's pane). These tests hold the watch to the windows and check what it still sees.
"""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDialog, QLabel, QLineEdit, QVBoxLayout, QWidget

from desktop.ui.kit.input_watch import input_watch
from desktop.ui.kit.tooltips import install_plain_tooltips
from tests.helpers.python_calls import python_calls


def test_building_widgets_away_from_the_pointer_runs_no_python_filter(
    qapp: QApplication, qtbot: Any
) -> None:
    install_plain_tooltips(qapp)  # as the app does: tooltips and idle work watch the input
    dialogs: list[QDialog] = []

    def build() -> None:
        dialog = QDialog()
        column = QVBoxLayout(dialog)
        for n in range(60):
            label = QLabel(f"label {n}")
            label.setWordWrap(True)
            column.addWidget(label)
        dialog.move(3000, 3000)  # nowhere near the pointer
        dialog.show()
        QApplication.processEvents()
        dialogs.append(dialog)

    calls = python_calls(build, lambda code: code.co_name == "eventFilter")
    for dialog in dialogs:
        qtbot.addWidget(dialog)
    # ~1,100 events went to those widgets: a filter on the application would have run for
    # each; the dialog's window gets a handful (expose, resize, activation)
    assert calls < 40, calls


def test_a_key_at_the_window_counts_as_input(qapp: QApplication, qtbot: Any) -> None:
    watch = input_watch(qapp)
    field = QLineEdit()
    qtbot.addWidget(field)
    field.show()
    field.setFocus()
    QApplication.processEvents()
    watch.look()  # the new window is watched (the 250 ms look would find it)
    before = time.monotonic()
    QTest.keyClick(field.windowHandle(), Qt.Key.Key_A)
    assert watch.last_input >= before
    assert field.text() == "a"


def test_the_widget_under_the_pointer_is_followed(qapp: QApplication, qtbot: Any) -> None:
    watch = input_watch(qapp)
    host = QWidget()
    qtbot.addWidget(host)
    column = QVBoxLayout(host)
    top, bottom = QLabel("top"), QLabel("bottom")
    column.addWidget(top)
    column.addWidget(bottom)
    host.resize(200, 200)
    host.show()
    QApplication.processEvents()
    watch.look()
    QTest.mouseMove(top, QPoint(5, 5))  # through the window, as a real move
    assert watch.hovered is top
    QTest.mouseMove(bottom, QPoint(5, 5))
    assert watch.hovered is bottom


def test_qt_s_own_tooltip_after_a_hover_is_plain(qapp: QApplication, qtbot: Any) -> None:
    """The whole way a person meets it: the pointer comes to rest on a label; Qt wakes the
    tooltip after its delay and sends it to that label, where the filter armed at the move
    shows it as typed."""
    from PySide6.QtWidgets import QToolTip

    from desktop.ui.kit.tooltips import plain_tip

    install_plain_tooltips(qapp)
    host = QWidget()
    qtbot.addWidget(host)
    column = QVBoxLayout(host)
    label = QLabel("agent")
    label.setToolTip('Model: <b>not bold</b> <img src="x">')
    column.addWidget(label)
    host.resize(200, 100)
    host.show()
    host.activateWindow()  # Qt shows tooltips for the active window
    qtbot.waitUntil(host.isActiveWindow)
    QToolTip.hideText()
    QTest.mouseMove(label, QPoint(5, 5))
    qtbot.waitUntil(QToolTip.isVisible, timeout=3_000)
    assert QToolTip.text() == plain_tip('Model: <b>not bold</b> <img src="x">')
    QToolTip.hideText()
