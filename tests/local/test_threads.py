"""How many threads llama.cpp gets: the CPUs this process may run on, not the machine's count
(a process under ``taskset`` or a container's cpuset with more threads than cores decodes many
times slower: the threads spin against each other)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CHECK = (
    "import os; from desktop.local.loading import usable_cpus, default_threads; "
    "from desktop.local.provider import LocalRuntime; "
    "print(usable_cpus(), default_threads(), LocalRuntime().cpu_count, "
    "len(os.sched_getaffinity(0)))"
)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_a_process_allowed_one_core_gives_llama_cpp_one_thread() -> None:
    cpus = sorted(os.sched_getaffinity(0))
    one = subprocess.run(
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpus[0]}}}); " + CHECK],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert one.stdout.split() == ["1", "1", "1", "1"]
    every = subprocess.run(
        # every core of the machine (a pinned test worker's child may widen it again)
        [
            sys.executable,
            "-c",
            f"os = __import__('os'); os.sched_setaffinity(0, {set(range(os.cpu_count() or 1))}); "
            + CHECK,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    usable, threads, pool, n = (int(x) for x in every.stdout.split())
    assert (usable, threads, pool) == (n, min(8, n), n)
