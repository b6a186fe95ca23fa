"""The Knowledge page's "Try a search" box: the best passages of the chosen collection for a
few words, as an agent would get them (file, place, score and the start of the text, plain),
searched off the GUI thread."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGroupBox, QLineEdit, QListWidgetItem

from desktop.errors import UserError
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.widgets import hbox, plain_label, push_button, vbox
from desktop.ui.knowledge import words
from desktop.ui.knowledge.parts import fit_rows, one_line_list, say

if TYPE_CHECKING:
    from desktop.chat.knowledge import KnowledgeService, Retrieval
    from desktop.store.knowledge import Collection

SEARCH_RESULTS = 5
RESULTS_PX = 360  # the most the passages found take before they scroll


class TrySearch(QGroupBox):
    """Signal searched(): a search ended (its passages, or why not, are shown)."""

    searched = Signal()

    def __init__(
        self, knowledge: KnowledgeService, collection: Callable[[], Collection | None]
    ) -> None:
        super().__init__("Try a search")
        self.setObjectName("KnowledgeTry")
        self._knowledge = knowledge
        self._collection = collection
        self._task: asyncio.Task[None] | None = None
        layout = vbox(self, (12, 12, 12, 12), 6)
        self.query = QLineEdit()
        self.query.setObjectName("KnowledgeQuery")
        self.query.setAccessibleName("Search the collection")
        self.query.setPlaceholderText("Words or a question, as an agent would be asked")
        self.query.setClearButtonEnabled(True)
        self.query.returnPressed.connect(self.try_search)
        self.button = push_button("Search", self.try_search)
        search_row = hbox(spacing=8)
        search_row.addWidget(self.query, 1)
        search_row.addWidget(self.button)
        layout.addLayout(search_row)
        self.note = plain_label("", "DialogNote", wrap=True)
        self.note.hide()
        layout.addWidget(self.note)
        self.results = one_line_list("KnowledgeResults", "Passages found")
        self.results.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.results.hide()
        layout.addWidget(self.results)

    def clear(self) -> None:
        """Another collection was chosen: its passages go."""
        self.results.clear()
        self.results.hide()
        self.note.hide()

    def try_search(self) -> asyncio.Task[None] | None:
        collection = self._collection()
        query = self.query.text().strip()
        if collection is None:
            return None
        if not query:
            say(self.note, "Type a few words to look for.")
            return None
        self._task = start(self._search(collection, query), name="knowledge page: search")
        return self._task

    async def _search(self, collection: Collection, query: str) -> None:
        self.button.setEnabled(False)
        say(self.note, "Searching…")
        try:
            found: Retrieval = await run_blocking(
                self._knowledge.search, [collection], query, SEARCH_RESULTS
            )
        except UserError as exc:
            self._failed(exc.user_message)
            return
        except (OSError, sqlite3.Error) as exc:
            self._failed(f"The search failed: {exc}")
            return
        self.button.setEnabled(True)
        self.results.clear()
        for source in found.sources:
            item = QListWidgetItem(words.source_text(source))
            item.setToolTip(f"{source.path}\n\n{source.text}")
            self.results.addItem(item)
        self.results.setVisible(bool(found.sources))
        fit_rows(self.results, SEARCH_RESULTS, RESULTS_PX)
        notes = list(found.notices)
        if found.sources:
            notes.append(
                f"{words.count(len(found.sources), 'passage')} in {found.total_ms:.0f} ms."
            )
        elif not notes:
            notes.append("Nothing in the collection matches.")
        say(self.note, " ".join(notes))
        self.searched.emit()

    def _failed(self, why: str) -> None:
        self.button.setEnabled(True)
        say(self.note, why)
        self.results.hide()
        self.searched.emit()

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
