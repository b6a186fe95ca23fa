"""The main window's Compare page: the side-by-side view and prompt-set runs, as two tabs.

``CompareView`` (compare_view.py) sends one prompt to 2-6 agents, each column an ordinary
conversation; ``RunsView`` (runs_view.py) runs a list of prompts over chosen agents and
tabulates the figures. The window asks this page whether anything is still running
(``busy``), stops it on close (``stop``) and waits for it to be stored (``wait_idle``).
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
        # each tab built in place (a child styled once as it comes, not again with its whole
        # subtree moved in)
        self.compare = CompareView(services, self)
        self.runs = RunsView(
            services, ask_save_path=ask_save_path, ask_open_path=ask_open_path, parent=self
        )
        self.addTab(self.compare, "Side by side")
        self.addTab(self.runs, "Prompt sets")
        self.setTabToolTip(0, "One prompt to several agents at once, with pairwise votes")
        self.setTabToolTip(1, "A list of prompts over chosen agents, measured and tabulated")
        self.compare.continue_requested.connect(self.continue_requested)

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
        return self.compare.busy or self.runs.busy

    def refresh_agents(self, by_id: dict[int, Agent]) -> None:
        self.compare.refresh_agents(by_id)

    def stop(self) -> None:
        """Stop every column's reply (partial text kept) and cancel a running prompt set."""
        self.compare.stop_all()
        runner = self.runs.runner
        if runner is not None:
            runner.cancel()

    async def wait_idle(self) -> None:
        self.compare.start_now()  # a prompt sent whose columns wait for their turn to start
        await asyncio.gather(*(pane.presenter.wait() for pane in self.panes))
        task = self.runs.run_task
        if task is not None and not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await task
