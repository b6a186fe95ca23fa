"""The painted reply texts' shared keys and words (desktop/ui/markdown/text_keys.py), on the
real streaming text: a double-click selects the word under the pointer, Ctrl+A then Ctrl+C
copies the whole text."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QGuiApplication

from desktop.ui.markdown.stream_text import StreamText
from desktop.ui.markdown.text_keys import word_bounds


def test_word_bounds() -> None:
    text = "call load_model(path) now"
    assert word_bounds(text, 7) == (5, 15)  # inside load_model: the underscore joins it
    assert word_bounds(text, 5) == (5, 15)  # at its start
    assert word_bounds(text, 15) == (5, 15)  # at its end (before "(")
    assert word_bounds(text, 0) == (0, 4)
    assert word_bounds("a  b", 2) == (2, 2)  # between words: nothing
    assert word_bounds("word", 99) == (0, 4)  # past the end: the last word


def test_double_click_selects_a_word_and_the_copy_keys_copy_everything(qtbot, qloop) -> None:
    view = StreamText()
    qtbot.addWidget(view)
    view.resize(400, 60)
    view.set_all("first second_word third")
    view.show()
    qtbot.waitExposed(view)
    at = view.cursor_rect(9).center()  # inside "second_word"
    qtbot.mouseDClick(view, Qt.MouseButton.LeftButton, pos=QPoint(at.x() + 2, at.y()))
    assert view.selected_text == "second_word"
    qtbot.keyClick(view, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == "first second_word third"
