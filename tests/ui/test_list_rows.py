"""The conversation list follows a Send by moving one row: the conversation goes to the top
(below the pinned ones), a new one appears there, and the rest of the list is not read again
(10,000 rows took ~50 ms of each Send)."""

from __future__ import annotations

from typing import Any

from desktop.store.agents import Agent
from tests.helpers.python_calls import python_calls


def _titles(window: Any) -> list[str]:
    model = window.browser.conversation_list.list_model
    return [model.conversation(i).title for i in range(model.rowCount())]


def test_a_send_moves_one_row_to_the_top_below_the_pinned(
    services: Any, make_window: Any, qtbot: Any, monkeypatch: Any
) -> None:
    agent = services.agents.create(
        Agent(name="Closed", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m")
    )
    store = services.conversations
    ids = {}
    for title in ("oldest", "older", "pinned", "newest"):
        conv = store.create(agent.id, title)
        store.add_message(conv.id, "user", f"about {title}", agent_id=agent.id)
        ids[title] = conv.id
    store.set_pinned(ids["pinned"], True)
    window = make_window(services)
    window.reload_agents()
    assert _titles(window) == ["pinned", "newest", "older", "oldest"]
    reads: list[object] = []
    real_list = store.list
    monkeypatch.setattr(store, "list", lambda *a: reads.append(a) or real_list(*a))

    window.open_conversation(ids["oldest"])
    window.pane.composer.setPlainText("one more")
    window.pane.send()  # the server refuses; the question is stored all the same
    qtbot.waitUntil(lambda: not window.pane.busy, timeout=20_000)

    assert _titles(window) == ["pinned", "oldest", "newest", "older"]
    assert window.browser.conversation_list.current_id() == ids["oldest"]
    assert reads == []  # one row moved; the list was not read again

    window.new_chat(agent)
    window.pane.composer.setPlainText("a new one")
    window.pane.send()
    qtbot.waitUntil(lambda: not window.pane.busy, timeout=20_000)
    titles = _titles(window)
    assert (
        len(titles) == 5
        and titles[0] == "pinned"
        and titles[2:]
        == [
            "oldest",
            "newest",
            "older",
        ]
    )
    assert window.browser.conversation_list.current_id() == window.conversation_id


def test_a_row_moving_in_10_000_conversations_asks_python_only_for_what_is_shown(
    qtbot: Any,
) -> None:
    """The view lays out every row after an insert or a removal; the row count it asks for at
    each one is C++'s, so a reply moving its conversation to the top costs the rows on screen,
    not 10,000 Python calls (~14 ms held before)."""
    from PySide6.QtWidgets import QApplication

    from desktop.store.conversations import Conversation
    from desktop.ui.conversation.listing import ConversationList

    def conv(n: int, when: str) -> Conversation:
        return Conversation(n, f"chat {n}", None, False, when, when)

    view = ConversationList()
    qtbot.addWidget(view)
    view.resize(260, 600)
    rows = [conv(n, f"2026-01-01 00:{n // 600:02d}:{n % 60:02d}") for n in range(10_000, 0, -1)]
    view.list_model.set_rows(rows, {})
    view.show()
    QApplication.processEvents()

    def move() -> None:
        view.list_model.place(conv(5, "2026-12-04 00:00:00"), 5)  # a reply: to the top
        QApplication.processEvents()

    calls = python_calls(move, lambda code: "listing.py" in code.co_filename)
    assert view.list_model.conversation(0) == conv(5, "2026-12-04 00:00:00")
    assert view.item(0).text() == "chat 5" and view.count() == 10_000
    assert view.list_model.row_of(5) == 0 and view.list_model.row_of(10_000) == 1
    assert calls < 2_000, calls  # ~20,000 when each row's count was a Python call
