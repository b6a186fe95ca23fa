"""The one-line notice shown when there is no system keyring to keep API keys in.

One line in plain words ("No system keyring: API keys can't be saved."), "How to fix" (the
steps for this platform, with the technical details folded away) and "Don't show again"
(remembered in the preferences). The full explanation is in the "How to fix" box. It spans
the window above the sidebar and the pages, so it has room even at the smallest size.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QMessageBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.settings.prefs import Preferences
from desktop.settings.secrets import SecretStore
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.widgets import hbox

PREF_HIDDEN = "ui.keyring_notice_hidden"

SHORT_TEXT = "No system keyring: API keys can't be saved."

_WHY = (
    "SIMI Multi keeps API keys only in your system's keyring and never writes them to a "
    "file. No keyring was found, so a key you type can be kept in memory until you quit, "
    "and no longer."
)
_STEPS = {
    "linux": (
        "Install a keyring that offers the Secret Service and make sure it is unlocked, then "
        "restart SIMI Multi:\n"
        "• GNOME Keyring: sudo apt install gnome-keyring (Debian, Ubuntu) or "
        "sudo dnf install gnome-keyring (Fedora); it unlocks when you log in to your desktop.\n"
        "• or KeePassXC: Settings → Secret Service Integration → enable, with a database open.\n"
        "• KDE: KWallet with its Secret Service option enabled (Plasma 6)."
    ),
    "darwin": (
        "The macOS Keychain keeps the keys. Open Keychain Access, unlock the “login” keychain "
        "(File → Unlock Keychain), then restart SIMI Multi."
    ),
    "win32": (
        "Windows Credential Manager keeps the keys. Sign in with your own Windows account "
        "(not a temporary profile), then restart SIMI Multi."
    ),
}


def how_to_fix_text(platform: str | None = None) -> str:
    """What to do on this platform (``sys.platform`` unless given), in plain words."""
    platform = platform or sys.platform
    key = "linux" if platform.startswith(("linux", "freebsd")) else platform
    return _WHY + "\n\n" + _STEPS.get(key, _STEPS["linux"])


class KeyringNotice(QFrame):
    """Signals: dismissed() (closed for this run, or hidden for good)."""

    dismissed = Signal()

    def __init__(
        self, secrets: SecretStore, prefs: Preferences, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("InfoBar")
        self._secrets, self._prefs = secrets, prefs
        self.help_box: QMessageBox | None = None
        layout = hbox(self, (16, 4, 6, 4), 6)
        self.label = ElidedLabel(SHORT_TEXT)
        self.label.setObjectName("InfoText")
        self.label.setToolTip(SHORT_TEXT + " Keys typed now last until you quit.")
        layout.addWidget(self.label, 1)
        self.fix_button = self._button("How to fix", "InfoAction", self.show_how_to_fix)
        self.hide_button = self._button("Don't show again", "InfoAction", self.never_again)
        self.close_button = self._button("✕", "InfoClose", self._dismiss)
        self.close_button.setToolTip("Dismiss until next start")
        self.close_button.setAccessibleName("Dismiss")
        for button in (self.fix_button, self.hide_button, self.close_button):
            layout.addWidget(button, 0, Qt.AlignmentFlag.AlignVCenter)

    def _button(self, text: str, name: str, slot: object) -> QToolButton:
        button = QToolButton()
        button.setObjectName(name)
        button.setText(text)
        button.setAutoRaise(True)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(slot)
        return button

    def show_how_to_fix(self) -> QMessageBox:
        """The steps for this platform, in a box that does not block the window."""
        if self.help_box is None:
            box = QMessageBox(self.window())
            box.setWindowTitle("Keeping API keys")
            box.setIcon(QMessageBox.Icon.Information)
            box.setText("No system keyring was found.")
            box.setInformativeText(how_to_fix_text())
            box.setDetailedText("Keyring backend in use: " + self._secrets.backend_name)
            box.setStandardButtons(QMessageBox.StandardButton.Close)
            self.help_box = box
        self.help_box.open()
        return self.help_box

    def never_again(self) -> None:
        try:
            self._prefs.set(PREF_HIDDEN, True)
        except OSError:
            pass  # the notice goes for this run; it comes back next time, nothing is lost
        self._dismiss()

    def _dismiss(self) -> None:
        self.hide()
        self.dismissed.emit()


def keyring_notice(
    secrets: SecretStore, prefs: Preferences, parent: QWidget | None = None
) -> KeyringNotice | None:
    """The notice when it is due: no real keyring, and not hidden for good."""
    if secrets.available or prefs.get(PREF_HIDDEN) is True:
        return None
    return KeyringNotice(secrets, prefs, parent)


def add_keyring_notice(
    column: QVBoxLayout, secrets: SecretStore, prefs: Preferences
) -> KeyringNotice | None:
    """Put the notice, when due, at the top of ``column`` (the window's central column, above
    its pages). Only the notice is new: the pages are not moved, so nothing they hold (the
    focus, the typing) is touched, and a window already shown only lays out again."""
    notice = keyring_notice(secrets, prefs)
    if notice is None:
        return None
    column.insertWidget(0, notice)
    notice.show()  # on a window already shown: now, not a loop turn later
    return notice
