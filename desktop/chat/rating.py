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

How. The strengths maximise the Bradley-Terry likelihood plus a prior of one virtual tie
between every agent and a reference of strength 1: an agent that won (or lost) every vote
still gets a finite score, and one with few votes stays near the middle. The log-likelihood
is concave, so Newton's method on the log-strengths finds the maximum in a few steps (the
MM iteration crawls here: one virtual game against hundreds of real ones pins the common
scale only weakly). The bootstrap keeps the votes' pairs and redraws each vote's winner from
the fitted chances (a parametric bootstrap): resampling the votes themselves would give an
interval of width 0 to an agent that won all of its few votes. A redrawn vote is a win or a
loss, never a tie, so many ties make an interval a little wider, never narrower. Every
resample is fitted at once, as arrays. Names are matched without regard to case (agent names
are unique that way); the latest spelling is shown. numpy is imported on the first call (the
dashboard rates on its worker thread).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

MIN_VOTES = 3
PRIOR_TIES = 1.0  # virtual ties of each agent with the reference (strength 1)
_TOLERANCE = 1e-9  # Newton step (natural log of strength) below which the fit has converged
_MAX_STEP = 2.0  # a step is at most this far per agent (damping, far from the optimum)
_MAX_ITERATIONS = 200
_SCALE = 400.0 / math.log(10)  # per natural-log unit of strength
_BASE = 1000.0
_SHARE = {"left": 1.0, "right": 0.0, "tie": 0.5, "both_bad": 0.5}


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
    import numpy as np

    names: dict[str, str] = {}  # casefolded -> latest spelling
    index: dict[str, int] = {}
    pairs: dict[tuple[int, int], list[float]] = {}  # (left, right) -> [votes, left's share]
    tally: dict[int, list[int]] = {}  # agent -> [votes, wins, losses, ties, both bad]
    for vote in votes:
        left, right = str(vote.left_agent_name), str(vote.right_agent_name)
        lkey, rkey = left.strip().casefold(), right.strip().casefold()
        share = _SHARE.get(vote.outcome)
        if lkey == rkey or share is None:
            continue
        for key, name in ((lkey, left), (rkey, right)):
            names[key] = name
            tally.setdefault(index.setdefault(key, len(index)), [0, 0, 0, 0, 0])
        li, ri = index[lkey], index[rkey]
        cell = pairs.setdefault((li, ri), [0.0, 0.0])
        cell[0] += 1
        cell[1] += share
        for agent, won in ((li, share), (ri, 1.0 - share)):
            counts = tally[agent]
            counts[0] += 1
            if vote.outcome == "both_bad":
                counts[4] += 1
            elif vote.outcome == "tie":
                counts[3] += 1
            else:
                counts[1 if won == 1.0 else 2] += 1
    if not index:
        return []
    k = len(index)
    left_ix = np.array([lr[0] for lr in pairs])
    right_ix = np.array([lr[1] for lr in pairs])
    games = np.array([c[0] for c in pairs.values()])
    shares = np.array([c[1] for c in pairs.values()])
    forward = np.zeros((len(pairs), k * k))  # pair -> its (left, right) entry
    forward[np.arange(len(pairs)), left_ix * k + right_ix] = 1.0
    backward = np.zeros((len(pairs), k * k))  # pair -> its (right, left) entry
    backward[np.arange(len(pairs)), right_ix * k + left_ix] = 1.0

    def wins(left_wins: np.ndarray) -> np.ndarray:
        """(samples, k, k) ``w[s, i, j]``: what i won against j in sample s."""
        w = left_wins @ forward + (games - left_wins) @ backward
        return w.reshape(left_wins.shape[0], k, k)

    theta = _fit(wins(shares[None, :]))
    scores = _scores(theta)[0]
    lows = highs = None
    if bootstrap > 0:
        chance = 1.0 / (1.0 + np.exp(theta[0, right_ix] - theta[0, left_ix]))  # the left one wins
        rng = np.random.default_rng(seed)
        redrawn = rng.binomial(games.astype(np.int64), chance, size=(bootstrap, len(pairs)))
        boot = _scores(_fit(wins(redrawn.astype(float))))
        lows = np.minimum(np.percentile(boot, 2.5, axis=0), scores)
        highs = np.maximum(np.percentile(boot, 97.5, axis=0), scores)

    ratings = []
    for key, i in index.items():
        n, won, lost, tied, bad = tally[i]
        enough = lows is not None and highs is not None and n >= MIN_VOTES
        ratings.append(
            Rating(
                agent_name=names[key],
                score=round(float(scores[i]), 1),
                low=round(float(lows[i]), 1) if enough and lows is not None else None,
                high=round(float(highs[i]), 1) if enough and highs is not None else None,
                votes=n,
                wins=won,
                losses=lost,
                ties=tied,
                both_bad=bad,
            )
        )
    ratings.sort(key=lambda r: (-r.score, r.agent_name.casefold()))
    return ratings


def _fit(w: np.ndarray) -> np.ndarray:
    """Log-strengths (samples, k) maximising the Bradley-Terry likelihood of ``w`` (samples,
    k, k) plus the prior, by damped Newton steps, every sample at once."""
    import numpy as np

    samples, k = w.shape[:2]
    games = w + w.transpose(0, 2, 1)
    won = w.sum(axis=2) + PRIOR_TIES / 2
    theta = np.zeros((samples, k))
    diagonal = np.arange(k)
    for _ in range(_MAX_ITERATIONS):
        beats = 1.0 / (1.0 + np.exp(theta[:, None, :] - theta[:, :, None]))  # i beats j
        beats_ref = 1.0 / (1.0 + np.exp(-theta))
        gradient = won - (games * beats).sum(axis=2) - PRIOR_TIES * beats_ref
        curvature = games * beats * (1.0 - beats)
        hessian = curvature.copy()
        hessian[:, diagonal, diagonal] = -curvature.sum(axis=2) - PRIOR_TIES * beats_ref * (
            1.0 - beats_ref
        )
        step = np.linalg.solve(hessian, gradient[:, :, None])[:, :, 0]
        step = np.clip(step, -_MAX_STEP, _MAX_STEP)
        theta = theta - step
        if np.max(np.abs(step)) < _TOLERANCE:
            break
    return theta


def _scores(theta: np.ndarray) -> np.ndarray:
    """Elo-like: 1000 + 400 log10 of the strength over its sample's geometric mean."""
    return _BASE + _SCALE * (theta - theta.mean(axis=1, keepdims=True))
