"""The context size a new local agent gets when nobody chose one ("Automatic").

The largest of 8,192, 4,096 and 2,048 tokens that the model was trained for (its GGUF
``context_length``) and whose memory estimate (``desktop.local.memory.estimate``: weights, KV
cache and compute buffers, all in RAM as a new agent starts with no GPU layers) takes at most
half of the memory the system has available now. A model whose file does not say what it was
trained on gets 2,048, the old default; one trained on less gets its own trained context.
"""

from __future__ import annotations

import os
from pathlib import Path

from desktop.local.catalog import ModelInfo
from desktop.local.memory import estimate

CONTEXT_STEPS = (8192, 4096, 2048)  # largest first
FALLBACK_N_CTX = 2048
RAM_SHARE = 0.5  # "fits comfortably": the model takes at most this share of available memory
MEMINFO = Path("/proc/meminfo")


def available_ram(meminfo: Path = MEMINFO) -> int | None:
    """Bytes of memory available to a new process now (Linux ``MemAvailable``), else the
    free pages, else the total; None when the system does not say."""
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    for pages in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf(pages)
        except (ValueError, OSError, AttributeError):
            continue
    return None


def automatic_n_ctx(info: ModelInfo, available: int | None) -> int:
    """The context a new local agent of this model gets (see the module doc)."""
    trained = info.context_length
    if trained is None:
        return FALLBACK_N_CTX
    for n_ctx in CONTEXT_STEPS:
        if n_ctx > trained:
            continue
        if available is not None and estimate(info, n_ctx).total > available * RAM_SHARE:
            continue
        return n_ctx
    return min(trained, CONTEXT_STEPS[-1])
