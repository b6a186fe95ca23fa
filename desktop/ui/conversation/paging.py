"""Which messages of a conversation's path exist as bubbles, and what to build or shed next.

Only a window of the path is built: a screen when a conversation opens (``FIRST_SCREEN``), then
a ``BATCH`` per event-loop turn while the view is near an unbuilt edge (fewer when building
them takes longer than ``PREFETCH_BUDGET_S``), or a ``PAGE`` for "Show earlier/later messages".
Past ``MAX_LOADED`` the far end is shed, so a 5,000-message conversation opens as fast as a
short one and memory stays bounded.

This is the arithmetic alone (no Qt): the transcript builds and drops the rows it is told to,
and passes in the scroll figures it needs (pixels, as plain numbers).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Generic, Literal, TypeVar

FIRST_SCREEN = 12  # messages built at once when a conversation opens; the rest follow
PAGE = 40  # messages built by "Show earlier/later messages"
BATCH = 8  # messages built per event-loop turn while the view nears an unbuilt edge, at most
PREFETCH_BUDGET_S = 0.008  # ... and fewer when building them would take longer than this (a
# loop turn also lays the rows out and paints: ~4-5 ms more, within a 16 ms frame; at 10 ms
# the first switch of conversations in bench/frames.py held 15 ms)
PREFETCH_SCREENS = 1.5  # build ahead while the view is this many heights from an edge
MAX_LOADED = 120  # rows alive at most; the far end of the window is shed beyond this

Edge = Literal["top", "bottom"]
T = TypeVar("T")
R = TypeVar("R")


def other(edge: Edge) -> Edge:
    return "bottom" if edge == "top" else "top"


class Paging(Generic[T]):
    """The window ``[start, end)`` of a path (messages, in order) that exists as rows.

    The methods that move the window say how many rows the caller must add or drop and at
    which end; ``start`` and ``end`` are then already where those rows leave them.
    """

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.path: list[T] = []
        self.start = 0
        self.end = 0
        self._clock = clock

    # the window --------------------------------------------------------------------------------
    @property
    def window(self) -> list[T]:
        """The items that are built, in path order."""
        return self.path[self.start : self.end]

    def has_more(self, edge: Edge) -> bool:
        """True when items beyond that edge of the window are not built."""
        return self.start > 0 if edge == "top" else self.end < len(self.path)

    def is_built(self, index: int) -> bool:
        return self.start <= index < self.end

    def open(self, path: Sequence[T], focus: int | None = None) -> None:
        """A new path: its last screen is built, or a screen around the item at ``focus``."""
        self.path = list(path)
        if focus is None:
            self.show_last()
        else:
            self.show_around(focus)

    def show_last(self) -> None:
        """The window becomes the last screen of the path (the caller rebuilds its rows)."""
        self.end = len(self.path)
        self.start = max(0, self.end - FIRST_SCREEN)

    def show_around(self, index: int) -> None:
        """The window becomes a screen with the item at ``index`` in its middle, or as near it
        as the path's ends allow (the caller rebuilds its rows)."""
        self.start = max(0, index - FIRST_SCREEN // 2)
        self.end = min(len(self.path), self.start + FIRST_SCREEN)

    # growing -----------------------------------------------------------------------------------
    def beyond(self, edge: Edge, count: int) -> list[T]:
        """Up to ``count`` unbuilt items next to that edge of the window, in path order."""
        if edge == "top":
            return self.path[max(0, self.start - count) : self.start]
        return self.path[self.end : self.end + count]

    def build(
        self,
        items: Sequence[T],
        make: Callable[[T], R],
        budget_s: float | None = None,
        edge: Edge = "bottom",
    ) -> list[R]:
        """``make`` each item, in path order; with a budget, as many as fit in it (at least one:
        another is made while the time spent so far plus one more at the average so far fits).

        ``edge`` is where the window grows: towards the top the items nearest the window are
        the last ones, so they are made first and a cut-off drops the first ones.
        """
        made: list[R] = []
        began = self._clock()
        for item in reversed(items) if edge == "top" else items:
            made.append(make(item))
            spent = self._clock() - began
            # stop when the next one, as long as the average so far, would not fit
            if budget_s is not None and spent + spent / len(made) > budget_s:
                break
        if edge == "top":
            made.reverse()
        return made

    def grown(self, edge: Edge, count: int) -> int:
        """``count`` rows were added at that edge: widen the window over them, then shed what
        is past MAX_LOADED at the other edge. Returns how many rows the other edge loses."""
        if edge == "top":
            self.start -= count
        else:
            self.end += count
        return self.shed(other(edge))

    def shed(self, edge: Edge) -> int:
        """Narrow the window to MAX_LOADED rows from that edge; how many rows it loses there."""
        extra = max(0, self.end - self.start - MAX_LOADED)
        if edge == "top":
            self.start += extra
        else:
            self.end -= extra
        return extra

    def near_edge(self, above_px: float, below_px: float, view_px: float) -> Edge | None:
        """The unbuilt edge the view is within PREFETCH_SCREENS view heights of, if any.

        ``above_px`` and ``below_px``: how far the view's top is from the top of the built
        rows, and its bottom from their bottom (the scroll bar's value - minimum and
        maximum - value); ``view_px``: the view's height.
        """
        zone = view_px * PREFETCH_SCREENS
        if self.has_more("top") and above_px < zone:
            return "top"
        if self.has_more("bottom") and below_px < zone:
            return "bottom"
        return None

    # the path changes --------------------------------------------------------------------------
    def append(self, item: T) -> bool:
        """Add an item at the end of the path. True when the window reached the end: it takes
        the item in (the caller builds its row, and may shed the top)."""
        taken = not self.has_more("bottom")
        self.path.append(item)
        if taken:
            self.end = len(self.path)
        return taken

    def remove(self, index: int) -> None:
        """Take the item at ``index`` out of the path (the caller drops its row, if built)."""
        del self.path[index]
        if index < self.start:
            self.start -= 1
        if index < self.end:
            self.end -= 1
