"""The main window: agents and conversations on the left, the conversation on the right.

Pages: the right-hand side is a QStackedWidget. The conversation is the page "chat";
``add_page(name, widget, label)`` adds another page (e.g. the Models page) with an entry in
the sidebar's page bar, and ``show_page(name)`` switches to it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QModelIndex, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QGuiApplication, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMenu,
    QMessageBox,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.agents import KIND_LABELS
from desktop.chat.export import ExportError, dumps, from_json, to_json, to_markdown
from desktop.chat.providers import load_params_for
from desktop.chat.services import Services, idle_unload_seconds
from desktop.chat.session import Turn
from desktop.llm.errors import UserError
from desktop.store.agents import Agent
from desktop.store.conversations import Message, Versions
from desktop.ui.agent_editor import AgentEditorDialog, attach_memory_estimate
from desktop.ui.async_door import run_blocking, start
from desktop.ui.chat_controller import ChatController
from desktop.ui.conversation_list import (
    MESSAGE_ROLE,
    SNIPPET_ROLE,
    ConversationList,
    SearchResults,
)
from desktop.ui.memory_estimate import MemoryEstimateView
from desktop.ui.message_view import Transcript
from desktop.ui.models_page import ModelsPage
from desktop.ui.resources import agent_badge, app_icon
from desktop.ui.resources import icon as resource_icon
from desktop.ui.settings_dialog import SettingsDialog, footer_mode
from desktop.ui.shortcuts import COMPOSER_ONLY, SHORTCUTS, ShortcutsSheet, sequences
from desktop.ui.widgets import (
    ID_ROLE,
    SUBTITLE_ROLE,
    ComposerEdit,
    FocusFrame,
    InfoBar,
    TwoLineDelegate,
)

log = logging.getLogger("simi.ui")

PREF_GEOMETRY = "ui.window_geometry"
PREF_SPLITTER = "ui.splitter_state"
PREF_SIDEBAR = "ui.sidebar_splitter_state"
BADGE_PX = 30
UNDO_DELETE_MS = 10_000  # how long "Undo" is offered after deleting a conversation
SEARCH_DEBOUNCE_MS = 150


def _encode(data: QByteArray) -> str:
    return base64.b64encode(bytes(data.data())).decode("ascii")


def _decode(text: object) -> QByteArray | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return QByteArray(base64.b64decode(text, validate=True))
    except ValueError:
        return None


class MainWindow(QMainWindow):
    """Signals: closed() once the window has closed (streaming cancelled, state saved)."""

    closed = Signal()
    # llama.cpp worker state (unloaded/loading/ready/busy/error), hopped onto the GUI thread
    model_state_changed = Signal(str, str)

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.controller = ChatController(services.chat, self)
        self._agents: list[Agent] = []
        self._agent: Agent | None = None
        self._conversation_id: int | None = None
        self._closing = False
        self._editing: int | None = None  # the user message being edited in the composer
        self._agent_filter: int | None = None
        self._pending_delete: int | None = None
        self._pages: dict[str, QWidget] = {}
        self._page_buttons: dict[str, QToolButton] = {}

        self.setWindowTitle("SIMI Multi")
        self.setWindowIcon(app_icon())
        self.setMinimumSize(720, 480)

        self.pages = QStackedWidget()
        self.pages.setObjectName("Pages")
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("MainSplitter")
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self._build_sidebar())
        self.splitter.addWidget(self.pages)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.setCentralWidget(self.splitter)
        self.add_page("chat", self._build_chat_pane(), "Chat")
        self.models_page = ModelsPage(services)
        emit_state = self.model_state_changed.emit
        self._state_listener = lambda state, detail: emit_state(state, detail)
        services.local.add_listener(self._state_listener)
        self.model_state_changed.connect(self._on_model_state)
        self.add_page("models", self.models_page, "Models")

        self.status_label = QLabel()
        self.status_label.setObjectName("StatusLine")
        self.statusBar().addWidget(self.status_label, 1)
        self.statusBar().setSizeGripEnabled(False)

        self._undo_timer = QTimer(self)
        self._undo_timer.setSingleShot(True)
        self._undo_timer.setInterval(UNDO_DELETE_MS)
        self._undo_timer.timeout.connect(self._finish_delete)
        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DEBOUNCE_MS)
        self._search_timer.timeout.connect(self.run_search)

        self.controller.busy_changed.connect(self._on_busy)
        self.controller.text_appended.connect(self.transcript.append_text)
        self.controller.reasoning_appended.connect(self.transcript.append_reasoning)
        self.controller.status_changed.connect(self.status_label.setText)
        self.controller.turn_finished.connect(self._on_turn_finished)
        self.transcript.retry_requested.connect(self.retry)
        self.transcript.action_requested.connect(self._on_message_action)
        self.transcript.version_step.connect(self.switch_version)
        self.transcript.set_footer_mode(footer_mode(services.prefs))

        self._build_menus()
        self._restore_state()
        self.reload_agents()
        self.new_chat()
        self._on_busy(False)
        self.composer.setFocus()

    # pages ---------------------------------------------------------------------------------
    def add_page(self, name: str, widget: QWidget, label: str | None = None) -> None:
        """Add a right-hand page with a button in the sidebar's page bar ("chat" is first).

        The bar appears once there is more than one page.
        """
        if name in self._pages:
            raise ValueError(f"a page called {name!r} exists")
        self._pages[name] = widget
        self.pages.addWidget(widget)
        button = QToolButton()
        button.setObjectName("PageButton")
        button.setText(label or name.title())
        button.setCheckable(True)
        button.setAutoExclusive(True)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(self._page_slot(name))
        self.page_bar_layout.insertWidget(self.page_bar_layout.count() - 1, button)
        self._page_buttons[name] = button
        self.page_bar.setVisible(len(self._pages) > 1)
        if len(self._pages) == 1:
            button.setChecked(True)

    def _page_slot(self, name: str) -> Callable[[], None]:
        return lambda: self.show_page(name)

    def show_page(self, name: str) -> None:
        widget = self._pages[name]
        self.pages.setCurrentWidget(widget)
        self._page_buttons[name].setChecked(True)
        refresh = getattr(widget, "refresh", None)
        if callable(refresh):
            refresh()

    @property
    def current_page(self) -> str:
        current = self.pages.currentWidget()
        return next((n for n, w in self._pages.items() if w is current), "chat")

    def _build_menus(self) -> None:
        bar = self.menuBar()
        self._actions: dict[str, QAction] = {}
        for shortcut in SHORTCUTS:
            if shortcut.name in COMPOSER_ONLY:
                continue
            action = QAction(shortcut.label, self)
            action.setShortcuts(sequences(shortcut))
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            action.triggered.connect(getattr(self, shortcut.name))
            self.addAction(action)
            self._actions[shortcut.name] = action
        file_menu = bar.addMenu("&File")
        file_menu.addAction(self._actions["new_chat"])
        file_menu.addAction("Import conversation…", self.import_conversation)
        file_menu.addAction("Export as Markdown…", lambda: self.export_conversation("md"))
        file_menu.addAction("Export as JSON…", lambda: self.export_conversation("json"))
        file_menu.addSeparator()
        file_menu.addAction(self._actions["open_settings"])
        file_menu.addSeparator()
        quit_action = file_menu.addAction("Quit", self.close)
        quit_action.setShortcuts(QKeySequence.keyBindings(QKeySequence.StandardKey.Quit))
        conv_menu = bar.addMenu("&Conversation")
        for name in (
            "focus_search",
            "copy_last_reply",
            "regenerate_last",
            "stop",
            "rename_current",
        ):
            conv_menu.addAction(self._actions[name])
        help_menu = bar.addMenu("&Help")
        help_menu.addAction(self._actions["show_shortcuts"])

    # building ------------------------------------------------------------------------------
    def _build_sidebar(self) -> QWidget:
        sidebar = QWidget()
        sidebar.setObjectName("Sidebar")
        sidebar.setMinimumWidth(220)
        layout = QVBoxLayout(sidebar)
        layout.setContentsMargins(8, 12, 8, 8)
        layout.setSpacing(8)

        title_row = QHBoxLayout()
        title_row.setContentsMargins(8, 0, 8, 0)
        icon = QLabel()
        icon.setPixmap(app_icon().pixmap(22, 22))
        title = QLabel("SIMI Multi")
        title.setObjectName("AppTitle")
        title_row.addWidget(icon)
        title_row.addWidget(title, 1)
        layout.addLayout(title_row)

        self.new_chat_button = QPushButton("+  New chat")
        self.new_chat_button.setObjectName("PrimaryButton")
        self.new_chat_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.new_chat_button.setToolTip("Start a new conversation (Ctrl+N)")
        self.new_chat_button.clicked.connect(self.new_chat)
        layout.addWidget(self.new_chat_button)

        self.sidebar_splitter = QSplitter(Qt.Orientation.Vertical)
        self.sidebar_splitter.setChildrenCollapsible(False)
        self.sidebar_splitter.setHandleWidth(1)

        # agents
        agents_box = QWidget()
        agents_layout = QVBoxLayout(agents_box)
        agents_layout.setContentsMargins(0, 4, 0, 4)
        agents_layout.setSpacing(4)
        header = QHBoxLayout()
        header.setContentsMargins(8, 0, 0, 0)
        header.setSpacing(2)
        label = QLabel("AGENTS")
        label.setObjectName("SectionLabel")
        header.addWidget(label, 1)
        tools = QHBoxLayout()
        tools.setContentsMargins(4, 0, 0, 0)
        tools.setSpacing(2)
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
        agents_layout.addLayout(header)
        self.agent_list = QListWidget()
        self.agent_list.setObjectName("AgentList")
        self.agent_list.setItemDelegate(TwoLineDelegate(self.agent_list, icon_size=BADGE_PX))
        self.agent_list.setMouseTracking(True)
        self.agent_list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.agent_list.customContextMenuRequested.connect(self._agent_menu)
        self.agent_list.currentItemChanged.connect(self._agent_selected)
        self.agent_list.itemDoubleClicked.connect(lambda _item: self.edit_agent())
        agents_layout.addWidget(self.agent_list)
        agents_layout.addLayout(tools)
        self.sidebar_splitter.addWidget(agents_box)

        # conversations
        conv_box = QWidget()
        conv_layout = QVBoxLayout(conv_box)
        conv_layout.setContentsMargins(0, 8, 0, 0)
        conv_layout.setSpacing(4)
        conv_header = QHBoxLayout()
        conv_header.setContentsMargins(8, 0, 0, 4)
        conv_label = QLabel("CONVERSATIONS")
        conv_label.setObjectName("SectionLabel")
        conv_header.addWidget(conv_label, 1)
        self.agent_filter = QComboBox()
        self.agent_filter.setObjectName("AgentFilter")
        self.agent_filter.setToolTip("Show the conversations of one agent")
        self.agent_filter.currentIndexChanged.connect(self._filter_changed)
        conv_header.addWidget(self.agent_filter)
        conv_layout.addLayout(conv_header)
        self.search_box = QLineEdit()
        self.search_box.setObjectName("SearchBox")
        self.search_box.setPlaceholderText("Search all conversations")
        self.search_box.setClearButtonEnabled(True)
        search_icon = resource_icon("search.svg")
        self.search_box.addAction(search_icon, QLineEdit.ActionPosition.LeadingPosition)
        self.search_box.textChanged.connect(lambda _t: self._search_timer.start())
        self.search_box.returnPressed.connect(self._open_first_result)
        conv_layout.addWidget(self.search_box)
        self.conversation_list = ConversationList()
        self.conversation_list.setObjectName("ConversationList")
        self.conversation_list.setMouseTracking(True)
        self.conversation_list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.conversation_list.customContextMenuRequested.connect(self._conversation_menu)
        self.conversation_list.selectionModel().currentChanged.connect(self._conversation_selected)
        conv_layout.addWidget(self.conversation_list)
        self.search_results = SearchResults()
        self.search_results.itemActivated.connect(self._open_result)
        self.search_results.itemClicked.connect(self._open_result)
        self.search_results.hide()
        conv_layout.addWidget(self.search_results)
        self.sidebar_splitter.addWidget(conv_box)
        self.sidebar_splitter.setStretchFactor(0, 0)
        self.sidebar_splitter.setStretchFactor(1, 1)
        layout.addWidget(self.sidebar_splitter, 1)

        self.page_bar = QWidget()
        self.page_bar.setObjectName("PageBar")
        self.page_bar_layout = QHBoxLayout(self.page_bar)
        self.page_bar_layout.setContentsMargins(4, 4, 4, 0)
        self.page_bar_layout.setSpacing(4)
        self.page_bar_layout.addStretch(1)
        self.page_bar.hide()
        layout.addWidget(self.page_bar)
        return sidebar

    def _build_chat_pane(self) -> QWidget:
        pane = QWidget()
        pane.setObjectName("ChatPane")
        layout = QVBoxLayout(pane)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)

        self.info_bar: InfoBar | None = None
        if not self.services.secrets.available:
            self.info_bar = InfoBar(self.services.secrets.unavailable_message())
            layout.addWidget(self.info_bar)

        header = QFrame()
        header.setObjectName("ChatHeader")
        header_layout = QHBoxLayout(header)
        header_layout.setContentsMargins(24, 12, 24, 12)
        header_layout.setSpacing(12)
        self.header_badge = QLabel()
        header_layout.addWidget(self.header_badge)
        titles = QVBoxLayout()
        titles.setSpacing(0)
        self.header_title = QLabel()
        self.header_title.setObjectName("HeaderTitle")
        self.header_subtitle = QLabel()
        self.header_subtitle.setObjectName("HeaderSubtitle")
        # a long model name or state never widens the pane (the splitter stays where put)
        self.header_subtitle.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        titles.addWidget(self.header_title)
        titles.addWidget(self.header_subtitle)
        header_layout.addLayout(titles, 1)
        layout.addWidget(header)

        self.transcript = Transcript()
        layout.addWidget(self.transcript, 1)

        composer_area = QWidget()
        area_layout = QVBoxLayout(composer_area)
        area_layout.setContentsMargins(24, 8, 24, 12)
        area_layout.setSpacing(6)
        self.undo_bar = InfoBar("")
        self.undo_bar.setObjectName("UndoBar")
        self.undo_button = QPushButton("Undo")
        self.undo_button.setObjectName("UndoButton")
        self.undo_button.clicked.connect(self.undo_delete)
        self.undo_bar.layout().insertWidget(1, self.undo_button)
        self.undo_bar.dismissed.connect(self._finish_delete)
        self.undo_bar.hide()
        area_layout.addWidget(self.undo_bar)
        self.edit_banner = InfoBar(
            "Editing your message: Enter sends it as a new branch "
            "(the earlier one stays). Esc cancels."
        )
        self.edit_banner.setObjectName("EditBanner")
        self.edit_banner.dismissed.connect(self.cancel_edit)
        self.edit_banner.hide()
        area_layout.addWidget(self.edit_banner)
        self.composer_frame = FocusFrame("Composer")
        frame_layout = QHBoxLayout(self.composer_frame)
        frame_layout.setContentsMargins(10, 8, 8, 8)
        frame_layout.setSpacing(8)
        self.composer = ComposerEdit()
        self.composer.submitted.connect(self.send)
        self.composer.textChanged.connect(self._update_send_enabled)
        self.composer_frame.watch(self.composer)
        frame_layout.addWidget(self.composer, 1)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("SendButton")
        self.send_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.send_button.setMinimumWidth(76)
        self.send_button.clicked.connect(self._send_or_stop)
        frame_layout.addWidget(self.send_button, 0, Qt.AlignmentFlag.AlignBottom)
        area_layout.addWidget(self.composer_frame)
        hint = QLabel("Enter to send · Shift+Enter for a new line")
        hint.setObjectName("ComposerHint")
        hint.setContentsMargins(14, 0, 0, 0)
        area_layout.addWidget(hint)
        layout.addWidget(composer_area)
        return pane

    # agents --------------------------------------------------------------------------------
    @property
    def current_agent(self) -> Agent | None:
        return self._agent

    @property
    def conversation_id(self) -> int | None:
        return self._conversation_id

    def reload_agents(self, select_id: int | None = None) -> None:
        keep = select_id if select_id is not None else (self._agent.id if self._agent else None)
        self._agents = self.services.agents.list()
        self.agent_list.blockSignals(True)
        self.agent_list.clear()
        ratio = self.devicePixelRatioF()
        for agent in self._agents:
            item = QListWidgetItem(QIcon(agent_badge(agent.name, agent.kind, BADGE_PX, ratio)), "")
            item.setText(agent.name)
            item.setData(ID_ROLE, agent.id)
            item.setData(SUBTITLE_ROLE, self._agent_subtitle(agent))
            item.setToolTip(f"{agent.name}\n{self._agent_subtitle(agent)}")
            self.agent_list.addItem(item)
        self.agent_list.blockSignals(False)
        target = next((a for a in self._agents if a.id == keep), None)
        if target is None and self._agents:
            target = self._agents[0]
        self._set_agent(target)
        self.agent_list.setFixedHeight(self._agent_list_height())

    def _agent_list_height(self) -> int:
        rows = max(1, min(5, self.agent_list.count()))
        row_h = self.agent_list.sizeHintForRow(0) if self.agent_list.count() else 46
        return rows * row_h + 4

    def _agent_subtitle(self, agent: Agent) -> str:
        kind = KIND_LABELS.get(agent.kind, agent.kind)
        text = f"{kind} · {agent.model}" if agent.model else kind
        state = self.model_state_of(agent)
        return f"{text} · {state}" if state else text

    def _idle_status(self, agent: Agent) -> str:
        state = self.model_state_of(agent)
        if state == "unloaded":
            return f"{agent.name} · model loads with the first message"
        if state in (None, "ready"):
            return f"{agent.name} · ready"
        return f"{agent.name} · model {state}"

    def model_note_of(self, agent: Agent) -> str | None:
        """What the person should know about a local agent's model file (from the cached
        header): no chat template (ChatML is used), or what is wrong with the file."""
        if not agent.is_local:
            return None
        try:
            path = load_params_for(agent).model_path
        except UserError as exc:
            return exc.user_message
        info = self.services.local.model_info.peek(path)
        if info is None:
            return None
        if isinstance(info, Exception):
            return getattr(info, "user_message", str(info))
        return info.template_note

    def _read_model_header(self, agent: Agent) -> None:
        """Read a local agent's GGUF header off the GUI thread, then show its note."""
        if not agent.is_local:
            return
        try:
            path = load_params_for(agent).model_path
        except UserError:
            return
        if self.services.local.model_info.peek(path) is not None:
            return

        async def read() -> None:
            with contextlib.suppress(Exception):
                await run_blocking(self.services.local.model_info.get, path)
            self._on_model_state("", "")

        start(read(), name="model-header")

    def model_state_of(self, agent: Agent) -> str | None:
        """For a local agent: its model's state (unloaded / loading / ready / busy / error)."""
        if not agent.is_local:
            return None
        worker = self.services.local.worker
        loaded = worker.params.model_path if worker.params is not None else None
        try:
            mine = load_params_for(agent).model_path
        except UserError:
            return "error"
        if loaded != mine or not worker.alive:
            return "error" if worker.state == "error" and loaded == mine else "unloaded"
        return worker.state

    def _on_model_state(self, _state: str, _detail: str) -> None:
        for row in range(self.agent_list.count()):
            item = self.agent_list.item(row)
            agent = next((a for a in self._agents if a.id == item.data(ID_ROLE)), None)
            if agent is not None:
                item.setData(SUBTITLE_ROLE, self._agent_subtitle(agent))
        if self._agent is not None:
            self._show_header_subtitle(self._agent)

    def _show_header_subtitle(self, agent: Agent) -> None:
        note = self.model_note_of(agent)
        text = self._agent_subtitle(agent)
        self.header_subtitle.setText(f"{text} · {note}" if note else text)
        self.header_subtitle.setToolTip(note or "")

    def _set_agent(self, agent: Agent | None) -> None:
        """Select ``agent`` in the list and make it answer the next message."""
        self._agent = agent
        self.agent_list.blockSignals(True)
        for row in range(self.agent_list.count()):
            item = self.agent_list.item(row)
            if agent is not None and item.data(ID_ROLE) == agent.id:
                self.agent_list.setCurrentItem(item)
                break
        else:
            self.agent_list.setCurrentRow(-1)
        self.agent_list.blockSignals(False)
        self._update_header()

    def select_agent(self, agent_id: int) -> None:
        agent = next((a for a in self._agents if a.id == agent_id), None)
        if agent is not None:
            self._set_agent(agent)

    def _agent_selected(self, current: QListWidgetItem | None, _previous: object) -> None:
        if current is None:
            return
        self.select_agent(int(current.data(ID_ROLE)))

    def _update_header(self) -> None:
        agent = self._agent
        has = agent is not None
        for key in ("edit", "clone", "delete"):
            self.agent_buttons[key].setEnabled(has)
        if agent is None:
            self.header_title.setText("No agent")
            self.header_subtitle.setText("Create an agent to start chatting")
            self.header_badge.clear()
            self.composer.setPlaceholderText("Create an agent first…")
            self.transcript.set_agent_name(None)
        else:
            self.header_title.setText(agent.name)
            self._show_header_subtitle(agent)
            self._read_model_header(agent)
            self.header_badge.setPixmap(
                agent_badge(agent.name, agent.kind, 36, self.devicePixelRatioF())
            )
            self.composer.setPlaceholderText(f"Message {agent.name}…")
            self.transcript.set_agent_name(agent.name)
            if not self.controller.busy:
                self.status_label.setText(self._idle_status(agent))
        self._update_send_enabled()

    def _agent_menu(self, pos: QPoint) -> None:
        menu = QMenu(self)
        has = self.agent_list.itemAt(pos) is not None
        menu.addAction("New agent…", self.new_agent)
        for text, slot in (
            ("Edit…", self.edit_agent),
            ("Clone", self.clone_agent),
            ("Delete…", self.delete_agent),
        ):
            action = menu.addAction(text, slot)
            action.setEnabled(has)
        menu.popup(self.agent_list.viewport().mapToGlobal(pos))

    def _editor(self, agent: Agent | None) -> AgentEditorDialog:
        dialog = AgentEditorDialog(self.services.agents, self.services.secrets, agent, self)
        attach_memory_estimate(dialog, MemoryEstimateView(cache=self.services.local.model_info))
        return dialog

    def new_agent(self) -> None:
        dialog = self._editor(None)
        if dialog.exec() and dialog.saved_agent is not None:
            self.reload_agents(select_id=dialog.saved_agent.id)
        dialog.deleteLater()

    def edit_agent(self) -> None:
        if self._agent is None:
            return
        dialog = self._editor(self._agent)
        if dialog.exec() and dialog.saved_agent is not None:
            self.reload_agents(select_id=dialog.saved_agent.id)
            self.reload_conversations()
        dialog.deleteLater()

    def clone_agent(self) -> None:
        if self._agent is None:
            return
        try:
            copy = self.services.agents.clone(self._agent)
        except Exception as exc:  # ValidationError, SecretsUnavailable: say it, stay up
            QMessageBox.warning(self, "Clone agent", getattr(exc, "user_message", str(exc)))
            return
        self.reload_agents(select_id=copy.id)

    def confirm(self, title: str, text: str) -> bool:
        """Ask yes/no (tests replace this to answer without a modal dialog)."""
        answer = QMessageBox.question(
            self,
            title,
            text,
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
            QMessageBox.StandardButton.Cancel,
        )
        return answer == QMessageBox.StandardButton.Yes

    def delete_agent(self) -> None:
        agent = self._agent
        if agent is None:
            return
        if (
            self.controller.busy
            and self.controller.turn
            and self.controller.turn.agent.id == (agent.id)
        ):
            self.status_label.setText(f"Stop {agent.name}'s reply before deleting it.")
            return
        if not self.confirm(
            "Delete agent",
            f"Delete the agent “{agent.name}”? Its conversations and statistics are kept.",
        ):
            return
        self.services.agents.delete(agent)
        self._agent = None
        self.reload_agents()
        self.reload_conversations()

    # conversations -------------------------------------------------------------------------
    def reload_conversations(self) -> None:
        names = {a.id: a.name for a in self._agents if a.id is not None}
        self._fill_agent_filter()
        rows = self.services.conversations.list(self._agent_filter)
        view = self.conversation_list
        selection = view.selectionModel()
        selection.blockSignals(True)
        view.list_model.set_rows(rows, names)
        row = view.list_model.row_of(self._conversation_id)
        view.setCurrentRow(row)
        selection.blockSignals(False)

    def _fill_agent_filter(self) -> None:
        combo = self.agent_filter
        wanted = [("All agents", None)] + [(a.name, a.id) for a in self._agents]
        have = [(combo.itemText(i), combo.itemData(i)) for i in range(combo.count())]
        if have == wanted:
            return
        combo.blockSignals(True)
        combo.clear()
        for text, agent_id in wanted:
            combo.addItem(text, agent_id)
        index = combo.findData(self._agent_filter) if self._agent_filter is not None else 0
        if index < 0:
            self._agent_filter, index = None, 0
        combo.setCurrentIndex(index)
        combo.blockSignals(False)

    def set_agent_filter(self, agent_id: int | None) -> None:
        """List only the conversations of one agent (None: all)."""
        self._agent_filter = agent_id
        index = self.agent_filter.findData(agent_id) if agent_id is not None else 0
        self.agent_filter.blockSignals(True)
        self.agent_filter.setCurrentIndex(max(0, index))
        self.agent_filter.blockSignals(False)
        self.reload_conversations()

    def _filter_changed(self, index: int) -> None:
        data = self.agent_filter.itemData(index)
        self._agent_filter = int(data) if data is not None else None
        self.reload_conversations()

    def new_chat(self) -> None:
        """An empty conversation with the selected agent; stored on the first message."""
        self.cancel_edit()
        self._conversation_id = None
        self.transcript.clear()
        self.reload_conversations()
        self._update_header()
        self.show_page("chat")
        self.composer.setFocus()

    def _fetch(
        self, messages: list[Message]
    ) -> tuple[dict[int, dict[str, Any]], dict[int, Versions]]:
        """Stats and versions for the bubbles about to be built (the window, not the path)."""
        stats = self.services.stats.for_messages([m.id for m in messages if m.role != "user"])
        return stats, self.services.conversations.versions_for(messages)

    def open_conversation(self, conversation_id: int, focus_id: int | None = None) -> None:
        conv = self.services.conversations.get(conversation_id)
        if conv is None or conv.deleted_at is not None:
            self.reload_conversations()
            return
        if conversation_id != self._conversation_id:
            self.cancel_edit()
        self._conversation_id = conversation_id
        if conv.agent_id is not None:
            self.select_agent(conv.agent_id)
        self._show_path(focus_id)
        self.reload_conversations()
        self._update_send_enabled()
        self.show_page("chat")

    def _show_path(self, focus_id: int | None = None) -> None:
        if self._conversation_id is None:
            self.transcript.clear()
            return
        messages = self.services.conversations.messages(self._conversation_id)
        self.transcript.show_path(messages, self._fetch, focus_id)
        self.transcript.set_busy(self.controller.busy)
        if focus_id is None:
            self.transcript.scroll_to_bottom()

    def _conversation_selected(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.open_conversation(int(current.data(ID_ROLE)))

    def _conversation_menu(self, pos: QPoint) -> None:
        index = self.conversation_list.indexAt(pos)
        if not index.isValid():
            return
        conv_id = int(index.data(ID_ROLE))
        conv = self.services.conversations.get(conv_id)
        if conv is None:
            return
        menu = QMenu(self)
        menu.addAction("Rename…", lambda: self.rename_conversation(conv_id))
        menu.addAction("Unpin" if conv.pinned else "Pin", lambda: self.toggle_pin(conv_id))
        menu.addSeparator()
        menu.addAction("Export as Markdown…", lambda: self.export_conversation("md", conv_id))
        menu.addAction("Export as JSON…", lambda: self.export_conversation("json", conv_id))
        menu.addSeparator()
        menu.addAction("Delete", lambda: self.delete_conversation(conv_id))
        menu.popup(self.conversation_list.viewport().mapToGlobal(pos))

    def ask_text(self, title: str, label: str, text: str) -> str | None:
        """Ask for a line of text (tests replace this to answer without a modal dialog)."""
        value, ok = QInputDialog.getText(self, title, label, QLineEdit.EchoMode.Normal, text)
        return value if ok else None

    def rename_conversation(self, conversation_id: int) -> None:
        conv = self.services.conversations.get(conversation_id)
        if conv is None:
            return
        title = self.ask_text("Rename conversation", "Title:", conv.title)
        if title is None or not title.strip():
            return
        self.services.conversations.rename(conversation_id, " ".join(title.split()))
        self.reload_conversations()

    def rename_current(self) -> None:
        if self._conversation_id is not None:
            self.rename_conversation(self._conversation_id)

    def toggle_pin(self, conversation_id: int) -> None:
        conv = self.services.conversations.get(conversation_id)
        if conv is not None:
            self.services.conversations.set_pinned(conversation_id, not conv.pinned)
            self.reload_conversations()

    def delete_conversation(self, conversation_id: int) -> None:
        """Hide it at once; "Undo" brings it back for a few seconds, then it is gone."""
        turn = self.controller.turn
        if turn is not None and turn.conversation_id == conversation_id:
            self.status_label.setText("Stop the reply before deleting its conversation.")
            return
        self._finish_delete()
        conv = self.services.conversations.get(conversation_id)
        if conv is None:
            return
        self.services.conversations.trash(conversation_id)
        self._pending_delete = conversation_id
        self.undo_bar.label.setText(f"Deleted “{conv.title or 'New chat'}”.")
        self.undo_bar.show()
        self._undo_timer.start()
        if self._conversation_id == conversation_id:
            self.new_chat()
        else:
            self.reload_conversations()

    def undo_delete(self) -> None:
        conv_id = self._pending_delete
        if conv_id is None:
            return
        self._pending_delete = None
        self._undo_timer.stop()
        self.undo_bar.hide()
        self.services.conversations.restore(conv_id)
        self.open_conversation(conv_id)

    def _finish_delete(self) -> None:
        conv_id = self._pending_delete
        self._pending_delete = None
        self._undo_timer.stop()
        self.undo_bar.hide()
        if conv_id is not None:
            self.services.conversations.delete(conv_id)

    # search --------------------------------------------------------------------------------
    def focus_search(self) -> None:
        self.show_page("chat")
        self.search_box.setFocus()
        self.search_box.selectAll()

    def run_search(self) -> None:
        """Titles first (the quick switcher), then message hits, newest first."""
        self._search_timer.stop()
        query = self.search_box.text().strip()
        results = self.search_results
        results.clear()
        if not query:
            results.hide()
            self.conversation_list.show()
            return
        for conv in self.services.conversations.find(query, limit=10):
            item = QListWidgetItem(conv.title or "New chat")
            item.setData(ID_ROLE, conv.id)
            item.setData(MESSAGE_ROLE, None)
            item.setData(SNIPPET_ROLE, "")
            results.addItem(item)
        for hit in self.services.search.search(query, limit=50):
            speaker = "You" if hit.role == "user" else "Reply"
            item = QListWidgetItem(hit.conversation_title or "New chat")
            item.setData(ID_ROLE, hit.conversation_id)
            item.setData(MESSAGE_ROLE, hit.message_id)
            item.setData(SNIPPET_ROLE, f"{speaker}: {hit.snippet}")
            item.setToolTip(hit.snippet.replace("\x02", "").replace("\x03", ""))
            results.addItem(item)
        self.conversation_list.hide()
        results.show()
        if results.count():
            results.setCurrentRow(0)

    def _open_first_result(self) -> None:
        self.run_search()
        item = self.search_results.currentItem() or self.search_results.item(0)
        if item is not None:
            self._open_result(item)

    def _open_result(self, item: QListWidgetItem) -> None:
        conv_id = int(item.data(ID_ROLE))
        message_id = item.data(MESSAGE_ROLE)
        if message_id is not None:
            # a hit on another branch: show that branch
            self.services.conversations.activate(int(message_id))
        self.open_conversation(conv_id, int(message_id) if message_id is not None else None)

    def clear_search(self) -> None:
        self.search_box.clear()
        self.run_search()

    # export / import -----------------------------------------------------------------------
    def ask_save_path(self, title: str, suggested: str, filters: str) -> str | None:
        """Where to save (tests replace this to answer without a modal dialog)."""
        path, _ = QFileDialog.getSaveFileName(self, title, suggested, filters)
        return path or None

    def ask_open_path(self, title: str, filters: str) -> str | None:
        path, _ = QFileDialog.getOpenFileName(self, title, "", filters)
        return path or None

    def export_conversation(self, fmt: str, conversation_id: int | None = None) -> None:
        conv_id = conversation_id if conversation_id is not None else self._conversation_id
        conv = self.services.conversations.get(conv_id) if conv_id is not None else None
        if conv is None:
            self.status_label.setText("Open a conversation to export it.")
            return
        stem = "".join(c if c.isalnum() or c in " -_" else "_" for c in conv.title)[:60]
        suffix, filters = (".md", "Markdown (*.md)") if fmt == "md" else (".json", "JSON (*.json)")
        path = self.ask_save_path("Export conversation", (stem or "conversation") + suffix, filters)
        if not path:
            return
        store, stats = self.services.conversations, self.services.stats
        text = (
            to_markdown(store, stats, conv.id)
            if fmt == "md"
            else dumps(to_json(store, stats, conv.id))
        )
        try:
            Path(path).write_text(text, encoding="utf-8")
        except OSError as exc:
            self.status_label.setText(f"Could not write {path}: {exc.strerror or exc}")
            return
        self.status_label.setText(f"Exported “{conv.title}” to {path}")

    def import_conversation(self) -> None:
        path = self.ask_open_path("Import conversation", "SIMI Multi JSON (*.json)")
        if not path:
            return
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            conv_id = from_json(
                data, self.services.conversations, self.services.stats, self.services.agents
            )
        except (OSError, ValueError) as exc:
            message = str(exc) if isinstance(exc, ExportError) else f"{path}: {exc}"
            self.status_label.setText(f"Could not import: {message}")
            return
        self.open_conversation(conv_id)
        self.status_label.setText(f"Imported {Path(path).name}")

    # sending -------------------------------------------------------------------------------
    def _update_send_enabled(self) -> None:
        if self.controller.busy:
            self.send_button.setEnabled(True)
            return
        has_text = not self.composer.document().isEmpty()
        self.send_button.setEnabled(has_text and self._agent is not None)

    def _send_or_stop(self) -> None:
        if self.controller.busy:
            self.stop()
        else:
            self.send()

    def send(self) -> None:
        """Send the composer's text to the selected agent (Enter, or the Send button)."""
        if self.controller.busy or self._agent is None:
            return
        text = self.composer.toPlainText()
        if not text.strip():
            return
        agent = self._agent
        editing = self._editing
        try:
            if self._conversation_id is None:
                conv = self.services.conversations.create(agent.id)
                self._conversation_id = conv.id
            elif agent.id is not None:
                self.services.conversations.set_agent(self._conversation_id, agent.id)
            if editing is not None:
                turn = self.controller.edit(self._conversation_id, agent, editing, text)
            else:
                turn = self.controller.send(self._conversation_id, agent, text)
        except Exception:
            log.exception("could not start a turn")
            self.status_label.setText("Could not store the message; see the log for details.")
            return
        self.composer.clear()
        if editing is not None:
            self.cancel_edit()
            self._show_path()
            self.reload_conversations()
        else:
            self._show_new_turn(turn, with_user_message=True)

    def _show_new_turn(self, turn: Turn, with_user_message: bool) -> None:
        store = self.services.conversations
        if with_user_message:
            user = store.message(turn.user_message_id)
            if user is not None:
                self.transcript.add_message(user, None, store.versions_for([user]).get(user.id))
        reply = store.message(turn.assistant_message_id)
        if reply is not None:
            self.transcript.add_message(reply)
        self.transcript.scroll_to_bottom()
        self.reload_conversations()

    def stop(self) -> None:
        """Esc: stop a streaming reply, or leave editing."""
        if self.controller.busy:
            self.controller.stop()
        elif self._editing is not None:
            self.cancel_edit()
            self.composer.clear()

    def _agent_for(self, message_id: int) -> Agent | None:
        message = self.services.conversations.message(message_id)
        agent = None
        if message is not None and message.agent_id is not None:
            agent = self.services.agents.get(message.agent_id)
        return agent or self._agent

    def retry(
        self, message_id: int, *, agent: Agent | None = None, drop_oldest_turns: int = 0
    ) -> None:
        """Replace a failed reply with a new attempt by the agent that wrote it (or ``agent``),
        optionally leaving the oldest turns out of the request."""
        if self.controller.busy or self._conversation_id is None:
            return
        agent = agent or self._agent_for(message_id)
        if agent is None:
            return
        try:
            turn = self.controller.retry(
                self._conversation_id, agent, message_id, drop_oldest_turns=drop_oldest_turns
            )
        except Exception:
            log.exception("could not retry message %s", message_id)
            self.status_label.setText("Could not retry this message.")
            return
        self.transcript.remove_message(message_id)
        self._show_new_turn(turn, with_user_message=False)

    def fit_context(self, message_id: int, *, raise_n_ctx: bool) -> asyncio.Task[None] | None:
        """A reply failed with "context too long": drop the oldest turns (this request only)
        or raise the agent's n_ctx, then retry. Tokenizing runs off the GUI thread."""
        agent = self._agent_for(message_id)
        if self.controller.busy or self._conversation_id is None or agent is None:
            return None
        if not agent.is_local:
            self.status_label.setText("Only local agents can be refitted; start a new chat.")
            return None
        conversation_id = self._conversation_id
        self.status_label.setText("Counting tokens…")

        async def go() -> None:
            fit = await run_blocking(
                self.services.chat.plan_context_fit, conversation_id, agent, message_id
            )
            chosen = agent
            drop = 0
            if raise_n_ctx:
                chosen = await run_blocking(
                    self.services.agents.update, agent.with_changes(n_ctx=fit.raise_n_ctx_to)
                )
                self.reload_agents(select_id=chosen.id)
                note = f"Raised {chosen.name}'s context to {fit.raise_n_ctx_to:,} tokens."
            elif not fit.plan.fits:
                self.status_label.setText(
                    "Even the newest message alone does not fit in "
                    f"{fit.plan.n_ctx:,} tokens; use Raise context instead."
                )
                return
            else:
                drop = fit.plan.drop_turns
                note = f"Leaving out the {drop} oldest turn(s) for this reply."
            if self._conversation_id != conversation_id:
                return  # the person moved on meanwhile
            self.retry(message_id, agent=chosen, drop_oldest_turns=drop)
            self.status_label.setText(note)

        return start(go(), name="fit-context")

    def regenerate(self, message_id: int) -> None:
        """A new version of a reply by the selected agent; earlier versions stay (‹ 1/2 ›)."""
        if self.controller.busy or self._conversation_id is None or self._agent is None:
            return
        try:
            self.controller.regenerate(self._conversation_id, self._agent, message_id)
        except Exception:
            log.exception("could not regenerate message %s", message_id)
            self.status_label.setText("Could not regenerate this reply.")
            return
        self._show_path()

    def regenerate_last(self) -> None:
        last = self._last_reply()
        if last is not None:
            self.regenerate(last.id)

    def continue_reply(self, message_id: int) -> None:
        """Carry on a reply cut off by max tokens (or stopped); the text goes on in place."""
        if self.controller.busy or self._conversation_id is None:
            return
        agent = self._agent_for(message_id)
        if agent is None:
            return
        try:
            turn = self.controller.continue_reply(self._conversation_id, agent, message_id)
        except Exception:
            log.exception("could not continue message %s", message_id)
            self.status_label.setText("Could not continue this reply.")
            return
        message = self.services.conversations.message(message_id)
        if message is not None:
            self.transcript.update_message(message, None)
            bubble = self.transcript.bubble(message_id)
            if bubble is not None:
                bubble.set_streaming_text(turn.prefix)
            self.transcript.seed_live(message_id, turn.prefix)
        self.transcript.scroll_to_bottom()

    def edit_message(self, message_id: int) -> None:
        """Put a sent message back in the composer; sending makes a new branch."""
        if self.controller.busy:
            return
        message = self.services.conversations.message(message_id)
        if message is None or message.role != "user":
            return
        self._editing = message_id
        self.composer.setPlainText(message.content)
        self.edit_banner.show()
        self.composer.setFocus()
        cursor = self.composer.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.composer.setTextCursor(cursor)

    def cancel_edit(self) -> None:
        if self._editing is not None:
            self._editing = None
        self.edit_banner.hide()

    @property
    def editing(self) -> int | None:
        return self._editing

    def delete_message(self, message_id: int) -> None:
        if self.controller.busy:
            return
        if not self.confirm(
            "Delete message",
            "Delete this message? Its other versions and what follows it are kept.",
        ):
            return
        self.services.conversations.delete_message(message_id)
        self._show_path()
        self.reload_conversations()

    def switch_version(self, message_id: int, step: int) -> None:
        if self.controller.busy:
            return
        new_id = self.services.conversations.switch_version(message_id, step)
        if new_id is not None:
            self._show_path(focus_id=new_id)

    def _last_reply(self) -> Message | None:
        path = self.transcript.path
        return next((m for m in reversed(path) if m.role == "assistant"), None)

    def copy_last_reply(self) -> None:
        last = self._last_reply()
        if last is None:
            return
        message = self.services.conversations.message(last.id) or last
        QGuiApplication.clipboard().setText(message.content)
        self.status_label.setText("Copied the last reply.")

    def _on_message_action(self, action: str, message_id: int) -> None:
        if action == "copy":
            self.status_label.setText("Copied.")
        elif action == "regenerate":
            self.regenerate(message_id)
        elif action == "edit":
            self.edit_message(message_id)
        elif action == "delete":
            self.delete_message(message_id)
        elif action == "continue":
            self.continue_reply(message_id)
        elif action in ("fit_drop", "fit_raise"):
            self.fit_context(message_id, raise_n_ctx=action == "fit_raise")

    def open_settings(self) -> None:
        dialog = SettingsDialog(self.services.prefs, self)
        if dialog.exec():
            self.transcript.set_footer_mode(footer_mode(self.services.prefs))
            self.services.local.set_idle_unload(idle_unload_seconds(self.services.prefs))
        dialog.deleteLater()

    def show_shortcuts(self) -> ShortcutsSheet:
        sheet = ShortcutsSheet(self)
        sheet.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        sheet.show()
        return sheet

    def _on_busy(self, busy: bool) -> None:
        self.send_button.setText("Stop" if busy else "Send")
        self.send_button.setToolTip("Stop the reply (Esc)" if busy else "Send (Enter)")
        self.send_button.setProperty("streaming", busy)
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)
        self.transcript.set_busy(busy)
        self._update_send_enabled()

    def _on_turn_finished(self, turn: Turn) -> None:
        if self._closing:
            return
        if turn.conversation_id == self._conversation_id:
            store = self.services.conversations
            message = store.message(turn.assistant_message_id)
            if message is not None:
                stats = self.services.stats.for_message(message.id)
                versions = store.versions_for([message]).get(message.id)
                self.transcript.update_message(message, stats, versions)
        self.reload_conversations()

    # state ---------------------------------------------------------------------------------
    def _restore_state(self) -> None:
        prefs = self.services.prefs
        geometry = _decode(prefs.get(PREF_GEOMETRY))
        if geometry is None or not self.restoreGeometry(geometry):
            self.resize(1180, 780)
        splitter = _decode(prefs.get(PREF_SPLITTER))
        if splitter is None or not self.splitter.restoreState(splitter):
            self.splitter.setSizes([290, 890])
        sidebar = _decode(prefs.get(PREF_SIDEBAR))
        if sidebar is not None:
            self.sidebar_splitter.restoreState(sidebar)

    def save_state(self) -> None:
        try:
            self.services.prefs.update(
                {
                    PREF_GEOMETRY: _encode(self.saveGeometry()),
                    PREF_SPLITTER: _encode(self.splitter.saveState()),
                    PREF_SIDEBAR: _encode(self.sidebar_splitter.saveState()),
                }
            )
        except OSError as exc:
            log.warning("could not save window state: %s", exc)

    def closeEvent(self, event: QCloseEvent) -> None:
        """Save the layout, cancel a streaming reply (its partial text is kept), close."""
        if not self._closing:
            self._closing = True
            self._finish_delete()
            self.save_state()
            self.services.local.remove_listener(self._state_listener)
            self.controller.stop()
            self.closed.emit()
        event.accept()
