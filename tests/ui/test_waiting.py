"""Before the first token a reply says what it waits for, and Stop works throughout.

The server is FaultServer on loopback: headers, then silence (standing in for a busy GPU box
in a long prefill, which no test can reach offline)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from desktop.store.agents import Agent
from tests.helpers.fault_server import FaultServer, Reply
from tests.ui.test_panes import TIMEOUT_MS, _messages, _type_and_send


def test_a_reply_waiting_for_its_first_token_says_so_with_the_time_and_stop_works(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    # A server that answers with headers and then says nothing: a long prefill on a busy box.
    with FaultServer(Reply(body=b"", after="stall")) as server:
        agent = services.agents.create(
            Agent(name="Busy box", kind="openai-compatible", base_url=server.url + "/v1", model="m")
        )
        window = make_window(services)
        window.select_agent(agent.id)
        _type_and_send(qtbot, window, "Hello?")
        pane = window.pane
        reply_id = pane.presenter.turn.assistant_message_id
        bubble = pane.transcript.bubble(reply_id)
        qtbot.waitUntil(
            lambda: "waiting for the first token · 1 s" in bubble.waiting.text(), timeout=TIMEOUT_MS
        )
        assert bubble.waiting.isVisible()
        assert "Busy box · waiting for the first token" in window.status_label.text()
        qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)  # Stop
        qtbot.waitUntil(lambda: not pane.busy, timeout=TIMEOUT_MS)
        assert not bubble.waiting.isVisible()
        assert _messages(services, pane.conversation_id)[-1].status == "cancelled"
