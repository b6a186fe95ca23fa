"""The memory estimate follows the agent editor's fields as they are typed."""

from __future__ import annotations

from pathlib import Path

from desktop.local.catalog import InfoCache
from desktop.local.context_size import automatic_n_ctx, available_ram
from desktop.local.gpu import detect
from desktop.local.memory import estimate
from desktop.local.starter import STARTER_REF
from desktop.ui.memory_estimate import MemoryEstimateView
from tests.helpers import gguf_files


def test_estimate_updates_live_and_reads_the_header_once(qtbot, qloop, tmp_path: Path) -> None:
    cache = InfoCache()
    view = MemoryEstimateView(cache=cache, gpu=detect(with_devices=False))
    qtbot.addWidget(view)
    with qtbot.waitSignal(view.estimate_changed, timeout=10_000):
        view.update_for(STARTER_REF, "2048", "f16", "0")  # first time: header read off-thread
    first = view.current
    assert first is not None and first.kv_cache == estimate(view.info, 2048, "f16").kv_cache
    assert view.cells[("kv", "ram")].text() == "45.0 MiB"

    info = view.info
    view.update_for(STARTER_REF, "8192", "q8_0", "0")  # cached: synchronous
    assert view.info is info  # the same header, not read again
    assert view.current.kv_cache < 4 * first.kv_cache  # 4x cells, ~half the bytes per cell
    assert view.cells[("kv", "ram")].text() == "95.6 MiB"  # 180 MiB x 34/64

    view.update_for(STARTER_REF, "16384", "f16", "0")
    assert "beyond the 8,192 tokens" in view.notes.text()

    view.update_for(STARTER_REF, "2048", "f16", "-1")
    if not detect(with_devices=False).gpu_offload:
        assert "CPU-only" in view.notes.text() and view.current.vram == 0

    # an empty context field estimates what saving gives the agent: the automatic size
    view.update_for(STARTER_REF, "", "f16", "0")
    automatic = automatic_n_ctx(info, available_ram())
    assert view.current.kv_cache == estimate(info, automatic, "f16").kv_cache


def test_bad_file_and_no_file_say_why(qtbot, qloop, tmp_path: Path) -> None:
    view = MemoryEstimateView(gpu=detect(with_devices=False))
    qtbot.addWidget(view)
    view.update_for("", 2048, None, 0)
    assert view.current is None and "Choose a model file" in view.notes.text()
    bad = gguf_files.text_file(tmp_path / "notes.gguf")
    with qtbot.waitSignal(view.estimate_changed, timeout=10_000):
        view.update_for(str(bad), 2048, None, 0)
    assert view.current is None and str(bad) in view.notes.text()
    assert "not a GGUF file" in view.notes.text()
    plain = gguf_files.rewrite_starter(
        tmp_path / "plain.gguf", drop_kv=("tokenizer.chat_template",)
    )
    with qtbot.waitSignal(view.estimate_changed, timeout=10_000):
        view.update_for(str(plain), 2048, None, 0)
    assert "no chat template: using ChatML" in view.notes.text()
