"""The reply timeline of real calls, not hand-made rows: the starter model's first call through
the llama.cpp worker (it pays for starting the worker and loading the model), and a call to
llama-cpp-python's OpenAI-compatible server on loopback. Each is opened from the reply's footer
in the real window, as a person would, and screenshots are saved for people to look at."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from desktop.chat.timeline_facts import ms_text
from desktop.store.agents import Agent
from desktop.ui.kit import theme
from tests.helpers.servers import llama_server

pytestmark = pytest.mark.slow

REPLY_TIMEOUT_MS = 90_000


def _send_and_open(qtbot: Any, window: Any, text: str) -> tuple[Any, dict[str, Any]]:
    window.pane.composer.setPlainText(text)
    qtbot.keyClick(window.pane.composer, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.pane.presenter.busy, timeout=5_000)
    qtbot.waitUntil(lambda: not window.pane.presenter.busy, timeout=REPLY_TIMEOUT_MS)
    bubble = window.pane.transcript.bubbles()[-1]
    row = window.services.stats.for_message(bubble.message_id)
    assert row is not None and row["finish_reason"] in ("stop", "length")
    qtbot.waitUntil(lambda: not bubble.footer.timeline_button.isHidden())
    qtbot.mouseClick(bubble.footer.timeline_button, Qt.MouseButton.LeftButton)
    panel = bubble.footer.panel
    assert panel is not None
    qtbot.waitUntil(panel.isVisible)  # built at the click, shown a loop turn later
    qtbot.waitExposed(panel)
    return panel, row


def _shots(qtbot: Any, qapp: QApplication, window: Any, name: str, tmp_path: Path) -> None:
    out = Path(os.environ.get("SIMI_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    bubble = window.pane.transcript.bubbles()[-1]
    try:
        for shade, dark in (("light", False), ("dark", True)):
            theme.install(qapp, dark=dark)
            panel = bubble.footer.open_timeline()
            qtbot.waitExposed(panel)
            panel.resize(panel.width(), panel.scroll_area.widget().sizeHint().height() + 72)
            qapp.processEvents()
            path = out / f"timeline_real_{name}_{shade}.png"
            assert panel.grab().save(str(path))
            panel.close()
    finally:
        theme.install(qapp, dark=False)


def test_first_local_reply_shows_worker_start_load_prefill_and_decode_to_scale(
    qtbot: Any, window: Any, qapp: QApplication, tmp_path: Path
) -> None:
    assert not window.services.local.worker.alive  # this call starts it
    panel, row = _send_and_open(qtbot, window, "Name three colors.")
    assert row["worker_start_ms"] > 0 and row["load_ms"] > 0 and row["prefill_ms"] > 0
    legend = panel.legend_text()
    for part, figure in (
        ("starting the worker", row["worker_start_ms"]),
        ("loading the model", row["load_ms"]),
        ("reading the prompt (prefill)", row["prefill_ms"]),
    ):
        assert f"{part} · {ms_text(figure)}" in legend
    assert "writing the reply (decode)" in legend and "llama.cpp" in legend
    rects = panel.chart.segment_rects()
    # to scale: the widths keep the measured ratio of worker start to model load
    ratio = rects["worker_start"].width() / rects["load"].width()
    assert ratio == pytest.approx(row["worker_start_ms"] / row["load_ms"], rel=0.1)
    assert "KiB" in panel.fact_values["kv_cache"].text() or "MiB" in (
        panel.fact_values["kv_cache"].text()
    )
    assert panel.fact_values["cost"].text().startswith("local")
    _shots(qtbot, qapp, window, "local", tmp_path)


def test_reply_from_a_real_openai_compatible_server_shows_the_network_parts(
    qtbot: Any, window: Any, services: Any, qapp: QApplication, tmp_path: Path
) -> None:
    with llama_server() as url:
        agent = services.agents.create(
            Agent(
                name="llama.cpp server",
                kind="openai-compatible",
                base_url=url,
                model="starter",
                max_tokens=24,
            )
        )
        window.new_chat(agent)
        panel, row = _send_and_open(qtbot, window, "Name three colors.")
    assert row["reused_connection"] == 0 and row["connect_ms"] > 0
    legend = panel.legend_text()
    for part in ("connecting", "waiting for the first token", "streaming the reply"):
        assert part in legend
    # llama-cpp-python's server reports no timings of its own: no server lane, and no price
    # for a server on this machine (never "$0")
    assert "Inside the server" not in legend
    cost = panel.fact_values["cost"].text()
    assert "$0" not in cost and "127.0.0.1 is a server of your own" in cost
    _shots(qtbot, qapp, window, "remote", tmp_path)
