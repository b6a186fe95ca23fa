"""Keyboard shortcuts: one table, used to make the window's actions, the Help sheet and the
user guide's list.

Platform-standard keys come from ``QKeySequence.StandardKey`` (⌘ on macOS, Ctrl elsewhere);
the others are written with "Ctrl", which Qt maps to ⌘ on macOS. Keys are shown in the
platform's own words (``NativeText``: "Ctrl+N" on Linux and Windows, "⌘N" on macOS); the
dedicated keys some standard actions also answer to (a keyboard's own "New", "Find" or
"Help" key) stay bound but are not listed: most keyboards have none.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from PySide6.QtCore import QKeyCombination, Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.ui.kit.widgets import cell_text

Std = QKeySequence.StandardKey


@dataclass(frozen=True, slots=True)
class Shortcut:
    name: str  # the MainWindow method it triggers
    label: str
    keys: tuple[QKeySequence.StandardKey | str, ...]


SHORTCUTS: tuple[Shortcut, ...] = (
    Shortcut("new_chat", "New conversation", (Std.New,)),
    Shortcut("focus_search", "Search / switch conversation", ("Ctrl+K", Std.Find)),
    Shortcut("send", "Send the message", ("Return", "Ctrl+Return")),
    Shortcut("stop", "Stop the reply (or cancel editing)", ("Escape",)),
    Shortcut("copy_last_reply", "Copy the last reply", ("Ctrl+Shift+C",)),
    Shortcut("regenerate_last", "Regenerate the last reply", ("Ctrl+Shift+R",)),
    Shortcut("rename_current", "Rename the conversation", ("F2",)),
    Shortcut("show_stats", "Stats dashboard", ("Ctrl+Shift+S",)),
    Shortcut("open_settings", "Settings", (Std.Preferences, "Ctrl+,")),
    Shortcut("show_guide", "User guide", (Std.HelpContents,)),
    Shortcut("show_shortcuts", "Keyboard shortcuts", ("Ctrl+/",)),
)
# Handled by the composer itself (listed on the sheet, not bound as window actions).
COMPOSER_ONLY = {"send"}


def sequences(shortcut: Shortcut) -> list[QKeySequence]:
    """The key sequences of a shortcut on this platform (duplicates and empties dropped)."""
    out: list[QKeySequence] = []
    for key in shortcut.keys:
        seqs = QKeySequence.keyBindings(key) if isinstance(key, Std) else [QKeySequence(key)]
        for seq in seqs:
            if not seq.isEmpty() and seq not in out:
                out.append(seq)
    return out


def _on_most_keyboards(seq: QKeySequence) -> bool:
    """False for a lone dedicated key past F35 (Qt's "New", "Find", "Help", "Copy" keys)."""
    # PySide6's stub lacks QKeySequence.__getitem__ (Qt's operator[]), which it has
    first: QKeyCombination = seq[0]  # type: ignore[index]
    combined = first.toCombined()
    modifiers = combined & int(Qt.KeyboardModifier.KeyboardModifierMask.value)
    key = combined & ~int(Qt.KeyboardModifier.KeyboardModifierMask.value)
    return seq.count() > 1 or bool(modifiers) or key <= Qt.Key.Key_F35.value


def key_texts(shortcut: Shortcut) -> list[str]:
    """The keys of a shortcut as this platform writes them ("Ctrl+K", "⌘K", "Esc")."""
    return [native_text(seq) for seq in sequences(shortcut) if _on_most_keyboards(seq)]


def native_text(keys: QKeySequence | str) -> str:
    """Keys as this platform writes them: "Shift+Enter" (macOS: "⇧↩"), "Ctrl+K" ("⌘K")."""
    seq = keys if isinstance(keys, QKeySequence) else QKeySequence(keys)
    text = seq.toString(QKeySequence.SequenceFormat.NativeText)
    # Qt says "Return"; the key is labelled Enter on these keyboards (macOS writes ↩)
    return text if sys.platform == "darwin" else text.replace("Return", "Enter")


def describe(shortcut: Shortcut) -> str:
    """ "Ctrl+K, Ctrl+F": every key that does it, the usual one first."""
    return ", ".join(key_texts(shortcut)) or "—"


class ShortcutsSheet(QDialog):
    """Help → Keyboard shortcuts."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        layout = QVBoxLayout(self)
        note = QLabel(f"{native_text('Shift+Return')} adds a new line in the message box.")
        note.setObjectName("DialogNote")
        self.table = QTableWidget(len(SHORTCUTS), 2)
        self.table.setAccessibleName("Keyboard shortcuts")
        self.table.setHorizontalHeaderLabels(["Action", "Keys"])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QTableWidget.SelectionMode.NoSelection)
        for row, shortcut in enumerate(SHORTCUTS):
            self.table.setItem(row, 0, QTableWidgetItem(shortcut.label))
            self.table.setItem(row, 1, QTableWidgetItem(describe(shortcut)))
        self.table.resizeColumnsToContents()
        self.table.horizontalHeader().setStretchLastSection(True)
        layout.addWidget(self.table)
        layout.addWidget(note)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        rows = self.table.verticalHeader().length() + self.table.horizontalHeader().height()
        self.table.setMinimumHeight(min(rows + 2 * self.table.frameWidth(), 420))
        self.resize(520, self.sizeHint().height())

    def rows(self) -> list[tuple[str, str]]:
        return [
            (cell_text(self.table, r, 0), cell_text(self.table, r, 1))
            for r in range(self.table.rowCount())
        ]
