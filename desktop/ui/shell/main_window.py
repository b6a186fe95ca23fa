"""The main window: menus, pages and window state around the sidebar and conversation panes.

The sidebar holds the agents (``AgentSidebar``) and the conversations (``ConversationBrowser``).
The "chat" page is a stack of ``ConversationPane``s, one per open conversation, so every
conversation streams on its own: switching conversations never stops, blocks or re-targets a
reply, and each pane keeps its own unsent draft. ``add_page(name, widget, label)`` adds another
page (e.g. Models) with a button in the sidebar's page bar; ``show_page(name)`` switches to it.

The window is built in two steps so that it paints before the data is read. ``MainWindow(prefs=
prefs)`` is the frame: title, menus, the sidebar's title and New chat button, the status line,
the saved size and split, all from this module's light imports (PySide6 and a few ``ui.kit`` /
``ui.shell`` modules). ``open(services)`` then fills it: the agent and conversation lists and
the chat page, whose modules (the store, the chat services, the conversation pane) are imported
there. ``MainWindow(services)`` does both at once (tests, benches). ``desktop.app`` shows the
frame, waits for its first paint, opens the store and calls ``open``.

Only the chat page is built when the window opens. The other pages are added as builders:
each is built when first shown (or asked for, e.g. ``window.stats_page``), and
``build_pages_when_idle`` builds the rest one per idle moment after start-up, after the
modules they need were loaded off the GUI thread (``desktop.preload``).
"""

from __future__ import annotations

import base64
import logging
from functools import partial
from typing import TYPE_CHECKING

from PySide6.QtCore import QByteArray, Qt, Signal
from PySide6.QtGui import QCloseEvent, QGuiApplication
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPushButton,
    QSplitter,
    QWidget,
)

from desktop.settings.prefs import Preferences
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.idle import WhenIdle
from desktop.ui.kit.resources import app_icon
from desktop.ui.kit.widgets import ask_text, confirm, plain_label, vbox
from desktop.ui.settings.appearance import footer_mode
from desktop.ui.shell.menus import build_menus
from desktop.ui.shell.page_bar import PageBar
from desktop.ui.shell.pages import LazyPage, PageBuilder, Pages
from desktop.ui.shell.shortcuts import ShortcutsSheet
from desktop.ui.shell.window_fit import keep_minimum_sizes

if TYPE_CHECKING:  # imported by ``open`` (the data's modules) or when first shown (the pages)
    import asyncio  # ~30 ms: the frame paints without it

    from desktop.chat.services import Services
    from desktop.store.agents import Agent
    from desktop.ui.compare.page import ComparePage
    from desktop.ui.conversation.pane import ConversationPane
    from desktop.ui.knowledge.page import KnowledgePage
    from desktop.ui.knowledge.watch import KnowledgeWatch
    from desktop.ui.models.page import ModelsPage
    from desktop.ui.server.page import ServerPage
    from desktop.ui.shell.keyring_notice import KeyringNotice
    from desktop.ui.shell.store_watch import StoreWatch
    from desktop.ui.stats.dashboard import StatsPage

log = logging.getLogger("simi.ui")

PREF_GEOMETRY = "ui.window_geometry"
PREF_SPLITTER = "ui.splitter_state"
PREF_SIDEBAR = "ui.sidebar_splitter_state"
IDLE_BUILD_MS = 1500  # without input before a page is built after start-up (it takes 50-100 ms)


def _encode(data: QByteArray) -> str:
    return base64.b64encode(bytes(data.data())).decode("ascii")


def _decode(text: object) -> QByteArray | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return QByteArray(base64.b64decode(text, validate=True))
    except ValueError:
        return None


# The modules of what is built after start (the pages, a reply's timeline): start-up loads
# them on a worker once the window has painted (desktop/preload.py), so a first show builds
# widgets only.
PAGE_MODULES = (
    "desktop.ui.stats.dashboard",
    "desktop.ui.stats.timeline_panel",
    "desktop.ui.compare.page",
    "desktop.ui.models.page",
    "desktop.ui.knowledge.page",
    "desktop.ui.server.page",
)


def _refresh(page: QWidget) -> None:
    """A page that reads the store reads it again when shown."""
    refresh = getattr(page, "refresh", None)
    if callable(refresh):
        refresh()


