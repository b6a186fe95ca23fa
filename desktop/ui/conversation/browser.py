"""The sidebar's conversations: the list (filtered by agent), search, rename, pin, and delete
with a few seconds of Undo before the conversation is gone for good."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from PySide6.QtCore import QModelIndex, QPoint, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLineEdit,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QWidget,
)

from desktop.chat.services import Services
from desktop.store.agents import Agent
from desktop.ui.conversation.listing import (
    MESSAGE_ROLE,
    SNIPPET_ROLE,
    ConversationList,
    SearchResults,
)
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.resources import icon as resource_icon
from desktop.ui.kit.widgets import ID_ROLE, InfoBar, vbox

UNDO_DELETE_MS = 10_000  # how long "Undo" is offered after deleting a conversation
SEARCH_DEBOUNCE_MS = 150


class ConversationBrowser(QWidget):
    """Signals:
    open_requested(int, object): open a conversation (id), scrolled to a message id or None.
    deleted(int): a conversation went to the trash (its pane should close).
    export_requested(str, int): "md" or "json", conversation id.
    status(str): a line for the status bar.
    """

    open_requested = Signal(int, object)
    deleted = Signal(int)
    export_requested = Signal(str, int)
    status = Signal(str)

    def __init__(
        self,
        services: Services,
        *,
        ask_text: Callable[[str, str, str], str | None],
        is_streaming: Callable[[int], bool],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.services = services
        self._ask_text = ask_text
        self._is_streaming = is_streaming  # a conversation with a reply streaming
        self._agents: list[Agent] = []
        self._agent_filter: int | None = None
        self._current: int | None = None
        self._pending_delete: int | None = None

        layout = vbox(self, (0, 8, 0, 0), 4)
        header = QHBoxLayout()
        header.setContentsMargins(8, 0, 0, 4)
        label = ElidedLabel("CONVERSATIONS")  # the sidebar's width is the person's
        label.setObjectName("SectionLabel")
        header.addWidget(label, 1)
        self.agent_filter = QComboBox()
        self.agent_filter.setObjectName("AgentFilter")
        # a long agent name elides in the box instead of widening the sidebar
        self.agent_filter.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.agent_filter.setMinimumContentsLength(7)
        self.agent_filter.setToolTip("Show the conversations of one agent")
        self.agent_filter.currentIndexChanged.connect(self._filter_changed)
        header.addWidget(self.agent_filter)
        layout.addLayout(header)

        self._search_timer = QTimer(self)
        self._search_timer.setSingleShot(True)
        self._search_timer.setInterval(SEARCH_DEBOUNCE_MS)
        self._search_timer.timeout.connect(self.run_search)
        self.search_box = QLineEdit()
        self.search_box.setObjectName("SearchBox")
        self.search_box.setAccessibleName("Search conversations")
        self.search_box.setPlaceholderText("Search all conversations")
        self.search_box.setClearButtonEnabled(True)
        self.search_box.addAction(
            resource_icon("search.svg"), QLineEdit.ActionPosition.LeadingPosition
        )
        self.search_box.textChanged.connect(lambda _t: self._search_timer.start())
        self.search_box.returnPressed.connect(self._open_first_result)
        layout.addWidget(self.search_box)

        self.conversation_list = ConversationList()
        self.conversation_list.setObjectName("ConversationList")
        self.conversation_list.setMouseTracking(True)
        self.conversation_list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.conversation_list.customContextMenuRequested.connect(self._menu)
        self.conversation_list.selectionModel().currentChanged.connect(self._selected)
        layout.addWidget(self.conversation_list, 1)
        self.search_results = SearchResults()
        self.search_results.itemActivated.connect(self._open_result)
        self.search_results.itemClicked.connect(self._open_result)
        self.search_results.hide()
        layout.addWidget(self.search_results, 1)

        self._undo_timer = QTimer(self)
        self._undo_timer.setSingleShot(True)
        self._undo_timer.setInterval(UNDO_DELETE_MS)
        self._undo_timer.timeout.connect(self.finish_delete)
        self.undo_bar = InfoBar("")
        self.undo_bar.setObjectName("UndoBar")
        self.undo_button = QPushButton("Undo")
        self.undo_button.setObjectName("UndoButton")
        self.undo_button.clicked.connect(self.undo_delete)
        self.undo_bar.row.insertWidget(1, self.undo_button)
        self.undo_bar.dismissed.connect(self.finish_delete)
        self.undo_bar.hide()
        layout.addWidget(self.undo_bar)

    # the list --------------------------------------------------------------------------------
    def reload(self, agents: list[Agent] | None = None, current: int | None = None) -> None:
        """Refill the list (and the agent filter); ``current`` is the shown conversation."""
        if agents is not None:
            self._agents = agents
        names = {a.id: a.name for a in self._agents if a.id is not None}
        self._fill_agent_filter()
        rows = self.services.conversations.list(self._agent_filter)
        with self._quiet_selection():
            self.conversation_list.list_model.set_rows(rows, names)
            self._mark(current)

    def update_row(self, conversation_id: int, current: int | None = None) -> None:
        """One conversation changed (title, activity, first message stored): its row is
        read, put where the list's order wants it (or dropped, when deleted or filtered out),
        and ``current`` stays marked. The rest of the list is not read again."""
        conv = self.services.conversations.get(conversation_id)
        shown = (
            conv is not None
            and conv.deleted_at is None
            and (self._agent_filter is None or conv.agent_id == self._agent_filter)
        )
        with self._quiet_selection():
            self.conversation_list.list_model.place(conv if shown else None, conversation_id)
            self._mark(current)

    def show_current(self, current: int | None) -> None:
        """Mark the shown conversation in the list as it is (a conversation not listed yet,
        e.g. just stored: the list is read again)."""
        if current is not None and self.conversation_list.list_model.row_of(current) < 0:
            self.reload(current=current)
            return
        with self._quiet_selection():
            self._mark(current)

    @contextmanager
    def _quiet_selection(self) -> Iterator[None]:
        """List changes that must not read as the person picking a row (no open_requested)."""
        selection = self.conversation_list.selectionModel()
        selection.blockSignals(True)
        try:
            yield
        finally:
            selection.blockSignals(False)

    def _mark(self, current: int | None) -> None:
        self._current = current
        view = self.conversation_list
        view.setCurrentRow(view.list_model.row_of(current))

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
        self.reload(current=self._current)

    def _filter_changed(self, index: int) -> None:
        data = self.agent_filter.itemData(index)
        self._agent_filter = int(data) if data is not None else None
        self.reload(current=self._current)

    def _selected(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.open_requested.emit(int(current.data(ID_ROLE)), None)

    def _menu(self, pos: QPoint) -> None:
        index = self.conversation_list.indexAt(pos)
        if not index.isValid():
            return
        conv_id = int(index.data(ID_ROLE))
        conv = self.services.conversations.get(conv_id)
        if conv is None:
            return
        menu = QMenu(self)
        menu.addAction("Rename…", lambda: self.rename(conv_id))
        menu.addAction("Unpin" if conv.pinned else "Pin", lambda: self.toggle_pin(conv_id))
        menu.addSeparator()
        menu.addAction("Export as Markdown…", lambda: self.export_requested.emit("md", conv_id))
        menu.addAction("Export as JSON…", lambda: self.export_requested.emit("json", conv_id))
        menu.addSeparator()
        menu.addAction("Delete", lambda: self.delete(conv_id))
        menu.popup(self.conversation_list.viewport().mapToGlobal(pos))

    # actions ---------------------------------------------------------------------------------
    def rename(self, conversation_id: int) -> None:
        conv = self.services.conversations.get(conversation_id)
        if conv is None:
            return
        title = self._ask_text("Rename conversation", "Title:", conv.title)
        if title is None or not title.strip():
            return
        self.services.conversations.rename(conversation_id, " ".join(title.split()))
        self.reload(current=self._current)

    def toggle_pin(self, conversation_id: int) -> None:
        conv = self.services.conversations.get(conversation_id)
        if conv is not None:
            self.services.conversations.set_pinned(conversation_id, not conv.pinned)
            self.reload(current=self._current)

    def delete(self, conversation_id: int) -> None:
        """Hide it at once; "Undo" brings it back for a few seconds, then it is gone."""
        if self._is_streaming(conversation_id):
            self.status.emit("Stop the reply before deleting its conversation.")
            return
        self.finish_delete()
        conv = self.services.conversations.get(conversation_id)
        if conv is None:
            return
        self.services.conversations.trash(conversation_id)
        self._pending_delete = conversation_id
        self.undo_bar.label.setText(f"Deleted “{conv.title or 'New chat'}”.")
        self.undo_bar.show()
        self._undo_timer.start()
        self.deleted.emit(conversation_id)
        self.reload(current=None if self._current == conversation_id else self._current)

    def undo_delete(self) -> None:
        conv_id = self._pending_delete
        if conv_id is None:
            return
        self._pending_delete = None
        self._undo_timer.stop()
        self.undo_bar.hide()
        self.services.conversations.restore(conv_id)
        self.open_requested.emit(conv_id, None)

    def finish_delete(self) -> None:
        conv_id = self._pending_delete
        self._pending_delete = None
        self._undo_timer.stop()
        self.undo_bar.hide()
        if conv_id is not None:
            self.services.conversations.delete(conv_id)

    # search ----------------------------------------------------------------------------------
    def focus_search(self) -> None:
        self.search_box.setFocus()
        self.search_box.selectAll()

    def run_search(self) -> None:
        """Titles first (the quick switcher), then message hits, newest first."""
        self._search_timer.stop()
        query = self.search_box.text().lstrip()  # a trailing space asks for whole words
        results = self.search_results
        results.clear()
        if not query.strip():
            results.hide()
            self.conversation_list.show()
            return
        for conv in self.services.conversations.find(query.strip(), limit=10):
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
        if message_id is not None and not self._is_streaming(conv_id):
            # a hit on another branch: show that branch (not under a streaming reply)
            self.services.conversations.activate(int(message_id))
        self.open_requested.emit(conv_id, int(message_id) if message_id is not None else None)

    def clear_search(self) -> None:
        self.search_box.clear()
        self.run_search()
