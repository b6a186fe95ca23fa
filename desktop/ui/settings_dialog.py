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

from desktop.settings.prefs import Preferences

PREF_FOOTER = "ui.stats_footer"
FOOTER_CHOICES = (
    ("always", "Always"),
    ("hover", "When the pointer is on the message"),
    ("never", "Never"),
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
        self.accept()
