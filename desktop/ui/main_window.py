"""The main window: agents and conversations on the left, the conversation on the right."""

from __future__ import annotations

import base64
import logging

from PySide6.QtCore import QByteArray, QPoint, Qt, Signal
from PySide6.QtGui import QAction, QCloseEvent, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMenu,
    QMessageBox,
    QPushButton,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.chat.agents import KIND_LABELS
from desktop.chat.services import Services
from desktop.chat.session import Turn
from desktop.store.agents import Agent
from desktop.ui.agent_editor import AgentEditorDialog
from desktop.ui.chat_controller import ChatController
from desktop.ui.message_view import Transcript
from desktop.ui.resources import agent_badge, app_icon
from desktop.ui.text_format import relative_time
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

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.services = services
        self.controller = ChatController(services.chat, self)
        self._agents: list[Agent] = []
        self._agent: Agent | None = None
        self._conversation_id: int | None = None
        self._closing = False

        self.setWindowTitle("SIMI Multi")
        self.setWindowIcon(app_icon())
        self.setMinimumSize(720, 480)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("MainSplitter")
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self._build_sidebar())
        self.splitter.addWidget(self._build_chat_pane())
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.setCentralWidget(self.splitter)

        self.status_label = QLabel()
        self.status_label.setObjectName("StatusLine")
        self.statusBar().addWidget(self.status_label, 1)
        self.statusBar().setSizeGripEnabled(False)

        self.controller.busy_changed.connect(self._on_busy)
        self.controller.text_flushed.connect(self.transcript.stream_text)
        self.controller.status_changed.connect(self.status_label.setText)
        self.controller.turn_finished.connect(self._on_turn_finished)
        self.transcript.retry_requested.connect(self.retry)

        self._restore_state()
        self.reload_agents()
        self.new_chat()
        self._on_busy(False)
        self.composer.setFocus()

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
        conv_label = QLabel("CONVERSATIONS")
        conv_label.setObjectName("SectionLabel")
        conv_label.setContentsMargins(8, 0, 0, 4)
        conv_layout.addWidget(conv_label)
        self.conversation_list = QListWidget()
        self.conversation_list.setObjectName("ConversationList")
        self.conversation_list.setItemDelegate(TwoLineDelegate(self.conversation_list))
        self.conversation_list.setMouseTracking(True)
        self.conversation_list.currentItemChanged.connect(self._conversation_selected)
        conv_layout.addWidget(self.conversation_list)
        self.sidebar_splitter.addWidget(conv_box)
        self.sidebar_splitter.setStretchFactor(0, 0)
        self.sidebar_splitter.setStretchFactor(1, 1)
        layout.addWidget(self.sidebar_splitter, 1)

        new_chat = QAction("New chat", self)
        new_chat.setShortcut(QKeySequence.StandardKey.New)
        new_chat.triggered.connect(self.new_chat)
        self.addAction(new_chat)
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

    @staticmethod
    def _agent_subtitle(agent: Agent) -> str:
        kind = KIND_LABELS.get(agent.kind, agent.kind)
        return f"{kind} · {agent.model}" if agent.model else kind

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
            self.header_subtitle.setText(self._agent_subtitle(agent))
            self.header_badge.setPixmap(
                agent_badge(agent.name, agent.kind, 36, self.devicePixelRatioF())
            )
            self.composer.setPlaceholderText(f"Message {agent.name}…")
            self.transcript.set_agent_name(agent.name)
            if not self.controller.busy:
                self.status_label.setText(f"{agent.name} · ready")
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
        return AgentEditorDialog(self.services.agents, self.services.secrets, agent, self)

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
        names = {a.id: a.name for a in self._agents}
        self.conversation_list.blockSignals(True)
        self.conversation_list.clear()
        current_item = None
        for conv in self.services.conversations.list():
            agent_name = names.get(conv.agent_id, "deleted agent") if conv.agent_id else ""
            item = QListWidgetItem(conv.title or "New chat")
            item.setData(ID_ROLE, conv.id)
            when = relative_time(conv.updated_at)
            item.setData(SUBTITLE_ROLE, " · ".join(p for p in (agent_name, when) if p))
            item.setToolTip(conv.title or "New chat")
            self.conversation_list.addItem(item)
            if conv.id == self._conversation_id:
                current_item = item
        if current_item is not None:
            self.conversation_list.setCurrentItem(current_item)
        else:
            self.conversation_list.setCurrentRow(-1)
        self.conversation_list.blockSignals(False)

    def new_chat(self) -> None:
        """An empty conversation with the selected agent; stored on the first message."""
        self._conversation_id = None
        self.transcript.clear()
        self.reload_conversations()
        self._update_header()
        self.composer.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        conv = self.services.conversations.get(conversation_id)
        if conv is None:
            self.reload_conversations()
            return
        self._conversation_id = conversation_id
        if conv.agent_id is not None:
            self.select_agent(conv.agent_id)
        self.transcript.clear()
        messages = self.services.conversations.messages(conversation_id)
        stats = self.services.stats.for_messages([m.id for m in messages if m.role != "user"])
        turn = self.controller.turn
        for message in messages:
            bubble = self.transcript.add_message(message, stats.get(message.id))
            if turn is not None and message.id == turn.assistant_message_id:
                bubble.set_streaming_text(self.controller.text)
        self.transcript.scroll_to_bottom()
        self.reload_conversations()
        self._update_send_enabled()

    def _conversation_selected(self, current: QListWidgetItem | None, _previous: object) -> None:
        if current is not None:
            self.open_conversation(int(current.data(ID_ROLE)))

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
        try:
            if self._conversation_id is None:
                conv = self.services.conversations.create(agent.id)
                self._conversation_id = conv.id
            elif agent.id is not None:
                self.services.conversations.set_agent(self._conversation_id, agent.id)
            turn = self.controller.send(self._conversation_id, agent, text)
        except Exception:
            log.exception("could not start a turn")
            self.status_label.setText("Could not store the message; see the log for details.")
            return
        self.composer.clear()
        self._show_new_turn(turn, with_user_message=True)

    def _show_new_turn(self, turn: Turn, with_user_message: bool) -> None:
        store = self.services.conversations
        if with_user_message:
            user = store.message(turn.user_message_id)
            if user is not None:
                self.transcript.add_message(user)
        reply = store.message(turn.assistant_message_id)
        if reply is not None:
            self.transcript.add_message(reply)
        self.transcript.scroll_to_bottom()
        self.reload_conversations()

    def stop(self) -> None:
        self.controller.stop()

    def retry(self, message_id: int) -> None:
        """Replace a failed reply with a new attempt by the agent that wrote it."""
        if self.controller.busy or self._conversation_id is None:
            return
        failed = self.services.conversations.message(message_id)
        agent = None
        if failed is not None and failed.agent_id is not None:
            agent = self.services.agents.get(failed.agent_id)
        agent = agent or self._agent
        if agent is None:
            return
        try:
            turn = self.controller.retry(self._conversation_id, agent, message_id)
        except Exception:
            log.exception("could not retry message %s", message_id)
            self.status_label.setText("Could not retry this message.")
            return
        self.transcript.remove_message(message_id)
        self._show_new_turn(turn, with_user_message=False)

    def _on_busy(self, busy: bool) -> None:
        self.send_button.setText("Stop" if busy else "Send")
        self.send_button.setToolTip("Stop the reply" if busy else "Send (Enter)")
        self.send_button.setProperty("streaming", busy)
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)
        self._update_send_enabled()

    def _on_turn_finished(self, turn: Turn) -> None:
        if self._closing:
            return
        if turn.conversation_id == self._conversation_id:
            message = self.services.conversations.message(turn.assistant_message_id)
            if message is not None:
                stats = self.services.stats.for_message(message.id)
                self.transcript.update_message(message, stats)
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
            self.save_state()
            self.controller.stop()
            self.closed.emit()
        event.accept()
