"""The access-token panel of the "Find models" tab, shown inline when the hub answers that a
repository is gated or private: why, a password field, Save, and where to get a token (as
text: the app never opens a browser by itself). Saved in the keyring off the GUI thread
(``HubService.set_token``); after that it only says "Token saved" with Remove, never the
token."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
)

from desktop.chat.services import Services
from desktop.errors import UserError
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.widgets import plain, push_button

TOKENS_PAGE = "huggingface.co/settings/tokens"


class TokenPanel(QFrame):
    """Signals: saved() after a token is stored; removed() after it is deleted."""

    saved = Signal()
    removed = Signal()

    def __init__(self, services: Services) -> None:
        super().__init__()
        self.setObjectName("UndoBar")  # the bordered notice frame of the theme
        self._services = services
        self._retry: Callable[[], None] | None = None
        outer = QVBoxLayout(self)
        outer.setContentsMargins(10, 8, 10, 8)
        outer.setSpacing(6)
        top = QHBoxLayout()
        self.reason = plain(QLabel())  # the hub's reason
        self.reason.setWordWrap(True)
        self.reason.setObjectName("FieldWarning")
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Close")
        close.setAccessibleName("Close the access token panel")
        close.clicked.connect(self.hide)
        top.addWidget(self.reason, 1)
        top.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        outer.addLayout(top)
        row = QHBoxLayout()
        row.setSpacing(6)
        self.field = QLineEdit()
        self.field.setObjectName("HubTokenField")
        self.field.setEchoMode(QLineEdit.EchoMode.Password)
        self.field.setPlaceholderText("hf_…")
        self.field.setAccessibleName("Access token")
        self.field.returnPressed.connect(self._save)
        label = QLabel("Access token")
        label.setBuddy(self.field)
        self.save = QPushButton("Save")
        self.save.setObjectName("PrimaryButton")
        self.save.setAccessibleName("Save the access token")
        self.save.clicked.connect(self._save)
        row.addWidget(label)
        row.addWidget(self.field, 1)
        row.addWidget(self.save)
        outer.addLayout(row)
        self.where = QLabel(
            f"Create a “Read” token at {TOKENS_PAGE}, and accept the model's terms on its "
            "page. The token is kept in the system keyring."
        )
        self.where.setObjectName("DialogNote")
        self.where.setWordWrap(True)
        self.where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.where)
        saved_row = QHBoxLayout()
        self.saved_label = plain(QLabel("Token saved"))  # or the keyring's error
        self.saved_label.setObjectName("DialogNote")
        self.remove = push_button(
            "Remove", self._remove, name="RetryButton", accessible="Remove the saved access token"
        )
        saved_row.addWidget(self.saved_label, 1)
        saved_row.addWidget(self.remove)
        outer.addLayout(saved_row)
        self.close_button = close
        self._ask_widgets = (self.reason, close, label, self.field, self.save, self.where)
        self._saved_widgets = (self.saved_label, self.remove)
        self.hide()

    def ask(self, reason: str, retry: Callable[[], None] | None) -> None:
        """Show why a token is needed; ``retry`` runs once a token is saved."""
        self._retry = retry
        self.reason.setText(reason)
        for widget in self._ask_widgets:
            widget.show()
        for widget in self._saved_widgets:
            widget.hide()
        self.save.setEnabled(True)
        self.show()
        self.field.setFocus()

    def show_saved(self) -> None:
        for widget in self._ask_widgets:
            widget.hide()
        for widget in self._saved_widgets:
            widget.show()
        self.saved_label.setText("Token saved · used for gated and private repositories")
        self.show()

    def _save(self) -> None:
        token = self.field.text().strip()
        if not token:
            self.reason.setText("Paste the access token first.")
            return
        self.save.setEnabled(False)
        start(self._store(token), name="hub-save-token")

    async def _store(self, token: str) -> None:
        try:
            await run_blocking(self._services.hub.set_token, token)
        except UserError as exc:
            self.reason.setText(str(exc))
            self.save.setEnabled(True)
            return
        self.field.clear()
        self.show_saved()
        self.saved.emit()
        retry, self._retry = self._retry, None
        if retry is not None:
            retry()

    def _remove(self) -> None:
        self.remove.setEnabled(False)
        start(self._delete(), name="hub-remove-token")

    async def _delete(self) -> None:
        try:
            await run_blocking(self._services.hub.set_token, None)
        except UserError as exc:
            self.saved_label.setText(str(exc))
            return
        finally:
            self.remove.setEnabled(True)
        self.hide()
        self.removed.emit()
