"""Streaming a reply into the transcript: event-loop lag and per-token cost vs reply length.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/render.py

Prints one JSON object.
(a) ``lag``: a reply streams at 1,000 tokens/s (an asyncio producer on the real qasync loop,
    standing in for a fast provider) through the real ChatController-style path: deltas are
    buffered and flushed to the Transcript at ~30 Hz. A 10 ms QTimer measures how late the event
    loop serves it (p50/p99/max lag, ms). The reference is the same timer with nothing streaming.
(b) ``per_token``: the marginal cost of 100 more tokens (append + layout + scroll + paint, in
    33-token flushes as at 1,000 tok/s), per token, when the reply holds 0 vs 9,900 tokens
    already, the view following it. ``ratio`` = long/short; near 1 means the cost per token does
    not grow with the reply's length (target <= 1.5). Qt paints what each flush made dirty,
    as in the app (an earlier version forced a full repaint per flush, which measured how full
    the screen was rather than what a flush costs); ``painted_px_per_flush`` reports the area
    painted (pixels of widget area, summed over the widgets painted), so a regression that
    repaints the whole view again shows up there. Two cases: the reply alone in a new
    conversation (its first 100 tokens fit on screen, so nothing scrolls yet, while the
    10,000-token reply scrolls every flush: this ratio also holds the cost of following), and
    the reply after a screen of earlier messages (both scroll; only the length differs).
    ``ratio_10000_vs_1000`` compares two replies that both scroll, in either case. Following
    costs ~150 us per flush (blit of the view ~40-80 us, the new strip, the scroll bar), a
    constant once the reply is taller than the view.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication

from desktop.store.conversations import Message
from desktop.ui import theme
from desktop.ui.loop import new_loop
from desktop.ui.presenter import FLUSH_INTERVAL_MS
from desktop.ui.transcript import Transcript

WORDS = [
    "the",
    "keeper",
    "climbed",
    "the",
    "stairs",
    "again",
    "and",
    "watched",
    "the",
    "long",
    "grey",
    "line",
    "of",
    "the",
    "sea",
    "while",
    "ships",
    "passed",
    "far",
    "out",
    "beyond",
    "the",
    "rocks",
    "and",
    "the",
    "lamp",
    "turned",
    "slowly",
    "through",
    "the",
    "night",
]


def token(i: int) -> str:
    word = WORDS[i % len(WORDS)]
    return (" " + word) + ("\n\n" if i % 60 == 59 else "")


def streaming_message(message_id: int) -> Message:
    return Message(
        message_id, 1, "assistant", "", "streaming", None, None, None, "Bench", "m", "", ""
    )


def make_transcript() -> Transcript:
    transcript = Transcript()
    transcript.resize(900, 700)
    transcript.show()
    return transcript


class PaintedArea(QObject):
    """Sums the area of every paint event (pixels, per widget painted)."""

    def __init__(self) -> None:
        super().__init__()
        self.pixels = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.pixels += sum(r.width() * r.height() for r in event.region())  # type: ignore[attr-defined]
        return False


def settle(app: QApplication) -> None:
    """Deliver what a flush posted: the layout requests up the bubble chain, then the paint."""
    for _ in range(4):
        app.processEvents()


def earlier(message_id: int) -> Message:
    role = "user" if message_id % 2 else "assistant"
    text = "".join(token(i) for i in range(message_id * 40, message_id * 40 + 40)).strip()
    return Message(message_id, 1, role, text, "complete", None, None, None, "Bench", "m", "", "")


def marginal_cost(
    app: QApplication, prior_tokens: int, measured: int = 99, earlier_messages: int = 0
) -> tuple[float, float]:
    """(microseconds per token, painted pixels per flush) for ``measured`` more tokens."""
    transcript = make_transcript()
    if earlier_messages:
        transcript.show_path([earlier(100 + k) for k in range(earlier_messages)])
        settle(app)
    transcript.add_message(streaming_message(1))
    batch = 33  # tokens per flush at 1,000 tok/s and ~30 flushes/s
    for start in range(0, prior_tokens, 500):
        transcript.append_text(
            1, "".join(token(i) for i in range(start, min(prior_tokens, start + 500)))
        )
        settle(app)
    settle(app)
    spy = PaintedArea()
    app.installEventFilter(spy)
    flushes = 0
    began = time.perf_counter()
    for start in range(prior_tokens, prior_tokens + measured, batch):
        transcript.append_text(1, "".join(token(i) for i in range(start, start + batch)))
        settle(app)
        flushes += 1
    spent = time.perf_counter() - began
    app.removeEventFilter(spy)
    transcript.close()
    transcript.deleteLater()
    app.processEvents()
    return spent / measured * 1e6, spy.pixels / flushes


def lag_run(
    app: QApplication, loop: asyncio.AbstractEventLoop, stream: bool, seconds: float
) -> dict:
    transcript = make_transcript()
    transcript.add_message(streaming_message(2))
    lags: list[float] = []
    last = [time.perf_counter()]
    probe = QTimer()
    probe.setInterval(10)

    def tick() -> None:
        now = time.perf_counter()
        lags.append(max(0.0, (now - last[0]) * 1000 - 10))
        last[0] = now

    probe.timeout.connect(tick)
    buffer: list[str] = []
    flush = QTimer()
    flush.setInterval(FLUSH_INTERVAL_MS)

    def do_flush() -> None:
        if buffer:
            transcript.append_text(2, "".join(buffer))
            buffer.clear()

    flush.timeout.connect(do_flush)
    tokens = [0]

    async def produce() -> None:
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            due = int((time.perf_counter() - start) * 1000)  # 1,000 tok/s
            while tokens[0] < due:
                buffer.append(token(tokens[0]))
                tokens[0] += 1
            await asyncio.sleep(0.002)

    probe.start()
    if stream:
        flush.start()
        loop.run_until_complete(produce())
    else:
        loop.run_until_complete(asyncio.sleep(seconds))
    probe.stop()
    flush.stop()
    transcript.close()
    transcript.deleteLater()
    app.processEvents()
    lags.sort()
    return {
        "tokens": tokens[0],
        "lag_p50_ms": round(statistics.median(lags), 2),
        "lag_p99_ms": round(lags[int(len(lags) * 0.99) - 1], 2),
        "lag_max_ms": round(lags[-1], 2),
    }


def main() -> None:
    app = QApplication.instance() or QApplication([])
    theme.install(app, dark=False)
    loop = new_loop(app)
    asyncio.events._set_running_loop(loop)
    per_token = {}
    for case, earlier_messages in (("empty_conversation", 0), ("after_a_screen_of_messages", 8)):
        shorts = [marginal_cost(app, 0, earlier_messages=earlier_messages) for _ in range(11)]
        mids = [marginal_cost(app, 900, earlier_messages=earlier_messages) for _ in range(11)]
        longs = [marginal_cost(app, 9_900, earlier_messages=earlier_messages) for _ in range(11)]
        short = statistics.median(us for us, _ in shorts)
        mid = statistics.median(us for us, _ in mids)
        long = statistics.median(us for us, _ in longs)
        per_token[case] = {
            "reply_100_tokens_us": round(short, 1),
            "reply_1000_tokens_us": round(mid, 1),
            "reply_10000_tokens_us": round(long, 1),
            "ratio": round(long / short, 2),
            "target_ratio": 1.5,
            "ratio_10000_vs_1000": round(long / mid, 2),
            "painted_px_per_flush_100": round(statistics.median(px for _, px in shorts)),
            "painted_px_per_flush_10000": round(statistics.median(px for _, px in longs)),
        }
    asyncio.events._set_running_loop(None)
    result = {
        "lag_idle_reference": lag_run(app, loop, stream=False, seconds=3.0),
        "lag_streaming_1000_tok_s": lag_run(app, loop, stream=True, seconds=10.0),
        "per_token": per_token,
        "load_avg": os.getloadavg(),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
