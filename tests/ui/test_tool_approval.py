"""Tool calls in the conversation pane, as a person meets them: the approval card (tool,
server, the arguments as indented JSON, Allow once / Always allow / Deny), the result folded
with its size and duration and shown as plain text when unfolded, denials and tool errors,
Stop while a call waits, and the cards of a stored reply when its conversation is reopened.

Real widgets offscreen on the qasync loop, a real agentic turn: a loopback ``FaultServer``
replaying ``tool_reply`` streams stands in for an OpenAI-compatible model that calls tools
(no real one can be reached offline), and the tools are the real MCP test server written with
the SDK (``tests/helpers/mcp_server.py``, over stdio), in a real SQLite file.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QApplication

from desktop.chat.tool_loop import DENIED_TEXT
from desktop.ui.conversation.pane import ConversationPane
from desktop.ui.conversation.tool_cards import ToolCard
from desktop.ui.kit import theme
from tests.helpers.fault_server import FaultServer, Reply
from tests.helpers.tool_server import Call, tool_reply
from tests.helpers.tool_turns import add_mcp_server, tool_agent

TIMEOUT_MS = 30_000
MARKUP = "<b>hi</b> & co"


def answer(text: str) -> Reply:
    return tool_reply("openai", [], text=text)


def call(name: str, arguments: dict[str, Any], text: str = "", cid: str = "c1") -> Reply:
    return tool_reply("openai", [Call(cid, name, json.dumps(arguments))], text=text)


PANES: list[Any] = []


@pytest.fixture
def mcp(services: Any, qloop: Any, qtbot: Any) -> Iterator[Any]:
    """Services with the SDK test server added; after the test every pane's reply is
    stopped and the server's process is stopped."""
    add_mcp_server(services)
    yield services
    for pane in PANES:
        pane.presenter.stop()
        qtbot.waitUntil(lambda p=pane: not p.busy, timeout=TIMEOUT_MS)
    PANES.clear()
    done = asyncio.ensure_future(services.aclose())
    qtbot.waitUntil(done.done, timeout=TIMEOUT_MS)


def open_pane(qtbot: Any, services: Any, agent: Any, conversation_id: int | None = None) -> Any:
    pane = ConversationPane(services, agent, conversation_id)
    PANES.append(pane)
    qtbot.addWidget(pane)
    pane.resize(1000, 760)
    pane.show()
    qtbot.waitExposed(pane)
    if conversation_id is not None:
        pane.show_path()
    return pane


def send(qtbot: Any, pane: Any, text: str) -> int:
    """Type and press Enter; the reply's message id."""
    pane.composer.setFocus()
    pane.composer.setPlainText(text)
    qtbot.keyClick(pane.composer, Qt.Key.Key_Return)
    assert pane.busy
    return pane.presenter.turn.assistant_message_id


def ask_in_a_pane(qtbot: Any, mcp: Any, server: FaultServer, prompt: str) -> tuple[Any, int]:
    """A pane on a new agent of ``server`` (allowed the MCP test server's tools) in which
    ``prompt`` was just sent: the pane and its reply's message id."""
    pane = open_pane(qtbot, mcp, tool_agent(mcp, server.url + "/v1"))
    return pane, send(qtbot, pane, prompt)


def cards(pane: Any, reply_id: int) -> list[ToolCard]:
    bubble = pane.transcript.bubble(reply_id)
    steps = bubble.__dict__.get("tool_steps") if bubble is not None else None
    return steps.ordered() if steps is not None else []


def waiting_card(qtbot: Any, pane: Any, reply_id: int, index: int = 0) -> ToolCard:
    qtbot.waitUntil(
        lambda: len(cards(pane, reply_id)) > index and cards(pane, reply_id)[index].waiting,
        timeout=TIMEOUT_MS,
    )
    return cards(pane, reply_id)[index]


def finish(qtbot: Any, pane: Any) -> None:
    qtbot.waitUntil(lambda: not pane.busy, timeout=TIMEOUT_MS)


