"""Renders the window mid-conversation, light and dark, for people to look at.

Written to ``$SIMI_SCREENSHOT_DIR`` when set, else to the test's tmp dir.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QApplication

from desktop.store.agents import Agent
from desktop.ui.kit import theme
from tests.helpers.shots import save_grab
from tests.helpers.stats_rows import record_reply_stats

REPLY = """A **KV cache** keeps the attention keys and values of tokens already processed, \
so each new token only computes its own.

- Prompt processing (*prefill*) fills the cache in batches.
- Decoding reuses it: one token at a time.

```python
llm = Llama(model_path="model.gguf", n_ctx=4096, type_k=8)
```

Quantising the cache to `q8_0` halves its memory with little quality loss."""

STATS = {
    "ttft_ms": 85.2,
    "decode_tok_s": 112.4,
    "prompt_tokens": 32,
    "cached_tokens": 0,
    "output_tokens": 57,
    "token_source": "reported",
    "finish_reason": "stop",
    "total_ms": 590.0,
    "backend": "CPU",
    "started_at": "2025-01-01T12:00:00.000+00:00",
}


def _streamed_reply(
    store: Any,
    conv_id: int,
    agent_name: str,
    model: str,
    agent_id: int | None = None,
    **outcome: Any,
) -> Any:
    """An assistant reply as a stream leaves it: added while streaming, then finished with
    ``outcome`` (its content and status, an error's kind and text)."""
    reply = store.add_message(
        conv_id,
        "assistant",
        "",
        status="streaming",
        agent_id=agent_id,
        agent_name=agent_name,
        model=model,
    )
    store.finish_message(reply.id, **outcome)
    return reply


def _populate(services: Any) -> int:
    store = services.conversations
    starter = services.agents.by_name("SmolLM2 (local)")
    services.agents.create(Agent(name="GPT-4o mini", kind="openai", model="gpt-4o-mini"))
    services.agents.create(
        Agent(
            name="Groq Llama",
            kind="openai-compatible",
            base_url="https://api.groq.com/openai/v1",
            model="llama-3.1-8b-instant",
        )
    )
    for title in ("Trip ideas for Lisbon", "Refactor the parser"):
        old = store.create(starter.id, title)
        store.add_message(old.id, "user", title)
    conv = store.create(starter.id, "What is a KV cache?")
    store.add_message(conv.id, "user", "What is a KV cache, in two sentences?")
    reply = _streamed_reply(
        store, conv.id, starter.name, starter.model, starter.id, content=REPLY, status="complete"
    )
    record_reply_stats(services, reply, "local", **STATS)
    store.add_message(conv.id, "user", "And how big is it for an 8B model at 8k context?")
    _streamed_reply(
        store,
        conv.id,
        "Groq Llama",
        "llama-3.1-8b-instant",
        content="",
        status="error",
        error_kind="unavailable",
        error_text="Groq Llama cannot be reached at api.groq.com (connection refused). "
        "Check the base URL and your network, then retry.",
    )
    return conv.id


def test_render_main_window_light_and_dark(
    qtbot: Any, services: Any, make_window: Any, qapp: QApplication, shot_dir: Path
) -> None:
    conv_id = _populate(services)
    window = make_window(services, size=(1200, 780), list_width=290)
    window.reload_agents()
    window.open_conversation(conv_id)
    window.pane.composer.setPlainText("Compare that with q4_0")
    window.status_label.setText("TTFT 85 ms · 112 tok/s · 32 → 57 tokens · stop")
    try:
        for name, dark in (("light", False), ("dark", True)):
            theme.install(qapp, dark=dark)
            qapp.processEvents()
            window.pane.transcript.scroll_to_bottom()
            qapp.processEvents()
            save_grab(window, shot_dir / f"main-window-{name}.png", 10_000)
        from desktop.ui.agents.editor import AgentEditorDialog

        dialog = AgentEditorDialog(services.agents, services.secrets, window.current_agent, window)
        dialog.show()
        dialog.temperature.setText("3")
        dialog.save()
        qapp.processEvents()
        # the shot shows the message the bad value provokes, under its field
        assert "temperature" in dialog.error_text("temperature").lower()
        assert dialog.saved_agent is None
        assert dialog.grab().save(str(shot_dir / "agent-editor-dark.png"))
        dialog.close()
        dialog.deleteLater()
        window.new_chat()
        theme.install(qapp, dark=False)
        qapp.processEvents()
        assert window.grab().save(str(shot_dir / "new-chat-light.png"))
    finally:
        theme.install(qapp, dark=False)
