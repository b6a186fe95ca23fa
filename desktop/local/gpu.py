"""What the installed llama.cpp build can do: GPU offload, backend, devices, architectures.

Everything here degrades to "CPU" / "unknown" rather than failing: a CPU-only machine, a
missing llama-cpp-python, or a build without the device API must all keep the app working.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from desktop.local.devices import Device, backend_from_libs, list_devices

__all__ = ["Device", "GpuSupport", "backend_name", "detect", "devices"]

log = logging.getLogger("simi.local")


@dataclass(frozen=True, slots=True)
class GpuSupport:
    """The installed llama.cpp build. ``backend`` is what stats record (CPU/CUDA/Metal/...)."""

    available: bool  # llama-cpp-python importable
    gpu_offload: bool
    backend: str
    llama_cpp_version: str | None = None
    devices: tuple[Device, ...] = field(default=())
    system_info: str = ""

    @property
    def build(self) -> str:
        return f"llama-cpp-python {self.llama_cpp_version}"

    @property
    def summary(self) -> str:
        if not self.available:
            return "llama.cpp is not installed: local models cannot run."
        gpus = [d for d in self.devices if d.kind != "CPU"]
        if self.gpu_offload and gpus:
            names = ", ".join(_device_label(d) for d in gpus)
            return f"{self.build} ({self.backend}): GPU offload on {names}."
        if self.gpu_offload:
            return f"{self.build} ({self.backend}): GPU offload supported."
        return (
            f"{self.build}: CPU only (this build has no GPU backend; "
            "see the README for CUDA, Metal and Vulkan builds)."
        )

    def to_public_dict(self) -> dict[str, Any]:
        return {
            "available": self.available,
            "gpu_offload": self.gpu_offload,
            "backend": self.backend,
            "llama_cpp_version": self.llama_cpp_version,
            "devices": [
                {
                    "name": d.name,
                    "description": d.description,
                    "type": d.kind,
                    "software": d.software,
                    "memory_total": d.memory_total,
                    "memory_free": d.memory_free,
                }
                for d in self.devices
            ],
            "summary": self.summary,
        }


def _device_label(d: Device) -> str:
    name = d.description or d.name
    if d.software:
        name += " (software)"
    if d.memory_total:
        return f"{name} ({d.memory_total / 1024**3:.0f} GiB)"
    return name


def _devices() -> tuple[Device, ...]:
    """The devices of the build this process loads; empty without one."""
    lib_dir = _lib_dir()
    return list_devices(lib_dir) if lib_dir is not None else ()


def _lib_dir() -> Path | None:
    """The folder of the llama.cpp build this process loads (``desktop.local.libraries``)."""
    from desktop.local.libraries import active_folder

    folder = active_folder()
    return folder if folder is not None and folder.is_dir() else None


def detect(with_devices: bool = True) -> GpuSupport:
    """Inspect the installed build (cheap; imports llama_cpp once)."""
    try:
        import llama_cpp
    except ImportError:
        return GpuSupport(available=False, gpu_offload=False, backend="unavailable")
    try:
        offload = bool(llama_cpp.llama_supports_gpu_offload())
    except Exception:
        offload = False
    try:
        system_info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    except Exception:
        system_info = ""
    backend = "CPU"
    if offload:
        backend = backend_from_libs(_lib_dir()) or "GPU"
    return GpuSupport(
        available=True,
        gpu_offload=offload,
        backend=backend,
        llama_cpp_version=getattr(llama_cpp, "__version__", None),
        devices=_devices() if with_devices else (),
        system_info=system_info,
    )


@functools.cache
def devices() -> tuple[Device, ...]:
    """The backend devices, listed once per process (the worker names its GPU with them)."""
    return _devices()


@functools.cache
def backend_name() -> str:
    """The backend a local call's stats record: "CPU", the GPU backend this build ships
    (CUDA, ROCm, Metal, Vulkan, ...), "GPU" when that cannot be told, or "unavailable"."""
    return detect(with_devices=False).backend


@functools.cache
def _llama_strings() -> bytes | None:
    lib_dir = _lib_dir()
    if lib_dir is None:
        return None
    for name in ("libllama.so", "libllama.dylib", "llama.dll"):
        candidate = lib_dir / name
        if candidate.exists():
            try:
                return candidate.read_bytes()
            except OSError:
                return None
    return None


def architecture_supported(arch: str) -> bool | None:
    """Whether the installed llama.cpp knows ``arch``; None when that cannot be told.

    llama.cpp has no API for its architecture list; its names (llama-arch.cpp LLM_ARCH_NAMES)
    are NUL-terminated string literals in libllama, so a name that does not occur there is one
    this build cannot load. A name that occurs is not proof, only no evidence against.
    """
    strings = _llama_strings()
    if strings is None or not arch or b"llama\x00" not in strings:
        return None  # no library, or its names are not visible as plain strings: no verdict
    # Match the name with its terminator only: linkers may merge it into a longer literal.
    return arch.encode("utf-8") + b"\x00" in strings
