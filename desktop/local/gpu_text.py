"""What the app says about the GPUs of the installed llama.cpp build (issue 26 item 3): the
Models page's backend line with each device's memory, and the editor's memory estimate naming
the GPU its GPU column means and saying when that part does not fit.

Words only, from a ``desktop.local.gpu.GpuSupport`` (``detect()``, called off the GUI thread
by whoever shows them). A software device (llvmpipe) is named so and has no memory of its
own: what it "frees" is the computer's RAM, so it never counts as room on a GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from desktop.local.gpu import Device, GpuSupport
from desktop.local.memory import format_bytes


def gpus(devices: Iterable[Device]) -> list[Device]:
    """The devices a GPU backend lists (software ones too), in ggml's order."""
    return [d for d in devices if d.kind != "CPU"]


def real_gpus(devices: Iterable[Device]) -> list[Device]:
    """The GPUs whose memory is room for layers: not the CPU, not a software device."""
    return [d for d in gpus(devices) if not d.software]


def free_gpu_memory(devices: Iterable[Device]) -> int | None:
    """The free bytes of the real GPUs together; None when there is none or one does not
    say (``desktop.local.pool.gpu_memory``'s figure)."""
    frees = [d.memory_free for d in real_gpus(devices)]
    if not frees or any(f is None for f in frees):
        return None
    return sum(f for f in frees if f is not None)


def device_text(device: Device) -> str:
    """ "Vulkan0 · NVIDIA H200 (139 GiB, 138 GiB free)"; a software device "(software)" and
    no memory; a device that does not say its memory, its name alone."""
    name = device.full_name
    if device.software:
        return name
    sizes = []
    if device.memory_total:
        sizes.append(format_bytes(device.memory_total))
    if device.memory_free is not None and device.memory_total:
        sizes.append(f"{format_bytes(device.memory_free)} free")
    return f"{name} ({', '.join(sizes)})" if sizes else name


def backend_text(support: GpuSupport) -> str:
    """The Models page's line about the build: ``GpuSupport.summary`` with each GPU's memory
    ("llama-cpp-python 0.3.36 (Vulkan): GPU offload on Vulkan0 · NVIDIA H200 (139 GiB,
    138 GiB free).")."""
    listed = gpus(support.devices)
    if not (support.available and support.gpu_offload and listed):
        return support.summary
    names = ", ".join(device_text(d) for d in listed)
    return f"{support.build} ({support.backend}): GPU offload on {names}."


def gpu_column_text(support: GpuSupport | None) -> str:
    """What the memory estimate's GPU column means: "GPU: Vulkan0 · NVIDIA H200, 138 GiB
    free" (each real GPU; a software device by name, "uses the RAM"); "" for a CPU-only build
    or when the devices are not known."""
    if support is None or not support.gpu_offload:
        return ""
    listed = gpus(support.devices)
    if not listed:
        return ""
    parts = []
    for device in listed:
        name = device.full_name
        if device.software:
            parts.append(f"{name}, in the computer's RAM")
        elif device.memory_free is not None and device.memory_total:
            parts.append(f"{name}, {format_bytes(device.memory_free)} free")
        else:
            parts.append(name)
    return "GPU: " + "; ".join(parts)


def gpu_shortfall(vram_needed: int, devices: Sequence[Device]) -> str:
    """ "Needs 9.1 GiB on the GPU; Vulkan0 has 7.8 GiB free: lower GPU layers or the
    context." when the GPU part of an estimate does not fit the real GPUs' free memory; ""
    when it fits, when nothing goes to the GPU, or when the free memory is not known."""
    free = free_gpu_memory(devices)
    if not vram_needed or free is None or vram_needed <= free:
        return ""
    names = [d.name for d in real_gpus(devices)]
    who = f"{names[0]} has" if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]} have"
    return (
        f"Needs {format_bytes(vram_needed)} on the GPU; {who} {format_bytes(free)} free: "
        "lower GPU layers or the context."
    )
