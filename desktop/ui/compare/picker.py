""" "Agents…": which 2-6 agents a comparison puts side by side; the order they are ticked is
the column order."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QWidget,
)

from desktop.store.agents import Agent
from desktop.ui.kit.widgets import plain, vbox

MIN_AGENTS, MAX_AGENTS = 2, 6


class AgentPicker(QDialog):
    def __init__(
        self, agents: list[Agent], chosen: list[Agent], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Agents to compare")
        self._agents = {a.id: a for a in agents if a.id is not None}
        self._order: list[int] = [a.id for a in chosen if a.id in self._agents]
        layout = vbox(self, (16, 16, 16, 16), 8)
        self.hint = plain(QLabel())
        self.hint.setWordWrap(True)
        layout.addWidget(self.hint)
        self.list = QListWidget()
        self.list.setAccessibleName("Agents")
        for agent in agents:
            if agent.id is None:
                continue
            item = QListWidgetItem(agent.name)
            item.setData(Qt.ItemDataRole.UserRole, agent.id)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            checked = agent.id in self._order
            item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
            self.list.addItem(item)
        self.list.itemChanged.connect(self._changed)
        layout.addWidget(self.list, 1)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self._update()

    def _changed(self, item: QListWidgetItem) -> None:
        agent_id = item.data(Qt.ItemDataRole.UserRole)
        checked = item.checkState() == Qt.CheckState.Checked
        if checked and agent_id not in self._order:
            self._order.append(agent_id)
        elif not checked and agent_id in self._order:
            self._order.remove(agent_id)
        self._update()

    def set_checked(self, name: str, checked: bool = True) -> None:
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.text() == name:
                item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)

    def chosen(self) -> list[Agent]:
        """The ticked agents in the order they were ticked (the column order)."""
        return [self._agents[i] for i in self._order]

    def _update(self) -> None:
        n = len(self._order)
        names = ", ".join(f"{k}. {a.name}" for k, a in enumerate(self.chosen(), 1))
        self.hint.setText(
            f"Tick {MIN_AGENTS} to {MAX_AGENTS} agents; columns follow the order you tick them."
            + (f"\nColumns: {names}" if names else "")
        )
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setEnabled(MIN_AGENTS <= n <= MAX_AGENTS)
