"""The memory estimate follows the agent editor's fields as they are typed."""

from __future__ import annotations

from pathlib import Path

from desktop.local.catalog import InfoCache
from desktop.local.context_size import automatic_n_ctx, available_ram
from desktop.local.gpu import Device, GpuSupport, detect
from desktop.local.memory import estimate, format_bytes
from desktop.local.starter import STARTER_REF
from desktop.ui.agents.memory_estimate import MemoryEstimateView
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


GiB = 1024**3
CPU = Device("CPU", "AMD EPYC 9654 96-Core Processor", "CPU", 64 * GiB, 60 * GiB)


def _read_starter() -> InfoCache:
    """A cache that has the starter's header: the estimate follows the fields at once."""
    cache = InfoCache()
    cache.get(str(gguf_files.starter()))
    return cache


def _vulkan(free: int) -> GpuSupport:
    gpu = Device("Vulkan0", "NVIDIA H200", "GPU", 139 * GiB, free)
    return GpuSupport(True, True, "Vulkan", "0.3.36", (gpu, CPU))


def test_the_gpu_column_names_its_gpu_and_a_part_that_does_not_fit(qtbot, qloop) -> None:
    view = MemoryEstimateView(cache=_read_starter(), gpu=_vulkan(138 * GiB))
    qtbot.addWidget(view)
    view.update_for(STARTER_REF, "2048", "f16", "-1")
    assert view.gpu_label.text() == "GPU: Vulkan0 · NVIDIA H200, 138 GiB free"
    assert not view.gpu_label.isHidden()
    need = view.current.vram
    assert need > 0 and "on the GPU;" not in view.notes.text()

    small = round(need * 0.5)  # half of what the GPU part needs
    view = MemoryEstimateView(cache=_read_starter(), gpu=_vulkan(small))
    qtbot.addWidget(view)
    view.update_for(STARTER_REF, "2048", "f16", "-1")
    assert view.gpu_label.text() == f"GPU: Vulkan0 · NVIDIA H200, {format_bytes(small)} free"
    assert (
        f"Needs {format_bytes(need)} on the GPU; Vulkan0 has {format_bytes(small)} free: "
        "lower GPU layers or the context."
    ) in view.notes.text()
    view.update_for(STARTER_REF, "2048", "f16", "0")  # nothing on the GPU: nothing to fit
    assert "on the GPU;" not in view.notes.text()


def test_an_empty_gpu_layers_field_is_estimated_as_saving_fills_it(qtbot, qloop) -> None:
    view = MemoryEstimateView(cache=_read_starter(), gpu=_vulkan(138 * GiB))
    qtbot.addWidget(view)
    view.update_for(STARTER_REF, "2048", "f16", "")
    assert view.current.gpu_layers == view.current.block_count + 1 == 31
    assert "GPU layers automatic: all 31 fit the GPU." in view.notes.text()
    tight = MemoryEstimateView(cache=_read_starter(), gpu=_vulkan(16 * 1024**2))
    qtbot.addWidget(tight)
    tight.update_for(STARTER_REF, "2048", "f16", "")
    assert tight.current.gpu_layers == 0 and tight.current.vram == 0
    assert "GPU layers automatic: none (the whole model does not fit" in tight.notes.text()


def test_a_cpu_build_names_no_gpu(qtbot, qloop) -> None:
    view = MemoryEstimateView(
        cache=_read_starter(), gpu=GpuSupport(True, False, "CPU", "0.3.36", (CPU,))
    )
    qtbot.addWidget(view)
    view.update_for(STARTER_REF, "2048", "f16", "")
    assert view.gpu_label.isHidden() and view.gpu_label.text() == ""
    assert view.current.vram == 0 and "automatic" not in view.notes.text()


def test_the_build_is_asked_off_the_gui_thread_with_its_devices(qtbot, qloop) -> None:
    """No figures given: ``detect()`` runs off the GUI thread, once, with its devices (this
    machine's CPU build: the CPU device, no GPU line)."""
    view = MemoryEstimateView()
    qtbot.addWidget(view)
    with qtbot.waitSignal(view.estimate_changed, timeout=10_000):
        view.update_for(STARTER_REF, "2048", "f16", "0")
    gpu = view.estimator.gpu
    assert gpu is not None and gpu.devices  # listed, not detect(False)
    if not gpu.gpu_offload:
        assert view.gpu_label.isHidden()
