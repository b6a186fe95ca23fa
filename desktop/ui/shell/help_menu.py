"""The Help menu: User guide, Keyboard shortcuts, About SIMI Multi.

``slot_for(window, name)`` is what a shortcut-table entry triggers: the window's method of that
name, or, for the help windows that are not the window's business, the function that opens
them on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu

from desktop import APP_NAME


def _open_guide(window: Any) -> object:
    from desktop.ui.shell.help_guide import open_guide  # built when asked for

    return open_guide(window)


def _open_about(window: Any) -> object:
    from desktop.ui.shell.about import open_about

    return open_about(window, window.services.paths)


_OPENERS: dict[str, Callable[[Any], object]] = {
    "show_guide": _open_guide,
    "show_about": _open_about,
}


def slot_for(window: Any, name: str) -> Callable[[], object]:
    opener = _OPENERS.get(name)
    if opener is not None:
        return lambda: opener(window)
    slot: Callable[[], object] = getattr(window, name)
    return slot


def fill_help_menu(menu: QMenu, window: Any, actions: dict[str, QAction]) -> None:
    menu.addAction(actions["show_guide"])
    menu.addAction(actions["show_shortcuts"])
    menu.addSeparator()
    about = menu.addAction(f"About {APP_NAME}", slot_for(window, "show_about"))
    about.setMenuRole(QAction.MenuRole.AboutRole)
    actions["show_about"] = about
