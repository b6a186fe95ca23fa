"""The conversation list follows a Send by moving one row: the conversation goes to the top
(below the pinned ones), a new one appears there, and the rest of the list is not read again
(10,000 rows took ~50 ms of each Send)."""

from __future__ import annotations

from typing import Any

from desktop.store.agents import Agent


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
