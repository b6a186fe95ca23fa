"""The agent editor's price section (remote agents): "Input price" and "Output price", what the
person pays in USD per million tokens, winning over the price list (``desktop.chat.pricing``).

Empty fields use the price list; their placeholders show its prices for the model as typed,
looked up off the GUI thread (``PriceBook.model_prices`` imports genai-prices the first time)
a moment after the last edit.
"""

from __future__ import annotations

import asyncio

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QGroupBox, QWidget

from desktop.chat.price_book import PriceBook
from desktop.chat.pricing import ModelPrices
from desktop.store.agents import Agent
from desktop.ui.agents.form import FieldForm, WrapLabel, line, show_value
from desktop.ui.kit.async_door import run_blocking, start

LOOKUP_DELAY_MS = 300  # after the last keystroke in the model, URL or kind
NO_PRICE = "USD per million tokens"
NOTE_EMPTY = "Empty: the price list's price for the model. Prices are USD per million tokens."
NOTE_UNKNOWN = (
    "The price list has no price for this model here (a server of your own, or a model it "
    "does not know), so its calls show no cost (—). Enter what you pay to count it, or 0 if "
    "it is free."
)

Key = tuple[str, str | None, str]  # kind, base URL, model


class PriceSection(QObject):
    """Owns the price widgets of one editor.

    Signals: prices_looked_up(object): the price list was asked about the model as typed;
    the ``ModelPrices``, or None when it has none (the placeholders show the answer).
    """

    prices_looked_up = Signal(object)

    def __init__(self, form: FieldForm, prices: PriceBook, parent: QWidget) -> None:
        super().__init__(parent)
        self._prices = prices
        self.group: QGroupBox = form.group("Price")
        self.price_input = line(NO_PRICE)
        self.price_output = line(NO_PRICE)
        self.price_note = WrapLabel(NOTE_EMPTY, "DialogNote")
        for edit in (self.price_input, self.price_output):
            edit.setToolTip(
                "What you pay per million tokens, in US dollars. It wins over the price list; "
                "leave it empty to use the list."
            )
        form.add(self.group, "price_input_per_m", "Input price", self.price_input)
        form.add(
            self.group, "price_output_per_m", "Output price", self.price_output, self.price_note
        )
        self._wanted: Key | None = None
        self._task: asyncio.Task[None] | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(LOOKUP_DELAY_MS)
        self._timer.timeout.connect(self._look_up)

    def load(self, agent: Agent) -> None:
        self.price_input.setText(show_value(agent.price_input_per_m))
        self.price_output.setText(show_value(agent.price_output_per_m))

    def number_texts(self) -> dict[str, str]:
        return {
            "price_input_per_m": self.price_input.text(),
            "price_output_per_m": self.price_output.text(),
        }

    def context_changed(self, kind: str, base_url: str | None, model: str) -> None:
        """The model, URL or kind changed: ask the price list again, shortly."""
        key = (kind, base_url, model.strip())
        if key == self._wanted:
            return
        self._wanted = key
        self._timer.start()

    def _look_up(self) -> None:
        if self._wanted is not None:
            self._task = start(self._fetch(self._wanted), name="agent editor: list prices")

    async def _fetch(self, key: Key) -> None:
        found = await run_blocking(self._prices.model_prices, *key) if key[2] else None
        if key != self._wanted:
            return  # typed on meanwhile: a newer lookup follows
        self._show(found, asked=bool(key[2]))
        self.prices_looked_up.emit(found)

    def _show(self, found: ModelPrices | None, *, asked: bool) -> None:
        if found is None:
            self.price_input.setPlaceholderText(NO_PRICE)
            self.price_output.setPlaceholderText(NO_PRICE)
            self.price_note.setText(NOTE_UNKNOWN if asked else NOTE_EMPTY)
            return
        self.price_input.setPlaceholderText(_listed(found.input_per_m))
        self.price_output.setPlaceholderText(_listed(found.output_per_m))
        parts = [f"input ${_amount(found.input_per_m)}"]
        if found.cached_per_m is not None:
            parts.append(f"cached input ${_amount(found.cached_per_m)}")
        parts.append(f"output ${_amount(found.output_per_m)}")
        note = f"Empty: the price list's price for {found.model_id} ({', '.join(parts)} per "
        note += "million tokens)."
        if found.cached_per_m is not None:
            note += " Your own input price applies to cached input too."
        self.price_note.setText(note)

    def cancel(self) -> None:
        self._timer.stop()
        if self._task is not None and not self._task.done():
            self._task.cancel()


def _amount(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"


def _listed(value: float | None) -> str:
    return NO_PRICE if value is None else f"{value:g} (price list)"
