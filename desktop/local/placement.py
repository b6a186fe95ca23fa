"""Where a loaded model runs, as llama.cpp itself reports it while loading (issue 26 item 3).

llama.cpp logs, for each load, which device every layer went to ("layer 3 assigned to device
Vulkan0"), how many it offloaded ("offloaded 31/31 layers to GPU"; only builds with a GPU
backend say it) and every buffer it allocated, per device ("Vulkan0 model buffer size =
92.10 MiB", "… KV buffer size", "… compute buffer size"). ``LoadLog`` reads those lines as
they come (``desktop.local.loading`` feeds it from the log callback) and ``Placement`` is the
result: the figures the stats row and the timeline show, not the setting that asked for them.
``LoadReport`` is what the worker sends the app after each load (the Models page shows it;
``buffers_text`` words its buffers).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from desktop.local.gpu import Device

MIB = 1024 * 1024
# How the buffers' kinds read, in the order they are listed (the output buffer, the logits
# of one batch, a fraction of a MiB, is left out)
KIND_WORDS = {"weights": "weights", "kv_cache": "KV cache", "compute": "compute"}

# load_tensors: offloaded 31/31 layers to GPU
_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
# load_tensors: layer   3 assigned to device Vulkan0, is_swa = 0
_ASSIGNED = re.compile(r"\blayer +(\d+) assigned to device ([^,\s]+)")
# load_tensors:      Vulkan0 model buffer size =    92.10 MiB
# llama_kv_cache:    Vulkan0 KV buffer size =    45.00 MiB
# sched_reserve:     Vulkan0 compute buffer size =    98.25 MiB
# llama_context: Vulkan_Host  output buffer size =     0.19 MiB
_BUFFER = re.compile(r"(\S+) +(model|KV|RS|compute|output) buffer size = *([\d.]+) MiB")
_BUFFER_KINDS = {
    "model": "weights",
    "KV": "kv_cache",
    "RS": "kv_cache",
    "compute": "compute",
    "output": "output",
}


def is_host_buffer(device: str) -> bool:
    """Buffers in the machine's RAM: the CPU's own ("CPU", "CPU_Mapped", "CPU_REPACK") and a
    GPU backend's pinned host memory ("CUDA_Host", "Vulkan_Host")."""
    return device.startswith("CPU") or device.endswith("_Host")


@dataclass(frozen=True, slots=True)
class Placement:
    """What llama.cpp reported about one load. ``layers``: every layer it placed (the
    repeating blocks and the output layer: 31 for a 30-block model); ``devices``: the devices
    other than the CPU that hold layers, in order; ``buffers``: bytes per device and kind
    ("weights", "kv_cache", "compute", "output")."""

    offloaded: int | None = None
    layers: int | None = None
    devices: tuple[str, ...] = ()
    buffers: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def offloaded_text(self) -> str | None:
        """ "31/31" (as llama.cpp says it), or None when the load did not say."""
        if self.offloaded is None or self.layers is None:
            return None
        return f"{self.offloaded}/{self.layers}"

    @property
    def vram_bytes(self) -> int:
        """The bytes of every buffer on a device other than the machine's RAM."""
        return sum(
            size
            for device, kinds in self.buffers.items()
            if not is_host_buffer(device)
            for size in kinds.values()
        )


