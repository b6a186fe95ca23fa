"""A rating per agent from pairwise votes (Bradley-Terry), with a confidence interval.

CONTRACT (written by the lead; the implementer keeps these names and fields):
``rate(votes)`` takes ``store.compare.Vote`` rows (or anything with ``left_agent_name``,
``right_agent_name``, ``outcome``) and returns one ``Rating`` per agent that took part, best
first. "left"/"right" is a win for that side; "tie" and "both_bad" count half a win each
(both_bad is also counted in ``both_bad``). Scores are on the familiar Elo-like scale
(1000 + 400 * log10 of the Bradley-Terry strength, strengths normalised to a geometric mean
of 1); ``low``/``high`` is a 95% interval from a seeded bootstrap over the votes (so the same
votes always give the same interval). Fewer than ``MIN_VOTES`` votes for an agent: its
interval is None (the UI says "needs more votes"). Qt-free, numpy allowed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MIN_VOTES = 3


@dataclass(frozen=True, slots=True)
class Rating:
    agent_name: str
    score: float
    low: float | None
    high: float | None
    votes: int
    wins: int
    losses: int
    ties: int
    both_bad: int


def rate(votes: Iterable[Any], bootstrap: int = 200, seed: int = 7) -> list[Rating]:
    raise NotImplementedError
