"""The window's cycle collector: short passes on the GUI thread that still reclaim every cycle.

A full pass walks only what was made since the last one (the survivors are frozen), and the
frozen objects are walked again every ``thaw_s``: garbage is never kept for good.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

from desktop.ui.kit.loop import GuiThreadGarbageCollector


class Node:
    def __init__(self) -> None:
        self.other: Any = self  # a cycle: only the collector frees it


def _ten_ticks(collector: GuiThreadGarbageCollector) -> None:
    for _ in range(10):
        collector._collect()


def _started(qapp: Any) -> GuiThreadGarbageCollector:
    """A collector past its first full pass (which only freezes what start-up made)."""
    collector = GuiThreadGarbageCollector(qapp, interval_ms=60_000, thaw_s=3600)
    _ten_ticks(collector)
    return collector


def test_what_start_up_made_is_frozen_without_a_walk(qapp: Any) -> None:
    collector = GuiThreadGarbageCollector(qapp, interval_ms=60_000, thaw_s=3600)
    try:
        walks = gc.get_stats()[2]["collections"]
        _ten_ticks(collector)
        assert gc.get_stats()[2]["collections"] == walks  # no walk of the old generation
        assert gc.get_freeze_count() > 0  # start-up's objects are left out of later passes
        _ten_ticks(collector)
        assert gc.get_stats()[2]["collections"] == walks + 1  # from then on, every 10 s
    finally:
        collector.stop()


def test_cycles_are_freed_and_the_survivors_frozen(qapp: Any) -> None:
    collector = _started(qapp)
    try:
        kept = Node()
        dropped = Node()
        gone = weakref.ref(dropped)
        del dropped
        _ten_ticks(collector)
        assert gone() is None  # the cycle made since the last full pass is freed
        assert gc.get_freeze_count() > 0  # the rest is left out of the next passes
        assert kept.other is kept
    finally:
        collector.stop()
    assert gc.get_freeze_count() == 0  # stop gives every object back to the collector


def test_a_cycle_among_frozen_objects_is_freed_at_the_next_thaw(qapp: Any) -> None:
    collector = _started(qapp)
    try:
        old = Node()
        gone = weakref.ref(old)
        _ten_ticks(collector)  # alive at this pass: frozen with the rest
        del old
        _ten_ticks(collector)
        assert gone() is not None  # frozen: the 10-second pass leaves it alone
        collector._thaw_s = 0  # the thaw is due
        _ten_ticks(collector)
        assert gone() is None
    finally:
        collector.stop()


def test_long_lived_objects_are_left_out_of_the_one_second_passes(qapp: Any) -> None:
    """Start-up freezes what it made once the window is open (and again after the modules
    loaded behind it): the next young-generation pass does not walk it."""
    collector = GuiThreadGarbageCollector(qapp, interval_ms=60_000, thaw_s=3600)
    try:
        made = [Node() for _ in range(20_000)]  # a window's worth of start-up objects
        collector.freeze_long_lived()
        assert gc.get_count()[0] < 1_000  # the young generation no longer holds them
        frozen = gc.get_freeze_count()
        assert frozen >= len(made)
        collector._collect()  # a 1-second pass: nothing of start-up to walk
        assert gc.get_freeze_count() == frozen and made[0].other is made[0]
    finally:
        collector.stop()
