"""Ratings from pairwise votes on the Stats page: real SQLite (votes stored through
``services.compare.add_vote``, calls through ``StatsStore.record``), the real ``rate()`` and
the real page offscreen."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from desktop.chat.rating import MIN_VOTES
from desktop.ui.stats.dashboard import StatsPage
from desktop.ui.stats.rating_table import COLUMNS, NEEDS_MORE


def _call(services: Any, agent: str) -> None:
    services.stats.record(
        {
            "agent_name": agent,
            "provider_kind": "openai",
            "started_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "ttft_ms": 300.0,
            "decode_tok_s": 50.0,
            "total_ms": 1300.0,
            "prompt_tokens": 20,
            "output_tokens": 40,
            "finish_reason": "stop",
        }
    )


def _vote(services: Any, left: str, right: str, outcome: str) -> None:
    services.compare.add_vote(
        None, "Which answer is better?", (None, left, None), (None, right, None), outcome, True
    )


@pytest.fixture
def page(qtbot: Any, qloop: Any, services: Any) -> StatsPage:
    for name in ("Strong", "Middling", "Weak", "Newcomer"):
        _call(services, name)
    p = StatsPage(services)
    qtbot.addWidget(p)
    p.resize(1280, 800)
    return p


def _open(qtbot: Any, page: StatsPage) -> None:
    with qtbot.waitSignal(page.ratings.refreshed, timeout=10_000):
        page.show()
        page.refresh()


def _rows(page: StatsPage) -> list[dict[str, str]]:
    names = [n for n, _ in COLUMNS]
    return [
        dict(zip(names, page.ratings.cells(r), strict=True))
        for r in range(page.ratings.table.rowCount())
    ]


def test_votes_become_ratings_best_first_with_intervals(
    qtbot: Any, page: StatsPage, services: Any
) -> None:
    for _ in range(6):
        _vote(services, "Strong", "Weak", "left")
    for _ in range(4):
        _vote(services, "Middling", "Strong", "right")
    _vote(services, "Middling", "Strong", "tie")
    for _ in range(4):
        _vote(services, "Middling", "Weak", "left")
    _vote(services, "Weak", "Middling", "both_bad")
    _vote(services, "Newcomer", "Weak", "left")  # one vote: too few for an interval
    _open(qtbot, page)

    assert page.ratings.isVisible()
    rows = _rows(page)
    names = [r["Agent"] for r in rows]
    assert sorted(names) == ["Middling", "Newcomer", "Strong", "Weak"]
    assert names[0] == "Strong" and names.index("Middling") < names.index("Weak")
    scores = [int(r["Rating"]) for r in rows]
    assert scores == sorted(scores, reverse=True)  # best first
    strong = rows[0]
    low, high = (int(x) for x in strong["95% interval"].split(" – "))
    assert low <= int(strong["Rating"]) <= high
    assert strong["Votes"] == "11"
    assert strong["Wins / ties / losses"] == "10 / 1 / 0"
    middling = next(r for r in rows if r["Agent"] == "Middling")
    assert middling["Wins / ties / losses"] == "4 / 2 / 4"  # a tie and a "both bad"
    record_tip = page.ratings.table.item(rows.index(middling), 4).toolTip()
    assert "1 both bad" in record_tip
    newcomer = next(r for r in rows if r["Agent"] == "Newcomer")
    assert int(newcomer["Votes"]) < MIN_VOTES
    assert newcomer["95% interval"] == NEEDS_MORE
    assert "pairwise votes in Compare" in page.ratings.how.text()
    assert all("?" not in "".join(r.values()) for r in rows)


def test_no_votes_no_ratings_section(qtbot: Any, page: StatsPage, services: Any) -> None:
    _open(qtbot, page)
    assert page.body.currentIndex() == 1  # the page shows its calls
    assert not page.ratings.isVisible() and page.ratings.table.rowCount() == 0


def test_a_vote_recorded_while_the_page_is_open_shows_on_refresh(
    qtbot: Any, page: StatsPage, services: Any
) -> None:
    _open(qtbot, page)
    assert not page.ratings.isVisible()
    for _ in range(3):
        _vote(services, "Strong", "Weak", "left")
    with qtbot.waitSignal(page.ratings.refreshed, timeout=10_000):
        page.refresh_button.click()
    assert page.ratings.isVisible()
    assert [r["Agent"] for r in _rows(page)] == ["Strong", "Weak"]
