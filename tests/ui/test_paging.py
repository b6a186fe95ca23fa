"""The transcript's paging arithmetic, without Qt: which rows are built, grown and shed."""

from __future__ import annotations

import pytest

from desktop.ui.conversation.paging import (
    BATCH,
    FIRST_SCREEN,
    MAX_LOADED,
    PAGE,
    PREFETCH_BUDGET_S,
    PREFETCH_SCREENS,
    Edge,
    Paging,
)
from tests.helpers.cli import packages_loaded

LONG = 5_000


class FakeClock:
    """Time that passes only when a test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def opened(
    length: int = LONG, focus: int | None = None, clock: FakeClock | None = None
) -> Paging[int]:
    paging: Paging[int] = Paging(clock or FakeClock())
    paging.open(range(length), focus)
    return paging


def grow(paging: Paging[int], edge: Edge, count: int) -> int:
    """What the transcript does for "Show earlier/later messages": build all, then shed."""
    items = paging.beyond(edge, count)
    rows = paging.build(items, lambda i: f"row {i}", edge=edge)
    assert rows == [f"row {i}" for i in items]  # path order, whichever end was built first
    return paging.grown(edge, len(rows))


def test_the_module_imports_no_qt() -> None:
    assert packages_loaded("import desktop.ui.conversation.paging", ("PySide6",)) == []


def test_a_conversation_opens_at_its_last_screen() -> None:
    paging = opened()
    assert (paging.start, paging.end) == (LONG - FIRST_SCREEN, LONG)
    assert paging.window == list(range(LONG - FIRST_SCREEN, LONG))
    assert paging.has_more("top") and not paging.has_more("bottom")


def test_a_short_conversation_is_built_whole_and_an_empty_one_not_at_all() -> None:
    short = opened(5)
    assert (short.start, short.end) == (0, 5) and not short.has_more("top")
    empty = opened(0)
    assert (empty.start, empty.end) == (0, 0) and empty.window == []
    assert not empty.has_more("top") and not empty.has_more("bottom")


def test_a_found_message_opens_in_the_middle_of_a_screen() -> None:
    paging = opened(focus=2_500)
    assert (paging.start, paging.end) == (2_500 - FIRST_SCREEN // 2, 2_500 + FIRST_SCREEN // 2)
    assert paging.is_built(2_500) and not paging.is_built(paging.end)
    assert paging.has_more("top") and paging.has_more("bottom")


@pytest.mark.parametrize(
    ("focus", "window"),
    [
        (0, (0, FIRST_SCREEN)),  # the first message: the window starts at the path's start
        (3, (0, FIRST_SCREEN)),
        (LONG - 1, (LONG - 1 - FIRST_SCREEN // 2, LONG)),  # the end cuts the screen short
    ],
)
def test_a_found_message_near_an_end(focus: int, window: tuple[int, int]) -> None:
    paging = opened(focus=focus)
    assert (paging.start, paging.end) == window and paging.is_built(focus)


def test_moving_the_window_back_to_the_end_and_to_a_message() -> None:
    paging = opened(focus=10)
    paging.show_last()
    assert (paging.start, paging.end) == (LONG - FIRST_SCREEN, LONG)
    paging.show_around(1_000)
    assert (paging.start, paging.end) == (1_000 - FIRST_SCREEN // 2, 1_000 + FIRST_SCREEN // 2)


def test_growing_up_a_page_at_a_time_until_the_start() -> None:
    paging = opened(200)
    assert paging.beyond("top", PAGE) == list(range(200 - FIRST_SCREEN - PAGE, 200 - FIRST_SCREEN))
    assert grow(paging, "top", PAGE) == 0
    assert (paging.start, paging.end) == (200 - FIRST_SCREEN - PAGE, 200)
    assert grow(paging, "top", PAGE) == 0
    assert paging.end - paging.start == FIRST_SCREEN + 2 * PAGE
    # past MAX_LOADED the far end (the bottom) is shed: the window keeps its size
    assert grow(paging, "top", PAGE) == FIRST_SCREEN + 3 * PAGE - MAX_LOADED
    assert paging.end - paging.start == MAX_LOADED and paging.has_more("bottom")
    while paging.has_more("top"):
        grow(paging, "top", PAGE)
    assert (paging.start, paging.end) == (0, MAX_LOADED)
    assert paging.beyond("top", PAGE) == [] and grow(paging, "top", PAGE) == 0


def test_growing_down_from_a_found_message_sheds_the_top() -> None:
    paging = opened(focus=100)
    start = paging.start
    assert paging.beyond("bottom", PAGE) == list(range(paging.end, paging.end + PAGE))
    for _ in range(2):
        assert grow(paging, "bottom", PAGE) == 0
    assert (paging.start, paging.end) == (start, start + FIRST_SCREEN + 2 * PAGE)
    shed = grow(paging, "bottom", PAGE)
    assert shed == FIRST_SCREEN + 3 * PAGE - MAX_LOADED
    assert (paging.start, paging.end) == (start + shed, start + FIRST_SCREEN + 3 * PAGE)
    assert paging.end - paging.start == MAX_LOADED


def test_a_short_batch_at_the_end_of_the_path() -> None:
    paging = opened(20, focus=5)  # window [0, 12): 8 more below
    assert paging.beyond("bottom", PAGE) == list(range(FIRST_SCREEN, 20))
    grow(paging, "bottom", PAGE)
    assert (paging.start, paging.end) == (0, 20) and not paging.has_more("bottom")
    assert paging.beyond("bottom", PAGE) == []


def test_shed_narrows_only_a_window_past_max_loaded() -> None:
    paging = opened()
    assert paging.shed("top") == 0 and paging.shed("bottom") == 0
    paging.start = paging.end - MAX_LOADED - 5
    assert paging.shed("bottom") == 5 and paging.end == LONG - 5
    paging.start = paging.end - MAX_LOADED - 3
    assert paging.shed("top") == 3 and paging.end - paging.start == MAX_LOADED


def test_prefetch_starts_within_a_screen_and_a_half_of_an_unbuilt_edge() -> None:
    view = 600
    zone = view * PREFETCH_SCREENS
    at_end = opened()  # more above, nothing below
    assert at_end.near_edge(above_px=zone - 1, below_px=0, view_px=view) == "top"
    assert at_end.near_edge(above_px=zone, below_px=0, view_px=view) is None
    assert at_end.near_edge(above_px=5_000, below_px=0, view_px=view) is None

    middle = opened(focus=2_500)  # more on both sides
    assert middle.near_edge(above_px=10, below_px=10, view_px=view) == "top"  # top first
    assert middle.near_edge(above_px=zone, below_px=zone - 1, view_px=view) == "bottom"
    assert middle.near_edge(above_px=zone, below_px=zone, view_px=view) is None

    whole = opened(5)  # everything built: never
    assert whole.near_edge(above_px=0, below_px=0, view_px=view) is None


def test_a_batch_stops_when_building_it_takes_longer_than_the_budget() -> None:
    clock = FakeClock()
    paging = opened(clock=clock)
    step = PREFETCH_BUDGET_S / 3.5  # a fourth row would end past the budget (at 4/3.5 of it)

    def make(i: int) -> str:
        clock.now += step
        return f"row {i}"

    items = paging.beyond("top", BATCH)
    made = paging.build(items, make, PREFETCH_BUDGET_S, "top")
    assert made == [f"row {i}" for i in items[-3:]]  # the ones nearest the window
    bottom = opened(focus=100, clock=clock)
    items = bottom.beyond("bottom", BATCH)
    assert bottom.build(items, make, PREFETCH_BUDGET_S, "bottom") == [f"row {i}" for i in items[:3]]
    assert len(paging.build(items, make, budget_s=None)) == BATCH  # no budget: all of them


def test_a_batch_builds_at_least_one_row_however_slow() -> None:
    clock = FakeClock()
    paging = opened(clock=clock)

    def slow(i: int) -> int:
        clock.now += 1.0
        return i

    assert paging.build(paging.beyond("top", BATCH), slow, PREFETCH_BUDGET_S, "top") == [
        LONG - FIRST_SCREEN - 1
    ]
    assert paging.build([], slow, PREFETCH_BUDGET_S) == []


def test_a_new_message_joins_the_window_only_when_it_reaches_the_end() -> None:
    paging = opened(100)
    assert paging.append(100) and paging.end == 101 == len(paging.path)
    away = opened(100, focus=10)
    window = away.window
    assert not away.append(100) and away.window == window and away.path[-1] == 100
    assert away.has_more("bottom")


def test_removing_a_message_keeps_the_window_on_the_same_messages() -> None:
    paging = opened(100, focus=50)
    start, end = paging.start, paging.end
    paging.remove(0)  # above the window: it moves up by one
    assert (paging.start, paging.end) == (start - 1, end - 1)
    assert paging.window == list(range(start, end))
    paging.remove(paging.start)  # inside: the window loses it
    assert paging.window == list(range(start + 1, end))
    paging.remove(len(paging.path) - 1)  # below: nothing moves
    assert paging.window == list(range(start + 1, end))
