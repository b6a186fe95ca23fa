"""How much memory a local agent's model will need, for the agent editor's live estimate
(Qt-free; ``desktop.ui.agents.memory_estimate`` shows it).

``MemoryEstimator`` holds the header cache (``local.catalog.InfoCache``: a file is read once
per path + mtime + size) and the llama.cpp build with its devices (``local.gpu.detect``, asked
once). ``read`` and ``probe_gpu`` block (the view calls them off the GUI thread when a loop
runs); ``estimate`` takes microseconds, so changing n_ctx or the KV type re-estimates at
once: the figures (``local.memory.estimate``) and the notes under them (the trained context
exceeded, a CPU-only build, what an empty GPU layers field gives, a GPU part that does not fit
the GPU's free memory: ``local.gpu_text``). An empty context field is the automatic size for
the memory available now; an empty GPU layers field is what saving fills in
(``local.memory.gpu_layers_for``: all layers when they fit, else none).
"""

from __future__ import annotations

import os

from desktop.local.catalog import InfoCache, ModelFileError, ModelInfo
from desktop.local.context_size import automatic_n_ctx, available_ram
from desktop.local.gpu import Device, GpuSupport, detect
from desktop.local.gpu_text import free_gpu_memory, gpu_column_text, gpu_shortfall, real_gpus
from desktop.local.memory import MemoryEstimate, estimate, format_bytes, gpu_layers_for
from desktop.local.starter import resolve_model_path

# (model file or None, n_ctx (0: automatic), KV type, GPU layers (None: automatic))
EstimateArgs = tuple[str | None, int, str, int | None]


def _int(value: int | str | None, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, int):
        return value
    text = value.strip().split()[0] if value.strip() else ""
    try:
        return int(text)
    except ValueError:
        return default


def _layers(value: int | str | None) -> int | None:
    """The GPU layers field: None when empty (automatic: saving fills it), else its number
    (0 for text that is not one: validation says so)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _int(value, 0)


def estimate_args(
    model_path: str | None,
    n_ctx: int | str | None,
    kv_type: str | None,
    n_gpu_layers: int | str | None,
) -> EstimateArgs:
    """The editor's fields as typed ("4096", "-1", "", a ``starter:`` reference) as what
    ``MemoryEstimator.estimate`` takes; the file's path is None when none is given."""
    resolved = resolve_model_path(model_path.strip()) if model_path else None
    path = str(resolved) if resolved else None
    # an empty context field: 0, the automatic size (worked out once the header is read)
    return (path, max(0, _int(n_ctx, 0)), kv_type or "f16", _layers(n_gpu_layers))


def _automatic_note(est: MemoryEstimate, devices: tuple[Device, ...]) -> str:
    """What an empty GPU layers field gives, and why."""
    if est.gpu_layers:
        return f"GPU layers automatic: all {est.gpu_layers} fit the GPU."
    if not real_gpus(devices):
        why = "no GPU with memory of its own"
    elif free_gpu_memory(devices) is None:
        why = "the GPU does not say its free memory"
    else:
        why = "the whole model does not fit the GPU's free memory"
    return f"GPU layers automatic: none ({why})."


def _system_ram() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


class MemoryEstimator:
    """``cache``: the runtime's header cache (a fresh one when not given); ``gpu``: the
    llama.cpp build and its devices (asked by ``probe_gpu`` when not given; tests pass
    figures)."""

    def __init__(self, cache: InfoCache | None = None, gpu: GpuSupport | None = None) -> None:
        self.cache = cache or InfoCache()
        self.gpu = gpu

    def peek(self, path: str) -> ModelInfo | ModelFileError | None:
        """The file's header facts when already read (never reads the file)."""
        return self.cache.peek(path)

    def read(self, path: str) -> ModelInfo | ModelFileError:
        """Blocking: the file's header facts, or what is wrong with it."""
        try:
            return self.cache.get(path)
        except ModelFileError as exc:
            return exc

    @staticmethod
    def probe_gpu() -> GpuSupport:
        """Blocking: the llama.cpp build with its devices (their names, their memory)."""
        return detect()

    def estimate(
        self,
        info: ModelInfo,
        n_ctx: int,
        kv_type: str,
        layers: int | None,
        *,
        flash_attn: bool = False,
    ) -> tuple[MemoryEstimate | None, str]:
        """The estimate for these fields (None when they cannot be estimated) and the notes
        to show under it. Without ``gpu`` the build is asked here, without its devices (no
        loop ran to ask it off the GUI thread)."""
        if not n_ctx:  # what saving the agent with the field empty gives it (/proc: µs)
            n_ctx = automatic_n_ctx(info, available_ram())
        if self.gpu is None:
            self.gpu = detect(with_devices=False)
        offload = self.gpu.gpu_offload
        devices = self.gpu.devices
        automatic = layers is None
        try:
            if layers is None:  # what saving the agent with the field empty gives it
                free = free_gpu_memory(devices)
                layers = gpu_layers_for(info, n_ctx, offload, free, kv_type, flash_attn=flash_attn)
            est = estimate(info, n_ctx, kv_type, layers, flash_attn=flash_attn, gpu_offload=offload)
        except ValueError as exc:
            return None, str(exc)
        notes = []
        if info.context_length and n_ctx > info.context_length:
            notes.append(
                f"n_ctx {n_ctx:,} is beyond the {info.context_length:,} tokens the model "
                "was trained on; replies may degrade past that."
            )
        if layers and not offload:
            notes.append("This llama.cpp build is CPU-only: n_gpu_layers is ignored.")
        elif automatic and offload:
            notes.append(_automatic_note(est, devices))
        elif est.gpu_layers:
            notes.append(f"{est.gpu_layers} of {est.block_count + 1} layers on the GPU.")
        shortfall = gpu_shortfall(est.vram, devices) if offload else ""
        if shortfall:
            notes.append(shortfall)
        ram = _system_ram()
        if ram and est.ram > 0.9 * ram:
            notes.append(f"That is more than this computer's {format_bytes(ram)} of RAM.")
        if info.template_note:
            notes.append(f"{info.name}: {info.template_note}.")
        return est, " ".join(notes)

    def gpu_line(self) -> str:
        """Which GPU the estimate's GPU column means, with its free memory ('' for none)."""
        return gpu_column_text(self.gpu)
