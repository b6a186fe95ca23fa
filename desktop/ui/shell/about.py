"""Help → About SIMI Multi: the version, what it runs on (llama.cpp, Qt, Python, the system),
where its data is, its licence, and "Copy" to paste all of it into a bug report.

The facts come from desktop/identity.py, which `simi --version --verbose` prints too; llama.cpp
is never loaded in the app's process to learn them.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from desktop import APP_NAME, __version__
from desktop.identity import LICENCE, SUMMARY, identity, licences_text
from desktop.settings.paths import AppPaths
from desktop.ui.kit.widgets import plain, push_button

__all__ = ["LICENCE", "SUMMARY", "AboutDialog", "facts", "open_about", "report_text"]


def facts(paths: AppPaths | None = None) -> list[tuple[str, str]]:
    """(what, value) rows of the About window, in order: the same facts as
    `simi --version --verbose` (desktop/identity.py)."""
    return [*identity(paths).rows(), ("Bundled parts", licences_text())]


def report_text(rows: list[tuple[str, str]]) -> str:
    """The rows as plain text, for a bug report."""
    lines = [f"{APP_NAME} {__version__}"]
    lines += [f"{what}: {value}" for what, value in rows if what != "Version"]
    return "\n".join(lines)


class AboutDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, paths: AppPaths | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("AboutDialog")
        self.setWindowTitle(f"About {APP_NAME}")
        self.rows = facts(paths)
        title = QLabel(f"{APP_NAME} {__version__}")
        title.setObjectName("EmptyTitle")
        summary = QLabel(SUMMARY)
        summary.setObjectName("DialogNote")
        summary.setWordWrap(True)
        form = QFormLayout()
        self.values: dict[str, QLabel] = {}
        for what, value in self.rows:
            label = plain(QLabel(value))  # versions, folders, file names
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            label.setAccessibleName(f"{what}: {value}")
            label.setWordWrap(True)
            self.values[what] = label
            form.addRow(what, label)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        self.copy_button = push_button(
            "Copy",
            self.copy,
            accessible="Copy these details",
            tip="Copy the version and these details, for a bug report",
        )
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.copied = QLabel("")
        self.copied.setObjectName("DialogNote")
        layout = QVBoxLayout(self)
        layout.addWidget(title)
        layout.addWidget(summary)
        layout.addSpacing(6)
        layout.addLayout(form)
        layout.addWidget(self.copied)
        layout.addWidget(buttons)
        self.resize(max(480, self.sizeHint().width()), self.sizeHint().height())

    def text(self) -> str:
        return report_text(self.rows)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.text())
        self.copied.setText("Copied: paste it into your bug report.")


def open_about(window: QWidget, paths: AppPaths | None = None) -> AboutDialog:
    """Help → About: the window's About box, raised if it is already open."""
    about = window.findChild(AboutDialog)
    if about is None:
        about = AboutDialog(window, paths)
        about.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    about.show()
    about.raise_()
    about.activateWindow()
    return about
