"""`simi` as a process: Ctrl+C / SIGTERM close it the normal way; no display gets words."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def _env(simi_home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, SIMI_HOME=str(simi_home), **extra)
    return env


def test_sigterm_closes_the_window_cleanly_and_saves_its_state(simi_home: Path) -> None:
    env = _env(simi_home, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.Popen(
        [sys.executable, "-m", "desktop"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    log = simi_home / "logs" / "simi.log"
    deadline = time.monotonic() + 60
    while not (log.exists() and "window shown" in log.read_text()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the window never came up"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert err.strip() == ""
    assert (simi_home / "settings.json").exists()  # window geometry was saved on close


def test_no_display_is_explained_instead_of_a_qt_abort(simi_home: Path) -> None:
    env = _env(simi_home)
    for key in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        env.pop(key, None)
    out = subprocess.run(
        [sys.executable, "-m", "desktop"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 1
    assert "no display" in out.stderr and "simi ask" in out.stderr
