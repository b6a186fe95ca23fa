"""Conversation panes: many conversations stream at once, each with its own agent, draft and
Stop.

The remote agents here talk to FaultServer on loopback streaming OpenAI-style chunks at a fixed
pace: a stand-in for a remote provider (a real one cannot be reached offline) whose replies
are slow enough to still be streaming while the test acts. The local ones use the real starter
model through the real worker process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QWidget

from desktop.store.agents import Agent
from desktop.ui.conversation.pane import ConversationPane
from tests.helpers.fault_server import FaultServer, Reply, ticking_tokens
from tests.ui.conftest import STARTER, limit_starter

CHUNK_DELAY_S = 0.03  # ~33 chunks/s: a 60-chunk reply streams for about two seconds
TIMEOUT_MS = 30_000


def _ticker() -> FaultServer:
    return FaultServer(lambda _request: Reply(body=ticking_tokens(60), chunk_delay_s=CHUNK_DELAY_S))


@pytest.fixture
def tickers(services: Any) -> Iterator[tuple[Agent, Agent]]:
    """Two remote agents on two servers that stream slowly."""
    with _ticker() as one, _ticker() as two:
        a = services.agents.create(
            Agent(name="Ticker A", kind="openai-compatible", base_url=one.url + "/v1", model="a")
        )
        b = services.agents.create(
            Agent(name="Ticker B", kind="openai-compatible", base_url=two.url + "/v1", model="b")
        )
        yield a, b


def _type_and_send(qtbot: Any, target: Any, text: str) -> None:
    """Type into a pane's composer (a window's: the shown pane's) and press Enter."""
    pane = getattr(target, "pane", target)
    pane.composer.setPlainText(text)
    qtbot.keyClick(pane.composer, Qt.Key.Key_Return)


def _answered_chat(qtbot: Any, services: Any, make_window: Any, agent: Agent) -> tuple[Any, Any]:
    """A window whose shown conversation with ``agent`` has one question and its reply."""
    window = make_window(services)
    window.select_agent(agent.id)
    _type_and_send(qtbot, window, "question")
    pane = window.pane
    qtbot.waitUntil(lambda: not pane.busy, timeout=TIMEOUT_MS)
    return window, pane


def _messages(services: Any, conversation_id: int) -> list[Any]:
    return services.conversations.messages(conversation_id)


def _stats(services: Any, message_id: int) -> list[tuple[Any, ...]]:
    return list(
        services.db.execute(
            "SELECT agent_name, output_tokens, finish_reason FROM inference_stats "
            "WHERE message_id = ?",
            [message_id],
        ).fetchall()
    )


def test_two_panes_on_two_agents_stream_at_once_and_stopping_one_leaves_the_other(
    qtbot: Any, qloop: Any, services: Any, tickers: tuple[Agent, Agent]
) -> None:
    a, b = tickers
    host = QWidget()
    row = QHBoxLayout(host)
    left = ConversationPane(services, a)
    right = ConversationPane(services, b)
    row.addWidget(left)
    row.addWidget(right)
    qtbot.addWidget(host)
    host.resize(1200, 700)
    host.show()
    assert left.composer.placeholderText() == "Message Ticker A…"
    assert right.header_title.text() == "Ticker B"

    _type_and_send(qtbot, left, "left question")
    _type_and_send(qtbot, right, "right question")
    assert left.busy and right.busy  # both stream at once
    left_reply = left.presenter.turn.assistant_message_id
    right_reply = right.presenter.turn.assistant_message_id
    qtbot.waitUntil(lambda: "tok3" in left.transcript.bubble(left_reply).text, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: "tok3" in right.transcript.bubble(right_reply).text, timeout=TIMEOUT_MS)

    qtbot.mouseClick(left.send_button, Qt.MouseButton.LeftButton)  # Stop, on the left only
    qtbot.waitUntil(lambda: not left.busy, timeout=TIMEOUT_MS)
    assert right.busy, "stopping one pane stopped the other"
    assert right.send_button.text() == "Stop" and left.send_button.text() == "Send"
    seen = right.transcript.bubble(right_reply).text
    qtbot.waitUntil(lambda: right.transcript.bubble(right_reply).text != seen, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: not right.busy, timeout=TIMEOUT_MS)

    left_rows = _messages(services, left.conversation_id)
    right_rows = _messages(services, right.conversation_id)
    assert left.conversation_id != right.conversation_id
    assert [(m.role, m.status, m.agent_name) for m in left_rows] == [
        ("user", "complete", "Ticker A"),
        ("assistant", "cancelled", "Ticker A"),
    ]
    assert [(m.role, m.status, m.agent_name) for m in right_rows] == [
        ("user", "complete", "Ticker B"),
        ("assistant", "complete", "Ticker B"),
    ]
    assert "tok59" in right_rows[1].content and "tok59" not in left_rows[1].content
    assert right.transcript.bubble(right_reply).text.strip() == right_rows[1].content.strip()
    (name, output, finish) = _stats(services, right_reply)[0]
    assert (name, output, finish) == ("Ticker B", 60, "stop")
    assert _stats(services, left_reply)[0][2] == "cancelled"
    assert "TTFT" in right.presenter.status and "stopped" in left.presenter.status
    host.close()


