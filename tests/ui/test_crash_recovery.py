"""Killed mid-reply (SIGKILL: no cleanup at all), the app comes back with the partial reply
stored and marked interrupted. The app process is real: the window, the starter model
through the llama.cpp worker, the SQLite file."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

APP = """
import os, sys
from PySide6.QtWidgets import QApplication
from desktop.ui.kit import theme
from desktop.ui.kit.loop import new_loop
from desktop.chat.services import Services
from desktop.settings.paths import AppPaths
from desktop.ui.shell.main_window import MainWindow

app = QApplication([])
theme.install(app)
services = Services.open(AppPaths.from_env())
agent = services.agents.by_name("SmolLM2 (local)")
services.agents.update(agent.with_changes(max_tokens=2000))
loop = new_loop(app)
window = MainWindow(services)
window.show()
window.pane.composer.setPlainText("Write a very long story about a lighthouse keeper and the sea.")
window.pane.send()
print("SENT", flush=True)
loop.run_forever()
"""


def _reply(db_path: Path) -> tuple[str, str] | None:
    try:
        with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
            row = conn.execute(
                "SELECT status, content FROM messages WHERE role = 'assistant' ORDER BY id DESC"
            ).fetchone()
    except sqlite3.Error:
        return None
    return (row[0], row[1]) if row else None


def test_sigkill_mid_reply_keeps_the_partial_text_marked_interrupted(
    simi_home: Path, qtbot: Any, make_window: Any
) -> None:
    env = dict(os.environ, SIMI_HOME=str(simi_home), QT_QPA_PLATFORM="offscreen")
    proc = subprocess.Popen(
        [sys.executable, "-c", APP],
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the llama.cpp worker goes with the process group
    )
    try:
        db_path = simi_home / "simi.db"
        deadline = time.monotonic() + 90
        reply = None
        while time.monotonic() < deadline:
            reply = _reply(db_path)
            # a checkpoint (at least once a second) has stored some streamed text
            if reply and reply[0] == "streaming" and len(reply[1]) > 20:
                break
            time.sleep(0.2)
        assert reply and reply[0] == "streaming", f"no checkpointed reply: {reply}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    partial = reply[1]

    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths

    services = Services.open(AppPaths.from_env())  # the restart
    try:
        conv = services.conversations.list()[0]
        message = services.conversations.messages(conv.id)[-1]
        assert message.status == "interrupted"
        assert message.content.startswith(partial[:20]) and len(message.content) >= len(partial)
        window = make_window(services)
        window.open_conversation(conv.id)
        bubble = window.pane.transcript.bubble(message.id)
        assert "interrupted" in bubble.stopped.text() and not bubble.stopped.isHidden()
        assert not bubble.action_buttons["continue"].isHidden()
        assert bubble.text.startswith(partial[:20].strip()[:10])
        window.close()
        qtbot.waitUntil(lambda: not window.pane.presenter.busy)
    finally:
        services.close()
