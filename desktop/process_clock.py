"""When this process started, for start-up measurements (``SIMI_EXIT_AFTER_FIRST_PAINT`` in
``desktop.app`` and the bare-window floor in ``bench/bare_window.py``). Standard library only,
so importing it costs the measured floor nothing."""

from __future__ import annotations

import os
import time

_IMPORTED_AT = time.time()


def process_start() -> float:
    """Epoch seconds this process started: /proc on Linux, else this module's import."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat", encoding="ascii") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED_AT


def started_at() -> float:
    """The start a measurement counts from: ``SIMI_BENCH_T0`` (epoch seconds) when the caller
    sets it, else the process start."""
    return float(os.environ.get("SIMI_BENCH_T0") or process_start())
