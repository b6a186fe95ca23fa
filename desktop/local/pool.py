"""The rule for starting another llama.cpp worker: whether a new one fits in memory.

``LocalRuntime`` (``desktop.local.provider``) keeps up to ``MAX_WORKERS`` worker processes so
local agents can answer at the same time. A request goes to an idle worker that has its load
parameters, else to any idle worker (which reloads), else to a *new* worker when that fits,
else it waits, saying so (``Queued``). "Fits" is decided here, from the memory estimate of
``desktop.local.memory`` (weights, KV cache for the agent's n_ctx and KV type, compute buffers):

* RAM: the new model's estimate plus the estimates of the models the running workers hold,
  plus a safety margin (``RAM_MARGIN_SHARE`` of the available RAM, at least
  ``RAM_MARGIN_MIN``), must be within the RAM available now (``/proc/meminfo`` MemAvailable).
  The running workers are counted although their memory is already taken: their weights are
  mapped files, which MemAvailable counts as free page cache, and erring on the side of waiting
  never costs more than the queue did before.
* VRAM: when the new model offloads layers, the same sum over GPU memory against the free GPU
  memory llama.cpp's devices report; when that is unknown, no GPU worker is started beside
  another worker.
An unknown available RAM figure never fits either. Cores: a new worker starts only while fewer
workers answer than the machine has cores; workers answering at once split the cores between
them (``LocalRuntime._share_threads``: the worker's shared thread budget, which llama.cpp
follows from the next token). Qt-free; no model is loaded here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import replace

from desktop.local.catalog import ModelInfo
from desktop.local.loading import LoadParams
from desktop.local.memory import MemoryEstimate, estimate

MAX_WORKERS = 3  # worker processes at most: the first, and two that start when they fit
EXTRA_IDLE_S = 60.0  # a worker beyond the first exits after this long idle (or the setting)
RAM_MARGIN_SHARE = 0.2
RAM_MARGIN_MIN = 512 * 1024**2
VRAM_MARGIN_SHARE = 0.1
VRAM_MARGIN_MIN = 256 * 1024**2
QUEUE_REASON = "the local model is answering another chat"

# () -> bytes of RAM available now, None when the system does not say.
RamProbe = Callable[[], "int | None"]
# () -> (the build can offload to a GPU, bytes of GPU memory free now or None when unknown).
GpuProbe = Callable[[], "tuple[bool, int | None]"]


def available_ram() -> int | None:
    """The RAM a new worker can take now (Linux MemAvailable, else free pages)."""
    from desktop.local.context_size import available_ram as probe

    return probe()


def gpu_memory() -> tuple[bool, int | None]:
    """Whether the installed build offloads, and the free memory of its GPUs (None when a
    device does not say). Imports llama_cpp (the library, never a model): call it off the
    event loop."""
    from desktop.local.gpu import detect
    from desktop.local.gpu_text import free_gpu_memory

    support = detect()
    if not support.gpu_offload:
        return False, None
    # a software device (llvmpipe) is the CPU again: its "free memory" is RAM, never GPU room
    return True, free_gpu_memory(support.devices)


def estimate_for(info: ModelInfo, params: LoadParams, gpu_offload: bool) -> MemoryEstimate:
    """What a worker loading ``params`` takes, RAM and GPU memory; a vision projector's
    weights (its file size) counted in RAM, where the projector is before any GPU takes it."""
    est = estimate(
        info,
        params.n_ctx,
        params.kv_type,
        params.n_gpu_layers,
        n_batch=params.n_batch,
        flash_attn=params.flash_attn,
        gpu_offload=gpu_offload,
    )
    if params.mmproj_path:
        try:
            extra = os.stat(params.mmproj_path).st_size
        except OSError:
            extra = 0  # a missing projector fails the load with its own message
        est = replace(est, weights_cpu=est.weights_cpu + extra)
    return est


def fits(
    new: MemoryEstimate,
    running: Iterable[MemoryEstimate],
    ram_available: int | None,
    vram_free: int | None,
) -> bool:
    """Whether a worker taking ``new`` may start beside workers taking ``running``."""
    running = list(running)
    if ram_available is None:
        return False
    ram_need = new.ram + sum(r.ram for r in running)
    ram_margin = max(RAM_MARGIN_MIN, RAM_MARGIN_SHARE * ram_available)
    if ram_need + ram_margin > ram_available:
        return False
    if new.vram <= 0:
        return True
    if vram_free is None:
        return False
    vram_need = new.vram + sum(r.vram for r in running)
    vram_margin = max(VRAM_MARGIN_MIN, VRAM_MARGIN_SHARE * vram_free)
    return vram_need + vram_margin <= vram_free