def test_window_streams_in_two_conversations_switching_never_stops_or_retargets_a_reply(
    qtbot: Any, services: Any, make_window: Any, tickers: tuple[Agent, Agent]
) -> None:
    a, b = tickers
    window = make_window(services)
    window.select_agent(a.id)  # the blank new chat starts with A
    assert window.pane.header_title.text() == "Ticker A"
    _type_and_send(qtbot, window, "to A")
    first = window.pane
    assert first.busy and window.pane.send_button.text() == "Stop"

    window.select_agent(b.id)  # a started chat is never re-targeted: a new one opens for B
    second = window.pane
    assert second is not first and second.agent.name == "Ticker B"
    assert first.busy, "switching conversations stopped the reply"
    assert first.agent.name == "Ticker A"
    assert second.send_button.text() == "Send"  # this conversation is not busy
    assert second.composer.placeholderText() == "Message Ticker B…"
    assert second.header_title.text() == "Ticker B"
    _type_and_send(qtbot, window, "to B")
    assert first.busy and second.busy

    window.stop()  # Esc acts on the shown conversation only
    qtbot.waitUntil(lambda: not second.busy, timeout=TIMEOUT_MS)
    assert first.busy
    qtbot.waitUntil(lambda: not first.busy, timeout=TIMEOUT_MS)
    stored = _messages(services, first.conversation_id)
    assert stored[-1].status == "complete" and stored[-1].agent_name == "Ticker A"
    assert _messages(services, second.conversation_id)[-1].status == "cancelled"
    conv = services.conversations.get(first.conversation_id)
    assert conv.agent_id == a.id  # still A's conversation


def test_each_conversation_keeps_its_own_unsent_draft(
    qtbot: Any, services: Any, make_window: Any, tickers: tuple[Agent, Agent]
) -> None:
    a, b = tickers
    one = services.conversations.create(a.id)
    two = services.conversations.create(b.id)
    window = make_window(services)
    window.open_conversation(one.id)
    qtbot.keyClicks(window.pane.composer, "half a thought for A")
    window.open_conversation(two.id)
    assert window.pane.composer.toPlainText() == ""  # the draft did not follow
    qtbot.keyClicks(window.pane.composer, "for B")
    window.open_conversation(one.id)
    assert window.pane.composer.toPlainText() == "half a thought for A"
    assert window.pane.agent.name == "Ticker A"
    window.open_conversation(two.id)
    assert window.pane.composer.toPlainText() == "for B"


def test_a_draft_survives_its_pane_being_closed_to_save_memory(
    qtbot: Any, services: Any, make_window: Any, tickers: tuple[Agent, Agent], monkeypatch: Any
) -> None:
    from desktop.ui.shell import pane_stack

    monkeypatch.setattr(pane_stack, "MAX_IDLE_PANES", 1)
    a, _b = tickers
    convs = [services.conversations.create(a.id) for _ in range(4)]
    window = make_window(services)
    window.open_conversation(convs[0].id)
    window.pane.composer.setPlainText("kept")
    for conv in convs[1:]:
        window.open_conversation(conv.id)
    assert len(window.panes) <= 3  # the shown one, one idle one, the new chat
    window.open_conversation(convs[0].id)
    assert window.pane.composer.toPlainText() == "kept"


def test_once_a_new_chat_is_stored_the_next_one_is_made_ahead_and_picking_an_agent_shows_it(
    qtbot: Any, services: Any, make_window: Any, tickers: tuple[Agent, Agent], monkeypatch: Any
) -> None:
    """Building a pane holds the window 8-12 ms; the next new chat's is made ahead, so a click
    on an agent (or New chat) only re-aims it."""
    from desktop.ui.shell import pane_stack

    monkeypatch.setattr(pane_stack, "SPARE_AFTER_MS", 50)
    a, b = tickers
    window = make_window(services)
    window.select_agent(a.id)
    first = window.pane
    _type_and_send(qtbot, first, "Hello")
    qtbot.waitUntil(lambda: first.conversation_id is not None, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: window.pane_stack.new_pane is not None, timeout=5000)
    spare = window.pane_stack.new_pane
    assert spare is not first and window.pane is first  # made hidden, the reply still shown
    built: list[Any] = []
    monkeypatch.setattr(window.pane_stack, "_make_pane", lambda *args: built.append(args))
    window.select_agent(b.id)
    assert window.pane is spare and built == []  # shown, not built
    assert spare.agent == b and spare.conversation_id is None
    assert first.busy  # the first conversation's reply goes on
    qtbot.waitUntil(lambda: not first.busy, timeout=TIMEOUT_MS)


