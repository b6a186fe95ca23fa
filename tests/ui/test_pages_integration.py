"""The local-engine widgets as a person meets them inside the window."""

from __future__ import annotations

from typing import Any

from desktop.local.starter import starter_model_path


def test_models_page_is_in_the_window_and_lists_the_starter(window: Any, qtbot: Any) -> None:
    starter = str(starter_model_path())
    window.show_page("models")  # showing the page refreshes it
    assert window.current_page == "models"
    page = window.models_page
    qtbot.waitUntil(lambda: page.row_of(starter) >= 0, timeout=20_000)
    row = page.row_of(starter)
    assert page.row_error(row) == ""
    assert "Q4_1" in " ".join(
        page.cell_text(row, c) for c in ("Quant", "Quantization") if c in _columns(page)
    )
    window.show_page("chat")
    assert window.current_page == "chat"


def _columns(page: Any) -> list[str]:
    return [page.table.horizontalHeaderItem(i).text() for i in range(page.table.columnCount())]


def test_agent_editor_shows_a_live_memory_estimate(window: Any, qtbot: Any) -> None:
    dialog = window.agents.editor(window.current_agent)
    view = dialog.memory_slot.itemAt(0).widget()
    qtbot.waitUntil(lambda: view.current is not None, timeout=20_000)
    dialog.n_ctx.setText("2048")
    qtbot.waitUntil(lambda: view.current is not None and view.current.kv_cells == 2048)
    small = view.current.kv_cache
    dialog.n_ctx.setText("8192")
    qtbot.waitUntil(lambda: view.current is not None and view.current.kv_cache != small)
    assert view.current.kv_cache > 3 * small  # 2048 -> 8192 tokens: four times the KV cache
    dialog.deleteLater()


def _overflowed(services: Any, make_window: Any, qtbot: Any) -> tuple[Any, Any]:
    """A window whose conversation has outgrown the starter's context (n_ctx 512): the last
    reply failed with "context too long"."""
    from PySide6.QtCore import Qt

    agent = services.agents.by_name("SmolLM2 (local)")
    services.agents.update(agent.with_changes(n_ctx=512, max_tokens=12, seed=1))
    window = make_window(services)
    long = " ".join(f"fact{i}" for i in range(120))
    for text in (f"Remember: {long}", f"And also: {long}"):
        window.pane.composer.setPlainText(text)
        qtbot.keyClick(window.pane.composer, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=60_000)
    return window, services.conversations.messages(window.conversation_id)[-1]


def test_context_too_long_offers_to_drop_oldest_turns_and_then_answers(
    services: Any, make_window: Any, qtbot: Any
) -> None:
    from PySide6.QtCore import Qt

    window, failed = _overflowed(services, make_window, qtbot)
    assert failed.status == "error" and failed.error_kind == "context_too_long"
    bubble = window.pane.transcript.bubble(failed.id)
    drop = bubble.fit_buttons["fit_drop"]
    assert not drop.isHidden() and not bubble.fit_buttons["fit_raise"].isHidden()

    qtbot.mouseClick(drop, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.pane.transcript.bubble(failed.id) is None, timeout=30_000)
    qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=60_000)
    reply = services.conversations.messages(window.conversation_id)[-1]
    assert reply.role == "assistant" and reply.status == "complete"
    assert "oldest turn" in window.status_label.text() or reply.content


def test_local_agent_shows_its_model_state(window: Any, qtbot: Any) -> None:
    from PySide6.QtCore import Qt

    agent = window.current_agent
    assert window.model_state_of(agent) == "unloaded"
    assert window.pane.header_subtitle.text().endswith("· unloaded")
    assert "loads with the first message" in window.status_label.text()
    window.pane.composer.setPlainText("Hi")
    qtbot.keyClick(window.pane.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=60_000)
    qtbot.waitUntil(lambda: window.pane.header_subtitle.text().endswith("· ready"), timeout=10_000)
    assert window.model_state_of(agent) == "ready"


def test_a_model_without_chat_template_is_said_under_the_agent(
    services: Any, make_window: Any, qtbot: Any, tmp_path: Any
) -> None:
    from desktop.store.agents import Agent
    from tests.helpers import gguf_files

    path = gguf_files.rewrite_starter(
        tmp_path / "no-template.gguf", drop_kv=("tokenizer.chat_template",)
    )
    agent = services.agents.create(
        Agent(name="No template", kind="local", model="n", model_path=str(path), n_ctx=512)
    )
    window = make_window(services)
    window.select_agent(agent.id)
    qtbot.waitUntil(lambda: "ChatML" in window.pane.header_subtitle.text(), timeout=20_000)
    window.select_agent(services.agents.by_name("SmolLM2 (local)").id)
    qtbot.waitUntil(lambda: "ChatML" not in window.pane.header_subtitle.text(), timeout=20_000)


def test_raise_context_asks_first_with_size_memory_and_trained_context(
    services: Any, make_window: Any, qtbot: Any
) -> None:
    from PySide6.QtCore import Qt

    window, failed = _overflowed(services, make_window, qtbot)
    assert failed.error_kind == "context_too_long"
    offers: list[Any] = []
    answers: list[Any] = [None]  # first: the person cancels
    window.pane.ask_context = lambda offer: offers.append(offer) or answers.pop(0)
    raise_button = window.pane.transcript.bubble(failed.id).fit_buttons["fit_raise"]

    qtbot.mouseClick(raise_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "unchanged" in window.status_label.text(), timeout=30_000)
    assert services.agents.by_name("SmolLM2 (local)").n_ctx == 512  # nothing changed
    offer = offers[0]
    assert offer.current == 512 and offer.trained == 8192 and 512 < offer.needed <= 8192
    assert "trained on 8,192 tokens" in offer.question
    [choice] = offer.choices  # fits within the trained context: one size, not beyond it
    assert choice.n_ctx == offer.needed and not choice.beyond_training
    assert choice.memory.startswith("about ") and "RAM" in choice.memory

    answers.append(choice)  # then: the person picks the offered size
    qtbot.mouseClick(raise_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.pane.transcript.bubble(failed.id) is None, timeout=30_000)
    qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=60_000)
    assert services.agents.by_name("SmolLM2 (local)").n_ctx == choice.n_ctx
    reply = services.conversations.messages(window.conversation_id)[-1]
    assert reply.status == "complete"
    assert services.stats.for_message(reply.id)["n_ctx"] == choice.n_ctx  # loaded with it
