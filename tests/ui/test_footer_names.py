"""The footer under a reply and the pane's header at the window's minimum size: a llama.cpp
server's GGUF path is shown as its file name, the statistics stay on one line (elided, the
whole record in the tooltip), a stopped reply shows no "?"."""

from __future__ import annotations

from typing import Any

from desktop.store.agents import Agent

GGUF = "/srv/llm/models/qwen2.5-7b-instruct-q4_k_m.gguf"


def _server_agent(services: Any) -> Agent:
    url = "http://127.0.0.1:9/v1"
    return services.agents.create(
        Agent(name="Box server", kind="openai-compatible", base_url=url, model=GGUF)
    )


def _reply(services: Any, agent: Agent, stats: dict[str, Any]) -> tuple[int, int]:
    store = services.conversations
    conv = store.create(agent.id, "Colours")
    user = store.add_message(conv.id, "user", "Name three primary colors")
    reply = store.add_message(
        conv.id, "assistant", "Red, yellow and blue.", parent_id=user.id,
        agent_name=agent.name, model=agent.model, agent_id=agent.id,
    )  # fmt: skip
    services.stats.record(
        {
            "message_id": reply.id,
            "conversation_id": conv.id,
            "agent_name": agent.name,
            "provider_kind": agent.kind,
            "started_at": "2025-01-01T00:00:00+00:00",
            "model_requested": agent.model,
            "model_reported": GGUF,
            **stats,
        }
    )
    return conv.id, reply.id


FULL = {
    "ttft_ms": 212.0,
    "total_ms": 2400.0,
    "decode_tok_s": 41.3,
    "prompt_tokens": 1234,
    "cached_tokens": 1024,
    "output_tokens": 321,
    "token_source": "reported",
    "finish_reason": "stop",
}


def test_at_the_minimum_size_the_footer_is_one_line_with_the_file_name_and_a_full_tooltip(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    agent = _server_agent(services)
    conv_id, reply_id = _reply(services, agent, FULL)
    window = make_window(services)
    window.resize(720, 480)
    window.open_conversation(conv_id)
    bubble = window.pane.transcript.bubble(reply_id)
    qtbot.waitUntil(lambda: bubble.footer.isVisible())
    line = bubble.footer.line
    assert "qwen2.5-7b-instruct-q4_k_m.gguf" in line.text() and "/srv/llm" not in line.text()
    qtbot.waitUntil(line.is_elided)  # the whole line does not fit at 720 px …
    shown = line.shown_text()  # … so the names go first (the bubble names the agent above)
    assert shown.startswith("TTFT 212 ms · 41 tok/s") and "Box server" not in shown
    assert line.fontMetrics().horizontalAdvance(shown) <= line.contentsRect().width()
    one_line = line.fontMetrics().height()
    assert not line.wordWrap() and line.height() < 2 * one_line  # … and stays on one line
    assert line.geometry().right() < bubble.footer.timeline_button.geometry().left()
    assert bubble.footer.geometry().right() <= bubble.contentsRect().right()
    tip = line.toolTip()
    assert GGUF in tip and "1,234 (1,024 cached) → 321 tokens" in tip
    assert not bubble.footer.timeline_button.isHidden()
    header = window.pane.header_subtitle
    assert "qwen2.5-7b-instruct-q4_k_m.gguf" in header.text() and "/srv/llm" not in header.text()
    assert GGUF in header.toolTip()

    window.resize(1280, 800)
    qtbot.waitUntil(lambda: not line.is_elided())  # room enough: the whole line
    assert line.shown_text() == line.text()


def test_a_stopped_reply_says_stopped_and_its_tokens_never_a_question_mark(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    agent = _server_agent(services)
    stopped = {"output_tokens": 81, "token_source": "counted", "finish_reason": "cancelled"}
    conv_id, reply_id = _reply(services, agent, stopped)
    services.conversations.finish_message(reply_id, content="Red, yel", status="cancelled")
    window = make_window(services)
    window.resize(1280, 800)
    window.open_conversation(conv_id)
    footer = window.pane.transcript.bubble(reply_id).footer
    qtbot.waitUntil(footer.isVisible)
    assert "?" not in footer.text()
    assert footer.text().endswith("81 tokens · — · stopped")