def test_opening_a_conversation_takes_over_the_untouched_new_chat_and_keeps_a_typed_one(
    qtbot: Any, services: Any, make_window: Any, tickers: tuple[Agent, Agent], monkeypatch: Any
) -> None:
    """A click on a stored conversation shows it in the new chat's pane while nothing was typed
    there (no pane is built); a new chat with a draft stays as it was."""
    from desktop.ui.shell import pane_stack

    monkeypatch.setattr(pane_stack, "SPARE_AFTER_MS", 50)
    a, b = tickers
    one = services.conversations.create(a.id, "One")
    services.conversations.add_message(one.id, "user", "first question")
    two = services.conversations.create(b.id, "Two")
    services.conversations.add_message(two.id, "user", "second question")
    window = make_window(services)
    fresh = window.pane
    assert fresh.conversation_id is None
    window.open_conversation(one.id)
    assert window.pane is fresh and fresh.conversation_id == one.id  # taken over, not built
    assert fresh.agent == a
    assert (
        "first question"
        in fresh.transcript.bubble(services.conversations.messages(one.id)[0].id).text
    )

    qtbot.waitUntil(lambda: window.pane_stack.new_pane is not None, timeout=5000)
    window.new_chat()
    typed = window.pane
    assert typed is not fresh and typed.conversation_id is None and typed.agent == a
    typed.composer.setPlainText("a draft")
    window.open_conversation(two.id)
    assert window.pane is not typed and window.pane.conversation_id == two.id
    window.new_chat()
    assert window.pane is typed and typed.composer.toPlainText() == "a draft"  # kept


def test_regenerate_with_another_agent_is_explicit_and_the_reply_names_it(
    qtbot: Any, services: Any, make_window: Any, tickers: tuple[Agent, Agent]
) -> None:
    a, b = tickers
    _window, pane = _answered_chat(qtbot, services, make_window, a)
    first_reply = _messages(services, pane.conversation_id)[-1]
    shown: list[Any] = []
    pane.regenerate_with = lambda message_id, at=None: shown.append(message_id)  # no popup
    button = pane.transcript.bubble(first_reply.id).action_buttons["regenerate_with"]
    assert button.isVisible() and button.text() == "Regenerate with…"
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: shown == [first_reply.id])  # the reply's button asks which agent
    pane.presenter.regenerate(first_reply.id, agent=b)  # what choosing "Ticker B" there does
    qtbot.waitUntil(lambda: not pane.busy, timeout=TIMEOUT_MS)
    newest = _messages(services, pane.conversation_id)[-1]
    assert newest.id != first_reply.id and newest.agent_name == "Ticker B"
    assert pane.transcript.bubble(newest.id).label.text() == "Ticker B"
    assert pane.agent.name == "Ticker A"  # the conversation's agent did not change
    assert pane.composer.placeholderText() == "Message Ticker A…"

    menu = pane.regenerate_menu(newest.id)
    assert [action.text() for action in menu.actions()] == [STARTER, "Ticker A", "Ticker B"]
    next(x for x in menu.actions() if x.text() == "Ticker A").trigger()
    assert pane.busy
    qtbot.waitUntil(lambda: not pane.busy, timeout=TIMEOUT_MS)
    assert _messages(services, pane.conversation_id)[-1].agent_name == "Ticker A"
    menu.close()


def test_switch_agent_is_an_explicit_choice_shown_in_header_and_composer(
    qtbot: Any, services: Any, make_window: Any, tickers: tuple[Agent, Agent]
) -> None:
    a, b = tickers
    window, pane = _answered_chat(qtbot, services, make_window, a)
    pane._fill_agent_menu()
    choice = next(x for x in pane.agent_menu.actions() if x.text() == "Ticker B")
    assert next(x for x in pane.agent_menu.actions() if x.text() == "Ticker A").isChecked()
    choice.trigger()
    assert pane.header_title.text() == "Ticker B"
    assert pane.composer.placeholderText() == "Message Ticker B…"
    assert services.conversations.get(pane.conversation_id).agent_id == b.id
    assert window.agents.agent_list.currentItem().text() == "Ticker B"


