"""Renders a long conversation (code, a table, thinking, versions, the stats footer) light and
dark, for people to look at: ``SIMI_SCREENSHOT_DIR=/tmp/simi-shots`` writes conv-*.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QApplication

from tests.helpers.shots import light_and_dark, save_grab, settle
from tests.helpers.stats_rows import record_reply_stats

ANSWER = """Here is a small **Python** helper and how the options compare.

```python
def kv_cache_bytes(layers: int, ctx: int, kv_heads: int, head_dim: int, bits: int = 16) -> int:
    # keys and values, per layer, per token
    return 2 * layers * ctx * kv_heads * head_dim * bits // 8
```

| cache type | bits | 8B model @ 8k |
|---|---|---|
| f16 | 16 | 1.0 GiB |
| q8_0 | 8 | 0.53 GiB |
| q4_0 | 4 | 0.28 GiB |

- [x] fits in 8 GB VRAM with `q8_0`
- [ ] try ~~f32~~ only for debugging

See the [llama.cpp docs](https://github.com/ggml-org/llama.cpp) for details. \
![benchmark chart](https://example.com/chart.png)"""

STATS = {
    "ttft_ms": 212.4,
    "decode_tok_s": 48.7,
    "prompt_tokens": 1840,
    "cached_tokens": 1536,
    "output_tokens": 196,
    "cost_usd": 0.00042,
    "finish_reason": "stop",
    "token_source": "reported",
    "started_at": "2025-01-01T12:00:00.000+00:00",
}


def _populate(services: Any) -> int:
    store = services.conversations
    agent = services.agents.by_name("SmolLM2 (local)")
    conv = store.create(agent.id, "KV cache sizes")
    for i in range(30):
        store.add_message(conv.id, "user", f"Earlier question {i}?")
        store.add_message(conv.id, "assistant", f"Earlier answer {i}.", agent_name=agent.name)
    question = store.add_message(conv.id, "user", "How big is the KV cache for an 8B model?")
    store.add_message(conv.id, "assistant", "A first, shorter answer.", agent_name=agent.name)
    reply = store.add_message(
        conv.id,
        "assistant",
        ANSWER,
        agent_id=agent.id,
        agent_name=agent.name,
        model="SmolLM2-135M-Instruct",
        parent_id=question.id,
        reasoning="Keys and values per layer; 32 layers, 8 KV heads of 128 dims.",
    )
    record_reply_stats(services, reply, "local", **STATS)
    return conv.id


def test_render_a_long_conversation_light_and_dark(
    qtbot: Any, services: Any, make_window: Any, qapp: QApplication, shot_dir: Path
) -> None:
    conv_id = _populate(services)
    window = make_window(services, size=(1280, 860), list_width=290)
    window.open_conversation(conv_id)
    for shade in light_and_dark(qapp):
        settle(qapp)
        window.pane.transcript.scroll_to_bottom()
        qapp.processEvents()
        save_grab(window, shot_dir / f"conv-{shade}.png", 20_000)
    bubble = window.pane.transcript.bubbles()[-1]
    assert bubble.version_text == "‹ 2/2 ›" and bubble.code_blocks()
    assert "TTFT 212 ms" in bubble.footer.text()
