"""The floor for bench/startup.py: a bare PySide6 QMainWindow that prints the time from the
process start to its first paint as JSON (as SIMI_EXIT_AFTER_FIRST_PAINT=1 does) and quits.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/bare_window.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QLabel, QMainWindow

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# the same clock as the app's hook; standard library only (the floor stays a bare window)
from desktop.process_clock import started_at


def main() -> int:
    started = started_at()
    app = QApplication(sys.argv)
    window = QMainWindow()
    window.setCentralWidget(QLabel("Hello"))
    window.resize(1100, 720)

    class FirstPaint(QObject):
        seen = False

        def eventFilter(self, obj: QObject, event: QEvent) -> bool:
            if not self.seen and event.type() == QEvent.Type.Paint:
                self.seen = True
                elapsed = round(time.time() - started, 4)
                cpu = round(time.process_time(), 4)
                print(json.dumps({"first_paint_s": elapsed, "cpu_s": cpu}), flush=True)
                QTimer.singleShot(0, app.quit)
            return False

    watcher = FirstPaint(app)
    app.installEventFilter(watcher)
    window.show()
    return app.exec()


if __name__ == "__main__":
    raise SystemExit(main())
