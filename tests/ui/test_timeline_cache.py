"""A reply whose prompt came back from the prompt-state cache, in the reply timeline panel:
a "restoring the prompt cache" part drawn to scale before prefill, in its own colour, and the
facts saying where the cached tokens came from. Screenshots (light and dark) go to
``$SIMI_SCREENSHOT_DIR`` for a person to look at. The stats row is recorded as a local call
with a memory-cache restore records it (``tests/chat/test_cache_source.SWITCH_BACK``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication

from desktop.ui.kit import theme
from desktop.ui.stats.timeline_chart import kind_color
from tests.chat.test_cache_source import SWITCH_BACK
from tests.ui.test_timeline_panel import _open


def test_a_memory_cache_restore_is_a_part_of_the_timeline_and_a_fact(
    qtbot: Any, qapp: QApplication, window: Any, services: Any, tmp_path: Path
) -> None:
    panel = _open(qtbot, window, services, SWITCH_BACK)
    legend = panel.legend_text()
    assert "restoring the prompt cache · 41 ms · SIMI Multi" in legend
    assert "reading the prompt (prefill) · 40 ms" in legend
    assert panel.fact_values["cache"].text() == (
        "Cached 2,950 of 3,010 prompt tokens — restored from the memory cache in 41 ms"
    )
    rects = panel.chart.segment_rects()
    assert rects["restore"].right() <= rects["prefill"].left() + 1  # before prefill
    ratio = rects["restore"].width() / rects["prefill"].width()
    assert ratio == pytest.approx(41.0 / 40.0, rel=0.1)  # to scale
    for dark in (False, True):  # its own colour, unlike its neighbours'
        own = kind_color("restore", dark).name()
        assert own not in {kind_color(k, dark).name() for k in ("prefill", "load", "other")}
    out = Path(os.environ.get("SIMI_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    panel.close()
    bubble = window.pane.transcript.bubbles()[-1]
    try:
        for shade, dark in (("light", False), ("dark", True)):
            theme.install(qapp, dark=dark)
            shown = bubble.footer.open_timeline()
            qtbot.waitExposed(shown)
            shown.resize(shown.width(), shown.scroll_area.widget().sizeHint().height() + 72)
            qapp.processEvents()
            assert shown.grab().save(str(out / f"timeline_memory_cache_{shade}.png"))
            shown.close()
    finally:
        theme.install(qapp, dark=False)


@pytest.mark.slow
def test_a_real_switch_back_shows_the_memory_restore_in_the_timeline(
    qtbot: Any, qapp: QApplication, window: Any, services: Any, tmp_path: Path
) -> None:
    """No recorded row: the starter model answers in conversation A, then B, then A again in
    the window, and A's last reply's timeline shows its restore from the memory cache."""
    from tests.chat.test_cache_source_real import STORY
    from tests.ui.test_timeline_real import _send_and_open

    agent = window.current_agent
    a = services.conversations.create(agent.id, "A").id
    b = services.conversations.create(agent.id, "B").id
    window.open_conversation(a)
    _send_and_open(qtbot, window, STORY + " What did he watch?")[0].close()
    window.open_conversation(b)
    _send_and_open(qtbot, window, "Name three rivers in Europe.")[0].close()
    window.open_conversation(a)
    panel, row = _send_and_open(qtbot, window, "And then?")
    assert row["cache_source"] == "memory" and row["cache_restore_ms"] is not None
    assert "restored from the memory cache in" in panel.fact_values["cache"].text()
    assert "restoring the prompt cache" in panel.legend_text()
    out = Path(os.environ.get("SIMI_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    panel.resize(panel.width(), panel.scroll_area.widget().sizeHint().height() + 72)
    qapp.processEvents()
    assert panel.grab().save(str(out / "timeline_memory_cache_real_light.png"))
