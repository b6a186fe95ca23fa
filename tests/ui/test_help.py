"""Help, as a newcomer finds it in the menu: the user guide (offline, with contents and
search, the fixed statistics definitions, the keys in this platform's words), the keyboard
shortcuts sheet (native key names, never "Ctrl+N or New"), and About (version, what it runs
on, the data folder, the licence, Copy for a bug report).

Screenshots go to ``$SIMI_SCREENSHOT_DIR`` when it is set."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QApplication, QPushButton

from desktop import __version__
from desktop.ui.settings import appearance
from desktop.ui.shell.about import AboutDialog
from desktop.ui.shell.help_guide import UserGuide
from desktop.ui.shell.shortcuts import ShortcutsSheet
from tests.helpers.widget_checks import cut_labels, overlaps, unnamed_controls

Std = QKeySequence.StandardKey
NATIVE = QKeySequence.SequenceFormat.NativeText


def _help_action(window: Any, text: str) -> QAction:
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    return next(a for a in menu.actions() if a.text() == text)


def _opened(kind: type) -> Any:
    found = [w for w in QApplication.topLevelWidgets() if isinstance(w, kind) and w.isVisible()]
    assert len(found) == 1, found
    return found[0]


def _choose_from_help(window: Any, text: str, kind: type) -> Any:
    """Help → ``text``: the one window of ``kind`` it shows."""
    _help_action(window, text).trigger()
    return _opened(kind)


def _shot(widget: Any, name: str) -> None:
    folder = os.environ.get("SIMI_SCREENSHOT_DIR")
    if folder:
        widget.grab().save(str(Path(folder) / name))


def test_help_menu_has_the_guide_the_shortcuts_and_about(window: Any) -> None:
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    names = [a.text() for a in menu.actions() if not a.isSeparator()]
    assert names == ["User guide", "Keyboard shortcuts", "About SIMI Multi"]
    guide = _help_action(window, "User guide")
    assert QKeySequence(Std.HelpContents) in guide.shortcuts()  # F1 on Linux and Windows


def test_the_user_guide_opens_from_the_menu_with_contents_and_the_definitions(
    qtbot: Any, window: Any
) -> None:
    guide = _choose_from_help(window, "User guide", UserGuide)
    qtbot.waitExposed(guide)
    contents = [guide.contents.item(i).text() for i in range(guide.contents.count())]
    assert contents == [
        "First steps",
        "Agents",
        "Local models",
        "Remote services",
        "Use your agents from other apps",
        "What the statistics mean",
        "Keyboard shortcuts",
        "Your data and privacy",
    ]
    text = guide.plain_text()
    # the fixed definitions, as the timeline's help says them
    assert "TTFT = from the request being sent to the first content token received" in text
    assert "Decode tok/s = the tokens after the first / the time from the first token" in text
    assert "Prefill tok/s = newly evaluated prompt tokens / prefill time" in text
    assert "KV cache" in text and "no telemetry" in text
    new_chat = QKeySequence(Std.New).toString(NATIVE)  # "Ctrl+N" here, "⌘N" on macOS
    assert f"{new_chat} starts a new conversation" in text
    assert " or New" not in text and "StandardKey" not in text
    # the contents move the text to the section
    bar = guide.text.verticalScrollBar()
    assert bar.value() == 0
    guide.contents.setCurrentRow(contents.index("What the statistics mean"))
    assert bar.value() > 0
    assert unnamed_controls(guide) == [] and overlaps(guide) == [] and cut_labels(guide) == []
    _shot(guide, "guide_light.png")
    _help_action(window, "User guide").trigger()  # again: the same window, raised
    assert _opened(UserGuide) is guide
    guide.close()


def test_the_guide_search_marks_what_it_finds_and_says_when_nothing(
    qtbot: Any, qapp: QApplication, window: Any
) -> None:
    guide = _choose_from_help(window, "User guide", UserGuide)
    qtbot.keyClicks(guide.search, "context")
    assert len(guide.text.extraSelections()) > 3 and guide.found.text().endswith("found")
    first = guide.text.textCursor().position()
    assert guide.text.textCursor().selectedText().lower() == "context"
    guide.find_next()
    assert guide.text.textCursor().position() > first
    guide.search.setText("zebra crossing")
    assert guide.text.extraSelections() == [] and guide.found.text() == "Not in the guide"
    guide.search.clear()
    assert guide.found.text() == ""
    appearance.apply(qapp, "dark", "normal")
    try:
        guide.search.setText("tokens")
        _shot(guide, "guide_dark.png")
    finally:
        appearance.apply(qapp, "light", "normal")
    guide.close()


def test_the_shortcuts_sheet_names_keys_as_this_platform_does(window: Any) -> None:
    sheet = _choose_from_help(window, "Keyboard shortcuts", ShortcutsSheet)
    rows = dict(sheet.rows())
    assert rows["New conversation"] == QKeySequence(Std.New).toString(NATIVE)
    assert rows["User guide"] == QKeySequence(Std.HelpContents).toString(NATIVE)
    assert rows["Keyboard shortcuts"] == QKeySequence("Ctrl+/").toString(NATIVE)
    for keys in rows.values():  # a keyboard's own New/Find/Help keys are not listed
        assert " or " not in keys
        assert not {"New", "Find", "Help", "Open", "Copy"} & set(keys.split(", ")), keys
    assert unnamed_controls(sheet) == []
    _shot(sheet, "shortcuts_light.png")
    sheet.close()


def test_about_shows_the_version_the_data_folder_and_copies_it_all(
    qtbot: Any, services: Any, window: Any
) -> None:
    about = _choose_from_help(window, "About SIMI Multi", AboutDialog)
    qtbot.waitExposed(about)
    assert about.windowTitle() == "About SIMI Multi"
    shown = {what: label.text() for what, label in about.values.items()}
    assert shown["Version"] == __version__
    assert shown["Data folder"] == str(services.paths.data_dir)
    assert shown["Licence"] == "Apache License 2.0"
    assert shown["Python"] == platform.python_version()
    assert shown["llama.cpp"].startswith("llama-cpp-python 0.")
    assert "PySide6" in shown["Qt"]
    copy = next(b for b in about.findChildren(QPushButton) if b.text() == "Copy")
    copy.click()
    pasted = QGuiApplication.clipboard().text()
    assert pasted.startswith(f"SIMI Multi {__version__}\n")
    assert f"Data folder: {services.paths.data_dir}" in pasted and "Python: " in pasted
    assert about.copied.text().startswith("Copied")
    assert unnamed_controls(about) == [] and overlaps(about) == [] and cut_labels(about) == []
    _shot(about, "about_light.png")
    about.close()
