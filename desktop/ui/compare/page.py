"""The main window's Compare page: the side-by-side view and prompt-set runs, as two tabs.

``CompareView`` (compare_view.py) sends one prompt to 2-6 agents, each column an ordinary
conversation; ``RunsView`` (runs_view.py) runs a list of prompts over chosen agents and
tabulates the figures. The window asks this page whether anything is still running
(``busy``), stops it on close (``stop``) and waits for it to be stored (``wait_idle``).

The "Prompt sets" tab is built when first chosen (or asked for: ``runs``): with it, building
the page held the window 20 ms in one turn (bench/frames.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QTabWidget, QWidget

from desktop.chat.services import Services
from desktop.store.agents import Agent
from desktop.ui.compare.runs_view import RunsView
from desktop.ui.compare.view import CompareView
from desktop.ui.conversation.pane import ConversationPane

RUNS_TAB = 1
RUNS_TIP = "A list of prompts over chosen agents, measured and tabulated"


class ComparePage(QTabWidget):
    """Signal continue_requested(int): open that conversation as an ordinary chat."""

    continue_requested = Signal(int)

    def __init__(
        self,
        services: Services,
        ask_save_path: Callable[[str, str, str], str | None] | None = None,
        ask_open_path: Callable[[str, str, str], str | None] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ComparePage")
        self.setDocumentMode(True)
        self._services = services
        self._paths = (ask_save_path, ask_open_path)
        # each tab built in place (a child styled once as it comes, not again with its whole
        # subtree moved in)
        self.compare = CompareView(services, self)
        self._runs: RunsView | None = None
        self.addTab(self.compare, "Side by side")
        self.addTab(QWidget(self), "Prompt sets")  # stands in until the tab is first chosen
        self.setTabToolTip(0, "One prompt to several agents at once, with pairwise votes")
        self.setTabToolTip(RUNS_TAB, RUNS_TIP)
        self.compare.continue_requested.connect(self.continue_requested)
        self.currentChanged.connect(lambda index: self.runs if index == RUNS_TAB else None)

    @property
    def runs(self) -> RunsView:
        """The "Prompt sets" tab, built now if it was not yet."""
        if self._runs is None:
            ask_save_path, ask_open_path = self._paths
            self._runs = RunsView(
                self._services,
                ask_save_path=ask_save_path,
                ask_open_path=ask_open_path,
                parent=self,
            )
            stand_in = self.widget(RUNS_TAB)
            shown = self.currentIndex() == RUNS_TAB
            self.blockSignals(True)  # the tab stays where it is; nothing else to announce
            self.removeTab(RUNS_TAB)
            self.insertTab(RUNS_TAB, self._runs, "Prompt sets")
            self.setTabToolTip(RUNS_TAB, RUNS_TIP)
            if shown:
                self.setCurrentIndex(RUNS_TAB)
            self.blockSignals(False)
            if stand_in is not None:
                stand_in.deleteLater()
        return self._runs

    def refresh(self) -> None:
        """The page was shown: saved sets, comparisons and runs are read again; the composer
        has the keyboard."""
        self.compare.refresh()
        if self.currentWidget() is self.compare:
            self.compare.composer.setFocus()

    @property
    def panes(self) -> list[ConversationPane]:
        return [column.pane for column in self.compare.columns]

    @property
    def busy(self) -> bool:
        return self.compare.busy or (self._runs is not None and self._runs.busy)

    def refresh_agents(self, by_id: dict[int, Agent]) -> None:
        self.compare.refresh_agents(by_id)

    def stop(self) -> None:
        """Stop every column's reply (partial text kept) and cancel a running prompt set."""
        self.compare.stop_all()
        runner = self._runs.runner if self._runs is not None else None
        if runner is not None:
            runner.cancel()

    async def wait_idle(self) -> None:
        self.compare.start_now()  # a prompt sent whose columns wait for their turn to start
        await asyncio.gather(*(pane.presenter.wait() for pane in self.panes))
        task = self._runs.run_task if self._runs is not None else None
        if task is not None and not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await task
