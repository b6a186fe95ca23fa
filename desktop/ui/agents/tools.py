"""The agent editor's "Tools" section: which MCP servers and tools this agent may use.

Each configured server has a checkbox "all tools" (every tool it has now or later) and, once
its tools are known (a Check in Settings, a call, or "Load tools" here, which starts it), a
list of its tools to tick one by one, each with its description as a tooltip. Tools ticked
before are listed even while the server's list is not loaded. ``selection()`` is what the
editor stores with ``ToolStore.set_agent_tools`` when it saves. With no server configured: a
line pointing at Settings → Tools.
"""

from __future__ import annotations

import asyncio
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QGroupBox,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.tool_loop import ToolRunner
from desktop.store.agents import Agent
from desktop.store.tools import ALL_TOOLS, McpServer
from desktop.tools.results import ToolInfo
from desktop.ui.agents.form import WrapLabel, row, say
from desktop.ui.kit.async_door import start

NO_SERVERS = (
    "No tool servers yet. Add MCP servers in Settings → Tools, then choose here which of "
    "their tools this agent may use."
)
SHOWN_CHARS = 60  # of a tool's description, in the list
VISIBLE_ROWS = 8  # more scroll
INTRO = "Tools this agent may call. Each call asks you first unless you always allow it."


class ServerTools(QWidget):
    """One server: "all tools", Load tools, and the list of its tools."""

    def __init__(self, server: McpServer, chosen: set[str], known: tuple[ToolInfo, ...]) -> None:
        super().__init__()
        self.server = server
        self.all_tools = QCheckBox(f"{server.name}: all tools")
        self.all_tools.setToolTip(f"Every tool {server.name} has, now and later")
        self.all_tools.setChecked(ALL_TOOLS in chosen)
        self.load = QPushButton("Load tools")
        self.load.setAccessibleName(f"Load the tools of {server.name}")
        self.load.setToolTip("Start the server and list its tools")
        self.status = WrapLabel()
        self.status.hide()
        self.list = QListWidget()
        self.list.setAccessibleName(f"Tools of {server.name}")
        self.list.setObjectName("AgentToolList")
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 6)
        layout.addWidget(row(self.all_tools, self.load))
        layout.addWidget(self.status)
        layout.addWidget(self.list)
        self.all_tools.toggled.connect(self._all_toggled)
        if not server.enabled:
            say(self.status, f"{server.name} is turned off in Settings → Tools.", "muted")
        self.show_tools(known, chosen - {ALL_TOOLS})

    def show_tools(self, tools: tuple[ToolInfo, ...], chosen: set[str] | None = None) -> None:
        """Lists the server's tools, keeping what is ticked (and ticked tools not in it)."""
        chosen = self.chosen_tools() if chosen is None else chosen
        described = {t.name: t.description for t in tools}
        self.list.clear()
        for name in [*described, *sorted(chosen - set(described))]:
            about = described.get(name, "")
            first = about.strip().splitlines()[0] if about.strip() else ""
            if len(first) > SHOWN_CHARS:  # the whole of it is the tooltip
                first = first[: SHOWN_CHARS - 1].rstrip() + "…"
            item = QListWidgetItem(f"{name} — {first}" if first else name)
            item.setData(Qt.ItemDataRole.UserRole, name)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if name in chosen else Qt.CheckState.Unchecked)
            item.setToolTip(described.get(name) or "Not listed by the server now")
            self.list.addItem(item)
        rows = min(VISIBLE_ROWS, max(1, self.list.count()))
        row_px = self.list.sizeHintForRow(0) if self.list.count() else 20
        self.list.setFixedHeight(rows * row_px + 2 * self.list.frameWidth() + 4)
        self.list.setVisible(self.list.count() > 0)
        self._all_toggled(self.all_tools.isChecked())

    def _all_toggled(self, all_tools: bool) -> None:
        self.list.setEnabled(not all_tools)

    def chosen_tools(self) -> set[str]:
        return {
            self.list.item(i).data(Qt.ItemDataRole.UserRole)
            for i in range(self.list.count())
            if self.list.item(i).checkState() == Qt.CheckState.Checked
        }

    def set_checked(self, tool: str, checked: bool = True) -> None:
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(Qt.ItemDataRole.UserRole) == tool:
                item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)

    def pairs(self) -> list[tuple[str, str]]:
        if self.all_tools.isChecked():
            return [(self.server.name, ALL_TOOLS)]
        return [(self.server.name, tool) for tool in sorted(self.chosen_tools())]


class AgentToolsSection:
    """The "Tools" group of the agent editor (``group``). Signals on ``loaded``: (str) a
    server's "Load tools" ended."""

    def __init__(self, tools: ToolRunner, agent: Agent | None) -> None:
        self._tools = tools
        self._tasks: list[asyncio.Task[Any]] = []
        self.group = QGroupBox("Tools")
        self.group.setObjectName("AgentTools")
        layout = QVBoxLayout(self.group)
        layout.setContentsMargins(12, 12, 12, 12)
        self.signals = _Signals(self.group)
        self.loaded = self.signals.loaded
        servers = tools.manager.config.list()
        chosen: dict[str, set[str]] = {}
        if agent is not None and agent.id is not None:
            for server_name, tool in tools.tools.agent_tools(agent.id):
                chosen.setdefault(server_name, set()).add(tool)
        self.note = WrapLabel(INTRO if servers else NO_SERVERS, "DialogNote")
        layout.addWidget(self.note)
        self.servers: dict[str, ServerTools] = {}
        for server in servers:
            known = tools.manager.state(server.name).tools
            part = ServerTools(server, chosen.get(server.name, set()), known)
            part.load.clicked.connect(lambda _=False, name=server.name: self.load_tools(name))
            part.load.setEnabled(server.enabled)
            failed = tools.manager.state(server.name)
            if failed.status == "failed":
                say(part.status, _did_not_start(server.name, failed.why), "error")
            self.servers[server.name] = part
            layout.addWidget(part)

    def selection(self) -> list[tuple[str, str]]:
        """(server, tool) pairs for ``set_agent_tools``; tool ``*``: all of its tools."""
        return [pair for part in self.servers.values() for pair in part.pairs()]

    def load_tools(self, name: str) -> asyncio.Task[None]:
        task = start(self._load(name), name=f"agent editor: tools of {name}")
        self._tasks.append(task)
        return task

    async def _load(self, name: str) -> None:
        part = self.servers[name]
        part.load.setEnabled(False)
        say(part.status, f"Starting {name}…", "muted")
        state = await self._tools.manager.check(name)
        if not shiboken6.isValid(part):
            return
        part.load.setEnabled(True)
        if state.status == "ready":
            part.show_tools(state.tools)
            n = len(state.tools)
            say(part.status, f"{n} tool{'s' if n != 1 else ''}.", "ok")
        else:
            say(part.status, _did_not_start(name, state.why), "error")
        self.loaded.emit(name)

    def cancel(self) -> None:
        for task in self._tasks:
            task.cancel()


def _did_not_start(name: str, why: str) -> str:
    why = why.removeprefix(f"MCP server “{name}”: ")
    return f"{name} did not start: {why} See Settings → Tools."


class _Signals(QObject):
    loaded = Signal(str)
