"""The main window's Server page: the local OpenAI-compatible API server (``desktop/serve``,
the same code as ``simi serve``) started and stopped here, its address to copy, how it is
reached, which agents it serves, its keys, and a live list of the requests it answers.

The server runs on the window's own loop (``ApiServer``: it shares the local models and the
stats store with the chats). Settings are saved at once and apply when the server (re)starts;
which agents are served and the keys apply from the next request.
"""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QHeaderView,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from desktop.chat.services import Services
from desktop.errors import UserError
from desktop.serve import config as serve_config
from desktop.serve.activity import Activity, Served
from desktop.serve.server import ApiServer
from desktop.store.agents import Agent
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.widgets import (
    ask_text,
    confirm,
    hbox,
    message_box,
    plain_label,
    push_button,
    scroll_column,
    vbox,
    warn,
)

REACH = (
    ("This computer only", "127.0.0.1"),
    ("Other devices on the network (needs a key)", "0.0.0.0"),
)
STATE_WORDS = {
    "received": "received",
    "waiting": "waiting for a local model",
    "answering": "answering",
    "done": "done",
    "cancelled": "cancelled",
    "error": "failed",
    "refused": "refused",
}
REQUEST_COLUMNS = ("Time", "Client", "Model", "State", "TTFT", "Speed", "Tokens", "Cost")


