"""Scale: a 5,000-message conversation and 10,000 conversations in a real SQLite file.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/scale.py

Prints one JSON object: time to open the long conversation in the real MainWindow (target:
<= 300 ms; the first screen of bubbles is built at once, then a screen and a half beyond it in
batches, one per event-loop turn: ``fill_after_open`` reports those turns), scrolling from the
bottom to the top a screen at a time as a wheel or PageUp would (each step = the scroll plus the
event-loop turn that follows, where a prefetch batch may be built; ``step_max_ms`` is the stall
a person would feel, against a 50 ms budget), time to fill the conversation list with 10,000
rows and to answer a full-text search (targets: <= 100 ms), and resident memory (RSS) before and
after. The reference is opening a 10-message conversation in the same window. Every open
builds the conversation's pane afresh (an open conversation keeps its pane, so showing it again
costs nothing to measure).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")
os.environ["SIMI_HOME"] = tempfile.mkdtemp(prefix="simi-scale-")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication

from desktop.chat.services import Services
from desktop.settings.paths import AppPaths
from desktop.ui.kit import theme
from desktop.ui.kit.loop import new_loop
from desktop.ui.shell.main_window import MainWindow

WORDS = ["lighthouse", "keeper", "sea", "ship", "lamp", "rock", "storm", "harbour", "rope"]
WORDS += ["tide", "gull", "night"]


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return -1.0


def text(i: int) -> str:
    words = [WORDS[(i * 7 + k) % len(WORDS)] for k in range(12)]
    return (
        f"Message {i}: " + " ".join(words) + (".\n\n```python\nx = 1\n```" if i % 10 == 0 else ".")
    )


def fill(services: Services) -> tuple[int, int]:
    db = services.db
    now = "2025-01-01T00:00:00.000+00:00"
    conn = db.conn
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO conversations (title, created_at, updated_at) VALUES (?, ?, ?)",
        [(f"Conversation {i} about {WORDS[i % len(WORDS)]}", now, now) for i in range(10_000)],
    )
    rows = []
    for conv in range(1, 10_001):
        for k in range(4):
            rows.append((conv, "user" if k % 2 == 0 else "assistant", text(conv * 4 + k), now, now))
    conn.executemany(
        "INSERT INTO messages (conversation_id, role, content, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?)",
        rows,
    )
    conn.execute("COMMIT")
    store = services.conversations
    long_conv = store.create(None, "The long one")
    short_conv = store.create(None, "The short one")
    conn.execute("BEGIN")
    parent = None
    for i in range(5_000):
        cur = conn.execute(
            "INSERT INTO messages (conversation_id, role, content, parent_id, created_at, "
            "updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            [long_conv.id, "user" if i % 2 == 0 else "assistant", text(i), parent, now, now],
        )
        new = cur.lastrowid
        if parent is None:
            conn.execute(
                "UPDATE conversations SET active_root_id = ? WHERE id = ?", [new, long_conv.id]
            )
        else:
            conn.execute("UPDATE messages SET active_child_id = ? WHERE id = ?", [new, parent])
        parent = new
    conn.execute("COMMIT")
    for i in range(10):
        store.add_message(short_conv.id, "user" if i % 2 == 0 else "assistant", text(i))
    return long_conv.id, short_conv.id


def timed(app: QApplication, fn) -> float:
    start = time.perf_counter()
    fn()
    app.processEvents()
    # what the running event loop does between events: delete the widgets let go of
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    return round((time.perf_counter() - start) * 1000, 1)


def main() -> None:
    app = QApplication.instance() or QApplication([])
    theme.install(app, dark=False)
    new_loop(app)
    services = Services.open(AppPaths.from_env())
    rss_start = rss_mib()
    long_id, short_id = fill(services)
    window = MainWindow(services)
    window.resize(1200, 800)
    window.show()
    app.processEvents()
    rss_window = rss_mib()

    def fresh_open(conversation_id: int) -> float:
        """Open with no pane for it yet (a conversation opened before keeps its pane)."""
        window.new_chat()
        pane = window.pane_stack.pane_for(conversation_id)
        if pane is not None:
            window.pane_stack.close_pane(pane)
        app.processEvents()
        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        return timed(app, lambda: window.open_conversation(conversation_id))

    short_ms = statistics.median(fresh_open(short_id) for _ in range(3))
    open_ms = []
    fill_turns: list[float] = []
    for _ in range(3):
        open_ms.append(fresh_open(long_id))
        transcript = window.pane.transcript
        fill_turns = []
        while transcript.prefetching:
            fill_turns.append(timed(app, lambda: None))
    bar = transcript.verticalScrollBar()
    steps = []

    waited = [0]

    def flick_up() -> None:
        if bar.value() == 0:  # at the top of what is built: the next batch is on its way
            waited[0] += 1
        bar.setValue(bar.value() - transcript.viewport().height())

    began = time.perf_counter()
    while bar.value() > 0 or transcript.window_range[0] > 0:
        steps.append(timed(app, flick_up))
    to_top_s = time.perf_counter() - began
    bubbles_alive = len(transcript.bubbles())
    rss_scrolled = rss_mib()

    list_ms = [timed(app, window.browser.reload) for _ in range(3)]
    search_store_ms = []
    search_ui_ms = []
    for query in ("lighthouse", "harbour rope", "storm", "conversation 99", "gul"):
        start = time.perf_counter()
        services.search.search(query)
        search_store_ms.append(round((time.perf_counter() - start) * 1000, 1))
        window.browser.search_box.setText(query)
        search_ui_ms.append(timed(app, window.browser.run_search))
    result = {
        "messages_in_long_conversation": 5_000,
        "conversations": services.db.execute("SELECT count(*) FROM conversations").fetchone()[0],
        "messages_total": services.db.execute("SELECT count(*) FROM messages").fetchone()[0],
        "open_10_messages_reference_ms": short_ms,
        "open_5000_messages_ms": {
            "runs": open_ms,
            "median": statistics.median(open_ms),
            "target": 300,
        },
        "fill_after_open": {
            "turns": len(fill_turns),
            "turn_max_ms": max(fill_turns) if fill_turns else None,
            "total_ms": round(sum(fill_turns), 1),
        },
        "scroll_to_top_a_screen_at_a_time": {
            "steps": len(steps),
            "step_median_ms": statistics.median(steps) if steps else None,
            "step_p99_ms": sorted(steps)[int(len(steps) * 0.99) - 1] if steps else None,
            "step_max_ms": max(steps) if steps else None,
            "steps_over_50_ms": sum(1 for step in steps if step > 50),
            "steps_at_the_top_of_what_was_built": waited[0],
            "total_s": round(to_top_s, 1),
            "bubbles_alive_after": bubbles_alive,
        },
        "conversation_list_10000_ms": {
            "runs": list_ms,
            "median": statistics.median(list_ms),
            "target": 100,
        },
        "search_ms": {
            "store_runs": search_store_ms,
            "store_max": max(search_store_ms),
            "window_runs": search_ui_ms,
            "window_max": max(search_ui_ms),
            "target": 100,
        },
        "rss_mib": {
            "start": rss_start,
            "window_open": rss_window,
            "after_paging": rss_scrolled,
            "end": rss_mib(),
        },
        "load_avg": os.getloadavg(),
    }
    window.close()
    services.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
