"""Opening a long conversation never holds the window: its branch is read on a worker thread
(more than LONG_PATH messages), the list keeps its rows, and nothing sent meanwhile is lost."""

from __future__ import annotations

from typing import Any

from desktop.store.agents import Agent
from desktop.ui.conversation.pane import LONG_PATH


def _long_conversation(services: Any, agent: Agent, count: int) -> int:
    store = services.conversations
    conv = store.create(agent.id, "The long one")
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        store.add_message(conv.id, role, f"{role} message {i}", agent_id=agent.id)
    return int(conv.id)


def _remote(services: Any, name: str) -> Agent:
    return services.agents.create(
        Agent(name=name, kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m")
    )


def test_a_long_conversation_is_read_off_the_gui_thread_and_then_shown(
    services: Any, make_window: Any, qtbot: Any
) -> None:
    agent = _remote(services, "Writer")
    conv_id = _long_conversation(services, agent, LONG_PATH + 21)
    window = make_window(services)
    window.reload_agents()
    listed = window.browser.conversation_list.list_model.rowCount()

    window.open_conversation(conv_id)

    pane = window.pane
    assert pane.path_loading is not None  # read on a worker thread, not in the click
    qtbot.waitUntil(pane.path_loading.done, timeout=20_000)
    texts = [b.text for b in pane.transcript.bubbles()]
    assert texts[-1] == f"user message {LONG_PATH + 20}"  # the newest (of 421)
    assert pane.agent is not None and pane.agent.id == agent.id
    # the list kept its rows and marks the conversation shown
    listing = window.browser.conversation_list
    assert listing.list_model.rowCount() == listed
    assert listing.current_id() == conv_id


def test_a_deleted_agents_conversation_opens_with_the_newest_writer(
    services: Any, make_window: Any, qtbot: Any
) -> None:
    first, second = _remote(services, "First"), _remote(services, "Second")
    conv_id = _long_conversation(services, first, 6)
    services.conversations.add_message(conv_id, "user", "and you?", agent_id=None)
    services.conversations.add_message(conv_id, "assistant", "me too", agent_id=second.id)
    services.conversations.add_message(conv_id, "user", "ok", agent_id=None)
    services.agents.delete(first)  # the conversation's own agent is gone
    window = make_window(services)
    window.reload_agents()

    window.open_conversation(conv_id)

    assert window.current_agent is not None and window.current_agent.id == second.id


def test_a_message_sent_while_the_branch_is_read_stays_on_screen(
    services: Any, make_window: Any, qtbot: Any, monkeypatch: Any
) -> None:
    agent = _remote(services, "Writer")
    conv_id = _long_conversation(services, agent, LONG_PATH + 1)
    store = services.conversations
    # The worker thread's read stands for one that ran before the message was sent: it
    # answers with the branch as it was then (later reads are the store's own).
    before, real, reads = store.messages(conv_id), store.messages, []
    monkeypatch.setattr(
        store,
        "messages",
        lambda cid: before if not reads.append(cid) and len(reads) == 1 else real(cid),
    )
    window = make_window(services)
    window.reload_agents()
    window.open_conversation(conv_id)
    pane = window.pane
    loading = pane.path_loading
    assert loading is not None and not loading.done()

    pane.composer.setPlainText("sent at once")
    pane.send()  # before the branch arrived (the server refuses: the question stays)

    qtbot.waitUntil(loading.done, timeout=20_000)
    qtbot.waitUntil(lambda: not pane.busy, timeout=20_000)
    texts = [b.text for b in pane.transcript.bubbles()]
    assert "sent at once" in texts  # the branch that arrived was read again with it
    assert f"user message {LONG_PATH}" in texts  # and the history before it
