"""The devices of a llama.cpp build, from ggml's own device API (called via ctypes: not bound by
llama-cpp-python), and the GPU backend a build's library folder holds.

Below ``desktop.local.libraries`` (which build a start loads; its probe lists the devices of a
build in a process of its own) and ``desktop.local.gpu`` (what the loaded build can do).
"""

from __future__ import annotations

import ctypes
import logging
from dataclasses import dataclass
from pathlib import Path

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

    @property
    def full_name(self) -> str:
        """ "Vulkan0 · NVIDIA H200", "Vulkan0 · llvmpipe (software)": ggml's name and the
        label, as the stats row, the timeline and the Models page name a device (the name
        alone when ggml does not describe it)."""
        label = self.label
        return f"{self.name} · {label}" if label and label != self.name else self.name


def backend_from_libs(lib_dir: Path | None) -> str | None:
    """The GPU backend whose library ``lib_dir`` holds (CUDA, Vulkan, ...), None for a CPU
    build or no folder: read from the file names, without loading anything."""
    if lib_dir is None:
        return None
    names = [p.name for p in lib_dir.iterdir()]
    for backend, stem in _BACKEND_LIBS:
        if any(n.startswith((f"lib{stem}.", f"{stem}.")) for n in names):
            return backend
    return None


def list_devices(lib_dir: Path) -> tuple[Device, ...]:
    """Devices from ggml's backend registry of the build in ``lib_dir`` (not bound by
    llama-cpp-python; called via ctypes on the libraries it ships; imports llama_cpp, which
    loads that build when ``desktop.local.libraries`` chose it). Empty when the API or the
    libraries are missing."""
    try:
        import llama_cpp

        llama_cpp.llama_backend_init()
        ggml = ctypes.CDLL(str(find_lib(lib_dir, "ggml")))
        base = ctypes.CDLL(str(find_lib(lib_dir, "ggml-base")))
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


def find_lib(lib_dir: Path, stem: str) -> Path:
    for pattern in (f"lib{stem}.so", f"lib{stem}.dylib", f"{stem}.dll"):
        candidate = lib_dir / pattern
        if candidate.exists():
            return candidate
    raise OSError(f"no {stem} library in {lib_dir}")
