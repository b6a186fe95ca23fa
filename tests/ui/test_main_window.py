"""The main window against real services: the real starter model, a real SQLite file."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from desktop.store.agents import Agent
from tests.helpers.servers import closed_port
from tests.ui.conftest import STARTER, limit_starter

REPLY_TIMEOUT_MS = 60_000
# asked with room for 400 tokens: still streaming when Stop is pressed or the window closes
LONG_STORY = "Write a long story about a lighthouse keeper and the sea."
LONG_POEM = "Write a long poem about mountains, rivers and the wind."


def _assistant(services: Any, window: Any) -> Any:
    messages = services.conversations.messages(window.conversation_id)
    assert messages and messages[-1].role == "assistant"
    return messages[-1]


def _stats_rows(services: Any, message_id: int) -> list[tuple[Any, ...]]:
    return list(
        services.db.execute(
            "SELECT ttft_ms, output_tokens, finish_reason FROM inference_stats "
            "WHERE message_id = ?",
            [message_id],
        ).fetchall()
    )


def _send(qtbot: Any, window: Any, text: str) -> None:
    window.pane.composer.setPlainText(text)
    qtbot.keyClick(window.pane.composer, Qt.Key.Key_Return)


def _streaming_reply(qtbot: Any, window: Any, services: Any, prompt: str) -> tuple[int, Any]:
    """Ask the starter model for up to 400 tokens and wait until the reply's first words
    show: returns the reply's id and its bubble, still streaming."""
    limit_starter(services, max_tokens=400)
    window.reload_agents()
    _send(qtbot, window, prompt)
    reply_id = window.pane.presenter.turn.assistant_message_id
    bubble = window.pane.transcript.bubble(reply_id)
    qtbot.waitUntil(lambda: bubble.text not in ("", "…"), timeout=REPLY_TIMEOUT_MS)
    return reply_id, bubble


def test_window_opens_with_the_starter_agent_selected_and_a_new_chat_ready(
    window: Any, services: Any
) -> None:
    assert window.current_agent is not None
    assert window.current_agent.name == STARTER
    assert window.agents.agent_list.currentItem().text() == STARTER
    assert window.conversation_id is None  # stored on the first message
    assert window.pane.composer.placeholderText() == f"Message {STARTER}…"
    assert window.pane.send_button.text() == "Send"
    assert not window.pane.send_button.isEnabled()  # nothing typed yet
    assert window.pane.header_title.text() == STARTER
    assert window.pane.transcript.bubbles() == []


@pytest.mark.slow
def test_enter_streams_a_reply_from_the_starter_model_and_records_stats(
    qtbot: Any, window: Any, services: Any
) -> None:
    qtbot.keyClicks(window.pane.composer, "Say hello.")
    qtbot.keyClick(window.pane.composer, Qt.Key.Key_Return)
    assert window.pane.presenter.busy
    assert window.pane.composer.toPlainText() == ""
    qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=REPLY_TIMEOUT_MS)

    reply = _assistant(services, window)
    assert reply.status == "complete"
    assert reply.content.strip()
    bubble = window.pane.transcript.bubble(reply.id)
    assert bubble is not None and bubble.text.strip()
    assert bubble.is_markdown  # rendered once finished, plain text while streaming
    rows = _stats_rows(services, reply.id)
    assert len(rows) == 1
    ttft_ms, output_tokens, finish = rows[0]
    assert finish in ("stop", "length")
    assert ttft_ms is not None and ttft_ms > 0
    assert output_tokens and output_tokens > 0
    assert "TTFT" in bubble.footer.text() and not bubble.footer.isHidden()
    assert "ttft_ms" in bubble.footer.toolTip()
    assert "TTFT" in window.status_label.text()
    # the conversation is listed, titled after the first message
    assert window.browser.conversation_list.count() == 1
    assert window.browser.conversation_list.item(0).text() == "Say hello."


def test_shift_enter_inserts_a_newline_and_does_not_send(
    qtbot: Any, window: Any, services: Any
) -> None:
    qtbot.keyClicks(window.pane.composer, "first line")
    qtbot.keyClick(window.pane.composer, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClicks(window.pane.composer, "second line")
    assert window.pane.composer.toPlainText() == "first line\nsecond line"
    assert not window.pane.presenter.busy
    assert window.conversation_id is None
    assert services.conversations.list() == []


@pytest.mark.slow
def test_stop_keeps_partial_text_and_marks_message_cancelled(
    qtbot: Any, window: Any, services: Any
) -> None:
    reply_id, bubble = _streaming_reply(qtbot, window, services, LONG_STORY)
    assert window.pane.send_button.text() == "Stop"
    assert window.pane.presenter.busy, "the reply finished before Stop could be pressed"
    qtbot.mouseClick(window.pane.send_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=30_000)

    assert window.pane.send_button.text() == "Send"
    reply = services.conversations.message(reply_id)
    assert reply.status == "cancelled"
    assert reply.content.strip()
    assert bubble.text.strip()
    assert not bubble.stopped.isHidden()
    assert _stats_rows(services, reply_id)[0][2] == "cancelled"


@pytest.mark.slow
def test_closing_the_window_mid_stream_keeps_the_partial_text_as_cancelled(
    qtbot: Any, window: Any, services: Any
) -> None:
    reply_id, _ = _streaming_reply(qtbot, window, services, LONG_POEM)
    assert window.pane.presenter.busy
    closed: list[bool] = []
    window.closed.connect(lambda: closed.append(True))
    window.close()
    assert closed == [True]
    qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=30_000)
    reply = services.conversations.message(reply_id)
    assert reply.status == "cancelled"
    assert reply.content.strip()
    assert services.prefs.get("ui.window_geometry")


