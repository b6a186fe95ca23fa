"""The agent editor's "Knowledge" section: a tick for each collection (Knowledge page) the
agent searches before it answers; stored with the agent when it saves
(``KnowledgeService.set_agent_collections``). A cloned agent opens with its original's
collections, which the service copied when it was cloned."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtWidgets import QCheckBox, QGroupBox, QVBoxLayout

from desktop.store.agents import Agent
from desktop.ui.agents.form import WrapLabel

if TYPE_CHECKING:
    from desktop.chat.knowledge import KnowledgeService
    from desktop.store.knowledge import Collection

INTRO = (
    "Collections this agent searches before each answer: the passages found go with the "
    "question, and the reply cites them."
)
NO_COLLECTIONS = (
    "No collections yet. Add folders on the Knowledge page, then choose here which ones this "
    "agent searches."
)


class AgentKnowledgeSection:
    """The "Knowledge" group of the agent editor (``group``)."""

    def __init__(self, knowledge: KnowledgeService, agent: Agent | None) -> None:
        self._knowledge = knowledge
        self.group = QGroupBox("Knowledge")
        self.group.setObjectName("AgentKnowledge")
        layout = QVBoxLayout(self.group)
        layout.setContentsMargins(12, 12, 12, 12)
        # a few rows, as the tools section reads the agent's tools
        self.collections: list[Collection] = knowledge.collections()
        chosen: set[int | None] = set()
        if agent is not None and agent.id is not None:
            chosen = {c.id for c in knowledge.agent_collections(agent.id)}
        self.note = WrapLabel(INTRO if self.collections else NO_COLLECTIONS, "DialogNote")
        layout.addWidget(self.note)
        self.boxes: dict[int, QCheckBox] = {}
        for collection in self.collections:
            if collection.id is None:
                continue
            box = QCheckBox(collection.name)
            box.setAccessibleName(f"Search the collection {collection.name}")
            box.setToolTip("\n".join(collection.paths))
            box.setChecked(collection.id in chosen)
            self.boxes[collection.id] = box
            layout.addWidget(box)

    def selection(self) -> list[Collection]:
        """The ticked collections, for ``set_agent_collections``."""
        return [
            c
            for c in self.collections
            if c.id is not None and c.id in self.boxes and self.boxes[c.id].isChecked()
        ]

    def set_checked(self, name: str, checked: bool = True) -> None:
        for collection in self.collections:
            if collection.name == name and collection.id in self.boxes:
                self.boxes[collection.id].setChecked(checked)

    def save(self, agent_id: int, chosen: list[Collection]) -> None:
        """Blocking (the editor's save runs it on its worker thread)."""
        self._knowledge.set_agent_collections(agent_id, chosen)
