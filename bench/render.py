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
(c) ``markdown``: the same two measurements for a Markdown-heavy reply (``md_token``: MD_CYCLE,
    a heading, a paragraph with bold, emphasis, inline code and a link, a bulleted and a
    numbered list, a block quote, a 12-line fenced Python block and a GFM table of 4 rows,
    repeated with numbered headings, cut into ~4-character tokens with the spaces before them
    kept; 100 tokens hold a finished paragraph and list, 10,000 hold 32 code blocks and
    tables). ``lag_p99_ms`` (with ``lag_p50_ms``, ``lag_max_ms``, ``tokens``) is (a) streaming
    it at 1,000 tok/s for 10 s; ``ratio`` is (b)'s long/short in a new conversation
    (``reply_10000_tokens_us`` / ``reply_100_tokens_us``), except that both windows are one
    whole cycle (``window_tokens``, in 33-token flushes), the first one and the one from
    ``long_window_from_token`` (31 cycles in, ending near 10,000 tokens): a Markdown token's
    cost depends on the block it falls in (a code line costs ~3x a list item), so 99-token
    windows at 0 and 9,900 compared prose with code, not a short reply with a long one, and a
    whole cycle holds every kind of block. ``vs_plain`` is that long window's cost per token
    over the plain reply's at 10,000 tokens (``plain_10000_tokens_us``: (b)'s 10,000-token
    case again, measured in turn with the Markdown runs, so that a change in the machine's
    load during the run moves both). Medians of 21 rounds. ``after_a_screen_of_messages``: the
    same windows after 8 earlier messages: both scroll, so (as in (b)) its ratio measures the
    reply's length alone, not also the cost of starting to follow it. Targets (issue 14):
    p99 < 16 ms, ratio <= 1.5, vs_plain <= 2.0. A Markdown token carries fewer characters than
    a plain one (``chars_per_token`` vs ``plain_chars_per_token``).
(d) ``resize``: a width change while a reply streams. A transcript at 900x700 holds one
    unfinished reply (10,000 plain tokens, 10,000 Markdown tokens, or 1 MiB of plain words
    appended in 64 KiB chunks), scrolled to the bottom and left idle; then
    ``transcript.resize`` alternates 700 <-> 900 wide five times. Each time counts from the
    call until the ``app.processEvents()`` pass in which the reply's body (the bubble's
    ``body_box`` or a widget in it) received its first Paint event at its new width has
    returned, i.e. that frame was painted and flushed (a paint that came before the layout
    reached the bubble would show the old text, and does not count). Median of the five, ms:
    ``tokens_10000_plain_ms``, ``tokens_10000_markdown_ms``, ``text_1mb_ms`` (targets 16 and
    50 ms). ``full_relayout_*_ms``: from the same call until the application delivered no
    event for 1 s (any lazy layout still queued shows up as events), the end of the last one:
    the time until the whole text is laid out again and the view has settled (Qt paints a
    second frame once the taller content has been laid out).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QT_API", "pyside6")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication, QWidget

from desktop.store.conversations import Message
from desktop.ui.conversation.presenter import FLUSH_INTERVAL_MS
from desktop.ui.conversation.transcript import Transcript
from desktop.ui.kit import theme
from desktop.ui.kit.loop import new_loop

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


MD_CYCLE = """## Section {n}: the keeper's log

The keeper wrote **every night** in the log, *slowly and by hand*, with `lamp.turn()` noted
beside each hour and a [link](https://example.com) to the tide tables for the ships far out.

- the lamp was trimmed at dusk
- the lens was cleaned with `spirit` and a *soft* cloth
- the **weather** was written down at every bell

1. climb the stairs again
2. wind the *clockwork* that turns the lens
3. light the lamp and watch the sea

> The sea was long and grey tonight,
> and the rocks were quiet under the light.

```python
def watch(night: int, ships: list[str]) -> dict[str, int]:
    # count the ships seen on one night of the watch
    seen: dict[str, int] = {}
    for hour in range(20, 30):
        for ship in ships:
            if (hour + night) % 3 == 0:
                seen[ship] = seen.get(ship, 0) + 1
    total = sum(seen.values())
    if total > 10:
        print(f"busy night {night}: {total} ships")
    return seen
```

| Hour | Wind | Sea | Ships |
| --- | --- | --- | ---: |
| 20:00 | `NW 4` | calm | 2 |
| 22:00 | `NW 5` | **rough** | 1 |
| 00:00 | `W 6` | rough | 0 |
| 02:00 | `SW 3` | *slight* | 3 |

"""
MD_TOKEN_RE = re.compile(r"\s*\S{1,4}")  # ~4 characters, the spaces before them kept
_md_tokens: list[str] = []
_md_cycles = [0]