@pytest.mark.slow
def test_two_local_conversations_at_once_the_second_queues_visibly_then_answers(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    starter = limit_starter(services, max_tokens=160)
    services.local.available_ram = lambda: 0  # stands in for no RAM free for a second worker
    window = make_window(services)
    _type_and_send(qtbot, window, "Write a long story about the sea.")
    first = window.pane
    window.new_chat()  # the first chat has a message: a new one opens
    second = window.pane
    assert second is not first and second.agent.id == starter.id
    _type_and_send(qtbot, window, "Tell me about the sky.")
    # with no room for a second llama.cpp worker, one chat is answered at a time: the other
    # waits, and says so (which one waits depends on which request reached the worker first)
    panes = (first, second)
    qtbot.waitUntil(lambda: any("queued" in p.presenter.status for p in panes), timeout=TIMEOUT_MS)
    waiting = next(p for p in panes if "queued" in p.presenter.status)
    assert all(p.busy for p in panes)
    assert "local model is answering another chat" in waiting.presenter.status
    if waiting is second:  # the shown one: the window's status line says it too
        assert "local model is answering another chat" in window.status_label.text()
    qtbot.waitUntil(lambda: not first.busy and not second.busy, timeout=120_000)
    for pane in (first, second):
        reply = _messages(services, pane.conversation_id)[-1]
        assert reply.status == "complete" and reply.content.strip()
    queued = services.db.execute(
        "SELECT queued_ms FROM inference_stats WHERE conversation_id = ?",
        [waiting.conversation_id],
    ).fetchone()[0]
    assert queued is not None and queued > 0


def test_a_new_agent_once_saved_answers_the_new_chat_named_in_header_and_composer(
    qtbot: Any, services: Any, make_window: Any, tickers: tuple[Agent, Agent]
) -> None:
    a, _b = tickers
    window = make_window(services)
    window.select_agent(a.id)
    _type_and_send(qtbot, window, "to A")  # the shown conversation is A's and streaming
    started = window.pane
    fresh = services.agents.create(
        Agent(name="Fresh", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="f")
    )
    window.agents._saved(fresh, chosen=True)  # what the editor's Save does for a new agent
    assert window.pane is not started and started.agent.name == "Ticker A" and started.busy
    assert window.pane.header_title.text() == "Fresh"
    assert window.pane.composer.placeholderText() == "Message Fresh…"
    assert window.current_agent.name == "Fresh"
    assert window.agents.agent_list.currentItem().text() == "Fresh"
    qtbot.waitUntil(lambda: not started.busy, timeout=TIMEOUT_MS)


def test_the_composer_says_before_sending_that_a_huge_paste_will_not_fit(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    limit_starter(services, max_tokens=48, n_ctx=2048)
    window = make_window(services)  # the starter agent: a 2,048-token context
    pane = window.pane
    pane.composer.setPlainText("lighthouse " * 20_000)  # ~200 KB
    qtbot.waitUntil(lambda: "will not fit" in pane.hint.text(), timeout=5_000)
    assert "holds 2,048" in pane.hint.text() and pane.hint.property("warn") is True
    assert pane.send_button.isEnabled()  # the person may still send and see the error
    pane.composer.setPlainText("Hi")
    qtbot.waitUntil(lambda: "Enter to send" in pane.hint.text(), timeout=5_000)
    assert pane.hint.property("warn") is False


def test_editing_or_deleting_an_agent_in_the_window_closes_its_kept_connection(
    qtbot: Any, services: Any, make_window: Any, tickers: tuple[Agent, Agent]
) -> None:
    a, b = tickers
    pool = services.chat.providers.clients
    window, _pane = _answered_chat(qtbot, services, make_window, a)
    assert len(pool) == 1  # the client is kept for the next turn
    window.agents._saved(services.agents.update(a.with_changes(temperature=0.3)), chosen=False)
    qtbot.waitUntil(lambda: len(pool) == 0, timeout=5_000)  # edited: a new client next time
    window.select_agent(b.id)
    _type_and_send(qtbot, window, "to B")
    qtbot.waitUntil(lambda: not window.pane.busy, timeout=TIMEOUT_MS)
    assert len(pool) == 1
    window.agents.highlight(window.agents.by_id(b.id))
    window.confirm = lambda _title, _text: True
    window.agents.delete_agent()
    qtbot.waitUntil(lambda: len(pool) == 0, timeout=5_000)
