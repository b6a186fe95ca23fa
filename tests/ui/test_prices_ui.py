"""Prices in the window: Settings' "Update prices" (fetched only when pressed, off the GUI
thread, from a loopback server standing in for GitHub), and the agent editor's own-price
fields, whose placeholders show the price list's prices for the model as typed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop.chat.price_book import PRICES_URL_ENV, PriceBook
from desktop.settings.prefs import Preferences
from desktop.store.agents import Agent
from desktop.ui.agents.price import NO_PRICE, NOTE_UNKNOWN
from desktop.ui.settings.dialog import SettingsDialog
from tests.chat.test_pricing import NEW_PRICES
from tests.helpers.fault_server import FaultServer, Reply, error_reply
from tests.ui.conftest import click_for
from tests.ui.test_agent_editor_remote import _choose, _editor, _save

WAIT_MS = 20_000  # a guard against hanging, not a timing assertion
ROW = {"prompt_tokens": 1000, "cached_tokens": 400, "output_tokens": 500}
GPT = Agent(name="a", kind="openai", model="gpt-4o-mini")


@pytest.fixture(autouse=True)
def bundled_prices() -> Iterator[None]:
    yield
    from genai_prices import data_snapshot

    data_snapshot.set_custom_snapshot(None)  # an update is process-wide


def _settings(qtbot: Any, tmp_path: Path, book: PriceBook) -> SettingsDialog:
    dialog = SettingsDialog(Preferences(tmp_path / "settings.json"), prices=book)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: "checking" not in dialog.prices_info.text(), timeout=WAIT_MS)
    return dialog


def _press_update(qtbot: Any, dialog: SettingsDialog) -> bool:
    return bool(click_for(qtbot, dialog.update_prices_button, dialog.prices_updated, WAIT_MS))


def test_update_prices_fetches_once_when_pressed_and_new_calls_use_them(
    qtbot: Any, qloop: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = json.dumps(NEW_PRICES).encode()
    book = PriceBook(tmp_path / "prices" / "genai-prices.json")
    with FaultServer(lambda _r: Reply(body=body, content_type="application/json")) as server:
        monkeypatch.setenv(PRICES_URL_ENV, server.url + "/data.json")
        dialog = _settings(qtbot, tmp_path, book)
        assert dialog.prices_info.text().startswith("Prices bundled with genai-prices 0.2")
        assert server.requests == []  # opening Settings fetches nothing
        assert _press_update(qtbot, dialog)
        assert len(server.requests) == 1
    assert dialog.prices_info.text().startswith("Prices updated ")
    assert "New calls are priced with these prices" in dialog.prices_status.text()
    assert dialog.update_prices_button.isEnabled()
    assert book.price(ROW, GPT).cost_usd == 0.0018  # was 0.00042 with the bundled prices
    reopened = _settings(qtbot, tmp_path, PriceBook(book.prices_file))  # the date stays
    assert reopened.prices_info.text() == dialog.prices_info.text()


def test_a_failed_update_says_what_went_wrong_and_keeps_the_prices(
    qtbot: Any, qloop: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = PriceBook(tmp_path / "genai-prices.json")
    with FaultServer([error_reply(503, {"error": "down"})]) as server:
        monkeypatch.setenv(PRICES_URL_ENV, server.url + "/data.json")
        dialog = _settings(qtbot, tmp_path, book)
        before = dialog.prices_info.text()
        assert not _press_update(qtbot, dialog)
    status = dialog.prices_status.text()
    assert "answered HTTP 503" in status and "The prices in use are kept" in status
    assert dialog.prices_info.text() == before and dialog.update_prices_button.isEnabled()
    assert book.price(ROW, GPT).cost_usd == 0.00042


# the agent editor ------------------------------------------------------------------------------
def test_price_fields_show_the_lists_prices_and_save_the_agents_own(
    qtbot: Any, qloop: Any, services: Any
) -> None:
    editor = _editor(qtbot, services)
    prices = editor.endpoint.price
    assert prices.group.isHidden()  # a new agent starts local: no price to set
    _choose(editor.kind, "openai")
    assert not prices.group.isHidden()
    editor.name.setText("Mini")
    editor.model.setEditText("gpt-4o-mini")
    editor.api_key.setText("sk-test-prices-ui-1234")
    qtbot.waitUntil(lambda: "price list" in prices.price_input.placeholderText(), timeout=WAIT_MS)
    assert prices.price_input.placeholderText() == "0.15 (price list)"
    assert prices.price_output.placeholderText() == "0.6 (price list)"
    assert "cached input $0.075" in prices.price_note.text()

    prices.price_input.setText("cheap")
    prices.price_output.setText("-2")
    assert not _save(qtbot, editor)
    assert editor.error_text("price_input_per_m") == "The input price must be a number."
    assert "between 0 and 10,000" in editor.error_text("price_output_per_m")

    prices.price_input.setText("0.1")
    prices.price_output.setText("")  # the list's price
    assert _save(qtbot, editor)
    saved = services.agents.by_name("Mini")
    assert (saved.price_input_per_m, saved.price_output_per_m) == (0.1, None)
    again = _editor(qtbot, services, saved)
    assert again.endpoint.price.price_input.text() == "0.1"
    assert again.endpoint.price.price_output.text() == ""


def test_a_server_of_your_own_has_no_list_price_to_offer(
    qtbot: Any, qloop: Any, services: Any
) -> None:
    editor = _editor(qtbot, services)
    prices = editor.endpoint.price
    _choose(editor.kind, "openai-compatible")
    _choose(editor.preset, "vllm")  # on this machine, serving a model called gpt-4o-mini
    editor.model.setEditText("gpt-4o-mini")
    qtbot.waitUntil(lambda: prices.price_note.text() == NOTE_UNKNOWN, timeout=WAIT_MS)
    assert prices.price_input.placeholderText() == NO_PRICE
    _choose(editor.preset, "groq")  # the same name on a hosted service it does not sell
    editor.model.setEditText("llama-3.1-8b-instant")  # one it does
    qtbot.waitUntil(lambda: "price list" in prices.price_input.placeholderText(), timeout=WAIT_MS)
    assert prices.price_input.placeholderText() == "0.05 (price list)"
