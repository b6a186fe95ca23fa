"""The main window's menu bar and its window-wide shortcuts, built from the shortcut table.

``build_menus(window)`` makes one ``QAction`` per shortcut (``shortcuts.SHORTCUTS``, bound to the
window method of the same name) and the File, Conversation, View and Help menus; it returns the
actions by name (the window keeps them as ``window._actions``).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence

from desktop.ui.shell.help_menu import fill_help_menu, slot_for
from desktop.ui.shell.shortcuts import COMPOSER_ONLY, SHORTCUTS, sequences


def build_menus(window: Any) -> dict[str, QAction]:
    """Fill ``window``'s menu bar (a ``MainWindow``); the actions by their method's name."""
    bar = window.menuBar()
    actions: dict[str, QAction] = {}
    for shortcut in SHORTCUTS:
        if shortcut.name in COMPOSER_ONLY:
            continue
        action = QAction(shortcut.label, window)
        action.setShortcuts(sequences(shortcut))
        action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        action.triggered.connect(slot_for(window, shortcut.name))
        window.addAction(action)
        actions[shortcut.name] = action
    file_menu = bar.addMenu("&File")
    file_menu.addAction(actions["new_chat"])
    file_menu.addAction("Import conversation…", window.import_conversation)
    file_menu.addAction("Export as Markdown…", lambda: window.export_conversation("md"))
    file_menu.addAction("Export as JSON…", lambda: window.export_conversation("json"))
    file_menu.addSeparator()
    file_menu.addAction(actions["open_settings"])
    file_menu.addSeparator()
    quit_action = file_menu.addAction("Quit", window.close)
    quit_action.setShortcuts(QKeySequence.keyBindings(QKeySequence.StandardKey.Quit))
    conv_menu = bar.addMenu("&Conversation")
    for name in ("focus_search", "copy_last_reply", "regenerate_last", "stop"):
        conv_menu.addAction(actions[name])
    conv_menu.addAction("Switch agent…", lambda: window.pane.agent_button.showMenu())
    conv_menu.addAction(actions["rename_current"])
    view_menu = bar.addMenu("&View")
    view_menu.addAction("Chat", lambda: window.show_page("chat"))
    view_menu.addAction("Models", lambda: window.show_page("models"))
    view_menu.addAction(actions["show_stats"])
    view_menu.addAction("Compare", lambda: window.show_page("compare"))
    view_menu.addAction("API server", lambda: window.show_page("server"))
    fill_help_menu(bar.addMenu("&Help"), window, actions)
    return actions
