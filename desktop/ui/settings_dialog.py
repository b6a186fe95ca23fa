"""Settings for the conversation view: when to show the per-message stats footer."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.services import PREF_IDLE_UNLOAD_MIN, idle_unload_seconds
from desktop.settings.prefs import Preferences

PREF_FOOTER = "ui.stats_footer"
FOOTER_CHOICES = (
    ("always", "Always"),
    ("hover", "When the pointer is on the message"),
    ("never", "Never"),
)


IDLE_CHOICES = (
    (0, "Never"),
    (5, "After 5 minutes idle"),
    (15, "After 15 minutes idle"),
    (60, "After 1 hour idle"),
)


def footer_mode(prefs: Preferences) -> str:
    value = prefs.get(PREF_FOOTER, "always")
    return value if value in {k for k, _ in FOOTER_CHOICES} else "always"


class SettingsDialog(QDialog):
    def __init__(self, prefs: Preferences, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self._prefs = prefs
        layout = QVBoxLayout(self)
        form = QFormLayout()
        self.footer = QComboBox()
        for key, text in FOOTER_CHOICES:
            self.footer.addItem(text, key)
        self.footer.setCurrentIndex([k for k, _ in FOOTER_CHOICES].index(footer_mode(prefs)))
        form.addRow("Message statistics", self.footer)
        self.idle_unload = QComboBox()
        current = (idle_unload_seconds(prefs) or 0) / 60
        for minutes, text in IDLE_CHOICES:
            self.idle_unload.addItem(text, minutes)
        if current and current not in [m for m, _ in IDLE_CHOICES]:
            self.idle_unload.addItem(f"After {current:g} minutes idle", current)
        self.idle_unload.setCurrentIndex(max(0, self.idle_unload.findData(current or 0)))
        self.idle_unload.setToolTip("Free a local model's memory when it has not been used")
        form.addRow("Unload local models", self.idle_unload)
        layout.addLayout(form)
        note = QLabel("Hover a message's statistics line to see its whole record.")
        note.setObjectName("DialogNote")
        layout.addWidget(note)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def save(self) -> None:
        self._prefs.set(PREF_FOOTER, self.footer.currentData())
        self._prefs.set(PREF_IDLE_UNLOAD_MIN, self.idle_unload.currentData())
        self.accept()
