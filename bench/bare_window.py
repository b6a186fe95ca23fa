"""The floor for bench/startup.py: a bare PySide6 QMainWindow that prints the time from the
process start to its first paint as JSON (as SIMI_EXIT_AFTER_FIRST_PAINT=1 does) and quits.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/bare_window.py
"""

from __future__ import annotations

import json
import os
import sys
import time

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QLabel, QMainWindow


def _process_start() -> float:
    """As desktop/app.py's (copied: importing the app would weigh on the floor measured)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat", encoding="ascii") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


def main() -> int:
    started = float(os.environ.get("SIMI_BENCH_T0") or _process_start())
    app = QApplication(sys.argv)
    window = QMainWindow()
    window.setCentralWidget(QLabel("Hello"))
    window.resize(1100, 720)

    class FirstPaint(QObject):
        seen = False

        def eventFilter(self, obj: QObject, event: QEvent) -> bool:
            if not self.seen and event.type() == QEvent.Type.Paint:
                self.seen = True
                print(json.dumps({"first_paint_s": round(time.time() - started, 4)}), flush=True)
                QTimer.singleShot(0, app.quit)
            return False

    watcher = FirstPaint(app)
    app.installEventFilter(watcher)
    window.show()
    return app.exec()


if __name__ == "__main__":
    raise SystemExit(main())
