"""The sidebar's agents: the list with each local model's state, and new / edit / clone /
delete. Choosing an agent asks the window to open a conversation with it; nothing here changes
which agent answers a conversation that is already open."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QPoint, Qt, Signal
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import (
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QToolButton,
    QWidget,
)

from desktop.chat import agent_status
from desktop.chat.kinds import badge_color
from desktop.chat.model_library import ModelLibrary
from desktop.chat.services import Services
from desktop.store.agents import Agent
from desktop.ui.kit.resources import agent_badge
from desktop.ui.kit.widgets import ID_ROLE, SUBTITLE_ROLE, TwoLineDelegate, hbox, vbox, warn

if TYPE_CHECKING:  # the editor is built when it is opened, not with the window
    from desktop.ui.agents.editor import AgentEditorDialog

BADGE_PX = 30


class AgentSidebar(QWidget):
    """Signals:
    agent_activated(int): the person chose an agent (click, or a new / cloned agent).
    agents_changed(): agents were added, edited or deleted (panes refresh theirs).
    status(str): a line for the status bar.
    """

    agent_activated = Signal(int)
    agents_changed = Signal()
    status = Signal(str)

    def __init__(
        self,
        services: Services,
        *,
        confirm: Callable[[str, str], bool],
        is_answering: Callable[[int], bool],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.services = services
        self._confirm = confirm
        self._is_answering = is_answering  # an agent with a reply streaming somewhere
        self._agents: list[Agent] = []
        self._highlighted: Agent | None = None

        layout = vbox(self, (0, 4, 0, 4), 4)
        header = hbox(margins=(8, 0, 0, 0), spacing=2)
        label = QLabel("AGENTS")
        label.setObjectName("SectionLabel")
        header.addWidget(label, 1)
        tools = hbox(margins=(4, 0, 0, 0), spacing=2)
        self.agent_buttons: dict[str, QToolButton] = {}
        for key, text, tip, slot in (
            ("new", "+ New", "Create an agent", self.new_agent),
            ("edit", "Edit", "Edit the selected agent", self.edit_agent),
            ("clone", "Clone", "Copy the selected agent", self.clone_agent),
            ("delete", "Delete", "Delete the selected agent", self.delete_agent),
        ):
            button = QToolButton()
            button.setObjectName("SidebarTool")
            button.setText(text)
            button.setToolTip(tip)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(slot)
            (header if key == "new" else tools).addWidget(button)
            self.agent_buttons[key] = button
        tools.addStretch(1)
        layout.addLayout(header)
        self.agent_list = QListWidget()
        self.agent_list.setObjectName("AgentList")
        self.agent_list.setItemDelegate(TwoLineDelegate(self.agent_list, icon_size=BADGE_PX))
        self.agent_list.setMouseTracking(True)
        # rows elide to the sidebar's width: never a sideways scroll bar
        self.agent_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.agent_list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.agent_list.customContextMenuRequested.connect(self._menu)
        self.agent_list.itemClicked.connect(self._clicked)
        self.agent_list.itemActivated.connect(self._clicked)
        self.agent_list.itemDoubleClicked.connect(lambda _item: self.edit_agent())
        layout.addWidget(self.agent_list)
        layout.addLayout(tools)

    # the list --------------------------------------------------------------------------------
    @property
    def agents(self) -> list[Agent]:
        return list(self._agents)

    @property
    def highlighted(self) -> Agent | None:
        """The agent the buttons act on (the shown conversation's, or the one last chosen)."""
        return self._highlighted

    def by_id(self, agent_id: int | None) -> Agent | None:
        return next((a for a in self._agents if a.id == agent_id), None)

    def reload(self) -> list[Agent]:
        """Read the agents again; returns them."""
        keep = self._highlighted.id if self._highlighted is not None else None
        self._agents = self.services.agents.list()
        self.agent_list.blockSignals(True)
        self.agent_list.clear()
        ratio = self.devicePixelRatioF()
        for agent in self._agents:
            item = QListWidgetItem(
                QIcon(agent_badge(agent.name, badge_color(agent.kind), BADGE_PX, ratio)), ""
            )
            item.setText(agent.name)
            item.setData(ID_ROLE, agent.id)
            self.agent_list.addItem(item)
        self.agent_list.blockSignals(False)
        self.refresh_states()
        self.highlight(self.by_id(keep))
        self._fit_list()
        return self.agents

    def _fit_list(self) -> None:
        """Up to five rows tall, at least one: a short window scrolls the list (and the
        splitter below it lets the person give it more room); the buttons under it never
        cover a row."""
        count = self.agent_list.count()
        row_h = self.agent_list.sizeHintForRow(0) if count else 46
        frame = 2 * self.agent_list.frameWidth() + 4
        self.agent_list.setMinimumHeight(row_h + frame)
        self.agent_list.setMaximumHeight(max(1, min(5, count)) * row_h + frame)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._fit_list()  # a new text size: new row heights

    def refresh_states(self) -> None:
        """Each agent's subtitle: kind, model and (local) model state."""
        runtime = self.services.local
        for row in range(self.agent_list.count()):
            item = self.agent_list.item(row)
            agent = self.by_id(item.data(ID_ROLE))
            if agent is not None:
                text = agent_status.subtitle(runtime, agent)
                item.setData(SUBTITLE_ROLE, text)
                whole = agent_status.subtitle(runtime, agent, full=True)  # the full model
                item.setToolTip(f"{agent.name}\n{whole}")

    def highlight(self, agent: Agent | None) -> None:
        """Mark ``agent`` in the list without choosing it (no signal)."""
        self._highlighted = agent
        self.agent_list.blockSignals(True)
        for row in range(self.agent_list.count()):
            item = self.agent_list.item(row)
            if agent is not None and item.data(ID_ROLE) == agent.id:
                self.agent_list.setCurrentItem(item)
                break
        else:
            self.agent_list.setCurrentRow(-1)
        self.agent_list.blockSignals(False)
        for key in ("edit", "clone", "delete"):
            self.agent_buttons[key].setEnabled(agent is not None)

    def choose(self, agent_id: int) -> None:
        """As if the person clicked the agent."""
        agent = self.by_id(agent_id)
        if agent is not None:
            self.highlight(agent)
            self.agent_activated.emit(agent_id)

    def _clicked(self, item: QListWidgetItem) -> None:
        self.choose(int(item.data(ID_ROLE)))

    def _menu(self, pos: QPoint) -> None:
        item = self.agent_list.itemAt(pos)
        if item is not None:
            self.highlight(self.by_id(item.data(ID_ROLE)))
        menu = QMenu(self)
        menu.addAction("New agent…", self.new_agent)
        for text, slot in (
            ("Edit…", self.edit_agent),
            ("Clone", self.clone_agent),
            ("Delete…", self.delete_agent),
        ):
            menu.addAction(text, slot).setEnabled(item is not None)
        menu.popup(self.agent_list.viewport().mapToGlobal(pos))

    # agent actions ---------------------------------------------------------------------------
    def editor(self, agent: Agent | None) -> AgentEditorDialog:
        from desktop.ui.agents.editor import AgentEditorDialog, attach_memory_estimate
        from desktop.ui.agents.local import attach_model_picker
        from desktop.ui.agents.memory_estimate import MemoryEstimateView

        dialog = AgentEditorDialog(
            self.services.agents,
            self.services.secrets,
            agent,
            self,
            tools=getattr(self.services, "tools", None),
            knowledge=getattr(self.services, "knowledge", None),
        )
        attach_memory_estimate(dialog, MemoryEstimateView(cache=self.services.local.model_info))
        attach_model_picker(dialog, ModelLibrary.of(self.services).entries)
        return dialog

    def new_agent(self) -> None:
        self._edit(None)

    def edit_agent(self) -> None:
        if self._highlighted is not None:
            self._edit(self._highlighted)

    def _edit(self, agent: Agent | None) -> None:
        """The editor for ``agent`` (None: a new one, which is then chosen)."""
        dialog = self.editor(agent)
        if dialog.exec() and dialog.saved_agent is not None:
            self._saved(dialog.saved_agent, chosen=agent is None)
        dialog.deleteLater()

    def clone_agent(self) -> None:
        if self._highlighted is None:
            return
        try:
            copy = self.services.agents.clone(self._highlighted)
        except Exception as exc:  # ValidationError, SecretsUnavailable: say it, stay up
            warn(self, "Clone agent", getattr(exc, "user_message", str(exc)))
            return
        self._saved(copy, chosen=True)

    def _saved(self, agent: Agent, chosen: bool) -> None:
        # an edited endpoint (URL, key, CA bundle, stall timeout) gets a new HTTP client
        self.services.chat.providers.close_endpoint(agent)
        self._highlighted = agent
        self.reload()
        self.agents_changed.emit()
        if chosen and agent.id is not None:
            self.choose(agent.id)

    def delete_agent(self) -> None:
        agent = self._highlighted
        if agent is None or agent.id is None:
            return
        if self._is_answering(agent.id):
            self.status.emit(f"Stop {agent.name}'s reply before deleting it.")
            return
        if not self._confirm(
            "Delete agent",
            f"Delete the agent “{agent.name}”? Its conversations and statistics are kept.",
        ):
            return
        self.services.agents.delete(agent)
        self.services.chat.providers.close_endpoint(agent)
        self._highlighted = None
        self.reload()
        self.agents_changed.emit()
