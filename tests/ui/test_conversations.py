"""Conversation features in the real window: versions, branches, list, search, rendering.

Real parts throughout: the starter model through the llama.cpp worker, a SQLite file, Qt
widgets offscreen.
"""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from desktop.ui.conversation.paging import BATCH, FIRST_SCREEN, MAX_LOADED, PAGE
from tests.ui.conftest import limit_starter

REPLY_TIMEOUT_MS = 60_000


def _send(qtbot: Any, window: Any, text: str) -> None:
    window.pane.composer.setPlainText(text)
    qtbot.keyClick(window.pane.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=REPLY_TIMEOUT_MS)


def _conversation(services: Any, window: Any, pairs: list[tuple[str, str]], title: str) -> int:
    store = services.conversations
    conv = store.create(window.current_agent.id, title)
    for question, answer in pairs:
        store.add_message(conv.id, "user", question)
        store.add_message(conv.id, "assistant", answer, agent_name="SmolLM2 (local)")
    return conv.id


@pytest.mark.slow
def test_regenerate_keeps_the_earlier_reply_and_switches_with_arrows(
    qtbot: Any, window: Any, services: Any
) -> None:
    limit_starter(services, max_tokens=12, temperature=1.0)
    window.reload_agents()
    _send(qtbot, window, "Name a colour.")
    first = window.pane.transcript.bubbles()[-1]
    first_id, first_text = first.message_id, services.conversations.message(first.message_id)
    qtbot.mouseClick(first.action_buttons["regenerate"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.pane.transcript.bubbles()[-1].message_id != first_id)
    qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=REPLY_TIMEOUT_MS)

    second = window.pane.transcript.bubbles()[-1]
    assert second.message_id != first_id and second.version_text == "‹ 2/2 ›"
    assert len(window.pane.transcript.bubbles()) == 2  # one question, one reply on show
    qtbot.mouseClick(second.prev_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.pane.transcript.bubbles()[-1].message_id == first_id)
    shown = window.pane.transcript.bubbles()[-1]
    assert shown.message_id == first_id and shown.version_text == "‹ 1/2 ›"
    assert shown.text.strip() == first_text.content.strip()


@pytest.mark.slow
def test_editing_a_question_sends_a_new_branch_and_the_old_one_stays(
    qtbot: Any, window: Any, services: Any
) -> None:
    _send(qtbot, window, "Say one word.")
    user = window.pane.transcript.bubbles()[0]
    old_reply_id = window.pane.transcript.bubbles()[1].message_id
    qtbot.mouseClick(user.action_buttons["edit"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.pane.presenter.editing is not None)
    assert window.pane.presenter.editing == user.message_id
    assert not window.pane.edit_banner.isHidden()
    assert window.pane.composer.toPlainText() == "Say one word."
    window.pane.composer.setPlainText("Say two words.")
    qtbot.keyClick(window.pane.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=REPLY_TIMEOUT_MS)

    bubbles = window.pane.transcript.bubbles()
    assert bubbles[0].text == "Say two words." and len(bubbles) == 2
    assert bubbles[0].version_text == "‹ 2/2 ›" and window.pane.presenter.editing is None
    qtbot.mouseClick(bubbles[0].prev_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.pane.transcript.bubbles()[0].text == "Say one word.")
    bubbles = window.pane.transcript.bubbles()
    assert bubbles[0].text == "Say one word." and bubbles[1].message_id == old_reply_id


@pytest.mark.slow
def test_a_reply_cut_off_by_max_tokens_can_be_continued_in_place(
    qtbot: Any, window: Any, services: Any
) -> None:
    limit_starter(services, max_tokens=4)
    window.reload_agents()
    _send(qtbot, window, "Write a long story about a cat.")
    reply = window.pane.transcript.bubbles()[-1]
    before = services.conversations.message(reply.message_id).content
    assert "max tokens reached" in reply.footer.text()
    continue_button = reply.action_buttons["continue"]
    assert not continue_button.isHidden()
    qtbot.mouseClick(continue_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.pane.presenter.busy, timeout=5000)
    qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=REPLY_TIMEOUT_MS)
    after = services.conversations.message(reply.message_id)
    assert after.status == "complete" and after.content.startswith(before)
    assert len(after.content) > len(before)
    assert window.pane.transcript.bubble(reply.message_id).text.startswith(before.strip()[:5])