def test_the_card_asks_with_the_arguments_and_allow_once_shows_the_result_as_text(
    qtbot: Any, mcp: Any
) -> None:
    replies = [call("echo", {"text": MARKUP}, text="Let me echo that."), answer("Echoed.")]
    with FaultServer(replies) as server:
        pane, reply_id = ask_in_a_pane(qtbot, mcp, server, "echo it")
        card = waiting_card(qtbot, pane, reply_id)

        # what will run: the tool, its server, its arguments as indented JSON, the answers
        assert card.title.text() == "echo · tools"
        assert card.status_words == "Waiting for your approval"
        assert pane.presenter.status == "Tooly · waiting for your approval to run echo"
        shown = card.arguments.toPlainText()
        assert json.loads(shown) == {"text": MARKUP} and '\n  "text"' in shown
        assert card.arguments.isReadOnly() and not card.arguments.isHidden()
        assert [b.text() for b in card.buttons.values()] == [
            "Allow once",
            "Always allow for Tooly",
            "Deny",
        ]
        assert "for this agent only" in card.buttons["always"].toolTip()
        assert "Settings → Tools" in card.buttons["always"].toolTip()
        # the text before the call is on screen above nothing yet: the card sits above it
        bubble = pane.transcript.bubble(reply_id)
        assert "Let me echo that." in bubble.text
        layout = bubble.layout()
        assert layout.indexOf(bubble.tool_steps) < layout.indexOf(bubble.body_box)
        # Allow once has the keyboard focus: Space answers it
        once = card.buttons["once"]
        qtbot.waitUntil(lambda: QApplication.focusWidget() is once, timeout=TIMEOUT_MS)
        qtbot.keyClick(once, Qt.Key.Key_Space)
        assert not card.waiting  # the answers go at once
        finish(qtbot, pane)
        second = server.requests[1].json()

    (result,) = [m for m in second["messages"] if m["role"] == "tool"]
    assert result["content"] == MARKUP
    assert "Let me echo that." in bubble.text and "Echoed." in bubble.text
    # collapsed: size and duration in words, nothing unfolded
    words = card.status_words
    assert words.startswith("Done · 14 chars · ") and words.endswith(" ms"), words
    assert card.toggle.text() == "Show result" and not card.expanded
    assert card.__dict__.get("result") is None or card.result.isHidden()
    # unfolded: the result's characters, literally (never rendered as HTML), and the arguments
    qtbot.mouseClick(card.toggle, Qt.MouseButton.LeftButton)
    assert card.expanded and card.toggle.text() == "Hide result"
    assert card.result.isVisible() and card.result.isReadOnly()
    assert card.result.toPlainText() == MARKUP
    assert json.loads(card.details_arguments.toPlainText()) == {"text": MARKUP}
    # the turn's two model calls went to the footer, for the timeline
    assert [c["call_index"] for c in bubble.footer.calls] == [1, 2]
    assert [s.tool for s in bubble.footer.steps] == ["echo"]


def test_a_card_does_not_take_the_focus_from_someone_typing(qtbot: Any, mcp: Any) -> None:
    """A space typed next would press Allow once: the focus stays in the composer."""
    with FaultServer([call("echo", {"text": "x"}), answer("Done.")]) as server:
        pane, reply_id = ask_in_a_pane(qtbot, mcp, server, "echo it")
        pane.composer.setFocus()
        pane.composer.setPlainText("and then")  # typed before the card came
        pane.composer.moveCursor(QTextCursor.MoveOperation.End)
        card = waiting_card(qtbot, pane, reply_id)
        qtbot.wait(50)
        assert QApplication.focusWidget() is pane.composer
        qtbot.keyClick(pane.composer, Qt.Key.Key_Space)
        assert card.waiting and pane.composer.toPlainText() == "and then "
        card.buttons["deny"].click()
        finish(qtbot, pane)


def test_deny_says_denied_and_the_model_is_told(qtbot: Any, mcp: Any) -> None:
    with FaultServer([call("echo", {"text": "secret"}), answer("OK, I won't.")]) as server:
        pane, reply_id = ask_in_a_pane(qtbot, mcp, server, "echo it")
        card = waiting_card(qtbot, pane, reply_id)
        qtbot.mouseClick(card.buttons["deny"], Qt.MouseButton.LeftButton)
        finish(qtbot, pane)
        (result,) = [m for m in server.requests[1].json()["messages"] if m["role"] == "tool"]
    assert result["content"] == DENIED_TEXT
    assert card.status_words == "Denied" and not card.waiting
    (step,) = mcp.tools.steps.for_message(reply_id)
    assert (step.status, step.approval) == ("denied", "denied")


def test_always_allow_is_granted_to_that_agent_and_the_next_call_is_not_asked(
    qtbot: Any, mcp: Any
) -> None:
    replies = [call("add", {"a": 1, "b": 1}), answer("2")]
    replies += [call("add", {"a": 2, "b": 2}), answer("4")]
    with FaultServer(replies) as server:
        agent = tool_agent(mcp, server.url + "/v1")
        pane = open_pane(qtbot, mcp, agent)
        asked: list[int] = []
        pane.presenter.approval_requested.connect(lambda reply, _request: asked.append(reply))
        first = send(qtbot, pane, "1+1")
        card = waiting_card(qtbot, pane, first)
        qtbot.mouseClick(card.buttons["always"], Qt.MouseButton.LeftButton)
        finish(qtbot, pane)
        (grant,) = mcp.tools.tools.grants(agent.id)
        assert (grant.server, grant.tool) == ("tools", "add")

        second = send(qtbot, pane, "2+2")
        finish(qtbot, pane)
    assert asked == [first]  # the second call ran without asking
    (again,) = cards(pane, second)
    assert again.status_words.startswith("Done · 1 char · ")
    assert mcp.tools.steps.for_message(second)[0].approval == "granted"


