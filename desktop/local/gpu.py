"""What the installed llama.cpp build can do: GPU offload, backend, devices, architectures.

Everything here degrades to "CPU" / "unknown" rather than failing: a CPU-only machine, a
missing llama-cpp-python, or a build without the device API must all keep the app working.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("simi.local")

# Backend library files next to libllama (llama.cpp builds one shared library per backend).
_BACKEND_LIBS = (
    ("CUDA", "ggml-cuda"),
    ("ROCm", "ggml-hip"),
    ("Metal", "ggml-metal"),
    ("Vulkan", "ggml-vulkan"),
    ("SYCL", "ggml-sycl"),
    ("OpenCL", "ggml-opencl"),
)
# ggml_backend_dev_type (ggml-backend.h)
_DEV_TYPES = {0: "CPU", 1: "GPU", 2: "iGPU", 3: "accelerator"}
# Devices that draw on the CPU while a GPU backend lists them as GPUs: Mesa's llvmpipe
# (lavapipe, Vulkan type CPU, which ggml-vulkan reports as a GPU), softpipe, SwiftShader,
# Windows' Basic Render Driver. Named "(software)", never chosen by automatic GPU layers.
SOFTWARE_DEVICE_WORDS = ("llvmpipe", "lavapipe", "softpipe", "swiftshader", "basic render")


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    description: str
    kind: str  # CPU / GPU / iGPU / accelerator
    memory_total: int | None = None
    memory_free: int | None = None

    @property
    def software(self) -> bool:
        """A GPU backend's device that is the CPU in disguise (llvmpipe): offloading to it
        is slower than the CPU backend itself (~1 vs 74 tok/s on the starter)."""
        text = self.description.lower()
        if any(word in text for word in SOFTWARE_DEVICE_WORDS):
            return True
        return self.kind == "CPU" and not self.name.upper().startswith("CPU")

    @property
    def label(self) -> str:
        """ "NVIDIA H200", "llvmpipe (software)": the description without its details in
        brackets ("(LLVM 15.0.6, 256 bits)"), marked when it is a software device."""
        short = self.description.split(" (", 1)[0].strip() or self.name
        return f"{short} (software)" if self.software else short


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


def _lib_dir() -> Path | None:
    """The folder of the llama.cpp build this process loads (``desktop.local.libraries``)."""
    from desktop.local.libraries import active_folder

    folder = active_folder()
    return folder if folder is not None and folder.is_dir() else None


def _backend_from_libs(lib_dir: Path | None) -> str | None:
    if lib_dir is None:
        return None
    names = [p.name for p in lib_dir.iterdir()]
    for backend, stem in _BACKEND_LIBS:
        if any(n.startswith((f"lib{stem}.", f"{stem}.")) for n in names):
            return backend
    return None


def _devices() -> tuple[Device, ...]:
    """Devices from ggml's backend registry (not bound by llama-cpp-python; called via
    ctypes on the libraries it ships). Empty when the API or the libraries are missing."""
    lib_dir = _lib_dir()
    if lib_dir is None:
        return ()
    try:
        import llama_cpp

        llama_cpp.llama_backend_init()
        ggml = ctypes.CDLL(str(_find_lib(lib_dir, "ggml")))
        base = ctypes.CDLL(str(_find_lib(lib_dir, "ggml-base")))
        ggml.ggml_backend_dev_count.restype = ctypes.c_size_t
        ggml.ggml_backend_dev_get.restype = ctypes.c_void_p
        ggml.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
        base.ggml_backend_dev_name.restype = ctypes.c_char_p
        base.ggml_backend_dev_name.argtypes = [ctypes.c_void_p]
        base.ggml_backend_dev_description.restype = ctypes.c_char_p
        base.ggml_backend_dev_description.argtypes = [ctypes.c_void_p]
        base.ggml_backend_dev_type.restype = ctypes.c_int
        base.ggml_backend_dev_type.argtypes = [ctypes.c_void_p]
        base.ggml_backend_dev_memory.restype = None
        base.ggml_backend_dev_memory.argtypes = [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.POINTER(ctypes.c_size_t),
        ]
        out = []
        for i in range(min(int(ggml.ggml_backend_dev_count()), 64)):
            dev = ggml.ggml_backend_dev_get(i)
            if not dev:
                continue
            free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
            base.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
            out.append(
                Device(
                    name=(base.ggml_backend_dev_name(dev) or b"").decode("utf-8", "replace"),
                    description=(base.ggml_backend_dev_description(dev) or b"").decode(
                        "utf-8", "replace"
                    ),
                    kind=_DEV_TYPES.get(int(base.ggml_backend_dev_type(dev)), "unknown"),
                    memory_total=int(total.value) or None,
                    memory_free=int(free.value) or None,
                )
            )
        return tuple(out)
    except (OSError, AttributeError) as exc:
        log.info("cannot list llama.cpp devices: %s", exc)
        return ()


def _find_lib(lib_dir: Path, stem: str) -> Path:
    for pattern in (f"lib{stem}.so", f"lib{stem}.dylib", f"{stem}.dll"):
        candidate = lib_dir / pattern
        if candidate.exists():
            return candidate
    raise OSError(f"no {stem} library in {lib_dir}")


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
        backend = _backend_from_libs(_lib_dir()) or "GPU"
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
