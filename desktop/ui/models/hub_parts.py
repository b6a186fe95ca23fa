"""Small parts of the "Find models" tab: its empty state (what the tab does, and that nothing
is sent to the hub until a search) and the error notice with Retry."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from desktop.ui.kit.widgets import plain


class EmptyState(QWidget):
    def __init__(self, host: str) -> None:
        super().__init__()
        self.setObjectName("HubEmpty")
        col = QVBoxLayout(self)
        col.addStretch(1)
        title = QLabel("Find models on the Hugging Face Hub")
        title.setObjectName("EmptyTitle")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        title.setWordWrap(True)
        self.hint = QLabel(
            "Search by name to see repositories of GGUF models, the models in each with "
            "whether they fit this machine, and download them into your models folder. "
            f"Nothing is sent to {host} until you search."
        )
        self.hint.setObjectName("EmptyHint")
        self.hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hint.setWordWrap(True)
        col.addWidget(title)
        col.addWidget(self.hint)
        col.addStretch(2)


class Notice(QFrame):
    """Why the last action failed, in the hub's finished words, with Retry (hidden at first)."""

    def __init__(self, retry: Callable[[], None]) -> None:
        super().__init__()
        self.setObjectName("ErrorBox")
        line = QHBoxLayout(self)
        line.setContentsMargins(10, 6, 6, 6)
        self.text = plain(QLabel())  # the hub's or the network's words
        self.text.setObjectName("ErrorText")
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.retry = QPushButton("Retry")
        self.retry.setObjectName("RetryButton")
        self.retry.setAccessibleName("Try again")
        self.retry.clicked.connect(retry)
        line.addWidget(self.text, 1)
        line.addWidget(self.retry, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()
