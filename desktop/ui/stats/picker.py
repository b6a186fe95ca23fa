"""The Stats page's agent picker: a button ("Agents: 5 of 12 ▾") opening a checkable list of
the agents with calls in the date range, each with its number of calls, plus "Busiest 5" (the
default: the page picks the agents with most calls) and "All"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QToolButton,
    QWidget,
    QWidgetAction,
)

from desktop.ui.kit.widgets import hbox, vbox
from desktop.ui.stats.dashboard_data import DEFAULT_AGENTS

NAME_ROLE = Qt.ItemDataRole.UserRole


class AgentPicker(QToolButton):
    """Signals: picked(object): the names checked (a tuple), or None for "the busiest"."""

    picked = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("AgentPicker")
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setAccessibleName("Agents shown")
        self.setText("Agents ▾")
        self.setStyleSheet(
            "QToolButton { padding: 4px 10px; } QToolButton::menu-indicator { image: none; }"
        )
        self.setToolTip("Choose which agents the table and charts show")
        self.menu_ = QMenu(self)
        panel = QWidget()
        layout = vbox(panel, (6, 6, 6, 6), 6)
        self.list = QListWidget()
        self.list.setAccessibleName("Agents with calls in the date range")
        self.list.setMinimumWidth(260)
        self.list.itemChanged.connect(self._item_changed)
        layout.addWidget(self.list)
        buttons = hbox(spacing=6)
        self.busiest_button = QPushButton(f"Busiest {DEFAULT_AGENTS}")
        self.busiest_button.setToolTip("The agents with the most calls in the date range")
        self.all_button = QPushButton("All")
        self.none_button = QPushButton("None")
        for b in (self.busiest_button, self.all_button, self.none_button):
            buttons.addWidget(b)
        layout.addLayout(buttons)
        self.busiest_button.clicked.connect(lambda: self.picked.emit(None))
        self.all_button.clicked.connect(lambda: self._check_all(True))
        self.none_button.clicked.connect(lambda: self._check_all(False))
        action = QWidgetAction(self.menu_)
        action.setDefaultWidget(panel)
        self.menu_.addAction(action)
        self.setMenu(self.menu_)
        self._filling = False

    def set_agents(
        self, agents: Sequence[dict[str, Any]], chosen: Sequence[str], *, picked: bool
    ) -> None:
        """List ``agents`` (summary dicts) with ``chosen`` checked."""
        names = {n.casefold() for n in chosen}
        self._filling = True
        self.list.clear()
        for row in agents:
            name = str(row["agent"])
            item = QListWidgetItem(f"{name}  ·  {int(row['calls']):,} calls")
            item.setData(NAME_ROLE, name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            checked = name.casefold() in names
            item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
            self.list.addItem(item)
        self._filling = False
        self.list.setFixedHeight(min(320, 8 + 22 * max(3, len(agents))))
        self.setText(f"Agents: {len(chosen)} of {len(agents)} ▾" if agents else "Agents ▾")
        self.setToolTip(
            ("Chosen by you" if picked else f"The {DEFAULT_AGENTS} agents with most calls")
            + "; click to choose which agents the table and charts show"
        )

    def checked(self) -> tuple[str, ...]:
        return tuple(
            str(self.list.item(i).data(NAME_ROLE))
            for i in range(self.list.count())
            if self.list.item(i).checkState() == Qt.CheckState.Checked
        )

    def set_checked(self, names: Sequence[str]) -> None:
        """Check exactly ``names`` (as a person would, one signal at the end)."""
        wanted = {n.casefold() for n in names}
        self._filling = True
        for i in range(self.list.count()):
            item = self.list.item(i)
            on = str(item.data(NAME_ROLE)).casefold() in wanted
            item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
        self._filling = False
        self.picked.emit(self.checked())

    def _check_all(self, on: bool) -> None:
        self.set_checked(
            [str(self.list.item(i).data(NAME_ROLE)) for i in range(self.list.count())] if on else []
        )

    def _item_changed(self, _item: QListWidgetItem) -> None:
        if not self._filling:
            self.picked.emit(self.checked())
