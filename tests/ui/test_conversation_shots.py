"""Renders a long conversation (code, a table, thinking, versions, the stats footer) light and
dark, for people to look at: ``SIMI_SCREENSHOT_DIR=/tmp/simi-shots`` writes conv-*.png."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication

from desktop.ui.kit import theme

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
    services.stats.record(
        {
            **STATS,
            "message_id": reply.id,
            "conversation_id": conv.id,
            "agent_id": agent.id,
            "agent_name": agent.name,
            "provider_kind": "local",
        }
    )
    return conv.id


def test_render_a_long_conversation_light_and_dark(
    qtbot: Any, services: Any, make_window: Any, qapp: QApplication, tmp_path: Path
) -> None:
    out = Path(os.environ.get("SIMI_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    conv_id = _populate(services)
    window = make_window(services)
    window.resize(1280, 860)
    window.splitter.setSizes([290, 990])
    window.open_conversation(conv_id)
    try:
        for name, dark in (("light", False), ("dark", True)):
            theme.install(qapp, dark=dark)
            for _ in range(5):
                qapp.processEvents()
            QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
            window.pane.transcript.scroll_to_bottom()
            qapp.processEvents()
            path = out / f"conv-{name}.png"
            assert window.grab().save(str(path))
            assert path.stat().st_size > 20_000
        bubble = window.pane.transcript.bubbles()[-1]
        assert bubble.version_text == "‹ 2/2 ›" and bubble.code_blocks()
        assert "TTFT 212 ms" in bubble.footer.text()
    finally:
        theme.install(qapp, dark=False)
