"""Keyboard shortcuts: one table, used to make the window's actions and the Help sheet.

Platform-standard keys come from ``QKeySequence.StandardKey`` (⌘ on macOS, Ctrl elsewhere);
the others are written with "Ctrl", which Qt maps to ⌘ on macOS.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    Shortcut("show_shortcuts", "Keyboard shortcuts", ("Ctrl+/", Std.HelpContents)),
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


def describe(shortcut: Shortcut) -> str:
    native = QKeySequence.SequenceFormat.NativeText
    return "  or  ".join(seq.toString(native) for seq in sequences(shortcut)) or "—"


class ShortcutsSheet(QDialog):
    """Help → Keyboard shortcuts."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        layout = QVBoxLayout(self)
        note = QLabel("Shift+Enter adds a new line in the message box.")
        note.setObjectName("DialogNote")
        self.table = QTableWidget(len(SHORTCUTS), 2)
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
        self.resize(520, 400)

    def rows(self) -> list[tuple[str, str]]:
        return [
            (self.table.item(r, 0).text(), self.table.item(r, 1).text())
            for r in range(self.table.rowCount())
        ]