def test_provider_error_shows_on_the_message_with_retry_and_window_stays_usable(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    nowhere = f"http://127.0.0.1:{closed_port()}/v1"  # nothing listens there
    broken = services.agents.create(
        Agent(name="Closed port", kind="openai-compatible", base_url=nowhere, model="test-model")
    )
    window = make_window(services)
    window.select_agent(broken.id)
    assert window.current_agent.name == "Closed port"
    _send(qtbot, window, "Hello?")
    qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=30_000)

    reply = _assistant(services, window)
    assert reply.status == "error"
    assert reply.error_text
    assert reply.content == ""  # the error is never pasted into the reply text
    bubble = window.pane.transcript.bubble(reply.id)
    assert not bubble.error_box.isHidden()
    assert bubble.error_text.text() == reply.error_text
    assert not bubble.retry_button.isHidden()
    assert bubble.body.isHidden()

    qtbot.mouseClick(bubble.retry_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.pane.transcript.bubble(reply.id) is None)  # (a queued action)
    qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=30_000)
    assert window.pane.transcript.bubble(reply.id) is None  # replaced by the new attempt
    retried = _assistant(services, window)
    assert retried.id != reply.id and retried.status == "error"
    assert not window.pane.transcript.bubble(retried.id).error_box.isHidden()
    assert [m.role for m in services.conversations.messages(window.conversation_id)] == [
        "user",
        "assistant",
    ]

    # still usable: typing works and Send is enabled again
    qtbot.keyClicks(window.pane.composer, "still here")
    assert window.pane.send_button.isEnabled() and window.pane.send_button.text() == "Send"
    assert "failed" in window.status_label.text()


def test_a_1mb_paste_into_the_composer_completes_with_all_text(
    qtbot: Any, window: Any, qapp: QApplication
) -> None:
    big = ("lorem ipsum dolor sit amet " * 4 + "\n") * 9_346  # ~1 MB, many lines
    assert len(big) > 1_000_000
    qapp.clipboard().setText(big)
    window.pane.composer.setFocus()
    window.pane.composer.paste()
    qapp.processEvents()
    assert len(window.pane.composer.toPlainText()) == len(big)
    assert window.pane.send_button.isEnabled()


def test_a_1mb_message_is_shown_truncated_in_its_bubble(window: Any, services: Any) -> None:
    from desktop.ui.kit.text_format import DISPLAY_LIMIT

    agent = window.current_agent
    conv = services.conversations.create(agent.id, "Big")
    text = "x" * 1_000_000
    message = services.conversations.add_message(conv.id, "user", text)
    window.open_conversation(conv.id)
    shown = window.pane.transcript.bubble(message.id).text
    assert shown.startswith("x" * DISPLAY_LIMIT)
    assert f"({1_000_000 - DISPLAY_LIMIT:,} more characters)" in shown
    assert len(shown) < DISPLAY_LIMIT + 100


