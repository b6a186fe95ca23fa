"""Ratings from pairwise votes, as a section of the Stats page.

``RatingSection`` shows one row per agent that took part in a vote in Compare: its rating
(Bradley–Terry on the Elo-like scale, ``desktop.chat.rating.rate``), the 95% interval or
"needs more votes", the number of votes and its wins / ties / losses (ties count "both bad"
too, which the tooltip says). Best first. The votes are read and rated on a worker thread
(``run_blocking``), one question at a time, the newest wins; the section is hidden while
there are no votes. All votes count, whatever the page's date range.

Signals: refreshed(): a new answer is shown (or the section hidden).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QLabel,
    QTableWidget,
    QWidget,
)

from desktop.chat.rating import Rating, rate
from desktop.chat.services import Services
from desktop.errors import UserError
from desktop.store.compare import CompareStore
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.figures_table import figures_table, fill_figures, fit_rows_height
from desktop.ui.kit.widgets import cell_text, vbox

log = logging.getLogger("simi.ui.ratings")

NEEDS_MORE = "needs more votes"
HOW = (
    "From pairwise votes in Compare (A better, B better, tie, both bad): a Bradley–Terry "
    "rating, 1000 is average; a tie or both bad counts half a win for each side."
)
COLUMNS: tuple[tuple[str, str], ...] = (
    ("Agent", "The agent whose answers were compared."),
    ("Rating", "Higher is preferred more often; 1000 is average. 100 points apart: the higher "
     "one wins about 64 in 100 votes."),
    ("95% interval", "The rating is likely within this range (from resampling the votes). "
     "A wide range means few or mixed votes."),
    ("Votes", "Pairwise votes this agent took part in."),
    ("Wins / ties / losses", "Ties include “both bad” votes (see the tooltip of each row)."),
)  # fmt: skip


def rating_cells(r: Rating) -> list[tuple[str, str]]:
    """One (text, tooltip) per column of ``COLUMNS``."""
    if r.low is None or r.high is None:
        interval, tip = NEEDS_MORE, "A rating needs a few votes before its range means anything."
    else:
        interval, tip = f"{r.low:.0f} – {r.high:.0f}", ""
    # every vote is a win, a tie or a loss; "both bad" is a kind of tie
    ties = r.ties if r.wins + r.ties + r.losses == r.votes else r.ties + r.both_bad
    record_tip = (
        f"{r.wins:,} won, {ties - r.both_bad:,} tied, {r.both_bad:,} both bad, {r.losses:,} lost."
    )
    return [
        (r.agent_name, ""),
        (f"{r.score:.0f}", ""),
        (interval, tip),
        (f"{r.votes:,}", ""),
        (f"{r.wins:,} / {ties:,} / {r.losses:,}", record_tip),
    ]


def load_ratings(compare: CompareStore) -> list[Rating]:
    """Every vote, rated (on a worker thread)."""
    return rate(compare.votes())


class RatingSection(QWidget):
    refreshed = Signal()

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("RatingSection")
        self._services = services
        self.ratings: list[Rating] = []
        self._want = False
        self._task: asyncio.Task[None] | None = None
        layout = vbox(self, (0, 6, 0, 0), 6)
        title = QLabel("RATINGS FROM YOUR VOTES")
        title.setObjectName("SectionLabel")
        self.how = QLabel(HOW)
        self.how.setObjectName("EmptyHint")
        self.how.setWordWrap(True)
        self.table = figures_table(QTableWidget(), "Ratings per agent", COLUMNS, 48)
        self.table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        for w in (title, self.how, self.table):
            layout.addWidget(w)
        self.setVisible(False)  # until votes are found

    @property
    def shown(self) -> bool:
        """Whether the section is part of the page (visible when its page is)."""
        return not self.isHidden()

    def refresh(self) -> asyncio.Task[None]:
        """Read the votes again (the Stats page calls this whenever it refreshes)."""
        self._want = True
        if self._task is None or self._task.done():
            self._task = start(self._answer(), name="stats-ratings")
        return self._task

    async def _answer(self) -> None:
        while self._want:
            self._want = False
            try:
                ratings = await run_blocking(load_ratings, self._services.compare)
            except (sqlite3.Error, UserError) as exc:  # locked or broken: keep what is shown
                log.warning("ratings query failed: %s", exc)
                return
            if not self._want:
                self._show(ratings)

    def _show(self, ratings: list[Rating]) -> None:
        self.ratings = ratings
        self.setVisible(bool(ratings))
        fill_figures(self.table, [rating_cells(rating) for rating in ratings])
        fit_rows_height(self.table, 48)
        self.refreshed.emit()

    def cells(self, row: int) -> list[str]:
        return [cell_text(self.table, row, c) for c in range(self.table.columnCount())]