class LoadLog:
    """Collects the placement lines of one load; ``clear`` before each load."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._offloaded: tuple[int, int] | None = None
        self._assigned: dict[int, str] = {}
        self._buffers: dict[str, dict[str, int]] = {}

    @property
    def seen(self) -> bool:
        return bool(self._offloaded or self._assigned or self._buffers)

    def feed(self, line: str) -> None:
        if "buffer size" in line:
            m = _BUFFER.search(line)
            if m:
                device, kind = m.group(1), _BUFFER_KINDS[m.group(2)]
                sizes = self._buffers.setdefault(device, {})
                sizes[kind] = sizes.get(kind, 0) + round(float(m.group(3)) * MIB)
            return
        if "offloaded" in line:
            m = _OFFLOADED.search(line)
            if m:
                self._offloaded = (int(m.group(1)), int(m.group(2)))
            return
        if "assigned to device" in line:
            m = _ASSIGNED.search(line)
            if m:
                self._assigned[int(m.group(1))] = m.group(2)

    def placement(self) -> Placement | None:
        """What the lines fed since ``clear`` said; None when there were none."""
        if not self.seen:
            return None
        devices = tuple(
            dict.fromkeys(d for _, d in sorted(self._assigned.items()) if not is_host_buffer(d))
        )
        offloaded: int | None = None
        layers: int | None = None
        if self._offloaded is not None:
            offloaded, layers = self._offloaded
        elif self._assigned:  # a CPU-only build does not log the "offloaded" line
            layers = len(self._assigned)
            offloaded = sum(1 for d in self._assigned.values() if not is_host_buffer(d))
        return Placement(offloaded, layers, devices, {k: dict(v) for k, v in self._buffers.items()})


def parse_load_log(lines: Iterable[str]) -> Placement | None:
    """``LoadLog`` over recorded lines (tests, and logs kept elsewhere)."""
    log = LoadLog()
    for line in lines:
        log.feed(line)
    return log.placement()


@dataclass(frozen=True, slots=True)
class WhereItRuns:
    """The stats row's ``device``, ``offloaded_layers`` and ``vram_bytes`` for a load: "CPU",
    "0/31", 0 on a CPU build; "Vulkan0 · llvmpipe (software)", "31/31", 246 MiB with a GPU."""

    device: str | None = None
    offloaded_layers: str | None = None
    vram_bytes: int | None = None


def where_it_runs(
    placement: Placement | None,
    backend: str,
    block_count: int | None,
    devices: Sequence[Device] = (),
) -> WhereItRuns:
    """The figures of a load from what llama.cpp logged (``placement``); without its log (a
    model loaded in a process that does not capture it) a CPU build still knows: nothing is
    offloaded. ``devices`` (``gpu.detect().devices``) name the GPUs ("Vulkan0 · llvmpipe")."""
    if placement is None:
        if backend != "CPU":
            return WhereItRuns()
        layers = f"0/{block_count + 1}" if block_count else None
        return WhereItRuns("CPU", layers, 0)
    device = ", ".join(device_label(name, devices) for name in placement.devices) or "CPU"
    return WhereItRuns(device, placement.offloaded_text, placement.vram_bytes)


def device_label(name: str, devices: Sequence[Device] = ()) -> str:
    """ "Vulkan0 · llvmpipe (software)", "CUDA0 · NVIDIA H200", or the bare name when ggml
    does not describe the device."""
    return next((dev.full_name for dev in devices if dev.name == name), name)


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What the worker tells the app after each load (``desktop.local.worker``'s "placement"
    message): ``placement`` (None when llama.cpp's log was not captured), the stats figures
    from it (``where``, named with the worker's devices), the GPU layers llama.cpp was given
    (fewer than asked after an out-of-memory retry) and the note that says so."""

    model_path: str
    placement: Placement | None = None
    where: WhereItRuns = field(default_factory=WhereItRuns)
    gpu_layers: int = 0
    note: str | None = None


def buffers_text(placement: Placement | None) -> str:
    """ "Vulkan0: weights 92.1 MiB · KV cache 45.0 MiB · compute 98.3 MiB; CPU: weights
    28.7 MiB · …": what llama.cpp allocated, per device, the devices with layers first. The
    machine's RAM (the CPU's own buffers, mapped weights, a GPU backend's host buffers) is one
    "CPU" entry, last; the tiny output buffer is left out. "" when the load did not say."""
    from desktop.local.memory import format_bytes

    if placement is None:
        return ""
    groups: dict[str, dict[str, int]] = {}
    for device, kinds in placement.buffers.items():
        name = "CPU" if is_host_buffer(device) else device
        sizes = groups.setdefault(name, {})
        for kind, size in kinds.items():
            sizes[kind] = sizes.get(kind, 0) + size
    order = [d for d in placement.devices if d in groups]
    order += sorted(d for d in groups if d not in order and d != "CPU")
    order += ["CPU"] if "CPU" in groups else []
    parts = []
    for device in order:
        sizes = groups[device]
        words = [
            f"{word} {format_bytes(sizes[kind])}"
            for kind, word in KIND_WORDS.items()
            if sizes.get(kind)
        ]
        if words:
            parts.append(f"{device}: {' · '.join(words)}")
    return "; ".join(parts)
