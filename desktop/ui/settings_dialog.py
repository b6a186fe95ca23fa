"""Settings: when to show the per-message stats footer, when to unload an idle local model,
and which prices costs are counted at ("Update prices": the one network call this dialog
makes, and only when pressed)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.price_book import PriceBook, PricesInfo
from desktop.chat.services import PREF_IDLE_UNLOAD_MIN, idle_unload_seconds
from desktop.errors import UserError
from desktop.settings.paths import AppPaths
from desktop.settings.prefs import Preferences
from desktop.ui.agent_form import WrapLabel, column, row, say
from desktop.ui.async_door import run_blocking, start

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
    """Signals: prices_updated(bool): "Update prices" ended (True: the new prices are in
    use; False: ``prices_status`` says what went wrong, and the old prices stay)."""

    prices_updated = Signal(bool)

    def __init__(
        self,
        prefs: Preferences,
        parent: QWidget | None = None,
        *,
        prices: PriceBook | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self._prefs = prefs
        self._prices = prices or PriceBook.in_folder(AppPaths.from_env().data_dir)
        self._tasks: list[asyncio.Task[Any]] = []
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
        form.addRow("Prices", self._prices_row())
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

    def _prices_row(self) -> QWidget:
        self.prices_info = WrapLabel("Prices: checking…", "DialogNote")
        self.update_prices_button = QPushButton("Update prices")
        self.update_prices_button.setToolTip(
            "Download the latest model prices (genai-prices, from GitHub) once. Costs of new "
            "calls use them; calls already made keep the cost they were given."
        )
        self.update_prices_button.clicked.connect(self.update_prices)
        self.prices_status = WrapLabel()
        self.prices_status.hide()
        self._show_prices_in_use()
        return column(row(self.prices_info, self.update_prices_button), self.prices_status)

    def _show_prices_in_use(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no event loop (nothing to keep responsive): read it now
            self._show_info(self._prices.info())
            return
        self._start(self._read_prices_in_use(), "settings: prices in use")

    async def _read_prices_in_use(self) -> None:
        self._show_info(await run_blocking(self._prices.info))

    def _show_info(self, info: PricesInfo) -> None:
        self.prices_info.setText(info.describe() + ".")

    def update_prices(self) -> asyncio.Task[Any]:
        """Fetch the price list once, off the GUI thread; ``prices_updated`` tells the end."""
        self.update_prices_button.setEnabled(False)
        say(self.prices_status, "Downloading the latest prices…", "muted")
        return self._start(self._update_prices(), "settings: update prices")

    async def _update_prices(self) -> bool:
        try:
            info = await run_blocking(self._prices.update)
        except UserError as exc:
            say(self.prices_status, exc.user_message, "error")
            return self._updated(False)
        self._show_info(info)
        say(self.prices_status, "New calls are priced with these prices.", "ok")
        return self._updated(True)

    def _updated(self, ok: bool) -> bool:
        self.update_prices_button.setEnabled(True)
        self.prices_updated.emit(ok)
        return ok

    def _start(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = start(coro, name=name)
        self._tasks.append(task)
        return task

    def done(self, result: int) -> None:
        for task in self._tasks:  # the dialog closes: it shows nothing more
            task.cancel()
        super().done(result)

    def save(self) -> None:
        self._prefs.set(PREF_FOOTER, self.footer.currentData())
        self._prefs.set(PREF_IDLE_UNLOAD_MIN, self.idle_unload.currentData())
        self.accept()
