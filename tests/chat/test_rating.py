"""Bradley-Terry ratings from pairwise votes (``desktop.chat.rating.rate``)."""

from __future__ import annotations

import math
import random
from pathlib import Path
from types import SimpleNamespace

from desktop.chat.rating import MIN_VOTES, rate
from desktop.store.compare import CompareStore
from desktop.store.db import open_database


def _votes(*specs: tuple[str, str, str, int]) -> list[SimpleNamespace]:
    """(left, right, outcome, times): stand-ins for stored ``Vote`` rows (the three fields
    ``rate`` reads)."""
    return [
        SimpleNamespace(left_agent_name=left, right_agent_name=right, outcome=outcome)
        for left, right, outcome, times in specs
        for _ in range(times)
    ]


def _by_name(ratings):
    return {r.agent_name: r for r in ratings}


def test_an_agent_that_wins_most_votes_rates_higher_and_best_comes_first() -> None:
    ratings = rate(
        _votes(
            ("Ann", "Bob", "left", 8),
            ("Ann", "Bob", "right", 2),
            ("Cid", "Bob", "right", 7),
            ("Cid", "Bob", "left", 3),
            ("Ann", "Cid", "left", 9),
            ("Ann", "Cid", "right", 1),
        )
    )
    assert [r.agent_name for r in ratings] == ["Ann", "Bob", "Cid"]
    assert ratings[0].score > ratings[1].score > ratings[2].score
    # strengths are normalised to a geometric mean of 1: the scores average 1000
    assert math.isclose(sum(r.score for r in ratings) / 3, 1000, abs_tol=0.2)
    ann = ratings[0]
    assert (ann.votes, ann.wins, ann.losses) == (20, 17, 3)


def test_symmetric_votes_give_equal_scores() -> None:
    cycle = _votes(("A", "B", "left", 4), ("B", "C", "left", 4), ("C", "A", "left", 4))
    ratings = rate(cycle)
    assert {r.score for r in ratings} == {1000.0}
    mirrored = rate(_votes(("A", "B", "left", 5), ("A", "B", "right", 5)))
    assert [r.score for r in mirrored] == [1000.0, 1000.0]


def test_an_undefeated_agent_gets_a_finite_score() -> None:
    ratings = _by_name(rate(_votes(("A", "B", "left", 6))))
    assert math.isfinite(ratings["A"].score) and ratings["A"].score > ratings["B"].score
    assert ratings["A"].low is not None and ratings["A"].low < ratings["A"].score


def test_intervals_contain_the_score_and_widen_with_fewer_votes() -> None:
    def pattern(times: int):
        return _by_name(rate(_votes(("A", "B", "left", 2 * times), ("A", "B", "right", times))))

    few, many = pattern(2), pattern(30)
    for ratings in (few, many):
        for r in ratings.values():
            assert r.low is not None and r.high is not None
            assert r.low <= r.score <= r.high and r.low < r.high
    assert (few["A"].high - few["A"].low) > 2 * (many["A"].high - many["A"].low)


def test_ties_and_both_bad_count_half_a_win_each_and_are_counted() -> None:
    plain = _by_name(rate(_votes(("A", "B", "left", 4))))
    tied = _by_name(
        rate(_votes(("A", "B", "left", 4), ("A", "B", "tie", 3), ("B", "A", "both_bad", 2)))
    )
    assert tied["A"].score - tied["B"].score < plain["A"].score - plain["B"].score
    a, b = tied["A"], tied["B"]
    assert (a.votes, a.wins, a.losses, a.ties, a.both_bad) == (9, 4, 0, 3, 2)
    assert (b.votes, b.wins, b.losses, b.ties, b.both_bad) == (9, 0, 4, 3, 2)
    only_ties = rate(_votes(("A", "B", "tie", 3), ("A", "B", "both_bad", 3)))
    assert [r.score for r in only_ties] == [1000.0, 1000.0]


def test_the_same_votes_give_the_same_result() -> None:
    votes = _votes(("A", "B", "left", 5), ("B", "C", "right", 3), ("C", "A", "left", 2))
    assert rate(votes) == rate(list(votes))
    assert rate(votes, seed=1) != rate(votes, seed=2)  # the interval is the bootstrap's


def test_fewer_than_min_votes_leaves_the_interval_out() -> None:
    ratings = _by_name(
        rate(_votes(("A", "B", "left", MIN_VOTES - 1), ("A", "C", "right", MIN_VOTES)))
    )
    assert ratings["B"].votes == MIN_VOTES - 1 and ratings["B"].low is None
    assert ratings["B"].high is None
    assert ratings["C"].votes == MIN_VOTES and ratings["C"].low is not None
    assert rate([]) == []


def test_names_differing_only_in_case_are_one_agent_and_self_votes_are_ignored() -> None:
    ratings = rate(
        _votes(("Ann", "Bob", "left", 2), ("ann", "Bob", "left", 2), ("Bob", "BOB", "left", 5))
    )
    assert [(r.agent_name, r.votes) for r in ratings] == [("ann", 4), ("Bob", 4)]


def test_a_thousand_votes_over_six_agents_recover_their_order() -> None:
    rnd = random.Random(3)
    names = [f"agent {i}" for i in range(6)]
    strength = {name: 2.0**i for i, name in enumerate(names)}
    votes = []
    for _ in range(1000):
        left, right = rnd.sample(names, 2)
        if rnd.random() < 0.1:
            outcome = "tie"
        else:
            won = rnd.random() < strength[left] / (strength[left] + strength[right])
            outcome = "left" if won else "right"
        votes.append(SimpleNamespace(left_agent_name=left, right_agent_name=right, outcome=outcome))
    ratings = rate(votes)
    assert [r.agent_name for r in ratings] == names[::-1]
    # twice the strength is 400*log10(2) = 120 points apart, within the noise of 1,000 votes
    gap = (ratings[0].score - ratings[-1].score) / 5
    assert 90 < gap < 150
    assert sum(r.votes for r in ratings) == 2000


def test_stored_votes_are_rated(tmp_path: Path) -> None:
    db = open_database(tmp_path / "simi.db")
    store = CompareStore(db)
    for outcome in ("left", "left", "right", "tie"):
        store.add_vote(None, "q", (None, "Ann", None), (None, "Bob", None), outcome, True)
    ratings = rate(store.votes())
    db.conn.close()
    assert [r.agent_name for r in ratings] == ["Ann", "Bob"]
    assert ratings[0].votes == 4 and ratings[0].ties == 1
