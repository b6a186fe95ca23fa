"""The Models page's "Find models" tab: search the Hugging Face Hub, a repository's GGUF
files with fit marks, downloads with progress (contract; helper H3 builds it)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget


class HubView(QWidget):
    downloaded = Signal(str)  # the path of a model whose download completed and verified

    def __init__(self, services: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services = services
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Search the Hugging Face Hub for GGUF models."))