def test_copy_and_delete_a_message(
    qtbot: Any, window: Any, services: Any, qapp: QApplication, monkeypatch: pytest.MonkeyPatch
) -> None:
    conv = _conversation(services, window, [("hi", "hello **there**"), ("more", "sure")], "C")
    window.open_conversation(conv)
    reply = window.pane.transcript.bubbles()[1]
    qtbot.mouseClick(reply.action_buttons["copy"], Qt.MouseButton.LeftButton)
    assert qapp.clipboard().text() == "hello **there**"
    monkeypatch.setattr(window, "confirm", lambda _t, _x: True)
    qtbot.mouseClick(reply.action_buttons["delete"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(window.pane.transcript.bubbles()) == 3)
    assert [b.text for b in window.pane.transcript.bubbles()] == ["hi", "more", "sure"]
    window.copy_last_reply()
    assert qapp.clipboard().text() == "sure"


def test_conversation_list_rename_pin_filter_and_delete_with_undo(
    qtbot: Any, window: Any, services: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from desktop.store.agents import Agent

    other = services.agents.create(Agent(name="Remote", kind="openai", model="gpt-4o-mini"))
    a = _conversation(services, window, [("first", "one")], "Alpha")
    b = _conversation(services, window, [("second", "two")], "Beta")
    services.conversations.set_agent(b, other.id)
    window.reload_agents()
    window.browser.reload(current=window.conversation_id)

    def titles() -> list[str]:
        view = window.browser.conversation_list
        return [view.item(i).text() for i in range(view.count())]

    assert titles() == ["Beta", "Alpha"]
    window.browser.toggle_pin(a)
    assert titles() == ["Alpha", "Beta"]
    monkeypatch.setattr(window, "ask_text", lambda *_a: "  Alpha   renamed ")
    window.browser.rename(a)
    assert titles()[0] == "Alpha renamed"
    window.browser.set_agent_filter(other.id)
    assert titles() == ["Beta"]
    window.browser.set_agent_filter(None)

    window.open_conversation(b)
    window.browser.delete(b)
    assert titles() == ["Alpha renamed"] and window.conversation_id is None
    assert not window.browser.undo_bar.isHidden()
    qtbot.mouseClick(window.browser.undo_button, Qt.MouseButton.LeftButton)
    assert "Beta" in titles() and window.conversation_id == b
    window.browser.delete(b)
    window.browser.finish_delete()  # the undo time ran out
    assert services.conversations.get(b) is None


def test_search_highlights_hits_and_jumps_to_the_message(
    qtbot: Any, window: Any, services: Any
) -> None:
    pairs = [(f"question {i}", f"answer number {i}") for i in range(200)]
    pairs[3] = ("where is the lighthouse?", "The lighthouse stands on the cape.")
    conv = _conversation(services, window, pairs, "Long one")
    _conversation(services, window, [("other", "nothing here")], "Short")
    window.focus_search()
    assert window.browser.search_box.hasFocus()
    qtbot.keyClicks(window.browser.search_box, "lighthou")
    window.browser.run_search()
    results = window.browser.search_results
    assert not results.isHidden() and window.browser.conversation_list.isHidden()
    assert results.count() == 2
    from desktop.ui.conversation.listing import SNIPPET_ROLE, snippet_html

    snippet = results.item(0).data(SNIPPET_ROLE)
    assert "<span" in snippet_html(snippet, "#ff0") and "lighthouse" in snippet
    qtbot.keyClick(window.browser.search_box, Qt.Key.Key_Return)
    assert window.conversation_id == conv
    target = services.conversations.messages(conv)[7]  # the reply with the hit
    bubble = window.pane.transcript.bubble(target.id)
    assert bubble is not None and bubble.property("found") == "true"
    start, end = window.pane.transcript.window_range
    assert start <= 7 < end and end - start <= PAGE


def _long_conversation(services: Any, window: Any, pairs: int, question: str, answer: str) -> int:
    store = services.conversations
    conv = store.create(window.current_agent.id, "Long")
    parent = None
    for i in range(pairs):
        parent = store.add_message(conv.id, "user", question.format(i), parent_id=parent).id
        parent = store.add_message(conv.id, "assistant", answer.format(i), parent_id=parent).id
    return conv.id


def _open_long(qtbot: Any, window: Any, conversation_id: int) -> None:
    """Open a conversation whose branch is read on a worker thread, and wait until it shows."""
    window.open_conversation(conversation_id)
    loading = window.pane.path_loading
    assert loading is not None
    qtbot.waitUntil(loading.done, timeout=20_000)


def test_a_5000_message_conversation_opens_as_a_window_and_pages_on_scroll(
    qtbot: Any, window: Any, services: Any
) -> None:
    _open_long(qtbot, window, _long_conversation(services, window, 2500, "q{}", "a{}"))
    transcript = window.pane.transcript
    # the first screen at once (a prefetch batch beyond it may have run while the test waited
    # for the read), then a screen and a half beyond it, a batch per loop turn
    assert FIRST_SCREEN <= len(transcript.bubbles()) <= FIRST_SCREEN + BATCH
    assert transcript.bubbles()[-1].text == "a2499"
    qtbot.waitUntil(lambda: not transcript.prefetching)
    built = len(transcript.bubbles())
    assert FIRST_SCREEN < built < 200
    start = transcript.window_range[0]
    for _ in range(5):
        transcript.load_earlier()  # "Show earlier messages": a page each
    assert len(transcript.bubbles()) <= MAX_LOADED
    assert transcript.window_range[0] == start - 5 * PAGE
    transcript.scroll_to_bottom()
    assert transcript.bubbles()[-1].text == "a2499"


def test_a_short_conversation_opens_newest_first_within_the_turn_budget(
    qtbot: Any, window: Any, services: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten bubbles with code held the window 17 ms in one turn: a short conversation, like a
    long one, builds its bubbles from the bottom up, as many per loop turn as the budget
    allows (here none beyond the first: each turn builds one), the view at the bottom."""
    from desktop.ui.conversation import transcript as transcript_module

    monkeypatch.setattr(transcript_module, "PREFETCH_BUDGET_S", 0.0)
    pairs = [(f"question {i}", f"answer {i}\n\n```python\nx = {i}\n```") for i in range(5)]
    conv_id = _conversation(services, window, pairs, "Short")
    window.open_conversation(conv_id)
    transcript = window.pane.transcript
    built = [row.bubble.text for row in transcript._rows]  # before anything asks for more
    assert built and built[-1].startswith("answer 4") and len(built) < 10
    qtbot.waitUntil(lambda: len(transcript._rows) == 10)
    assert [b.text.partition("\n")[0] for b in transcript.bubbles()][:2] == [
        "question 0",
        "answer 0",
    ]
    bar = transcript.verticalScrollBar()
    assert bar.value() == bar.maximum()  # still at the newest


def test_scrolling_up_builds_earlier_bubbles_ahead_and_the_view_does_not_jump(
    qtbot: Any, window: Any, services: Any
) -> None:
    _open_long(qtbot, window, _long_conversation(services, window, 300, "question {}", "answer {}"))
    transcript = window.pane.transcript
    bar = transcript.verticalScrollBar()
    qtbot.waitUntil(lambda: not transcript.prefetching)
    # flick up a screen at a time, as a wheel or PageUp would (the cap is a guard: on a loaded
    # machine a turn may build one bubble only, and the 300 pairs need 600 turns then)
    for _ in range(2_000):
        if bar.value() == 0 and transcript.window_range[0] == 0:
            break
        bar.setValue(bar.value() - transcript.viewport().height())
        row = transcript.bubbles()[0].parentWidget()
        for bubble in transcript.bubbles():  # the first message showing at the top of the view
            if bubble.parentWidget().geometry().bottom() > bar.value():
                row = bubble.parentWidget()
                break
        on_screen = row.y() - bar.value()
        QApplication.processEvents()  # one prefetch batch may land above the view
        assert row.bubble.message_id in [b.message_id for b in transcript.bubbles()]
        assert row.y() - bar.value() == on_screen  # it has not moved on screen
        assert len(transcript.bubbles()) <= MAX_LOADED
    assert transcript.window_range[0] == 0 and bar.value() == 0
    assert transcript.bubbles()[0].text == "question 0"


def test_markdown_code_copy_links_and_images_without_fetching(
    qtbot: Any, window: Any, services: Any, qapp: QApplication
) -> None:
    reply = (
        "Here:\n\n```python\nprint('hi')\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "- [x] done\n- [ ] todo\n\n~~old~~ see [docs](https://example.com) "
        "![chart](https://tracker.example/pixel.png)"
    )
    conv = _conversation(services, window, [("show", reply)], "MD")
    window.open_conversation(conv)
    bubble = window.pane.transcript.bubbles()[-1]
    assert bubble.is_markdown
    [code] = bubble.code_blocks()
    view = bubble.view
    doc = code.build(view.style_)
    colours = set()
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            colours.add(it.fragment().charFormat().foreground().color().name())
            it += 1
        block = block.next()
    assert len(colours) >= 3, colours  # highlighted: keyword, string and plain text differ
    qtbot.mouseClick(code.copy_button, Qt.MouseButton.LeftButton)
    assert qapp.clipboard().text() == "print('hi')"
    html = "".join(item.build(view.style_).toHtml() for item in view.items if item is not code)
    assert "<img" not in html and 'href="https://tracker.example/pixel.png"' in html
    assert "image, click to open" in html and "line-through" in html and "<table" in html
    assert 'class="checked"' in html or "☑" in html


def test_reasoning_is_shown_folded_and_footer_follows_the_setting(
    qtbot: Any, window: Any, services: Any
) -> None:
    store = services.conversations
    conv = store.create(window.current_agent.id, "Thinking")
    store.add_message(conv.id, "user", "2+2?")
    reply = store.add_message(
        conv.id, "assistant", "4", reasoning="Two plus two is four.", agent_name="X", model="m"
    )
    services.stats.record(
        {
            "message_id": reply.id,
            "conversation_id": conv.id,
            "agent_name": "X",
            "provider_kind": "openai",
            "started_at": "now",
            "ttft_ms": 80.0,
            "decode_tok_s": 50.0,
            "prompt_tokens": 10,
            "cached_tokens": 4,
            "output_tokens": 2,
            "cost_usd": 0.0001,
            "finish_reason": "stop",
        }
    )
    window.open_conversation(conv.id)
    bubble = window.pane.transcript.bubble(reply.id)
    assert not bubble.thinking_button.isHidden() and bubble.thinking.isHidden()
    bubble.thinking_button.click()
    assert not bubble.thinking.isHidden()
    assert "Two plus two" in bubble.thinking.toPlainText()
    line = bubble.footer.text()
    for part in ("X", "m", "TTFT 80 ms", "50 tok/s", "10 (4 cached) → 2 tokens", "$0.0001"):
        assert part in line
    assert "ttft_ms: 80.0" in bubble.footer.toolTip()
    window.pane.transcript.set_footer_mode("never")
    assert bubble.footer.isHidden()
    window.pane.transcript.set_footer_mode("hover")
    assert bubble.footer.isHidden()
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QEnterEvent

    QApplication.sendEvent(bubble, QEnterEvent(QPointF(5, 5), QPointF(5, 5), QPointF(5, 5)))
    assert not bubble.footer.isHidden()


def test_shortcuts_sheet_lists_platform_keys(qtbot: Any, window: Any) -> None:
    sheet = window.show_shortcuts()
    rows = dict(sheet.rows())
    assert "New conversation" in rows and rows["Stop the reply (or cancel editing)"] == "Esc"
    assert "Ctrl+K" in rows["Search / switch conversation"]
    assert window._actions["new_chat"].shortcuts()  # bound on the window
    sheet.close()


def test_a_trailing_space_in_the_search_box_finds_whole_words_only(
    window: Any, services: Any
) -> None:
    _conversation(services, window, [("my cat sleeps", "ok")], "Cat")
    _conversation(services, window, [("the catalogue is long", "ok")], "Catalogue")
    window.browser.search_box.setText("cat")
    window.browser.run_search()
    from desktop.ui.conversation.listing import MESSAGE_ROLE

    def hits() -> set[str]:
        results = window.browser.search_results
        return {
            results.item(i).text()
            for i in range(results.count())
            if results.item(i).data(MESSAGE_ROLE) is not None
        }

    assert hits() == {"Cat", "Catalogue"}  # a prefix by default, as you type
    window.browser.search_box.setText("cat ")
    window.browser.run_search()
    assert hits() == {"Cat"}
