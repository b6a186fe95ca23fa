"""How long the GUI thread was held: a probe for benches that drive a real Qt window.

Two views of the same thread, merged per named stretch of time (a *segment*):

* a 1 ms ``Qt.PreciseTimer`` on the GUI thread: each timeout records its lateness, the gap
  since the previous timeout minus the 1 ms interval. Nothing else can run on the thread
  while it is held, so a 40 ms hold shows as one ~40 ms late tick (whatever held it: a
  Python callback, layout, painting, a nested wait, the GIL kept by another thread);
* Qt's own event timing: ``QAbstractEventDispatcher.instance()`` emits ``aboutToBlock`` just
  before each wait for events (and ``awake`` when a pass of the loop begins). Measured on this
  Qt (glib and unix dispatchers alike), the work of a pass (timers, sockets, input, paint,
  posted calls) runs between one ``aboutToBlock`` and the next; no signal marks the end of
  the wait itself, so the probe takes a *turn* as the time between two ``aboutToBlock``: the
  wait (at most ~1 ms, since the probe's timer wakes the loop every 1 ms) plus everything
  the loop handled before it could wait again. The longest turn is the longest time input
  and paint could not be served. (The ``awake``-to-``aboutToBlock`` stretch alone holds only
  the posted events of the unix dispatcher and is ~0 under glib, so it is not used.)

``mark(name)`` ends the current segment and starts one called ``name`` (``mark(None)``
pauses recording); a segment's *hold* is the larger of its longest tick lateness and its
longest busy stretch. A stretch or a late tick counts in the segment current when it ends:
code that marks and then does the work (``probe.mark("send"); pane.send()``) is charged to
"send" even though its turn of the loop began before the mark. Several segments may share a
name (one per PageUp step, say): ``summary()`` gives, per name, the list of holds with its
p50/p99/max and where the longest was.

    probe = HoldProbe()          # after the QApplication exists, on the GUI thread
    probe.start()
    probe.mark("open")
    window.open_conversation(cid)
    await asyncio.sleep(0.5)      # let the loop run: the hold is what it could not do
    probe.mark(None)
    probe.stop()
    probe.summary()["open"]["max_ms"]

Python's garbage collections on the GUI thread are timed too (``gc.callbacks``): a
segment's ``gc_max_ms`` tells whether its hold was a collection.

``stacks_over_ms`` (optional): a watchdog thread samples the GUI thread's Python stack each
``stack_every_ms`` while a busy stretch has lasted longer than this, so a long hold names
the code it was in (``summary()[name]["stacks"]``: the most frequent innermost app frames).
The sampling needs the GIL for microseconds at a time; it is off unless asked for.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QAbstractEventDispatcher, QObject, Qt, QTimer

INTERVAL_MS = 1


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (``pct`` 0-100) of a non-empty list."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


@dataclass
class Segment:
    """One named stretch of time between two marks."""

    name: str
    began: float  # perf_counter seconds
    ended: float | None = None
    ticks: int = 0
    late_max_ms: float = 0.0
    late_at: float = 0.0
    turns: int = 0
    busy_max_ms: float = 0.0
    busy_at: float = 0.0
    gc_max_ms: float = 0.0  # the longest garbage collection on the GUI thread
    gc_generation: int = -1
    stacks: Counter[str] = field(default_factory=Counter)
    note: dict[str, Any] = field(default_factory=dict)

    @property
    def hold_ms(self) -> float:
        return max(self.late_max_ms, self.busy_max_ms)

    @property
    def span_ms(self) -> float:
        end = self.ended if self.ended is not None else time.perf_counter()
        return (end - self.began) * 1000


class HoldProbe(QObject):
    """start() / mark(name) / stop() / summary(): see the module docstring."""

    def __init__(
        self,
        interval_ms: int = INTERVAL_MS,
        stacks_over_ms: float | None = None,
        stack_every_ms: float = 5.0,
        app_marker: str = "/desktop/",
    ) -> None:
        super().__init__()
        self.interval_ms = interval_ms
        self.segments: list[Segment] = []
        self._current: Segment | None = None
        self._last_tick = 0.0
        self._turn_began: float | None = None
        self._running = False
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._tick)
        self._dispatcher = QAbstractEventDispatcher.instance()
        self._stacks_over = stacks_over_ms
        self._stack_every = stack_every_ms / 1000
        self._app_marker = app_marker
        self._gui_ident = threading.get_ident()
        self._watchdog: threading.Thread | None = None
        self._gc_began: float | None = None

    # recording ------------------------------------------------------------------------------
    def start(self) -> None:
        if self._running:
            return
        self._running = True
        self._last_tick = time.perf_counter()
        self._turn_began = None
        if self._dispatcher is not None:
            self._dispatcher.aboutToBlock.connect(self._on_block)
        self._timer.start()
        gc.callbacks.append(self._on_gc)
        if self._stacks_over is not None and self._watchdog is None:
            self._watchdog = threading.Thread(target=self._watch, name="hold-probe", daemon=True)
            self._watchdog.start()

    def stop(self) -> None:
        if not self._running:
            return
        self.mark(None)
        self._running = False
        self._timer.stop()
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_gc)
        if self._dispatcher is not None:
            self._dispatcher.aboutToBlock.disconnect(self._on_block)
        if self._watchdog is not None:
            self._watchdog.join(timeout=1)
            self._watchdog = None

    def mark(self, name: str | None, **note: Any) -> Segment | None:
        """End the current segment; start one called ``name`` (None: record nothing until the
        next mark). ``note`` is kept with the segment (shown by ``summary``)."""
        now = time.perf_counter()
        if self._current is not None:
            self._current.ended = now
        self._current = None
        if name is None:
            return None
        segment = Segment(name, now, note=dict(note))
        self.segments.append(segment)
        self._current = segment
        return segment

    @property
    def current(self) -> Segment | None:
        return self._current

    def _tick(self) -> None:
        now = time.perf_counter()
        late = (now - self._last_tick) * 1000 - self.interval_ms
        self._last_tick = now
        segment = self._current
        if segment is not None:
            segment.ticks += 1
            if late > segment.late_max_ms:
                segment.late_max_ms = late
                segment.late_at = now

    def _on_block(self) -> None:
        now = time.perf_counter()
        began = self._turn_began
        self._turn_began = now
        segment = self._current
        if began is None or segment is None:
            return
        busy = (now - began) * 1000
        segment.turns += 1
        if busy > segment.busy_max_ms:
            segment.busy_max_ms = busy
            segment.busy_at = now

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if threading.get_ident() != self._gui_ident:
            return
        if phase == "start":
            self._gc_began = time.perf_counter()
            return
        began, self._gc_began = self._gc_began, None
        segment = self._current
        if began is None or segment is None:
            return
        took = (time.perf_counter() - began) * 1000
        if took > segment.gc_max_ms:
            segment.gc_max_ms = took
            segment.gc_generation = int(info.get("generation", -1))

    def _watch(self) -> None:
        """Sample the GUI thread's stack while one turn of its loop has run too long."""
        limit = (self._stacks_over or 0) / 1000
        while self._running:
            time.sleep(self._stack_every)
            began = self._turn_began
            segment = self._current
            if began is None or segment is None or time.perf_counter() - began < limit:
                continue
            frame = sys._current_frames().get(self._gui_ident)
            if frame is not None:
                segment.stacks[self._where(frame)] += 1

    def _where(self, frame: Any) -> str:
        """The innermost app frames (and the outermost non-app frame under them)."""
        stack = traceback.extract_stack(frame)
        inner = [f for f in stack if self._app_marker in f.filename][-3:]
        last = stack[-1] if stack else None
        parts = [f"{f.filename.rpartition(self._app_marker)[2]}:{f.lineno} {f.name}" for f in inner]
        if last is not None and (not inner or last is not inner[-1]):
            parts.append(f"{last.filename.rpartition('/')[2]}:{last.lineno} {last.name}")
        return " > ".join(parts) or "?"

    # results --------------------------------------------------------------------------------
    def holds(self, name: str) -> list[float]:
        return [s.hold_ms for s in self.segments if s.name == name]

    def summary(self, names: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """Per segment name: ``n`` (segments), ``holds_ms`` (each one's hold, when few),
        ``p50_ms``/``p99_ms``/``max_ms`` over them, ``timer_max_ms`` and ``turn_max_ms`` (the
        two views of the longest), ``gc_max_ms`` (the longest collection), ``worst`` (the
        note of the segment that held longest) and ``stacks`` (the most sampled frames, when
        sampling was on)."""
        by_name: dict[str, list[Segment]] = {}
        for segment in self.segments:
            if names is None or segment.name in names:
                by_name.setdefault(segment.name, []).append(segment)
        result: dict[str, dict[str, Any]] = {}
        for name, segments in by_name.items():
            holds = [s.hold_ms for s in segments]
            worst = max(segments, key=lambda s: s.hold_ms)
            stacks: Counter[str] = Counter()
            for segment in segments:
                stacks.update(segment.stacks)
            entry: dict[str, Any] = {
                "n": len(segments),
                "p50_ms": round(percentile(holds, 50), 1),
                "p99_ms": round(percentile(holds, 99), 1),
                "max_ms": round(max(holds), 1),
                "timer_max_ms": round(max(s.late_max_ms for s in segments), 1),
                "turn_max_ms": round(max(s.busy_max_ms for s in segments), 1),
                "gc_max_ms": round(max(s.gc_max_ms for s in segments), 1),
                "ticks": sum(s.ticks for s in segments),
                "span_ms": round(sum(s.span_ms for s in segments), 1),
            }
            if len(holds) <= 12:
                entry["holds_ms"] = [round(h, 1) for h in holds]
            else:
                entry["over_16_ms"] = sum(1 for h in holds if h > 16)
            if worst.note:
                entry["worst"] = dict(worst.note)
            if stacks:
                entry["stacks"] = [f"{n}x {where}" for where, n in stacks.most_common(6)]
            result[name] = entry
        return result