class MainWindow(QMainWindow):
    """Signals:
    closed(): once the window has closed (streaming replies stopped, state saved).
    model_state_changed(str, str): a llama.cpp worker state change, hopped onto this thread.
    """

    closed = Signal()
    model_state_changed = Signal(str, str)
    models_page: LazyPage[ModelsPage] = LazyPage("models")
    stats_page: LazyPage[StatsPage] = LazyPage("stats")
    compare_page: LazyPage[ComparePage] = LazyPage("compare")
    server_page: LazyPage[ServerPage] = LazyPage("server")
    knowledge_page: LazyPage[KnowledgePage] = LazyPage("knowledge")

    def __init__(
        self,
        services: Services | None = None,
        parent: QWidget | None = None,
        *,
        prefs: Preferences | None = None,
    ) -> None:
        """The frame (``prefs``: the window's saved size and split), then, given ``services``,
        ``open(services)``; one of the two is needed."""
        super().__init__(parent)
        if prefs is None:
            assert services is not None, "MainWindow needs services or prefs"
            prefs = services.prefs
        self._closing = False
        self._opened = False
        self._keyring_checked = False
        self._info_bar: KeyringNotice | None = None
        self._knowledge_watch: KnowledgeWatch | None = None
        self._footer_mode = footer_mode(prefs)

        self.setWindowTitle("SIMI Multi")
        self.setWindowIcon(app_icon())
        self.status_label = ElidedLabel()  # a long error never widens the window
        self.status_label.setObjectName("StatusLine")
        self.statusBar().addWidget(self.status_label, 1)
        self.statusBar().setSizeGripEnabled(False)
        self.page_bar = PageBar()  # one row of page buttons, or two in a narrow sidebar
        self.page_bar.hide()
        self.pages = Pages(self.page_bar)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("MainSplitter")
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self._build_sidebar())
        self.splitter.addWidget(self.pages)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        central = QWidget()  # the keyring notice, when due, goes above the splitter
        self._central_layout = vbox(central)
        self._central_layout.addWidget(self.splitter, 1)
        self.setCentralWidget(central)
        self._min_sizes = keep_minimum_sizes(self)  # 720x480 and a 220 px sidebar, x text size
        self._actions = build_menus(self)
        self._restore_frame(prefs)
        if services is not None:
            self.open(services)

    def open(self, services: Services) -> None:
        """Fill the frame: the agents, the conversations and an empty chat with the first agent
        (or the one of the conversation shown); then follow the store's changes."""
        from desktop.store.watch import ChangeWatch
        from desktop.ui.agents.sidebar import AgentSidebar
        from desktop.ui.conversation.browser import ConversationBrowser
        from desktop.ui.shell.store_watch import watch_store

        assert not self._opened, "the window is open already"
        self._opened = True
        self.services = services
        self.agents = AgentSidebar(
            services,
            confirm=lambda title, text: self.confirm(title, text),
            is_answering=lambda agent_id: self.pane_stack.agent_answering(agent_id),
        )
        self.browser = ConversationBrowser(
            services,
            ask_text=lambda *args: self.ask_text(*args),
            is_streaming=lambda conv_id: self.pane_stack.is_streaming(conv_id),
        )
        self._fill_sidebar()
        self.add_page("chat", self._build_chat_page(), "Chat")
        self.add_page("models", self._build_models_page, "Models")
        self.add_page("stats", self._build_stats_page, "Stats")
        self.add_page("compare", self._build_compare_page, "Compare")
        self.add_page("server", self._build_server_page, "Server")
        self.add_page("knowledge", self._build_knowledge_page, "Knowledge")

        emit_state = self.model_state_changed.emit
        self._state_listener = lambda state, detail: emit_state(state, detail)
        services.local.add_listener(self._state_listener)
        self.model_state_changed.connect(self._on_model_state)
        self.agents.agent_activated.connect(self._agent_chosen)
        self.agents.agents_changed.connect(self.reload_agents)
        self.agents.status.connect(self._say)
        self.browser.open_requested.connect(self.open_conversation)
        self.browser.deleted.connect(self._conversation_deleted)
        self.browser.export_requested.connect(self.export_conversation)
        self.browser.status.connect(self._say)

        sidebar = _decode(services.prefs.get(PREF_SIDEBAR))
        if sidebar is not None:
            self.sidebar_splitter.restoreState(sidebar)
        self.reload_agents()
        self.new_chat()
        # what the CLI or another window changes shows
        self.store_watch: StoreWatch = watch_store(ChangeWatch(services.db.conn), self, self.closed)
        self.store_watch.changed.connect(self.refresh_from_store)

    @property
    def opened(self) -> bool:
        """``open(services)`` has filled the frame."""
        return self._opened

    # pages -----------------------------------------------------------------------------------
    def add_page(self, name: str, page: QWidget | PageBuilder, label: str | None = None) -> None:
        """Add a right-hand page with a button in the sidebar's page bar ("chat" is first);
        ``page``: the widget, or a function that builds it when the page is first shown."""
        self.pages.add(name, page, label or name.title(), partial(self.show_page, name))

    def page(self, name: str) -> QWidget:
        return self.pages.page(name)

    def page_built(self, name: str) -> bool:
        return self.pages.built(name)

    def build_pages_when_idle(self, quiet_ms: int = IDLE_BUILD_MS) -> WhenIdle:
        """The pages not built yet, one per quiet moment; the server page at once when it
        starts with the app."""
        from desktop.serve.config import PREF_AUTOSTART as PREF_SERVER_AUTOSTART

        if self.services.prefs.get(PREF_SERVER_AUTOSTART, False):
            self.page("server")
        idle = self.pages.build_when_idle(lambda: self.busy or self._closing, quiet_ms)
        self.closed.connect(idle.stop)
        if not self._closing:
            self.knowledge_watch.start()  # indexed collections kept up to date from now on
        return idle

    def _build_models_page(self) -> QWidget:
        from desktop.ui.models.page import ModelsPage

        page = ModelsPage(self.services)
        page.agent_created.connect(lambda _agent: self.reload_agents())
        return page

    def _build_stats_page(self) -> QWidget:
        from desktop.ui.stats.dashboard import StatsPage

        page = StatsPage(
            self.services,
            open_reply=lambda conv_id, focus_id: self.open_conversation(conv_id, focus_id),
            ask_save_path=lambda *args: self.ask_save_path(*args),
            parent=self.pages,  # built in place: each child is styled once, as it is added
        )
        page.status.connect(self._say)
        return page

    def _build_compare_page(self) -> QWidget:
        from desktop.ui.compare.page import ComparePage

        page = ComparePage(self.services, self.ask_save_path, self.ask_open_path, self.pages)
        page.continue_requested.connect(self._continue_compared)
        return page

    @property
    def knowledge_watch(self) -> KnowledgeWatch:
        """Indexing runs and the watch over indexed collections' folders (made on first use;
        watching from ``build_pages_when_idle``, after the first paint)."""
        if self._knowledge_watch is None:
            from desktop.ui.knowledge.watch import KnowledgeWatch

            assert self.services.knowledge is not None
            self._knowledge_watch = KnowledgeWatch(self.services.knowledge, self)
            self.closed.connect(self._knowledge_watch.stop)
        return self._knowledge_watch

    def _build_knowledge_page(self) -> QWidget:
        from desktop.ui.knowledge.page import KnowledgePage

        page = KnowledgePage(self.services, self.knowledge_watch)
        page.status.connect(self._say)
        return page

    def _build_server_page(self) -> QWidget:
        from desktop.ui.server.page import ServerPage

        page = ServerPage(self.services)
        page.status.connect(self._say)
        return page

    # the keyring notice ----------------------------------------------------------------------
    @property
    def info_bar(self) -> KeyringNotice | None:
        """The notice across the top when no real keyring is available. Checked once: after
        the first paint, once the keyring's backend was chosen off the GUI thread
        (``desktop.preload``); asked for sooner, it is chosen now."""
        if not self._keyring_checked:
            from desktop.ui.shell.keyring_notice import add_keyring_notice

            self._keyring_checked = True
            self._info_bar = add_keyring_notice(
                self._central_layout, self.services.secrets, self.services.prefs
            )
        return self._info_bar

    def show_page(self, name: str) -> None:
        self.pages.show_page(name, _refresh)

    @property
    def current_page(self) -> str:
        return self.pages.current

    def _build_sidebar(self) -> QWidget:
        """The sidebar's frame: the app's title, New chat and the page bar; ``open`` puts the
        agent and conversation lists between them."""
        sidebar = QWidget()
        sidebar.setObjectName("Sidebar")
        layout = vbox(sidebar, (8, 12, 8, 8), 8)
        title_row = QHBoxLayout()
        title_row.setContentsMargins(8, 0, 8, 0)
        icon = QLabel()
        icon.setPixmap(app_icon().pixmap(22, 22))
        title = plain_label("SIMI Multi", "AppTitle")
        title_row.addWidget(icon)
        title_row.addWidget(title, 1)
        layout.addLayout(title_row)
        self.new_chat_button = QPushButton("+  New chat")
        self.new_chat_button.setObjectName("PrimaryButton")
        self.new_chat_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.new_chat_button.setToolTip("Start a new conversation (Ctrl+N)")
        self.new_chat_button.clicked.connect(lambda: self.new_chat())
        layout.addWidget(self.new_chat_button)
        self._lists_at = layout.count()  # where ``open`` puts the lists
        layout.addStretch(1)  # holds their place in the frame
        layout.addWidget(self.page_bar)
        self._sidebar_layout = layout
        return sidebar

    def _fill_sidebar(self) -> None:
        self.sidebar_splitter = QSplitter(Qt.Orientation.Vertical)
        self.sidebar_splitter.setChildrenCollapsible(False)
        self.sidebar_splitter.setHandleWidth(1)
        self.sidebar_splitter.addWidget(self.agents)
        self.sidebar_splitter.addWidget(self.browser)
        self.sidebar_splitter.setStretchFactor(0, 0)
        self.sidebar_splitter.setStretchFactor(1, 1)
        self._sidebar_layout.takeAt(self._lists_at)  # the frame's stretch
        self._sidebar_layout.insertWidget(self._lists_at, self.sidebar_splitter, 1)

    def _build_chat_page(self) -> QWidget:
        from desktop.ui.shell.pane_stack import PaneStack

        page = QWidget()
        layout = vbox(page)
        self.pane_stack = PaneStack(self._make_pane)
        self.pane_stack.shown_status.connect(self.status_label.setText)
        self.pane_stack.shown_agent.connect(self.agents.highlight)
        self.pane_stack.listing_changed.connect(self._conversation_listed)
        layout.addWidget(self.pane_stack, 1)
        return page

    # panes -----------------------------------------------------------------------------------
    @property
    def pane(self) -> ConversationPane:
        """The conversation shown on the chat page."""
        shown = self.pane_stack.shown
        assert shown is not None
        return shown

    @property
    def panes(self) -> list[ConversationPane]:
        return self.pane_stack.panes

    @property
    def current_agent(self) -> Agent | None:
        shown = self.pane_stack.shown
        return shown.agent if shown is not None else None

    @property
    def conversation_id(self) -> int | None:
        shown = self.pane_stack.shown
        return shown.conversation_id if shown is not None else None

    @property
    def busy(self) -> bool:
        """Some conversation has a reply streaming (or a comparison, or a prompt set runs)."""
        if not self._opened:
            return False
        return any(p.busy for p in self.panes) or (
            self.page_built("compare") and self.compare_page.busy
        )

    def _make_pane(
        self, agent: Agent | None, conversation_id: int | None, parent: QWidget
    ) -> ConversationPane:
        from desktop.ui.conversation.pane import ConversationPane

        return ConversationPane(
            self.services,
            agent,
            conversation_id,
            agents=lambda: self.agents.agents,
            confirm=lambda title, text: self.confirm(title, text),
            footer_mode=self._footer_mode,
            parent=parent,
        )

    def _shown_pane_changed(self) -> None:
        pane = self.pane_stack.shown
        if pane is None or self._closing:
            return
        self.agents.highlight(pane.agent)
        self.browser.show_current(pane.conversation_id)
        self.status_label.setText(pane.presenter.status)
        self.show_page("chat")

    def _conversation_listed(self, conversation_id: int | None) -> None:
        """A conversation's title or activity changed: its row moves (the list is not read
        again: 10,000 rows took ~50 ms of each Send)."""
        if self._closing:
            return
        if conversation_id is None:
            self._reload_list()
        else:
            self.browser.update_row(conversation_id, current=self.conversation_id)

    def _reload_list(self) -> None:
        if not self._closing:
            self.browser.reload(current=self.conversation_id)

    def new_chat(self, agent: Agent | None = None) -> None:
        """An empty conversation (stored on its first message) with ``agent``, or with the
        agent of the conversation shown, or the first agent."""
        agent = agent or self.current_agent or next(iter(self.agents.agents), None)
        self.pane_stack.new_chat(agent)
        self._shown_pane_changed()

    def open_conversation(self, conversation_id: int, focus_id: int | None = None) -> None:
        """Show a conversation in its own pane (a streaming one keeps streaming)."""
        conv = self.services.conversations.get(conversation_id)
        if conv is None or conv.deleted_at is not None:
            self._reload_list()
            return
        agent = self.agents.by_id(conv.agent_id) or self._last_agent_of(conversation_id)
        self.pane_stack.open(conversation_id, agent, focus_id)
        self._shown_pane_changed()

    def _continue_compared(self, conversation_id: int) -> None:
        self.open_conversation(conversation_id)
        self.show_page("chat")

    def _last_agent_of(self, conversation_id: int) -> Agent | None:
        """The agent of the newest message still around (the conversation's own was deleted)."""
        for agent_id in self.services.conversations.agents_newest_first(conversation_id):
            agent = self.agents.by_id(agent_id)
            if agent is not None:
                return agent
        return None

    def refresh_from_store(self) -> None:
        """Another door (the ``simi`` command, a second window) changed the database: read the
        agents (sidebar, each pane's agent, "Switch agent") and the conversation list again,
        keeping the highlighted agent, the conversation shown and both lists' scroll
        positions. An open conversation deleted elsewhere closes as if deleted here; one
        still streaming a reply is left to finish."""
        views = [self.agents.agent_list, self.browser.conversation_list]
        kept = [(view, view.verticalScrollBar().value()) for view in views]
        if self.services.agents.list() != self.agents.agents:
            self.reload_agents()  # sidebar, each pane's agent, and the conversation list
        else:
            self.browser.reload(current=self.conversation_id)
        for view, value in kept:
            view.verticalScrollBar().setValue(value)
        store = self.services.conversations
        for pane in list(self.panes):
            conv_id = pane.conversation_id
            if conv_id is None or pane.busy:
                continue
            conv = store.get(conv_id)
            if conv is None or conv.deleted_at is not None:
                self._conversation_deleted(conv_id)

    def _conversation_deleted(self, conversation_id: int) -> None:
        pane = self.pane_stack.forget(conversation_id)
        if pane is None:
            return
        if pane is self.pane_stack.shown:
            self.new_chat()
        self.pane_stack.close_pane(pane)

    # agents ----------------------------------------------------------------------------------
    def reload_agents(self) -> None:
        agents = self.agents.reload()
        by_id = {a.id: a for a in agents if a.id is not None}
        for pane in self.panes:
            pane.presenter.refresh_agent(by_id)
            pane.reread_collections()  # a knowledge collection ticked or not, nothing else
        if self.page_built("compare"):
            self.compare_page.refresh_agents(by_id)
        new = self.pane_stack.new_pane
        if new is not None and new.agent is None and agents:
            new.set_agent(agents[0])
        self.browser.reload(agents, current=self.conversation_id)
        shown = self.pane_stack.shown
        if shown is not None:
            self.agents.highlight(shown.agent)

    def select_agent(self, agent_id: int) -> None:
        """Choose an agent as in the sidebar."""
        self.agents.choose(agent_id)

    def _agent_chosen(self, agent_id: int) -> None:
        """Open (or start) a conversation with the agent; never re-target the one shown."""
        agent = self.agents.by_id(agent_id)
        if agent is None or (agent == self.current_agent and self.current_page == "chat"):
            return
        self.new_chat(agent)  # the new chat, if one is open and unsent, now starts with it

    def model_state_of(self, agent: Agent) -> str | None:
        from desktop.chat import agent_status

        return agent_status.model_state(self.services.local, agent)

    def _on_model_state(self, _state: str, _detail: str) -> None:
        self.agents.refresh_states()
        for pane in self.panes:
            pane.refresh_header()
        shown = self.pane_stack.shown
        if not self._closing and shown is not None:
            self.status_label.setText(shown.presenter.status)

    # window actions (menus and shortcuts) ----------------------------------------------------
    def _say(self, text: str) -> None:
        self.status_label.setText(text)

    def stop(self) -> None:
        """Esc: stop the shown conversation's reply (only that one), or leave editing."""
        self.pane.stop()

    def regenerate_last(self) -> None:
        last = self.pane.last_reply()
        if last is not None:
            self.pane.presenter.regenerate(last.id)

    def copy_last_reply(self) -> None:
        last = self.pane.last_reply()
        if last is None:
            return
        message = self.services.conversations.message(last.id) or last
        QGuiApplication.clipboard().setText(message.content)
        self._say("Copied the last reply.")

    def show_stats(self) -> None:
        self.show_page("stats")

    def focus_search(self) -> None:
        self.show_page("chat")
        self.browser.focus_search()

    def rename_current(self) -> None:
        if self.conversation_id is not None:
            self.browser.rename(self.conversation_id)

    def export_conversation(
        self, fmt: str, conversation_id: int | None = None
    ) -> asyncio.Task[None] | None:
        from desktop.ui.shell import transfer

        return transfer.export_conversation(
            self.services,
            fmt,
            conversation_id or self.conversation_id,
            ask_save_path=self.ask_save_path,
            say=self._say,
        )

    def import_conversation(self) -> asyncio.Task[None] | None:
        from desktop.ui.shell import transfer

        return transfer.import_conversation(
            self.services,
            ask_open_path=self.ask_open_path,
            say=self._say,
            opened=self.open_conversation,
        )

    def open_settings(self) -> None:
        from desktop.chat.services import idle_unload_seconds
        from desktop.ui.settings.dialog import SettingsDialog

        dialog = SettingsDialog.for_services(self.services, self)
        if dialog.exec():
            self._footer_mode = footer_mode(self.services.prefs)
            compared = self.compare_page.panes if self.page_built("compare") else []
            for pane in [*self.panes, *compared]:
                pane.transcript.set_footer_mode(self._footer_mode)
            self.services.local.set_idle_unload(idle_unload_seconds(self.services.prefs))
        dialog.deleteLater()

    def show_shortcuts(self) -> ShortcutsSheet:
        sheet = ShortcutsSheet(self)
        sheet.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        sheet.show()
        return sheet

    # questions (tests replace these to answer without a modal dialog) -------------------------
    def confirm(self, title: str, text: str) -> bool:
        return confirm(self, title, text)

    def ask_text(self, title: str, label: str, text: str) -> str | None:
        value, ok = ask_text(self, title, label, text)
        return value if ok else None

    def ask_save_path(self, title: str, suggested: str, filters: str) -> str | None:
        from desktop.ui.shell import transfer

        where = transfer.proposed_path(self.services, suggested)
        path, _ = QFileDialog.getSaveFileName(self, title, where, filters)
        return path or None

    def ask_open_path(self, title: str, filters: str, folder: str = "") -> str | None:
        path, _ = QFileDialog.getOpenFileName(self, title, folder, filters)
        return path or None

    # state -----------------------------------------------------------------------------------
    def _restore_frame(self, prefs: Preferences) -> None:
        geometry = _decode(prefs.get(PREF_GEOMETRY))
        if geometry is None or not self.restoreGeometry(geometry):
            self.resize(1180, 780)
        splitter = _decode(prefs.get(PREF_SPLITTER))
        if splitter is None or not self.splitter.restoreState(splitter):
            self.splitter.setSizes([290, 890])

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

    async def wait_idle(self) -> None:
        """Until every streaming reply has finished and been stored."""
        import asyncio

        if not self._opened:
            return
        await asyncio.gather(*(pane.presenter.wait() for pane in self.panes))
        if self.page_built("compare"):
            await self.compare_page.wait_idle()
        if self.page_built("server"):
            await self.server_page.stop()  # API calls under way end as cancelled
        if self._knowledge_watch is not None:
            await self._knowledge_watch.runs.wait()  # cancelled as the window closed

    def closeEvent(self, event: QCloseEvent) -> None:
        """Save the layout, stop every streaming reply (partial text is kept), close."""
        if not self._closing and not self._opened:  # closed before the data was read
            self._closing = True
            self.closed.emit()
        elif not self._closing:
            self._closing = True
            self.browser.finish_delete()
            self.save_state()
            self.services.local.remove_listener(self._state_listener)
            for pane in self.panes:
                pane.presenter.stop()
            if self.page_built("compare"):
                self.compare_page.stop()
            self.closed.emit()
        event.accept()