def test_window_geometry_and_splitter_are_restored_from_prefs(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    first = make_window(services)
    first.resize(760, 540)
    first.splitter.setSizes([333, 427])
    qtbot.waitUntil(lambda: first.splitter.sizes()[0] == 333)
    first.close()
    assert services.prefs.get("ui.splitter_state")

    second = make_window(services)
    assert (second.width(), second.height()) == (760, 540)
    assert second.splitter.sizes()[0] == 333


def test_the_frame_shows_before_the_data_and_opening_it_moves_nothing(
    qtbot: Any, qloop: Any, services: Any, make_window: Any
) -> None:
    """The app paints the window's frame (from the saved preferences alone) before it opens
    the store; ``open`` then fills it. Nothing the person already sees jumps: the size, the
    split, the menus and the sidebar's title stay where they were."""
    from desktop.ui.shell.main_window import MainWindow

    first = make_window(services)
    first.resize(760, 540)
    first.splitter.setSizes([310, 450])
    qtbot.waitUntil(lambda: first.splitter.sizes()[0] == 310)
    first.close()

    frame = MainWindow(prefs=services.prefs)
    qtbot.addWidget(frame)
    frame.show()
    qtbot.waitExposed(frame)
    assert not frame.opened
    menus = [action.text() for action in frame.menuBar().actions()]
    assert menus == ["&File", "&Conversation", "&View", "&Help"]
    assert frame.new_chat_button.isVisible()
    before = (frame.size(), frame.splitter.sizes(), frame.new_chat_button.geometry())
    assert (before[0].width(), before[1][0]) == (760, 310)

    frame.open(services)
    qtbot.waitUntil(lambda: frame.agents.isVisible() and frame.pane.isVisible())
    assert (frame.size(), frame.splitter.sizes(), frame.new_chat_button.geometry()) == before
    assert frame.current_agent is not None
    assert frame.agents.agent_list.count() == len(services.agents.list())
    assert frame.pane.agent == frame.current_agent
    frame.close()


def test_the_app_goes_on_as_soon_as_the_frame_has_painted(qtbot: Any, services: Any) -> None:
    """``paint_now`` waits for the frame's own first paint (a filter on the window, not the
    application's), not for its time limit: the store opens right after the person sees it."""
    import time

    from desktop.app import paint_now
    from desktop.ui.shell.main_window import MainWindow

    frame = MainWindow(prefs=services.prefs)
    qtbot.addWidget(frame)
    started = time.monotonic()
    paint_now(frame, timeout_ms=20_000)
    assert time.monotonic() - started < 10
    assert frame.isVisible()
    frame.close()


def test_closing_the_frame_before_the_store_opens_ends_cleanly(
    qtbot: Any, qloop: Any, services: Any
) -> None:
    """A person who closes the window while the app still asks about a damaged database (the
    frame is up, the store is not open) gets a clean exit: ``closed`` fires, nothing waits."""
    from desktop.ui.shell.main_window import MainWindow

    frame = MainWindow(prefs=services.prefs)
    qtbot.addWidget(frame)
    frame.show()
    qtbot.waitExposed(frame)
    with qtbot.waitSignal(frame.closed, timeout=2000):
        frame.close()
    assert not frame.busy
    qloop.run_until_complete(frame.wait_idle())


def test_conversations_of_all_agents_are_listed_newest_first_and_open_on_select(
    qtbot: Any, window: Any, services: Any
) -> None:
    starter = window.current_agent
    other = services.agents.create(
        Agent(name="Remote", kind="openai", model="gpt-4o-mini", base_url=None)
    )
    old = services.conversations.create(starter.id, "Older chat")
    services.conversations.add_message(old.id, "user", "hi")
    new = services.conversations.create(other.id, "Newer chat")
    services.conversations.add_message(new.id, "user", "hello")
    window.reload_agents()
    window.browser.reload(current=window.conversation_id)
    titles = [window.browser.conversation_list.item(i).text() for i in range(2)]
    assert titles == ["Newer chat", "Older chat"]
    window.browser.conversation_list.setCurrentRow(1)
    assert window.conversation_id == old.id
    assert window.current_agent.id == starter.id
    window.browser.conversation_list.setCurrentRow(0)
    assert window.conversation_id == new.id
    assert window.current_agent.name == "Remote"
    assert "Remote" in window.browser.conversation_list.item(0).data(Qt.ItemDataRole.UserRole + 1)
    window.new_chat()
    assert window.conversation_id is None and window.pane.transcript.bubbles() == []


def test_delete_agent_asks_first_and_clone_copies(
    qtbot: Any, window: Any, services: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers: list[bool] = [False, True]
    monkeypatch.setattr(window, "confirm", lambda _title, _text: answers.pop(0))
    window.agents.clone_agent()
    assert window.current_agent.name == f"{STARTER} (copy)"
    window.agents.delete_agent()  # answered "Cancel"
    assert services.agents.by_name(f"{STARTER} (copy)") is not None
    window.agents.delete_agent()  # answered "Yes"
    assert services.agents.by_name(f"{STARTER} (copy)") is None
    assert window.current_agent is not None
    assert window.agents.agent_list.count() == 1


@pytest.mark.slow
def test_sending_a_1mb_message_shows_it_cut_and_a_context_error_on_the_reply(
    qtbot: Any, window: Any, services: Any
) -> None:
    big = ("lorem ipsum dolor sit amet " * 4 + "\n") * 9_346
    window.pane.composer.setPlainText(big)
    qtbot.keyClick(window.pane.composer, Qt.Key.Key_Return)
    user_id = window.pane.presenter.turn.user_message_id
    qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=REPLY_TIMEOUT_MS)
    assert services.conversations.message(user_id).content == big  # stored whole
    shown = window.pane.transcript.bubble(user_id).text
    assert len(shown) < 20_100 and "more characters)" in shown
    reply = _assistant(services, window)
    assert reply.status == "error" and reply.error_text
    assert not window.pane.transcript.bubble(reply.id).error_box.isHidden()


def test_a_message_on_the_status_line_is_not_covered_by_the_same_idle_status_again(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    """The model header read in the background refreshes the pane's header; its idle status,
    unchanged, does not replace what the window said meanwhile (an export's error, say)."""
    from PySide6.QtWidgets import QLabel

    conv = services.conversations.create(services.agents.list()[0].id, "Kept")
    services.conversations.add_message(conv.id, "user", "hi")
    window = make_window(services)
    window.open_conversation(conv.id)
    window._say("Could not export: the disk is full.")
    window.pane.refresh_header()  # what the background read does when it ends
    qtbot.wait(300)
    assert QLabel.text(window.status_label) == "Could not export: the disk is full."
