"""Start-up: time from process start to the first paint of an interactive window.

    .venv/bin/python bench/startup.py [--runs 5] [--bundle dist/simi-multi/simi-multi]
                                      [--installed /opt/simi-multi/simi-multi]

Prints one JSON object with the median, min and max of several runs (seconds) of:
(a) ``source``: the source checkout, ``python -m desktop`` — MainWindow with the starter agent
    ready (the store opened and migrated, the starter agent ensured, the sidebar filled); and
    ``source_frame``: the same runs' first paint, the window's frame (title, menus, the
    sidebar's title), which paints before the store opens;
(b) ``bundle``: the PyInstaller bundle (skipped when it has not been built);
(c) ``bare``: a bare PySide6 QMainWindow (bench/bare_window.py), the floor Qt itself sets;
(d) ``installed``: an installed package's launcher, when ``--installed`` names one.
Each run is a new process on a new SIMI_HOME (a first start: database created, starter agent
made), with SIMI_EXIT_AFTER_FIRST_PAINT=1: the app prints ``{"first_paint_s": …}`` measured from
the process's start time (/proc) at the first paint event of its window (the frame) and
``{"open_paint_s": …}`` at its first paint once open, then closes normally.
The OS file cache stays warm between runs ("cold-ish": no page-cache drop, which needs root and
would measure the disk). The platform is offscreen unless QT_QPA_PLATFORM is set (e.g. xcb
under Xvfb).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def paints(command: list[str]) -> dict[str, float]:
    """One start: ``first_paint_s`` and, from the app, ``open_paint_s`` (see above)."""
    with tempfile.TemporaryDirectory(prefix="simi-startup-") as home:
        env = dict(os.environ)
        env.setdefault("QT_QPA_PLATFORM", "offscreen")
        env.update(SIMI_HOME=home, SIMI_EXIT_AFTER_FIRST_PAINT="1", PYTHONUNBUFFERED="1")
        out = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=120, cwd=ROOT
        )
        found: dict[str, float] = {}
        for line in out.stdout.splitlines():
            if line.startswith(('{"first_paint_s"', '{"open_paint_s"')):
                found.update((k, float(v)) for k, v in json.loads(line).items() if k != "cpu_s")
        if "first_paint_s" not in found:
            raise RuntimeError(f"{command[0]}: no first paint (rc {out.returncode}): {out.stderr}")
        return found


def one_run(command: list[str]) -> float:
    """The first paint of one start (seconds from the process's start)."""
    return paints(command)["first_paint_s"]


def _summary(times: list[float], command: list[str]) -> dict[str, object]:
    return {
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "max_s": round(max(times), 3),
        "runs": len(times),
        "command": " ".join(command),
    }


def measure(command: list[str], runs: int, key: str = "first_paint_s") -> dict[str, object]:
    one_run(command)  # warm the file cache once; not counted
    return _summary([paints(command)[key] for _ in range(runs)], command)


def measure_app(command: list[str], runs: int) -> dict[str, dict[str, object]]:
    """The app's runs: ``source`` (open) and ``source_frame`` (its first paint)."""
    one_run(command)
    found = [paints(command) for _ in range(runs)]
    return {
        "source": _summary([f.get("open_paint_s", f["first_paint_s"]) for f in found], command),
        "source_frame": _summary([f["first_paint_s"] for f in found], command),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--bundle", default=str(ROOT / "dist" / "simi-multi" / "simi-multi"))
    parser.add_argument("--installed", help="an installed launcher, e.g. /usr/bin/simi")
    args = parser.parse_args()
    result: dict[str, object] = {
        "platform": os.environ.get("QT_QPA_PLATFORM", "offscreen"),
        "cpus": os.cpu_count(),
    }
    result["bare"] = measure([sys.executable, str(ROOT / "bench" / "bare_window.py")], args.runs)
    result.update(measure_app([sys.executable, "-m", "desktop"], args.runs))
    if Path(args.bundle).is_file():
        result["bundle"] = measure([args.bundle], args.runs)
    else:
        result["bundle"] = f"not built: {args.bundle} (make bundle)"
    if args.installed:
        result["installed"] = measure([args.installed], args.runs)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