def md_token(i: int) -> str:
    """The i-th token of a Markdown-heavy reply: MD_CYCLE over and over, numbered sections."""
    while len(_md_tokens) <= i:
        _md_cycles[0] += 1
        cycle = MD_CYCLE.strip().replace("{n}", str(_md_cycles[0]))
        _md_tokens.extend(MD_TOKEN_RE.findall(("\n\n" if _md_cycles[0] > 1 else "") + cycle))
    return _md_tokens[i]


MD_CYCLE_TOKENS = len(MD_TOKEN_RE.findall(MD_CYCLE.strip()))  # the same for sections 1-999


Token = Callable[[int], str]


def streaming_message(message_id: int) -> Message:
    return Message(
        message_id, 1, "assistant", "", "streaming", None, None, None, "Bench", "m", "", ""
    )


def make_transcript() -> Transcript:
    transcript = Transcript()
    transcript.resize(900, 700)
    transcript.show()
    return transcript


def discard(app: QApplication, transcript: Transcript) -> None:
    """Close and delete now: outside a running event loop processEvents() leaves deleteLater
    pending, and every transcript of the run was then freed at once in the first lag run
    (a 200-500 ms stall in its lag_max)."""
    transcript.close()
    transcript.deleteLater()
    app.processEvents()
    app.sendPostedEvents(None, QEvent.Type.DeferredDelete)


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
    app: QApplication,
    prior_tokens: int,
    measured: int = 99,
    earlier_messages: int = 0,
    token_of: Token = token,
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
            1, "".join(token_of(i) for i in range(start, min(prior_tokens, start + 500)))
        )
        settle(app)
    settle(app)
    spy = PaintedArea()
    app.installEventFilter(spy)
    flushes = 0
    began = time.perf_counter()
    end = prior_tokens + measured
    for start in range(prior_tokens, end, batch):
        batch_text = "".join(token_of(i) for i in range(start, min(end, start + batch)))
        transcript.append_text(1, batch_text)
        settle(app)
        flushes += 1
    spent = time.perf_counter() - began
    app.removeEventFilter(spy)
    discard(app, transcript)
    return spent / measured * 1e6, spy.pixels / flushes


