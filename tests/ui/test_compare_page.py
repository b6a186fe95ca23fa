"""The Compare page in the main window: its two tabs, "Continue with this one" opening the
column's conversation as an ordinary chat, and closing the window while a comparison streams
(the window waits for every column's reply to be stored, partial text kept).

The remote agents talk to FaultServer on loopback (an OpenAI-compatible server streaming
chunks at a fixed rate), standing in for a hosted API no test can reach.
"""

from __future__ import annotations

import asyncio
from typing import Any

from desktop.ui.compare.page import ComparePage
from desktop.ui.compare.runs_view import RunsView
from tests.ui.test_compare_view import TIMEOUT_MS, _remote, _ticker


def test_the_compare_page_holds_side_by_side_and_prompt_sets(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    window = make_window(services)
    window.show_page("compare")
    page = window.compare_page
    assert isinstance(page, ComparePage) and window.current_page == "compare"
    assert [page.tabText(i) for i in range(page.count())] == ["Side by side", "Prompt sets"]
    assert page.currentWidget() is page.compare and not window.busy
    # "Prompt sets" is built when first chosen (with it, the page's build held the window
    # 20 ms in one turn), in its place, with its tooltip
    assert page._runs is None
    page.setCurrentIndex(1)
    runs = page._runs
    assert isinstance(runs, RunsView) and page.currentWidget() is runs and runs.isVisible()
    assert page.tabText(1) == "Prompt sets" and "prompts" in page.tabToolTip(1)
    assert page.runs is runs and not window.busy


def test_continue_with_this_one_opens_the_column_as_a_chat(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    with _ticker(count=8) as one, _ticker(count=8) as two:
        left = _remote(services, "Left", one)
        right = _remote(services, "Right", two)
        window = make_window(services)
        window.show_page("compare")
        view = window.compare_page.compare
        view.set_agents([left, right])
        assert view.send("Name three rivers.")
        assert window.busy  # the window knows a comparison streams
        qtbot.waitUntil(lambda: not view.busy, timeout=TIMEOUT_MS)
        column = view.columns[1]
        conversation = column.pane.conversation_id
        assert conversation is not None
        view.continue_requested.emit(conversation)
        assert window.current_page == "chat"
        assert window.conversation_id == conversation
        replies = [b for b in window.pane.transcript.bubbles() if b.role == "assistant"]
        assert replies and replies[-1].message.agent_name == column.agent.name


def test_closing_the_window_stores_what_every_column_streamed(
    qtbot: Any, services: Any, make_window: Any, qloop: Any
) -> None:
    with _ticker(count=400, delay=0.05) as one, _ticker(count=400, delay=0.05) as two:
        left = _remote(services, "Slow left", one)
        right = _remote(services, "Slow right", two)
        window = make_window(services)
        view = window.compare_page.compare
        view.set_agents([left, right])
        assert view.send("Count slowly.")
        qtbot.waitUntil(
            lambda: all(c.pane.presenter.streamed_text for c in view.columns), timeout=TIMEOUT_MS
        )
        window.close()
        qloop.run_until_complete(asyncio.wait_for(window.wait_idle(), 30))
        for column in view.columns:
            stored = services.conversations.messages(column.pane.conversation_id)
            reply = stored[-1]
            assert reply.status == "cancelled" and reply.content  # partial text kept


def test_showing_the_compare_page_puts_the_keyboard_in_its_composer(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    window = make_window(services)
    window.activateWindow()
    window.show_page("compare")
    qtbot.waitUntil(lambda: window.compare_page.compare.composer.hasFocus(), timeout=5_000)
