"""Programs run as a user runs them: in a subprocess from the repository root, their output
captured as text. ``simi(env, ...)`` is the ``simi`` command (``python -m desktop``); ``env``
is usually the ``cli_env`` fixture (the test's own SIMI_HOME)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_text(
    argv: Sequence[str], env: Mapping[str, str], timeout: float = 120, **options: Any
) -> subprocess.CompletedProcess[str]:
    """``argv`` run from the repository root with ``env``, until it ends (``timeout`` seconds
    at most); ``options`` are more of ``subprocess.run``'s (``input``, ``stdin``)."""
    return subprocess.run(
        list(argv),
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        **options,
    )


def simi(
    env: Mapping[str, str], *args: str, stdin: str | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """``simi ARGS`` with ``stdin`` as what is typed or piped in."""
    return run_text([sys.executable, "-m", "desktop", *args], env, timeout, input=stdin)


def packages_loaded(
    code: str, packages: Sequence[str], env: Mapping[str, str] | None = None
) -> list[str]:
    """The modules of ``packages`` (top-level names, e.g. ``PySide6``) that a fresh interpreter
    has imported once it has run ``code``, sorted: what importing a layer drags in."""
    probe = (
        f"{code}\nimport sys\n"
        f"print(*sorted(m for m in sys.modules if m.split('.')[0] in {tuple(packages)!r}))"
    )
    done = run_text([sys.executable, "-c", probe], os.environ if env is None else env)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()
