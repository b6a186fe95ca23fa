"""Where a local model runs, from llama.cpp's own load log (issue 26 item 3)."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

from desktop.chat.format import stats_tooltip_text, where_text
from desktop.chat.timeline import build_timeline
from desktop.local import pool
from desktop.local.catalog import read_model_info
from desktop.local.gpu import Device, GpuSupport
from desktop.local.gpu_text import backend_text, device_text, gpu_column_text, gpu_shortfall
from desktop.local.memory import estimate, gpu_layers_for
from desktop.local.placement import (
    MIB,
    LoadReport,
    WhereItRuns,
    buffers_text,
    parse_load_log,
    where_it_runs,
)
from desktop.local.starter import STARTER_AGENT_NAME
from tests.helpers import gguf_files
from tests.helpers.timeline_rows import LOCAL_FIRST

# The starter loaded on Mesa's software Vulkan device (../shared/docs/PLATFORM_NOTES.md,
# "Vulkan": GGML_VK_VISIBLE_DEVICES=0, llama-cpp-python 0.3.36), the lines that matter.
VULKAN_LOAD = """\
load_tensors: layer   0 assigned to device Vulkan0, is_swa = 0
load_tensors: layer  29 assigned to device Vulkan0, is_swa = 0
load_tensors: layer  30 assigned to device Vulkan0, is_swa = 0
load_tensors: offloading 30 repeating layers to GPU
load_tensors: offloading output layer to GPU
load_tensors: offloaded 31/31 layers to GPU
load_tensors:      Vulkan0 model buffer size =    92.10 MiB
load_tensors:   CPU_Mapped model buffer size =    28.69 MiB
llama_context: Vulkan_Host  output buffer size =     0.19 MiB
llama_kv_cache:    Vulkan0 KV buffer size =    45.00 MiB
llama_kv_cache: size =   45.00 MiB (  2048 cells,  30 layers,  1/1 seqs), K (f16):   22.50 MiB
sched_reserve:    Vulkan0 compute buffer size =    98.30 MiB
sched_reserve: Vulkan_Host compute buffer size =     5.01 MiB
""".splitlines()
# The same model on this machine's CPU build (recorded): no "offloaded" line at all.
CPU_LOAD = [
    *(f"load_tensors: layer {n:3d} assigned to device CPU, is_swa = 0" for n in range(31)),
    "load_tensors:   CPU_Mapped model buffer size =    92.10 MiB",
    "llama_context:        CPU  output buffer size =     0.19 MiB",
    "llama_kv_cache:        CPU KV buffer size =    11.25 MiB",
    "sched_reserve:        CPU compute buffer size =    98.25 MiB",
]
LLVMPIPE = Device("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "GPU", 16 << 30, 12 << 30)
H200 = Device("CUDA0", "NVIDIA H200", "GPU", 141 << 30, 140 << 30)
CPU = Device("CPU", "AMD EPYC 9654 96-Core Processor", "CPU", 64 << 30, 60 << 30)


def test_vulkan_load_log_gives_layers_device_and_gpu_bytes() -> None:
    placement = parse_load_log(VULKAN_LOAD)
    assert placement is not None
    assert placement.offloaded_text == "31/31"
    assert placement.devices == ("Vulkan0",)
    assert placement.buffers["Vulkan0"] == {
        "weights": round(92.10 * MIB),
        "kv_cache": round(45.00 * MIB),
        "compute": round(98.30 * MIB),
    }
    # GPU memory: Vulkan0's buffers; the mapped token embeddings and host buffers are RAM
    assert placement.vram_bytes == round(92.10 * MIB) + round(45.00 * MIB) + round(98.30 * MIB)
    where = where_it_runs(placement, "Vulkan", 30, [LLVMPIPE, CPU])
    assert where.device == "Vulkan0 · llvmpipe (software)"
    assert where.offloaded_layers == "31/31"
    assert where_text(_row(where)) == "31/31 layers on Vulkan0 · llvmpipe (software)"


def _row(where: WhereItRuns) -> dict[str, object]:
    return {
        "device": where.device,
        "offloaded_layers": where.offloaded_layers,
        "vram_bytes": where.vram_bytes,
    }


def test_cpu_load_log_offloads_nothing() -> None:
    placement = parse_load_log(CPU_LOAD)
    assert placement is not None
    assert (placement.offloaded, placement.layers, placement.devices) == (0, 31, ())
    assert placement.vram_bytes == 0
    where = where_it_runs(placement, "CPU", 30)
    assert (where.device, where.offloaded_layers, where.vram_bytes) == ("CPU", "0/31", 0)
    assert where_text(_row(where)) == "0/31 layers on GPU · CPU"
    # no log captured (a model loaded in a process that does not route llama.cpp's log): a
    # CPU build still knows nothing is offloaded; a GPU build does not guess
    assert where_it_runs(None, "CPU", 30) == where
    assert where_it_runs(None, "CUDA", 30).device is None
    assert parse_load_log(["llama_model_loader: loaded meta data"]) is None


def test_partial_offload_and_unnamed_devices() -> None:
    lines = [
        *(f"load_tensors: layer {n:3d} assigned to device CPU, is_swa = 0" for n in range(20)),
        *(
            f"load_tensors: layer {n:3d} assigned to device CUDA0, is_swa = 0"
            for n in range(20, 33)
        ),
        "load_tensors: offloaded 13/33 layers to GPU",
        "load_tensors:        CUDA0 model buffer size =  1776.00 MiB",
        "load_tensors:   CPU_Mapped model buffer size =  2500.00 MiB",
        "llama_kv_cache:      CUDA0 KV buffer size =   104.00 MiB",
        "llama_kv_cache:        CPU KV buffer size =   160.00 MiB",
        "sched_reserve:      CUDA0 compute buffer size =   300.00 MiB",
        "sched_reserve:  CUDA_Host compute buffer size =    16.00 MiB",
    ]
    placement = parse_load_log(lines)
    assert placement is not None and placement.offloaded_text == "13/33"
    assert placement.vram_bytes == (1776 + 104 + 300) * MIB
    where = where_it_runs(placement, "CUDA", 32, [CPU, H200])
    assert where.device == "CUDA0 · NVIDIA H200"
    assert where_it_runs(placement, "CUDA", 32).device == "CUDA0"  # devices not listable
    assert where_text(_row(where)) == "13/33 layers on CUDA0 · NVIDIA H200"


def test_software_device_is_named_so_and_never_chosen_automatically(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert LLVMPIPE.software and LLVMPIPE.label == "llvmpipe (software)"
    assert not H200.software and H200.label == "NVIDIA H200"
    assert not CPU.software  # the CPU backend is the CPU, not a disguised one
    support = GpuSupport(True, True, "Vulkan", "0.3.36", (LLVMPIPE, CPU))
    assert "llvmpipe (LLVM 15.0.6, 256 bits) (software)" in support.summary
    monkeypatch.setattr("desktop.local.gpu.detect", lambda with_devices=True: support)
    # offload-capable build, but its only "GPU" is software: no GPU room to fill
    assert pool.gpu_memory() == (True, None)
    info = read_model_info(gguf_files.starter())
    assert gpu_layers_for(info, 2048, *pool.gpu_memory()) == 0
    real = GpuSupport(True, True, "CUDA", "0.3.36", (H200, LLVMPIPE, CPU))
    monkeypatch.setattr("desktop.local.gpu.detect", lambda with_devices=True: real)
    assert pool.gpu_memory() == (True, 140 << 30)
    assert gpu_layers_for(info, 2048, *pool.gpu_memory()) == -1


def test_tooltip_and_timeline_say_where_it_ran() -> None:
    row = {
        **LOCAL_FIRST,
        "device": "Vulkan0 · llvmpipe (software)",
        "offloaded_layers": "31/31",
        "vram_bytes": 235 * MIB,
    }
    assert "31/31 layers on Vulkan0 · llvmpipe (software)" in stats_tooltip_text(row, "Starter")
    facts = {f.key: f for f in build_timeline(row).facts}
    assert facts["placement"].value == (
        "31/31 layers on Vulkan0 · llvmpipe (software) · 235 MiB GPU memory"
    )
    cpu = {**row, "device": "CPU", "offloaded_layers": "0/31", "vram_bytes": 0}
    assert "0/31 layers on GPU · CPU" in stats_tooltip_text(cpu, "Starter")
    assert {f.key: f for f in build_timeline(cpu).facts}["placement"].value == (
        "0/31 layers on GPU · CPU"
    )
    older = LOCAL_FIRST  # recorded before m012: no such fact, nothing in the tooltip
    assert "placement" not in {f.key for f in build_timeline(older).facts}
    assert "layers on" not in stats_tooltip_text(older, "Starter")


@pytest.mark.slow
def test_local_reply_stats_row_says_cpu_and_no_layers_offloaded(services: Any) -> None:
    agent = services.agents.by_name(STARTER_AGENT_NAME).with_changes(max_tokens=2, seed=1)
    conv = services.conversations.create(agent.id)
    turn = services.chat.begin(conv.id, agent, "Hi")
    result = asyncio.run(services.chat.run(turn))
    assert result.status == "complete"
    stored = services.stats.for_message(turn.reply.id)
    assert stored is not None
    assert stored["backend"] == "CPU"
    assert stored["device"] == "CPU"
    assert stored["offloaded_layers"] == "0/31"  # the starter: 30 blocks + the output layer
    assert stored["vram_bytes"] == 0
    # the worker told the app where the model it loaded for the reply runs (Models page)
    report = services.local.placement_of(str(gguf_files.starter()))
    assert report is not None and report.where.device == "CPU"
    assert report.placement is not None and set(report.placement.buffers) >= {"CPU"}
    assert buffers_text(report.placement).startswith("CPU: weights ")
    asyncio.run(services.local.unload())
    assert services.local.placement_of(str(gguf_files.starter())) is None


GiB = 1024**3
H200_VULKAN = Device("Vulkan0", "NVIDIA H200", "GPU", 139 * GiB, 138 * GiB)
LLVMPIPE_1 = Device("Vulkan1", "llvmpipe (LLVM 15.0.6, 256 bits)", "GPU", 16 * GiB, 12 * GiB)


def test_buffers_read_per_device_gpu_first_and_the_ram_as_cpu() -> None:
    """The Models page's "Buffers" fact from the recorded Vulkan load: the device with the
    layers first; the mapped embeddings and Vulkan's host buffers are the machine's RAM, one
    "CPU" entry (the 0.19 MiB output buffer left out)."""
    assert buffers_text(parse_load_log(VULKAN_LOAD)) == (
        "Vulkan0: weights 92.1 MiB · KV cache 45.0 MiB · compute 98.3 MiB; "
        "CPU: weights 28.7 MiB · compute 5.0 MiB"
    )
    assert buffers_text(parse_load_log(CPU_LOAD)) == (
        "CPU: weights 92.1 MiB · KV cache 11.2 MiB · compute 98.2 MiB"
    )
    assert buffers_text(None) == ""


def test_load_facts_say_where_a_loaded_model_runs() -> None:
    from desktop.ui.models.facts import load_facts

    vulkan = parse_load_log(VULKAN_LOAD)
    report = LoadReport("/m.gguf", vulkan, where_it_runs(vulkan, "Vulkan", 30, [LLVMPIPE]), -1)
    facts = dict(load_facts(report))
    assert facts["Where it runs"] == "31/31 layers on Vulkan0 · llvmpipe (software)"
    assert facts["Buffers"].startswith("Vulkan0: weights 92.1 MiB · KV cache 45.0 MiB")
    assert "GPU note" not in facts
    cpu = parse_load_log(CPU_LOAD)
    facts = dict(load_facts(LoadReport("/m.gguf", cpu, where_it_runs(cpu, "CPU", 30))))
    assert facts["Where it runs"] == "0/31 layers on GPU · CPU"
    assert load_facts(None) == []
    # an out-of-memory retry's note reaches the page (the worker sends it with the placement)
    retried = LoadReport("/m.gguf", cpu, WhereItRuns("CPU", "0/31", 0), 0, "Not enough GPU…")
    assert dict(load_facts(retried))["GPU note"] == "Not enough GPU…"
    assert pickle.loads(pickle.dumps(report)) == report  # it crosses the worker's pipe


def test_the_backend_line_gives_each_gpu_its_memory_and_names_software_ones() -> None:
    support = GpuSupport(True, True, "Vulkan", "0.3.36", (H200_VULKAN, LLVMPIPE_1, CPU))
    assert backend_text(support) == (
        "llama-cpp-python 0.3.36 (Vulkan): GPU offload on Vulkan0 · NVIDIA H200 "
        "(139 GiB, 138 GiB free), Vulkan1 · llvmpipe (software)."
    )
    assert device_text(LLVMPIPE_1) == "Vulkan1 · llvmpipe (software)"  # no memory of its own
    assert device_text(Device("CUDA0", "", "GPU")) == "CUDA0"  # says nothing more
    cpu_only = GpuSupport(True, False, "CPU", "0.3.36", (CPU,))
    assert backend_text(cpu_only) == cpu_only.summary and "CPU only" in backend_text(cpu_only)


def test_the_estimate_names_its_gpu_and_says_when_the_gpu_part_does_not_fit() -> None:
    support = GpuSupport(True, True, "Vulkan", "0.3.36", (H200_VULKAN, CPU))
    assert gpu_column_text(support) == "GPU: Vulkan0 · NVIDIA H200, 138 GiB free"
    soft = GpuSupport(True, True, "Vulkan", "0.3.36", (LLVMPIPE, CPU))
    assert gpu_column_text(soft) == "GPU: Vulkan0 · llvmpipe (software), in the computer's RAM"
    assert gpu_column_text(GpuSupport(True, False, "CPU", "0.3.36", (CPU,))) == ""
    small = Device("Vulkan0", "AMD Radeon RX 7600", "GPU", 8 * GiB, round(7.8 * GiB))
    assert gpu_shortfall(round(9.1 * GiB), [small, CPU]) == (
        "Needs 9.1 GiB on the GPU; Vulkan0 has 7.8 GiB free: lower GPU layers or the context."
    )
    assert gpu_shortfall(round(7 * GiB), [small, CPU]) == ""  # fits
    assert gpu_shortfall(round(9.1 * GiB), [LLVMPIPE, CPU]) == ""  # no GPU memory to compare
    two = [small, Device("Vulkan1", "AMD Radeon RX 7600", "GPU", 8 * GiB, GiB)]
    assert "Vulkan0 and Vulkan1 have 8.8 GiB free" in gpu_shortfall(10 * GiB, two)


def test_all_layers_only_when_the_whole_model_fits_the_free_gpu_memory() -> None:
    info = read_model_info(gguf_files.starter())
    need = estimate(info, 2048, "f16", -1, gpu_offload=True).vram
    assert gpu_layers_for(info, 2048, True, need) == -1
    assert gpu_layers_for(info, 2048, True, need - 1) == 0
    assert gpu_layers_for(info, 2048, False, 100 * GiB) == 0  # a CPU build
    assert gpu_layers_for(info, 2048, True, None) == 0  # free memory not known