def _table(name: str, headers: tuple[str, ...]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setObjectName(name)
    table.setHorizontalHeaderLabels(list(headers))
    table.verticalHeader().hide()
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.horizontalHeader().setStretchLastSection(True)
    table.setMinimumHeight(140)
    return table


def _cell(text: str, right: bool = False) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    if right:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item


def request_cells(entry: Served) -> list[str]:
    """One request's row, in words and figures (``REQUEST_COLUMNS``)."""
    state = STATE_WORDS.get(entry.state, entry.state)
    if entry.state in ("refused", "error") and entry.status >= 400:
        state = f"{state} ({entry.status})"
    return [
        time.strftime("%H:%M:%S", time.localtime(entry.started)),
        entry.client or "no key",
        entry.model,
        state,
        f"{entry.ttft_ms:.0f} ms" if entry.ttft_ms is not None else "",
        f"{entry.decode_tok_s:.1f} tok/s" if entry.decode_tok_s is not None else "",
        (
            f"{entry.prompt_tokens or 0} → {entry.output_tokens}"
            if entry.output_tokens is not None
            else ""
        ),
        _cost(entry.cost_usd),
    ]


def _cost(usd: float | None) -> str:
    """A call's cost; nothing where its price is unknown (a server of one's own)."""
    if usd is None:
        return ""
    return "free" if usd == 0 else f"${usd:.4f}"


class KeyAgentsDialog(QDialog):
    """The agents one API key may call, as ticks (every tick: every agent, new ones too)."""

    def __init__(
        self,
        key_name: str,
        agents: list[Agent],
        allowed: tuple[int, ...] | None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("KeyAgentsDialog")
        self.setWindowTitle(f"Agents the key “{key_name}” may call")
        layout = vbox(self, (12, 12, 12, 12), 8)
        self.list = QListWidget()
        self.list.setAccessibleName("Agents this key may call")
        for agent in agents:
            item = QListWidgetItem(agent.name)
            item.setData(Qt.ItemDataRole.UserRole, agent.id)
            item.setFlags(Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsEnabled)
            ticked = allowed is None or agent.id in allowed
            item.setCheckState(Qt.CheckState.Checked if ticked else Qt.CheckState.Unchecked)
            self.list.addItem(item)
        layout.addWidget(self.list)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def _items(self) -> list[QListWidgetItem]:
        return [item for i in range(self.list.count()) if (item := self.list.item(i))]

    def chosen(self) -> tuple[int, ...] | None:
        """The ticked agents' ids; None when all are ticked (every agent, new ones too)."""
        items = self._items()
        ticked = [i for i in items if i.checkState() == Qt.CheckState.Checked]
        if len(ticked) == len(items):
            return None
        return tuple(int(i.data(Qt.ItemDataRole.UserRole)) for i in ticked)

    def summary(self) -> str:
        chosen = self.chosen()
        if chosen is None:
            return "every served agent"
        return f"{len(chosen)} agent{'s' if len(chosen) != 1 else ''}"


class ServerPage(QWidget):
    """Signal status(str): a short line for the window's status bar."""

    status = Signal(str)
    request_changed = Signal(object)  # a Served, from the server (same thread: queued redraw)

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ServerPage")
        self.services = services
        self.activity = Activity()
        self.activity.listeners.append(self.request_changed.emit)
        self.request_changed.connect(self._request_changed)
        self.server: ApiServer | None = None
        self._starting = False
        self._rows: dict[int, int] = {}  # request id -> row (newest on top)

        outer = vbox(self)
        area, column = scroll_column("ServerScroll", "ServerBody", (16, 12, 16, 12), 12)
        outer.addWidget(area)

        title = plain_label("API server", "PageTitle")
        column.addWidget(title)
        column.addWidget(
            plain_label(
                "Editors, scripts and other apps can use your agents as models through an "
                "OpenAI-compatible API. Each agent is a model: its system prompt and settings "
                "apply, and every call is measured like a chat.",
                "PageIntro",
                wrap=True,
            )
        )

        row = hbox(spacing=8)
        self.state_label = plain_label("Stopped", "ServerState")
        self.start_button = push_button("Start server", self.toggle, name="ServerStart")
        self.copy_button = push_button("Copy address", self.copy_address, name="ServerCopyAddress")
        row.addWidget(self.state_label, 1)
        row.addWidget(self.copy_button)
        row.addWidget(self.start_button)
        column.addLayout(row)
        self.error_label = plain_label("", "ServerError", wrap=True)
        self.error_label.hide()
        column.addWidget(self.error_label)

        column.addWidget(self._build_connection())
        column.addWidget(self._build_agents())
        column.addWidget(self._build_keys())
        column.addWidget(self._build_requests())
        column.addStretch(1)
        self._show_state()
        if services.prefs.get(serve_config.PREF_AUTOSTART, False):
            QTimer.singleShot(0, self.toggle)

    # building ----------------------------------------------------------------------------
    def _build_connection(self) -> QGroupBox:
        box = QGroupBox("Connection")
        form = QFormLayout(box)
        config = self.saved_config()
        self.reach = QComboBox()
        self.reach.setObjectName("ServerReach")
        for words, host in REACH:
            self.reach.addItem(words, host)
        self.reach.setCurrentIndex(0 if config.loopback else 1)
        self.port = QSpinBox()
        self.port.setObjectName("ServerPort")
        self.port.setRange(1024, 65535)
        self.port.setValue(config.port if config.port >= 1024 else serve_config.DEFAULT_PORT)
        self.require_key = QCheckBox("Require a key from apps on this computer too")
        self.require_key.setChecked(config.require_key)
        self.origins = QLineEdit(", ".join(config.cors_origins))
        self.origins.setObjectName("ServerOrigins")
        self.origins.setPlaceholderText("none (for example http://localhost:3000)")
        self.keep = QCheckBox("Keep API calls as conversations")
        self.keep.setToolTip(
            "Each call becomes a conversation titled by its client, with its timeline"
        )
        self.keep.setChecked(config.keep_conversations)
        self.autostart = QCheckBox("Start the server when SIMI Multi opens")
        self.autostart.setChecked(bool(self.services.prefs.get(serve_config.PREF_AUTOSTART)))
        form.addRow("Reachable from", self.reach)
        form.addRow("Port", self.port)
        form.addRow("", self.require_key)
        form.addRow("Web pages that may call it", self.origins)
        form.addRow("", self.keep)
        form.addRow("", self.autostart)
        form.addRow(
            "",
            plain_label(
                "Changes apply when the server starts. Other devices need an API key.",
                "FieldHint",
                wrap=True,
            ),
        )
        for signal in (
            self.reach.currentIndexChanged,
            self.port.valueChanged,
            self.require_key.toggled,
            self.keep.toggled,
            self.autostart.toggled,
            self.origins.editingFinished,
        ):
            signal.connect(self._save_settings)
        return box

    def _build_agents(self) -> QGroupBox:
        box = QGroupBox("Agents")
        layout = vbox(box, (8, 8, 8, 8), 6)
        self.agents_table = _table(
            "ServerAgents",
            (
                "Agent",
                "Model id",
                "Served",
                "Apps may set temperature and length",
                "Runs its tools",
            ),
        )
        header = self.agents_table.horizontalHeaderItem(4)
        if header is not None:
            header.setToolTip(
                "The agent's own MCP tools run for apps too: only those you allowed always for "
                "it (nobody is asked); each call is kept as a conversation"
            )
        self.agents_table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.agents_table.itemChanged.connect(self._agent_toggled)
        layout.addWidget(self.agents_table)
        self.refresh_agents()
        return box

    def _build_keys(self) -> QGroupBox:
        box = QGroupBox("API keys")
        layout = vbox(box, (8, 8, 8, 8), 6)
        self.keys_table = _table("ServerKeys", ("Name", "Key", "Agents", "Last used"))
        layout.addWidget(self.keys_table)
        buttons = hbox(spacing=8)
        self.new_key_button = push_button("New key…", self.new_key, name="ServerNewKey")
        self.copy_key_button = push_button("Copy key", self.copy_key, name="ServerCopyKey")
        self.limit_button = push_button(
            "Agents…",
            self.limit_key,
            name="ServerKeyAgents",
            tip="Choose which agents this key may call",
        )
        self.revoke_button = push_button("Revoke", self.revoke_key, name="ServerRevoke")
        for button in (
            self.new_key_button,
            self.copy_key_button,
            self.limit_button,
            self.revoke_button,
        ):
            buttons.addWidget(button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        layout.addWidget(
            plain_label(
                "A key is shown when it is made and kept in the system keyring; SIMI Multi's "
                "database keeps only a fingerprint of it.",
                "FieldHint",
                wrap=True,
            )
        )
        self.refresh_keys()
        return box

    def _build_requests(self) -> QGroupBox:
        box = QGroupBox("Requests")
        layout = vbox(box, (8, 8, 8, 8), 6)
        self.requests_table = _table("ServerRequests", REQUEST_COLUMNS)
        self.requests_table.setMinimumHeight(200)
        self.requests_table.cellDoubleClicked.connect(self._open_timeline)
        layout.addWidget(self.requests_table)
        layout.addWidget(plain_label("Double-click a request to see its timeline.", "FieldHint"))
        return box

    # settings ----------------------------------------------------------------------------
    def saved_config(self) -> serve_config.ServeConfig:
        return serve_config.from_prefs(self.services.prefs)

    def _save_settings(self) -> None:
        prefs = self.services.prefs
        origins = [o.strip().rstrip("/") for o in self.origins.text().split(",") if o.strip()]
        prefs.update(
            {
                serve_config.PREF_HOST: self.reach.currentData(),
                serve_config.PREF_PORT: self.port.value(),
                serve_config.PREF_REQUIRE_KEY: self.require_key.isChecked(),
                serve_config.PREF_CORS_ORIGINS: origins,
                serve_config.PREF_KEEP_CONVERSATIONS: self.keep.isChecked(),
                serve_config.PREF_AUTOSTART: self.autostart.isChecked(),
            }
        )
        try:
            prefs.save()
        except OSError as exc:
            self.status.emit(f"Could not save the server settings: {exc}")

    # starting and stopping ---------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.server is not None and self.server.running

    def toggle(self) -> None:
        if self._starting:
            return
        start(self._stop() if self.running else self._start(), name="server toggle")

    async def _start(self) -> None:
        self._starting = True
        self.error_label.hide()
        self.start_button.setEnabled(False)
        try:
            server = ApiServer(self.services, self.saved_config(), self.activity)
            await server.start()
            self.server = server
            self.status.emit(f"API server running at {server.address}")
        except UserError as exc:
            self.error_label.setText(exc.user_message)
            self.error_label.show()
        finally:
            self._starting = False
            self.start_button.setEnabled(True)
            self._show_state()

    async def _stop(self) -> None:
        server, self.server = self.server, None
        self.start_button.setEnabled(False)
        try:
            if server is not None:
                await server.stop()
        finally:
            self.start_button.setEnabled(True)
            self._show_state()
        self.status.emit("API server stopped")

    async def stop(self) -> None:
        """Stop serving (the window closes): calls under way end as cancelled."""
        if self.server is not None:
            await self._stop()

    def _show_state(self) -> None:
        if self.running and self.server is not None:
            self.state_label.setText(f"Running at {self.server.address}")
            self.start_button.setText("Stop server")
        else:
            self.state_label.setText("Stopped")
            self.start_button.setText("Start server")
        self.copy_button.setEnabled(self.running)

    def copy_address(self) -> None:
        if self.server is not None:
            QGuiApplication.clipboard().setText(self.server.address)
            self.status.emit("Address copied")

    # agents ------------------------------------------------------------------------------
    def _listing(self) -> ApiServer:
        return self.server or ApiServer(self.services, self.saved_config(), self.activity)

    def refresh_agents(self) -> None:
        table = self.agents_table
        table.blockSignals(True)
        rows = self._listing().exposed()
        table.setRowCount(len(rows))
        for i, (model_id, agent, how) in enumerate(rows):
            name = _cell(agent.name)
            name.setData(Qt.ItemDataRole.UserRole, agent.id)
            table.setItem(i, 0, name)
            table.setItem(i, 1, _cell(model_id))
            for column, checked in (
                (2, how.exposed),
                (3, how.client_sampling),
                (4, how.run_tools),
            ):
                box = QTableWidgetItem()
                box.setFlags(Qt.ItemFlag.ItemIsUserCheckable | Qt.ItemFlag.ItemIsEnabled)
                box.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
                table.setItem(i, column, box)
        table.blockSignals(False)

    def _agent_toggled(self, item: QTableWidgetItem) -> None:
        field = {2: "exposed", 3: "client_sampling", 4: "run_tools"}.get(item.column())
        if field is None:
            return
        name = self.agents_table.item(item.row(), 0)
        if name is None:
            return
        agent_id = int(name.data(Qt.ItemDataRole.UserRole))
        checked = item.checkState() == Qt.CheckState.Checked
        self._listing().set_served(agent_id, **{field: checked})

    # keys ---------------------------------------------------------------------------------
    def refresh_keys(self) -> None:
        names = {a.id: a.name for a in self.services.agents.list()}
        records = self._listing().keys.list()
        table = self.keys_table
        table.setRowCount(len(records))
        for i, record in enumerate(records):
            agents = (
                "every served agent"
                if record.agent_ids is None
                else ", ".join(names.get(a, "a deleted agent") for a in record.agent_ids)
            )
            used = (record.last_used_at or "never")[:16].replace("T", " ")
            for column, text in enumerate((record.name, record.hint, agents, used)):
                table.setItem(i, column, _cell(text))
        has_keys = bool(records)
        for button in (self.copy_key_button, self.limit_button, self.revoke_button):
            button.setEnabled(has_keys)

    def _chosen_key(self) -> str | None:
        row = self.keys_table.currentRow()
        item = self.keys_table.item(row if row >= 0 else 0, 0)
        return item.text() if item is not None else None

    def new_key(self) -> None:
        name, ok = ask_text(self, "New API key", "What will use this key?", "")
        if ok and name.strip():
            start(self._new_key(name.strip()), name="new API key")

    async def _new_key(self, name: str) -> None:
        try:
            # the keyring answers over D-Bus (and may ask to be unlocked): off the GUI thread
            _record, key = await run_blocking(self._listing().keys.create, name)
        except UserError as exc:
            warn(self, "New API key", exc.user_message)
            return
        self.refresh_keys()
        QGuiApplication.clipboard().setText(key)
        box = message_box(
            self,
            QMessageBox.Icon.Information,
            "New API key",
            f"The key “{name}” is copied to the clipboard:\n\n{key}\n\n"
            "Apps send it as 'Authorization: Bearer <key>'. Copy key shows it again later.",
        )
        box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        box.open()
        self.key_box = box

    def copy_key(self) -> None:
        name = self._chosen_key()
        if name is not None:
            start(self._copy_key(name), name="copy API key")

    async def _copy_key(self, name: str) -> None:
        try:
            key = await run_blocking(self._listing().keys.reveal, name)
        except UserError as exc:
            warn(self, "Copy key", exc.user_message)
            return
        if key is None:
            warn(
                self,
                "Copy key",
                f"The keyring no longer has the key “{name}”: revoke it and make a new one.",
            )
            return
        QGuiApplication.clipboard().setText(key)
        self.status.emit(f"Key “{name}” copied")

    def limit_key(self) -> None:
        """Agents… : tick the agents the chosen key may call (all ticked: every agent)."""
        name = self._chosen_key()
        keys = self._listing().keys
        record = keys.store.by_name(name) if name is not None else None
        if record is None:
            return
        dialog = KeyAgentsDialog(record.name, self.services.agents.list(), record.agent_ids, self)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return
        keys.store.set_agents(record.name, dialog.chosen())
        self.refresh_keys()
        self.status.emit(f"Key “{record.name}” may call {dialog.summary()}")

    def revoke_key(self) -> None:
        name = self._chosen_key()
        if name is None or not confirm(
            self, "Revoke key", f"Revoke the key “{name}”? Apps using it stop working at once."
        ):
            return
        start(self._revoke(name), name="revoke API key")

    async def _revoke(self, name: str) -> None:
        try:
            await run_blocking(self._listing().keys.revoke, name)
        except UserError as exc:
            warn(self, "Revoke key", exc.user_message)
        self.refresh_keys()
        self.status.emit(f"Key “{name}” revoked")

    # requests -------------------------------------------------------------------------------
    def _request_changed(self, entry: Served) -> None:
        table = self.requests_table
        if entry.id not in self._rows:
            table.insertRow(0)
            self._rows = {rid: row + 1 for rid, row in self._rows.items()}
            self._rows[entry.id] = 0
            keep = self.activity.entries.maxlen or 200
            while table.rowCount() > keep:
                table.removeRow(table.rowCount() - 1)
            self._rows = {rid: row for rid, row in self._rows.items() if row < keep}
        row = self._rows[entry.id]
        for column, text in enumerate(request_cells(entry)):
            table.setItem(row, column, _cell(text, right=column >= 4))
        first = table.item(row, 0)
        if first is not None:
            first.setData(Qt.ItemDataRole.UserRole, entry.stats_id)
            if entry.error:
                first.setToolTip(entry.error)

    def _open_timeline(self, row: int, _column: int) -> None:
        item = self.requests_table.item(row, 0)
        stats_id = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        if stats_id is None:
            self.status.emit("This request has no timeline: it never reached the model.")
            return
        stats = self.services.stats.by_id(int(stats_id))
        if stats is None:
            return
        from desktop.ui.stats.timeline_panel import TimelinePanel

        panel = TimelinePanel(stats, self.window())
        panel.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        panel.show()
        self.timeline_panel = panel

    def showEvent(self, event: Any) -> None:
        self.refresh_agents()
        self.refresh_keys()
        super().showEvent(event)
