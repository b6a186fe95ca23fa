"""When this process started, for start-up measurements (``SIMI_EXIT_AFTER_FIRST_PAINT`` in
``desktop.app`` and the bare-window floor in ``bench/bare_window.py``). Standard library only,
so importing it costs the measured floor nothing."""

from __future__ import annotations

import os
import time

_IMPORTED_AT = time.time()


def process_start() -> float:
    """Epoch seconds this process started: /proc on Linux, else this module's import.

    /proc gives the start in clock ticks since boot (10 ms); the age is measured against
    CLOCK_BOOTTIME, the clock those ticks count on. (``btime`` in /proc/stat, the boot's epoch
    time, is whole seconds: counting from it put a constant error of up to a second into
    every start-up figure, the same for the app and the bare window, which hid their ratio.)
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except (OSError, ValueError, IndexError, AttributeError):
        return _IMPORTED_AT


def started_at() -> float:
    """The start a measurement counts from: ``SIMI_BENCH_T0`` (epoch seconds) when the caller
    sets it, else the process start."""
    return float(os.environ.get("SIMI_BENCH_T0") or process_start())