def test_stop_while_a_call_waits_stops_the_call_and_the_reply(qtbot: Any, mcp: Any) -> None:
    with FaultServer([call("echo", {"text": "never"}, text="About to echo.")]) as server:
        pane, reply_id = ask_in_a_pane(qtbot, mcp, server, "echo it")
        card = waiting_card(qtbot, pane, reply_id)
        qtbot.mouseClick(pane.send_button, Qt.MouseButton.LeftButton)  # Stop
        finish(qtbot, pane)
        assert len(server.requests) == 1
    assert card.status_words == "Stopped" and not card.waiting
    bubble = pane.transcript.bubble(reply_id)
    assert bubble.status == "cancelled" and bubble.stopped.isVisible()
    assert mcp.conversations.message(reply_id).status == "cancelled"
    assert mcp.tools.steps.for_message(reply_id)[0].status == "cancelled"
    assert pane.presenter.approvals.waiting == []


def test_a_tool_error_shows_in_the_error_colour_without_unfolding(qtbot: Any, mcp: Any) -> None:
    replies = [call("fail", {"message": "disk is full"}), answer("The tool failed.")]
    with FaultServer(replies) as server:
        pane, reply_id = ask_in_a_pane(qtbot, mcp, server, "try it")
        card = waiting_card(qtbot, pane, reply_id)
        card.buttons["once"].click()
        finish(qtbot, pane)
        (result,) = [m for m in server.requests[1].json()["messages"] if m["role"] == "tool"]
    assert "disk is full" in result["content"]
    assert card.status_words.startswith("Tool error · ") and "disk is full" in card.status_words
    assert card.status.isVisible() and not card.expanded
    colour = card.status.palette().color(card.status.foregroundRole()).name()
    assert colour == theme.LIGHT.error_text
    card.set_expanded(True)
    assert card.result_label.text() == "Error" and "disk is full" in card.result.toPlainText()


def test_two_conversations_wait_at_once_and_each_answer_goes_to_its_own(
    qtbot: Any, mcp: Any
) -> None:
    with (
        FaultServer([call("echo", {"text": "left"}), answer("L")]) as one,
        FaultServer([call("echo", {"text": "right"}), answer("R")]) as two,
    ):
        left_agent = tool_agent(mcp, one.url + "/v1", name="Lefty")
        right_agent = tool_agent(mcp, two.url + "/v1", name="Righty")
        left, right = open_pane(qtbot, mcp, left_agent), open_pane(qtbot, mcp, right_agent)
        left_id, right_id = send(qtbot, left, "echo"), send(qtbot, right, "echo")
        left_card = waiting_card(qtbot, left, left_id)
        right_card = waiting_card(qtbot, right, right_id)
        qtbot.mouseClick(right_card.buttons["deny"], Qt.MouseButton.LeftButton)
        finish(qtbot, right)
        assert left.busy and left_card.waiting  # still waiting for its own answer
        qtbot.mouseClick(left_card.buttons["once"], Qt.MouseButton.LeftButton)
        finish(qtbot, left)
    assert right_card.status_words == "Denied"
    assert left_card.status_words.startswith("Done · 4 chars")


def test_reopening_the_conversation_shows_the_stored_cards_folded(qtbot: Any, mcp: Any) -> None:
    replies = [call("echo", {"text": MARKUP}), answer("Echoed.")]
    with FaultServer(replies) as server:
        pane, reply_id = ask_in_a_pane(qtbot, mcp, server, "echo it")
        waiting_card(qtbot, pane, reply_id).buttons["once"].click()
        finish(qtbot, pane)
    conversation_id = pane.conversation_id

    queries: list[str] = []
    mcp.db.conn.set_trace_callback(queries.append)
    try:
        again = open_pane(qtbot, mcp, pane.agent, conversation_id)
    finally:
        mcp.db.conn.set_trace_callback(None)
    (card,) = cards(again, reply_id)
    assert card.title.text() == "echo · tools" and not card.expanded and not card.waiting
    assert card.status_words.startswith("Done · 14 chars · ")
    card.set_expanded(True)
    assert card.result.toPlainText() == MARKUP
    footer = again.transcript.bubble(reply_id).footer
    assert [c["call_index"] for c in footer.calls] == [1, 2]
    # loading stays cheap: one query for the tool calls, one for the stats rows
    assert sum("FROM tool_steps" in q for q in queries) == 1
    assert sum("FROM inference_stats" in q for q in queries) == 1


def test_a_result_over_the_limit_says_it_was_cut(qtbot: Any, mcp: Any) -> None:
    with FaultServer([call("big", {"n": 120_000}), answer("That was long.")]) as server:
        pane, reply_id = ask_in_a_pane(qtbot, mcp, server, "make it big")
        card = waiting_card(qtbot, pane, reply_id)
        card.buttons["once"].click()
        finish(qtbot, pane)
    assert card.step.truncated
    assert card.status_words.startswith("Done · 120,000 chars, cut · ")
    card.set_expanded(True)
    assert card.cut_note.isVisible() and "120,000 characters" in card.cut_note.text()
    assert len(card.result.toPlainText()) < 120_000