def lag_run(
    app: QApplication,
    loop: asyncio.AbstractEventLoop,
    stream: bool,
    seconds: float,
    token_of: Token = token,
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
                buffer.append(token_of(tokens[0]))
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
    discard(app, transcript)
    lags.sort()
    return {
        "tokens": tokens[0],
        "lag_p50_ms": round(statistics.median(lags), 2),
        "lag_p99_ms": round(lags[int(len(lags) * 0.99) - 1], 2),
        "lag_max_ms": round(lags[-1], 2),
    }


class FirstPaint(QObject):
    """After ``arm``: when the bubble's body (or anything in it) is first painted at a new width.

    A paint of the view that comes before the layout has reached the bubble (the body still at
    its old width) does not count: that frame shows the old text.
    """

    def __init__(self, body: QWidget) -> None:
        super().__init__()
        self.body = body
        self.old_width = body.width()
        self.seen = False

    def arm(self) -> None:
        self.old_width = self.body.width()
        self.seen = False

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (
            not self.seen
            and event.type() == QEvent.Type.Paint
            and isinstance(watched, QWidget)
            and (watched is self.body or self.body.isAncestorOf(watched))
            and self.body.width() != self.old_width
        ):
            self.seen = True
        return False


class Busy(QObject):
    """Counts the events the application delivers (any work still pending shows up here)."""

    def __init__(self) -> None:
        super().__init__()
        self.events = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        self.events += 1
        return False


def run_until_idle(app: QApplication, quiet_s: float, limit_s: float = 30.0) -> float:
    """Deliver events until none came for ``quiet_s``; when the last one was done (perf_counter)."""
    busy = Busy()
    app.installEventFilter(busy)
    last = time.perf_counter()
    while True:
        before = busy.events
        app.processEvents()
        now = time.perf_counter()
        if busy.events != before:
            last = now
        elif now - last > quiet_s or now - last > limit_s:
            break
        else:
            time.sleep(0.001)
    app.removeEventFilter(busy)
    return last


def resize_cost(
    app: QApplication, fill: Callable[[Transcript], None], repeats: int = 5
) -> tuple[float, float]:
    """(median ms from a width change to the end of the first repaint of the streamed reply at
    the new width, median ms until no work was pending any more) over alternating resizes."""
    transcript = make_transcript()
    transcript.add_message(streaming_message(3))
    fill(transcript)
    transcript.scroll_to_bottom()
    run_until_idle(app, 0.3)
    bubble = transcript.bubble(3)
    assert bubble is not None
    first = FirstPaint(bubble.body_box)
    app.installEventFilter(first)
    firsts: list[float] = []
    fulls: list[float] = []
    for k in range(repeats):
        first.arm()
        began = time.perf_counter()
        transcript.resize(700 if k % 2 == 0 else 900, 700)
        while not first.seen:
            app.processEvents()
            if time.perf_counter() - began > 30:
                raise RuntimeError("the resized reply was never painted")
        firsts.append((time.perf_counter() - began) * 1000)
        fulls.append((run_until_idle(app, 1.0) - began) * 1000)
    app.removeEventFilter(first)
    discard(app, transcript)
    return statistics.median(firsts), statistics.median(fulls)


def fill_tokens(app: QApplication, count: int, token_of: Token) -> Callable[[Transcript], None]:
    def fill(transcript: Transcript) -> None:
        for start in range(0, count, 500):
            text = "".join(token_of(i) for i in range(start, min(count, start + 500)))
            transcript.append_text(3, text)
            settle(app)

    return fill


def fill_text(app: QApplication, size: int, chunk: int = 64 * 1024) -> Callable[[Transcript], None]:
    def fill(transcript: Transcript) -> None:
        parts: list[str] = []
        length = 0
        i = 0
        while length < size:
            parts.append(token(i))
            length += len(parts[-1])
            i += 1
        text = "".join(parts)[:size]
        for start in range(0, size, chunk):
            transcript.append_text(3, text[start : start + chunk])
            settle(app)

    return fill


def resize_figures(app: QApplication) -> dict:
    plain, plain_full = resize_cost(app, fill_tokens(app, 10_000, token))
    markdown, markdown_full = resize_cost(app, fill_tokens(app, 10_000, md_token))
    mb, mb_full = resize_cost(app, fill_text(app, 1 << 20))
    return {
        "tokens_10000_plain_ms": round(plain, 1),
        "tokens_10000_markdown_ms": round(markdown, 1),
        "text_1mb_ms": round(mb, 1),
        "target_10000_ms": 16,
        "target_1mb_ms": 50,
        "full_relayout_1mb_ms": round(mb_full, 1),
        "full_relayout_10000_plain_ms": round(plain_full, 1),
        "full_relayout_10000_markdown_ms": round(markdown_full, 1),
    }


MD_ROUNDS = 21  # a window is ~10 flushes: more rounds than (b) for a steady median


def markdown_figures(app: QApplication, loop: asyncio.AbstractEventLoop) -> dict:
    """The Markdown reply: per-token cost over its first cycle and over the cycle that ends
    near 10,000 tokens (empty conversation, and after a screen of messages), with the plain
    reply's at 10,000 measured in the same rounds (a change in the machine's load during the
    run then moves both)."""
    cycle = MD_CYCLE_TOKENS
    long_prior = 10_000 // cycle * cycle
    samples: dict[str, list[float]] = {}

    def sample(name: str, prior: int, earlier_messages: int, token_of: Token) -> None:
        measured = 99 if token_of is token else cycle
        cost = marginal_cost(app, prior, measured, earlier_messages, token_of)[0]
        samples.setdefault(name, []).append(cost)

    asyncio.events._set_running_loop(loop)
    for _ in range(MD_ROUNDS):
        sample("short", 0, 0, md_token)
        sample("long", long_prior, 0, md_token)
        sample("plain", 9_900, 0, token)
        sample("short_after", 0, 8, md_token)
        sample("long_after", long_prior, 8, md_token)
    asyncio.events._set_running_loop(None)
    med = {name: statistics.median(values) for name, values in samples.items()}
    lag = lag_run(app, loop, stream=True, seconds=10.0, token_of=md_token)
    chars = sum(len(md_token(i)) for i in range(10_000))
    plain_chars = sum(len(token(i)) for i in range(10_000))
    return {
        "lag_p99_ms": lag["lag_p99_ms"],
        "ratio": round(med["long"] / med["short"], 2),
        "vs_plain": round(med["long"] / med["plain"], 2),
        "target_lag_p99_ms": 16,
        "target_ratio": 1.5,
        "target_vs_plain": 2.0,
        "reply_100_tokens_us": round(med["short"], 1),
        "reply_10000_tokens_us": round(med["long"], 1),
        "plain_10000_tokens_us": round(med["plain"], 1),
        "lag_p50_ms": lag["lag_p50_ms"],
        "lag_max_ms": lag["lag_max_ms"],
        "tokens": lag["tokens"],
        "window_tokens": cycle,
        "long_window_from_token": long_prior,
        "after_a_screen_of_messages": {
            "reply_100_tokens_us": round(med["short_after"], 1),
            "reply_10000_tokens_us": round(med["long_after"], 1),
            "ratio": round(med["long_after"] / med["short_after"], 2),
        },
        "chars_per_token": round(chars / 10_000, 2),
        "plain_chars_per_token": round(plain_chars / 10_000, 2),
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
    }
    result["markdown"] = markdown_figures(app, loop)
    result["resize"] = resize_figures(app)
    result["load_avg"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
