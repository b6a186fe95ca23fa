"""Compare mode: four agents streaming at once in the compare view, on the app's loop.

A loopback server (``remote_streams.serve``: a separate process, so it never shares the
client's loop) streams OpenAI-style chunks at a fixed rate per stream. Four
``openai-compatible`` agents in a temporary SIMI home point at it (it needs no key). The real
compare view (``desktop.ui.compare.view.CompareView``; until it exists, four plain
``ConversationPane``s side by side, which is what each compare column is) sends one prompt to
all four, on the real qasync loop, with the window shown at 1280x800 (offscreen).

Measured:
- a 10 ms ``QTimer``'s lateness while the four stream (p50/p99/max, ms): a Qt window paints
  from this loop, so lateness above one 60 Hz frame (16 ms) would show as jank;
- the same probe for 2 s with nothing streaming (``idle_reference``: the machine's own noise),
  the ticks inside the streaming alone (``streaming_only``: from Send's return to the first
  column's end, without the work of starting and ending the replies);
- the longest hold of the loop (a 1 ms ``Qt.PreciseTimer``'s longest gap between two ticks,
  less its 1 ms), per round: from the Send until every column has started its reply
  (``send_blocked_ms``: Send returns at once, the columns start in later loop turns) and
  from the first column's end until the marks and the vote are shown (``end_blocked_ms``);
- per-stream throughput: the stored stats row's ``decode_tok_s`` (tokens from the first to
  the last, the figure the column shows) of one stream alone (the first column sends alone)
  against each of the four when all send at once. ``worst_vs_lone`` is the slowest of the four
  (its median over the rounds) over the lone median.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/compare.py [--rate 100] [--tokens 300]
        [--rounds 3]

Prints one JSON object. Targets: ``lag_p99_ms`` < 16 and ``worst_vs_lone`` >= 0.95; the
holds within a frame (16 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["QT_API"] = "pyside6"
os.environ["SIMI_HOME"] = tempfile.mkdtemp(prefix="simi-compare-")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from remote_streams import loopback_agents, percentile, serve

STREAMS = 4
PROBE_MS = 10
HOLD_PROBE_MS = 1
SETTLE_S = 0.3  # after the last column's end: the marks and the vote bar, a turn each
IDLE_S = 2.0
TARGET_LAG_P99_MS = 16
TARGET_VS_LONE = 0.95
PROMPT = "Tell me about the sea."


class Harness:
    """The compare view (or four panes standing in for it) on four agents, shown."""

    def __init__(self, services: Any, agents: list[Any]) -> None:
        from PySide6.QtWidgets import QHBoxLayout, QWidget

        try:
            from desktop.ui.compare.view import CompareView
        except ImportError:
            CompareView = None  # helper B's widget, until it is in the tree
        if CompareView is not None:
            self.view: Any = CompareView(services)
            self.view.set_agents(agents)
            self.kind = "CompareView"
            self.panes = [column.pane for column in self.view.columns]
        else:
            from desktop.ui.conversation.pane import ConversationPane

            self.view = QWidget()
            row = QHBoxLayout(self.view)
            self.panes = [ConversationPane(services, agent) for agent in agents]
            for pane in self.panes:
                row.addWidget(pane)
            self.kind = f"{len(agents)} ConversationPanes side by side"
        self.view.resize(1280, 800)
        self.view.show()

    @property
    def busy(self) -> bool:
        if self.kind == "CompareView":  # also while a sent prompt's columns wait to start
            return bool(self.view.busy)
        return any(pane.busy for pane in self.panes)

    def send_all(self, text: str) -> None:
        """One prompt to every column (they may start in later loop turns: ``started``)."""
        if self.kind == "CompareView":
            assert self.view.send(text), "the compare view refused to send"
        else:
            for pane in self.panes:
                pane.composer.setPlainText(text)
                pane.send()

    async def started(self, timeout_s: float = 30.0) -> list[int]:
        """Once every column has started its reply: the reply message ids, left to right."""
        deadline = time.monotonic() + timeout_s
        while any(pane.presenter.turn is None for pane in self.panes):
            if time.monotonic() > deadline:
                raise TimeoutError("the columns did not start")
            await asyncio.sleep(0.001)
        return [pane.presenter.turn.assistant_message_id for pane in self.panes]

    def send_one(self, text: str) -> int:
        """The first column alone (its own composer, as a follow-up in that column)."""
        pane = self.panes[0]
        pane.composer.setPlainText(text)
        pane.send()
        assert pane.busy, "the first column did not start"
        return int(pane.presenter.turn.assistant_message_id)


class LagProbe:
    """How late a 10 ms QTimer fires (ms past its interval), while armed."""

    def __init__(self) -> None:
        from PySide6.QtCore import QTimer

        self.lags: list[float] = []
        self.ticks: list[tuple[float, float]] = []  # (previous tick, this tick), perf_counter
        self._last = 0.0
        self._timer = QTimer()
        self._timer.setInterval(PROBE_MS)
        self._timer.timeout.connect(self._tick)

    def _tick(self) -> None:
        now = time.perf_counter()
        self.lags.append(max(0.0, (now - self._last) * 1000 - PROBE_MS))
        self.ticks.append((self._last, now))
        self._last = now

    def start(self) -> None:
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()


class HoldProbe:
    """The loop's holds: the gaps between a 1 ms precise timer's ticks, less the 1 ms."""

    def __init__(self) -> None:
        from PySide6.QtCore import Qt, QTimer

        self.ticks: list[float] = []
        self._timer = QTimer()
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(HOLD_PROBE_MS)
        self._timer.timeout.connect(lambda: self.ticks.append(time.perf_counter()))

    def start(self) -> None:
        self.ticks.append(time.perf_counter())
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        self.ticks.append(time.perf_counter())

    def longest(self, start: float, end: float) -> float:
        """The longest hold overlapping ``start`` .. ``end`` (perf_counter), ms."""
        pairs = zip(self.ticks, self.ticks[1:], strict=False)
        gaps = [(b - a) * 1000 - HOLD_PROBE_MS for a, b in pairs if b >= start and a <= end]
        return max([0.0, *gaps])


def decode_rate(services: Any, message_id: int) -> float:
    row = services.db.execute(
        "SELECT decode_tok_s, finish_reason FROM inference_stats WHERE message_id = ?",
        [message_id],
    ).fetchone()
    assert row is not None and row[1] == "stop", f"reply {message_id} did not finish: {row}"
    return float(row[0])


async def until_idle(harness: Harness, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while harness.busy:
        if time.monotonic() > deadline:
            raise TimeoutError("the streams did not finish")
        await asyncio.sleep(0.02)


async def rounds(services: Any, harness: Harness, count: int) -> dict[str, Any]:
    await until_idle(harness)
    harness.send_all(PROMPT)  # warm-up: connections, first layouts, price book
    await until_idle(harness)
    idle = LagProbe()  # the same probe with nothing streaming: this machine's own noise
    idle.start()
    await asyncio.sleep(IDLE_S)
    idle.stop()
    probe = LagProbe()
    lone: list[float] = []
    many: list[list[float]] = [[] for _ in harness.panes]
    send_ms: list[float] = []
    end_ms: list[float] = []
    windows: list[tuple[float, float]] = []  # (every column started, first column finished)
    for _ in range(count):
        lone_id = harness.send_one(PROMPT)
        await until_idle(harness)
        lone.append(decode_rate(services, lone_id))
        holds = HoldProbe()
        holds.start()
        probe.start()
        await asyncio.sleep(0.05)  # the probes tick before the Send
        first_end = [0.0]

        def ended(*_args: object, box: list[float] = first_end) -> None:
            box[0] = box[0] or time.perf_counter()

        for pane in harness.panes:
            pane.presenter.turn_finished.connect(ended)
        began = time.perf_counter()
        harness.send_all(PROMPT)
        ids = await harness.started()
        sent = time.perf_counter()
        send_ms.append(holds.longest(began, sent))
        await until_idle(harness)
        probe.stop()
        await asyncio.sleep(SETTLE_S)
        holds.stop()
        end_ms.append(holds.longest(first_end[0], time.perf_counter()))
        for pane in harness.panes:
            pane.presenter.turn_finished.disconnect(ended)
        windows.append((sent, first_end[0]))
        for i, message_id in enumerate(ids):
            many[i].append(decode_rate(services, message_id))
    # The ticks wholly inside a window: the streaming alone, without the send's and the
    # ends' work (which the whole-run figures include).
    streaming = [
        lag
        for lag, (prev, now) in zip(probe.lags, probe.ticks, strict=True)
        if any(start <= prev and now < end for start, end in windows)
    ]
    return {
        "lone": lone,
        "many": many,
        "lags": probe.lags,
        "streaming": streaming,
        "send_ms": send_ms,
        "end_ms": end_ms,
        "idle": idle.lags,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=100.0, help="tokens/s per stream")
    parser.add_argument("--tokens", type=int, default=300, help="tokens per reply")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    ctx = multiprocessing.get_context("spawn")
    ports = ctx.Queue()
    server = ctx.Process(target=serve, args=(ports, args.rate, args.tokens), daemon=True)
    server.start()
    try:
        base = f"http://127.0.0.1:{ports.get(timeout=30)}/v1"
        result = run_window(base, args.rounds)
    finally:
        server.terminate()
        server.join(timeout=10)
    result.update(
        {
            "server_rate_tok_s": args.rate,
            "tokens_per_reply": args.tokens,
            "load_avg": [round(x, 2) for x in os.getloadavg()],
            "cpus": os.cpu_count(),
        }
    )
    print(json.dumps(result, indent=2))


def run_window(base: str, count: int) -> dict[str, Any]:
    from PySide6.QtWidgets import QApplication

    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths
    from desktop.ui.kit import theme
    from desktop.ui.kit.loop import drain, new_loop
    from desktop.ui.markdown import text_access

    app = QApplication.instance() or QApplication([])
    text_access.install()
    theme.install(app, dark=False)
    loop = new_loop(app)
    services = Services.open(AppPaths.from_env())
    agents = loopback_agents(services, base, "Loopback", "bench", STREAMS)
    harness = Harness(services, agents)
    try:
        runs = loop.run_until_complete(rounds(services, harness, count))
    finally:
        harness.view.close()
        drain(loop, app)
        services.close()
    lone = statistics.median(runs["lone"])
    per_stream = [statistics.median(r) for r in runs["many"]]
    lags = runs["lags"]
    worst = min(per_stream) / lone
    lag_p99 = percentile(lags, 99)
    return {
        "bench": "compare",
        "view": harness.kind,
        "streams": STREAMS,
        "rounds": count,
        "lag_p99_ms": round(lag_p99, 2),
        "lag_p50_ms": round(percentile(lags, 50), 2),
        "lag_max_ms": round(max(lags), 2),
        "probe_ticks": len(lags),
        "send_blocked_ms": [round(x, 1) for x in runs["send_ms"]],
        "end_blocked_ms": [round(x, 1) for x in runs["end_ms"]],
        "idle_reference": {
            "lag_p50_ms": round(percentile(runs["idle"], 50), 2),
            "lag_p99_ms": round(percentile(runs["idle"], 99), 2),
            "lag_max_ms": round(max(runs["idle"]), 2),
        },
        "streaming_only": {
            "lag_p50_ms": round(percentile(runs["streaming"], 50), 2),
            "lag_p99_ms": round(percentile(runs["streaming"], 99), 2),
            "lag_max_ms": round(max(runs["streaming"]), 2),
            "ticks": len(runs["streaming"]),
        },
        "lone_tok_s": round(lone, 2),
        "lone_tok_s_runs": [round(x, 2) for x in runs["lone"]],
        "per_stream_tok_s": [round(x, 2) for x in per_stream],
        "worst_vs_lone": round(worst, 4),
        "target_lag_p99_ms": TARGET_LAG_P99_MS,
        "target_vs_lone": TARGET_VS_LONE,
        "pass": lag_p99 < TARGET_LAG_P99_MS and worst >= TARGET_VS_LONE,
    }


if __name__ == "__main__":
    main()
