"""The benches (bench/*.py) run as a person runs them: ``python bench/NAME.py --quick`` from the
repository root, its one JSON object of results read back."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from tests.helpers.cli import ROOT, run_text


def quick_run(name: str, timeout: float) -> dict[str, Any]:
    """The results ``bench/{name}.py --quick`` prints, after it ended well."""
    done = run_text(
        [sys.executable, str(ROOT / "bench" / f"{name}.py"), "--quick"],
        {**os.environ, "PYTHONUNBUFFERED": "1"},
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def is_number(value: object) -> bool:
    """An int or a float (a bool is neither here)."""
    return isinstance(value, int | float) and not isinstance(value, bool)
