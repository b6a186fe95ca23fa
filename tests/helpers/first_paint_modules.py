"""Start the real app (``desktop.app.run_app``) and report which modules were loaded when its
window first painted, as JSON on stdout, twice: at the frame's paint (before the store opens)
and at the first paint once open (the agents and the chat shown); then close it the normal way.

    python -m tests.helpers.first_paint_modules HEAVY [HEAVY ...]

Prints ``{"paint": "frame" or "open", "modules": [...], "first_importers": {"httpx":
"desktop/llm/transport.py:12 <- ..."}}``: every module in ``sys.modules`` at that paint, and
for each HEAVY top-level package that was loaded by then, the chain of the app's own frames that
imported it first (so a failing guard names the import to make lazy). Run with a fresh
SIMI_HOME and QT_QPA_PLATFORM=offscreen (tests/test_startup_imports.py does).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any


class _FirstImport:
    """A meta-path finder that finds nothing: it only notes the app frames on the stack when a
    heavy package is first looked for (``import`` statements and ``importlib`` alike)."""

    def __init__(self, heavy: set[str]) -> None:
        self.heavy = heavy
        self.first: dict[str, str] = {}

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        top = name.partition(".")[0]
        if top in self.heavy and top not in self.first:
            frames = [
                f"{f.filename.rpartition('/desktop/')[2] or f.filename}:{f.lineno}"
                for f in traceback.extract_stack()[:-1]
                if "/desktop/" in f.filename
                or ("site-packages" in f.filename and "importlib" not in f.filename)
            ]
            self.first[top] = " <- ".join(reversed(frames[-8:])) or "(outside the app)"
        return None


def main(heavy_names: list[str]) -> int:
    watch = _FirstImport(set(heavy_names))
    sys.meta_path.insert(0, watch)
    first = watch.first

    import desktop.app as app  # before the command imports it, to wrap its first-paint hook

    original = app.exit_after_first_paint

    def report_then_exit(qapp: Any, window: Any) -> None:
        original(qapp, window)  # closes the window after its first paint once open
        from PySide6.QtCore import QEvent, QObject

        class Report(QObject):
            done: set[str] = set()

            def eventFilter(self, obj: QObject, event: QEvent) -> bool:
                # installed after the original, so Qt calls this one first at the same paint
                paint = "open" if window.opened else "frame"
                if (
                    paint not in self.done
                    and event.type() == QEvent.Type.Paint
                    and getattr(obj, "window", lambda: None)() is window
                ):
                    self.done.add(paint)
                    report = {"paint": paint, "modules": sorted(sys.modules)}
                    print(json.dumps(report | {"first_importers": dict(first)}), flush=True)
                return False

        watcher = Report(qapp)
        qapp.installEventFilter(watcher)
        window._first_paint_report = watcher  # kept alive with the window

    app.exit_after_first_paint = report_then_exit
    os.environ["SIMI_EXIT_AFTER_FIRST_PAINT"] = "1"
    from desktop.cli import main as simi

    return simi([])  # as `simi` with no arguments starts it


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
