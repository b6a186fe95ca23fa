"""Settings → Tools: the MCP servers agents may call, and the tools always allowed.

Servers: a table (name, what it runs, its state in words, live from ``McpManager.on_state``),
with Add…, Edit…, Remove (after a question that says what goes with it) and Check (starts the
server and shows its state; a failed one shows why and the last lines it wrote on stderr in a
read-only monospace box; a command that was not found names the PATH searched and, when a
usual folder has it, offers "Use <absolute path>"). With no server: one sentence on what they
are and "Add server…". "Always allowed": every grant (agent, tool, server, since) with Revoke.

Changes here are stored at once (Cancel in Settings does not undo them). Keyring work and
stopping servers run off the GUI thread or as tasks on the loop (``async_door``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from datetime import datetime
from typing import Any

import shiboken6
from PySide6.QtCore import Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGroupBox,
    QHeaderView,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.agents import AgentService
from desktop.chat.format import date_text
from desktop.chat.tool_loop import ToolRunner
from desktop.errors import UserError
from desktop.store.tools import McpServer, ToolGrant
from desktop.tools.results import ServerState
from desktop.ui.agents.form import WrapLabel, row, say
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.widgets import confirm
from desktop.ui.settings.mcp_server_dialog import McpServerDialog

INTRO = (
    "MCP servers give agents tools: programs on this computer (started with a command) or "
    "services at a URL that read files, search, or call other apps. Choose which agents may "
    "use which tools in each agent's editor. Changes here are saved at once."
)
GRANTS_NOTE = "A revoked tool asks again before it runs."
NO_GRANTS = "No tool is always allowed yet: each call asks first."
_SUGGESTED = re.compile(r"It is at (\S.*?): give that absolute path")


def state_words(state: ServerState, name: str = "") -> str:
    """ "stopped", "starting…", "ready, 7 tools", "failed: …" (without a leading "MCP server
    “name”:", which the row already says)."""
    if state.status == "starting":
        return "starting…"
    if state.status == "failed":
        return "failed: " + state.why.removeprefix(f"MCP server “{name}”: ")
    return state.describe()


def suggested_path(why: str) -> str | None:
    """The absolute path a "command not found" message suggests (``resolve_command``)."""
    found = _SUGGESTED.search(why)
    return found.group(1) if found else None


def since(stamp: str) -> str:
    """An ISO time stored in UTC as the person's local date and time."""
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    return date_text(when.astimezone(), "%-d %b %Y, %H:%M")


def _table(headers: list[str], name: str) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setObjectName(name)
    table.setAccessibleName(name)
    table.setHorizontalHeaderLabels(headers)
    table.verticalHeader().hide()
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setWordWrap(False)
    header = table.horizontalHeader()
    header.setStretchLastSection(True)
    header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    return table


class ToolsPage(QWidget):
    """Signals: changed(): a server or a grant was added, edited or removed; checked(str):
    a Check ended (the server's name)."""

    changed = Signal()
    checked = Signal(str)

    def __init__(
        self, tools: ToolRunner, agents: AgentService, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ToolsPage")
        self._tools = tools
        self._manager = tools.manager
        self._config = tools.manager.config
        self._agents = agents
        self._tasks: list[asyncio.Task[Any]] = []
        self.dialog: McpServerDialog | None = None  # the last Add/Edit dialog opened
        self._servers: list[McpServer] = []

        self.servers_group = QGroupBox("MCP servers")
        servers = QVBoxLayout(self.servers_group)
        self.intro = WrapLabel(INTRO, "DialogNote")
        servers.addWidget(self.intro)
        self.empty_add = QPushButton("Add server…")
        self.empty_add.setObjectName("PrimaryButton")
        self.empty_add.clicked.connect(lambda: self.add_server())
        self.empty_row = row(self.empty_add, stretch=True)
        servers.addWidget(self.empty_row)
        self.table = _table(["Name", "Runs", "State"], "MCP servers")
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self.table.itemDoubleClicked.connect(lambda _item: self.edit_server())
        servers.addWidget(self.table)
        self.add_button = QPushButton("Add…")
        self.add_button.setAccessibleName("Add a server")
        self.add_button.clicked.connect(lambda: self.add_server())
        self.edit_button = QPushButton("Edit…")
        self.edit_button.setAccessibleName("Edit the server")
        self.edit_button.clicked.connect(lambda: self.edit_server())
        self.remove_button = QPushButton("Remove")
        self.remove_button.setAccessibleName("Remove the server")
        self.remove_button.clicked.connect(lambda: self.remove_server())
        self.check_button = QPushButton("Check")
        self.check_button.setAccessibleName("Check the server")
        self.check_button.setToolTip("Start the server and list its tools")
        self.check_button.clicked.connect(lambda: self.check_server())
        self.buttons_row = row(
            self.add_button, self.edit_button, self.remove_button, self.check_button, stretch=True
        )
        servers.addWidget(self.buttons_row)
        self.status = WrapLabel()
        self.status.hide()
        servers.addWidget(self.status)
        self.use_path = QPushButton("Use the path found")
        self.use_path.clicked.connect(lambda: self.use_suggested_path())
        self.use_path_row = row(self.use_path, stretch=True)
        self.use_path_row.hide()
        servers.addWidget(self.use_path_row)
        self.output = QPlainTextEdit()
        self.output.setObjectName("ServerOutput")
        self.output.setAccessibleName("What the server wrote")
        self.output.setReadOnly(True)
        self.output.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.output.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.output.setFixedHeight(110)
        self.output.hide()
        servers.addWidget(self.output)

        self.grants_group = QGroupBox("Always allowed")
        grants = QVBoxLayout(self.grants_group)
        self.grants_note = WrapLabel(GRANTS_NOTE, "DialogNote")
        grants.addWidget(self.grants_note)
        self.grants_table = _table(["Agent", "Tool", "Server", "Since", ""], "Always allowed")
        self.grants_table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        grants_header = self.grants_table.horizontalHeader()
        grants_header.setStretchLastSection(False)
        grants_header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        grants.addWidget(self.grants_table)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.servers_group, 3)
        layout.addWidget(self.grants_group, 2)
        self._manager.on_state.append(self._state_changed)
        self.destroyed.connect(lambda *_: self.detach())
        self.refresh()

    def detach(self) -> None:
        """Stop listening to the servers' states (the dialog closes)."""
        listener = self._state_changed
        if listener in self._manager.on_state:
            self._manager.on_state.remove(listener)
        for task in self._tasks:
            task.cancel()

    # showing ----------------------------------------------------------------------------------
    def refresh(self) -> None:
        selected = self.selected_name()
        self._servers = self._config.list()
        table = self.table
        table.setRowCount(len(self._servers))
        for i, server in enumerate(self._servers):
            name = server.name if server.enabled else f"{server.name} (off)"
            where = server.where()
            cells = (name, where, state_words(self._manager.state(server.name), server.name))
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                table.setItem(i, column, item)
            if server.name == selected:
                table.selectRow(i)
        table.resizeColumnToContents(0)
        table.setColumnWidth(1, max(160, min(320, table.sizeHintForColumn(1) + 16)))
        has = bool(self._servers)
        self.table.setVisible(has)
        self.buttons_row.setVisible(has)
        self.empty_row.setVisible(not has)
        self._selection_changed()
        self._show_grants()

    def _show_grants(self) -> None:
        grants = self._tools.tools.grants()
        names = {a.id: a.name for a in self._agents.list()}
        table = self.grants_table
        table.setRowCount(len(grants))
        for i, grant in enumerate(grants):
            agent = names.get(grant.agent_id, f"agent {grant.agent_id} (removed)")
            for column, text in enumerate(
                (agent, grant.tool, grant.server, since(grant.created_at))
            ):
                table.setItem(i, column, QTableWidgetItem(text))
            revoke = QPushButton("Revoke")
            revoke.setAccessibleName(f"Revoke {grant.tool} for {agent}")
            revoke.clicked.connect(lambda _=False, g=grant: self.revoke(g))
            table.setCellWidget(i, 4, revoke)
        table.resizeColumnsToContents()
        table.setVisible(bool(grants))
        self.grants_note.setText(GRANTS_NOTE if grants else NO_GRANTS)

    def selected_name(self) -> str | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows or rows[0].row() >= len(self._servers):
            return None
        return self._servers[rows[0].row()].name

    def select(self, name: str) -> None:
        for i, server in enumerate(self._servers):
            if server.name == name:
                self.table.selectRow(i)

    def state_text(self, name: str) -> str:
        for i, server in enumerate(self._servers):
            if server.name == name:
                item = self.table.item(i, 2)
                return item.text() if item is not None else ""
        return ""

    def _selection_changed(self) -> None:
        name = self.selected_name()
        for button in (self.edit_button, self.remove_button, self.check_button):
            button.setEnabled(name is not None)
        self._show_details(name)

    def _show_details(self, name: str | None) -> None:
        state = self._manager.state(name) if name else ServerState()
        failed = state.status == "failed"
        if name is None or state.status == "stopped":
            say(self.status, "", "muted")
        elif failed:
            say(self.status, f"{name} {state_words(state, name)}", "error")
        else:
            tone = "ok" if state.status == "ready" else "muted"
            say(self.status, f"{name}: {state_words(state, name)}", tone)
        path = suggested_path(state.why) if failed else None
        if path:
            self.use_path.setText(f"Use {path}")
            self.use_path.setToolTip(f"Make {path} the server's command")
        self.use_path_row.setVisible(bool(path))
        self.output.setPlainText("\n".join(state.stderr_tail))
        self.output.setVisible(failed and bool(state.stderr_tail))

    def _state_changed(self, name: str, state: ServerState) -> None:
        """From ``McpManager.on_state`` (the loop's thread, the GUI thread under qasync)."""
        if not shiboken6.isValid(self):
            self.detach()
            return
        for i, server in enumerate(self._servers):
            if server.name.casefold() == name.casefold():
                item = self.table.item(i, 2)
                if item is not None:
                    item.setText(state_words(state, server.name))
                    item.setToolTip(state_words(state, server.name))
        if self.selected_name() == name:
            self._show_details(name)

    # actions ----------------------------------------------------------------------------------
    def add_server(self) -> McpServerDialog:
        return self._open_dialog(None)

    def edit_server(self, name: str | None = None) -> McpServerDialog | None:
        name = name or self.selected_name()
        server = self._config.get(name) if name else None
        return self._open_dialog(server) if server is not None else None

    def _open_dialog(self, server: McpServer | None) -> McpServerDialog:
        dialog = McpServerDialog(self._config, server, self)
        dialog.accepted.connect(lambda: self._saved(dialog))
        dialog.finished.connect(lambda _result: dialog.deleteLater())
        self.dialog = dialog
        dialog.open()
        return dialog

    def _saved(self, dialog: McpServerDialog) -> None:
        self.refresh()
        if dialog.saved is not None:
            self.select(dialog.saved.name)
        self.changed.emit()

    def confirm(self, title: str, text: str) -> bool:
        """Asks; tests replace it."""
        return confirm(self, title, text)

    def remove_server(self, name: str | None = None) -> asyncio.Task[bool] | None:
        name = name or self.selected_name()
        if name is None:
            return None
        question = (
            f"Remove the MCP server “{name}”? Agents lose access to its tools, its “always "
            "allow” grants go, and its secrets are deleted from the keyring."
        )
        if not self.confirm("Remove server", question):
            return None
        return self._start(self._remove(name), "tools page: remove")

    async def _remove(self, name: str) -> bool:
        try:
            await self._manager.stop(name)
            await run_blocking(self._config.remove, name)
        except UserError as exc:
            say(self.status, exc.user_message, "error")
            return False
        self.refresh()
        say(self.status, f"Removed {name}.", "muted")
        self.changed.emit()
        return True

    def check_server(self, name: str | None = None) -> asyncio.Task[ServerState] | None:
        name = name or self.selected_name()
        if name is None:
            return None
        self.select(name)
        return self._start(self._check(name), "tools page: check")

    async def _check(self, name: str) -> ServerState:
        self.check_button.setEnabled(False)
        try:
            state = await self._manager.check(name)
        finally:
            self.check_button.setEnabled(self.selected_name() is not None)
        for i, server in enumerate(self._servers):
            if server.name == name and (item := self.table.item(i, 2)) is not None:
                # check() may answer a state no connection holds (an unknown server)
                item.setText(state_words(state, name))
        if self.selected_name() == name:
            self._show_details(name)
            if state.status == "failed" and not self._manager.state(name).why:
                say(self.status, f"{name} {state_words(state, name)}", "error")
        self.checked.emit(name)
        return state

    def use_suggested_path(self) -> McpServer | None:
        name = self.selected_name()
        path = suggested_path(self._manager.state(name).why) if name else None
        if name is None or path is None:
            return None
        saved = self._config.update(self._config.require(name).with_changes(command=path))
        self.refresh()
        self.select(name)
        say(self.status, f"{name} now runs {path}. Press Check to start it.", "ok")
        self.use_path_row.hide()
        self.changed.emit()
        return saved

    def revoke(self, grant: ToolGrant) -> None:
        self._tools.tools.revoke_grant(grant.agent_id, grant.server, grant.tool)
        self._show_grants()
        self.changed.emit()

    def _start(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = start(coro, name=name)
        self._tasks.append(task)
        task.add_done_callback(self._tasks.remove)
        return task
