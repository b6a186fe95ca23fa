"""A conversation pane: header + transcript + composer over one ``ConversationPresenter``.

A pane owns one conversation with one agent; a window can hold many (the main window keeps one
per open conversation, a compare view puts several side by side). Each keeps its own draft,
streams on its own, and its Stop stops only its own reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QLabel,
    QMenu,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.chat import agent_status
from desktop.chat.context_offer import ContextChoice, ContextOffer
from desktop.chat.kinds import badge_color
from desktop.chat.services import Services
from desktop.chat.session import Turn
from desktop.store.agents import Agent
from desktop.store.attachments import Attachment
from desktop.store.conversations import Message
from desktop.ui.conversation.attach_send import composer_box
from desktop.ui.conversation.context_fit import (
    COMPOSER_HINT,
    FIT_CHECK_MS,
    choose_context,
    fit_warning,
)
from desktop.ui.conversation.presenter import ConversationPresenter, final_message
from desktop.ui.conversation.tool_cards import person_is_typing, reveal
from desktop.ui.conversation.transcript import Transcript
from desktop.ui.kit.async_door import loop_running, run_blocking, start
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.resources import agent_badge
from desktop.ui.kit.widgets import InfoBar, hbox, plain, vbox

log = logging.getLogger("simi.ui.pane")

LONG_PATH = 400  # a branch longer than this is read on a worker thread (show_path)


def _at_once(job: Callable[[], None]) -> None:
    job()


HEADER_BADGE_PX = 36


class ConversationPane(QWidget):
    """One conversation: its header names the agent that answers, the composer sends to it.
    The window listens to ``presenter``'s signals (status, agent, listing, stored)."""

    def __init__(
        self,
        services: Services,
        agent: Agent | None,
        conversation_id: int | None = None,
        *,
        agents: Callable[[], list[Agent]] = list,
        confirm: Callable[[str, str], bool] | None = None,
        footer_mode: str = "always",
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ChatPane")
        self.services = services
        self.presenter = ConversationPresenter(services, agent, conversation_id, self)
        self._agents = agents  # the agents "Switch agent" and "Regenerate with…" offer
        self._confirm = confirm or (lambda _title, _text: True)
        self._shown_name: str | None = None  # set_shown_name: replies named this instead
        self._composer_shown = True  # set_composer_visible
        self._note = ""  # words for the composer's hint until the next edit (say_in_composer)
        self._path_load = 0  # show_path calls so far: only the latest one's branch is shown
        # agent id -> the knowledge collections it searches, by name (read off the GUI thread
        # each time the agent is shown: an edit in the editor or the CLI shows at once)
        self._searches: dict[int, tuple[str, ...]] = {}
        # Where the end of a reply is shown (its final render, the stats footer): at once, or,
        # for a host that ends several replies together (the compare view), in its queue.
        self.finish_later: Callable[[Callable[[], None]], None] = _at_once
        self.path_loading: asyncio.Task[None] | None = None  # a long branch being read

        # top-down: each part is a child of the pane before it fills, so a widget is styled
        # once, as it is added, not again when a finished part moves in
        layout = vbox(self)
        self.header = self._build_header()
        layout.addWidget(self.header)
        self.transcript = Transcript(self)
        self.transcript.files = services.attachments  # thumbnails, documents opened
        self.transcript.set_footer_mode(footer_mode)
        layout.addWidget(self.transcript, 1)
        self.composer_area = self._build_composer()
        layout.addWidget(self.composer_area)

        p = self.presenter
        p.agent_changed.connect(self._show_agent)
        p.busy_changed.connect(self._on_busy)
        p.turn_started.connect(self._on_turn_started)
        p.text_appended.connect(self.transcript.append_text)
        p.reasoning_appended.connect(self.transcript.append_reasoning)
        p.waiting_changed.connect(self.transcript.set_waiting)
        p.turn_finished.connect(self._turn_finished)
        p.path_changed.connect(lambda focus: self.show_path(focus))
        p.message_removed.connect(self.transcript.remove_message)
        p.tool_step_changed.connect(self.transcript.update_tool_step)
        p.approval_requested.connect(self._on_approval)
        p.sources_found.connect(self.transcript.set_sources)
        self.transcript.tool_decided.connect(self._on_tool_decided)
        p.ask_context = lambda offer: self.ask_context(offer)
        self.transcript.retry_requested.connect(p.retry)
        self.transcript.action_requested.connect(self._on_message_action)
        self.transcript.version_step.connect(p.switch_version)

        self._show_agent(agent)
        self._on_busy(False)

    # building --------------------------------------------------------------------------------
    def _build_header(self) -> QWidget:
        header = QFrame(self)
        header.setObjectName("ChatHeader")
        row = hbox(header, (24, 12, 24, 12), 12)
        self.header_badge = plain(QLabel())
        row.addWidget(self.header_badge)
        titles = QVBoxLayout()
        titles.setSpacing(0)
        self.header_title = plain(QLabel())  # the agent's name
        self.header_title.setObjectName("HeaderTitle")
        self.header_subtitle = ElidedLabel()
        self.header_subtitle.setObjectName("HeaderSubtitle")
        # a long model name or state never widens the pane (the splitter stays where put)
        self.header_subtitle.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        titles.addWidget(self.header_title)
        titles.addWidget(self.header_subtitle)
        row.addLayout(titles, 1)
        self.agent_button = QToolButton()
        self.agent_button.setObjectName("SwitchAgentButton")
        self.agent_button.setText("Switch agent ▾")
        self.agent_button.setToolTip("Choose which agent answers the next messages here")
        self.agent_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.agent_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.agent_menu = QMenu(self.agent_button)
        self.agent_menu.aboutToShow.connect(self._fill_agent_menu)
        self.agent_button.setMenu(self.agent_menu)
        row.addWidget(self.agent_button, 0, Qt.AlignmentFlag.AlignVCenter)
        return header

    def _build_composer(self) -> QWidget:
        area = QWidget(self)
        column = vbox(area, (24, 8, 24, 12), 6)
        self.edit_banner = InfoBar(
            "Editing your message: Enter sends it as a new branch "
            "(the earlier one stays). Esc cancels."
        )
        self.edit_banner.setObjectName("EditBanner")
        self.edit_banner.dismissed.connect(self.cancel_edit)
        self.edit_banner.hide()
        column.addWidget(self.edit_banner)
        box = composer_box(self.services, self, lambda: self.agent)
        self.composer_frame, self.composer = box.frame, box.composer
        self.files, self.send_button = box.files, box.send_button
        self.composer.submitted.connect(self.send)
        self.composer.textChanged.connect(self._update_send_enabled)
        self.files.changed.connect(self._update_send_enabled)
        self.send_button.clicked.connect(self._send_or_stop)
        column.addWidget(self.composer_frame)
        self.hint = plain(QLabel(COMPOSER_HINT))
        self.hint.setObjectName("ComposerHint")
        self.hint.setWordWrap(True)
        self.hint.setContentsMargins(14, 0, 0, 0)
        column.addWidget(self.hint)
        self._fit_timer = QTimer(self)
        self._fit_timer.setSingleShot(True)
        self._fit_timer.setInterval(FIT_CHECK_MS)
        self._fit_timer.timeout.connect(self.check_fit)
        self.composer.textChanged.connect(self._fit_timer.start)
        self.files.changed.connect(self._fit_timer.start)
        for change in (self.composer.textChanged, self.files.changed):
            change.connect(self._forget_note)
        return area

    # state -----------------------------------------------------------------------------------
    @property
    def agent(self) -> Agent | None:
        return self.presenter.agent

    @property
    def conversation_id(self) -> int | None:
        return self.presenter.conversation_id

    @property
    def busy(self) -> bool:
        return self.presenter.busy

    def set_agent(self, agent: Agent | None) -> None:
        self.presenter.set_agent(agent)

    def set_composer_visible(self, visible: bool) -> None:
        """A host with one composer for many panes (compare view) hides each pane's own; it
        shows only while a message of this pane is being edited (Edit makes a branch here)."""
        self._composer_shown = visible
        self.composer_area.setVisible(visible or self.presenter.editing is not None)

    def set_header_visible(self, visible: bool) -> None:
        """A host that names the agent itself (compare view) hides the pane's header."""
        self.header.setVisible(visible)

    def set_shown_name(self, name: str | None) -> None:
        """Show replies as written by ``name`` (a blind comparison's "A"), without their model;
        None shows the agents' own names again. Re-shows the transcript."""
        self._shown_name = name
        self.transcript.set_agent_name(name or (self.agent.name if self.agent else None))
        self.show_path()

    def _shown(self, message: Message) -> Message:
        if self._shown_name is None or message.role == "user":
            return message
        return replace(message, agent_name=self._shown_name, model=None)

    def refresh_header(self) -> None:
        """The agent's model state changed (or its model file's header was read)."""
        agent = self.agent
        if agent is not None:
            note = agent_status.model_note(self.services.local, agent)
            text = agent_status.subtitle(self.services.local, agent)
            whole = agent_status.subtitle(self.services.local, agent, full=True)
            searched = self._searches.get(agent.id or 0)
            if searched:  # it answers with passages of these
                text += " · searches " + ", ".join(searched)
                whole += "\nSearches its knowledge collections: " + ", ".join(searched)
            self.header_subtitle.setText(f"{text} · {note}" if note else text)
            self.header_subtitle.setToolTip(f"{whole}\n{note}" if note else whole)
        self.presenter.show_idle_status()

    def _show_agent(self, agent: Agent | None) -> None:
        """Header, composer placeholder and transcript all name the agent that answers."""
        if agent is None:
            self.header_title.setText("No agent")
            self.header_subtitle.setText("Create an agent, or choose one with Switch agent")
            self.header_subtitle.setToolTip("")
            self.header_badge.clear()
            self.composer.setPlaceholderText("Choose an agent first…")
            self.transcript.set_agent_name(None)
        else:
            self.header_title.setText(agent.name)
            ratio = self.devicePixelRatioF()
            self.header_badge.setPixmap(
                agent_badge(agent.name, badge_color(agent.kind), HEADER_BADGE_PX, ratio)
            )
            self.composer.setPlaceholderText(f"Message {agent.name}…")
            self.transcript.set_agent_name(self._shown_name or agent.name)
            self.refresh_header()
            self._read_model_header(agent)
            self._read_collections(agent)
            self.files.row.refresh_tokens()
        self._update_send_enabled()
        self.check_fit()

    def reread_collections(self) -> None:
        """The agents were edited (their collections may have changed with nothing else)."""
        if self.agent is not None:
            self._read_collections(self.agent)

    def _read_collections(self, agent: Agent) -> None:
        """Which knowledge collections the agent searches, read off the GUI thread, then said
        in the header."""
        knowledge = getattr(self.services, "knowledge", None)
        if knowledge is None or agent.id is None:
            return
        agent_id = agent.id

        async def read() -> None:
            with contextlib.suppress(Exception):  # the store went away: the header says less
                found = await run_blocking(knowledge.agent_collections, agent_id)
                names = tuple(c.name for c in found)
                if self._searches.get(agent_id, ()) != names:
                    self._searches[agent_id] = names
                    if self.agent is not None and self.agent.id == agent_id:
                        self.refresh_header()

        start(read(), name="pane: an agent's collections")

    def _read_model_header(self, agent: Agent) -> None:
        """Read a local agent's GGUF header off the GUI thread, then say what it tells."""
        path = agent_status.model_path_of(agent)
        cache = self.services.local.model_info
        if path is None or cache.peek(path) is not None:
            return

        async def read() -> None:
            with contextlib.suppress(Exception):  # a bad file: model_note says what is wrong
                await run_blocking(cache.get, path)
            self.refresh_header()

        start(read(), name="model-header")

    def _fill_agent_menu(self) -> None:
        self.agent_menu.clear()
        current = self.agent.id if self.agent is not None else None
        for agent in self._agents():
            action = self.agent_menu.addAction(agent.name)
            action.setCheckable(True)
            action.setChecked(agent.id == current)
            action.triggered.connect(lambda _checked=False, a=agent: self.set_agent(a))
        if self.agent_menu.isEmpty():
            self.agent_menu.addAction("No agents yet").setEnabled(False)

    # the transcript --------------------------------------------------------------------------
    def _fetch(self, messages: list[Message]) -> tuple[Any, ...]:
        """Stats, versions, tool calls and model calls, the questions' attachments, the
        replies' sources, for the bubbles about to be built (the window, not the path): one
        query each; a reply's stats are its last call's row."""
        ids = [m.id for m in messages if m.role != "user"]
        calls = self.services.stats.calls_for_messages(ids)
        steps = self.services.tools.steps.for_messages(ids)
        tools = {i: (s, calls.get(i, [])) for i, s in steps.items()}
        stats = {i: rows[-1] for i, rows in calls.items()}
        files = self.services.chat.attachments_of([m.id for m in messages if m.role == "user"])
        knowledge = self.services.knowledge
        sources = knowledge.sources_of(ids) if knowledge is not None and ids else {}
        return stats, self.services.conversations.versions_for(messages), tools, files, sources

    def show_path(self, focus_id: int | None = None) -> None:
        """Show the conversation's active branch (optionally scrolled to ``focus_id``).

        A long conversation's branch (more than ``LONG_PATH`` messages: reading 5,000 takes
        ~50 ms) is read on a worker thread, and shown when it arrives (``path_loading``)."""
        conv_id = self.conversation_id
        self._path_load += 1  # a load under way for an earlier call is not shown
        if conv_id is None:
            self.transcript.clear()
            return
        store = self.services.conversations
        if loop_running() and store.message_count(conv_id) > LONG_PATH:
            self.transcript.clear()
            self.path_loading = start(self._load_path(conv_id, focus_id, self._path_load))
            return
        self._show_messages(store.messages(conv_id), focus_id)

    async def _load_path(self, conv_id: int, focus_id: int | None, load: int) -> None:
        store = self.services.conversations
        messages = await run_blocking(store.messages, conv_id)
        if load != self._path_load or conv_id != self.conversation_id:
            return
        turn = self.presenter.turn
        if turn is not None and turn.assistant_message_id not in {m.id for m in messages}:
            messages = store.messages(conv_id)  # sent while it was read: read it again
        self._show_messages(messages, focus_id)

    def _show_messages(self, stored: list[Message], focus_id: int | None) -> None:
        messages = [self._shown(m) for m in stored]
        self.transcript.show_path(messages, self._fetch, focus_id)
        self.transcript.set_busy(self.busy)
        turn = self.presenter.turn
        if turn is not None:  # re-shown while streaming: the live text so far
            bubble = self.transcript.bubble(turn.assistant_message_id)
            if bubble is not None:
                bubble.set_streaming_text(self.presenter.streamed_text)
            self.transcript.seed_live(turn.assistant_message_id, self.presenter.streamed_text)
        if focus_id is None:
            self.transcript.scroll_to_bottom()

    def _on_turn_started(self, turn: Turn) -> None:
        if turn.kind in ("regenerate", "edit"):
            return  # path_changed re-showed the branch, new reply included
        if turn.kind == "continue" and turn.reply is not None:
            reply = self._shown(replace(turn.reply, status="streaming"))
            self.transcript.update_message(reply, None)
            bubble = self.transcript.bubble(turn.assistant_message_id)
            if bubble is not None:
                bubble.set_streaming_text(turn.prefix)
            self.transcript.seed_live(turn.assistant_message_id, turn.prefix)
        else:
            if turn.user_message is not None:
                self.transcript.add_message(turn.user_message, attachments=turn.attachments)
            if turn.reply is not None:
                self.transcript.add_message(self._shown(turn.reply))
        self.transcript.scroll_to_bottom()

    def check_fit(self) -> None:
        """Under the composer: whether the typed message and its files will fit the local
        agent's context (an estimate), else a note said, else the hint."""
        agent = self.agent
        text = self.composer.toPlainText()
        files = self.files.row.tokens()
        warning = fit_warning(agent, self.transcript.path, text, files) if text or files else None
        words = warning or self._note or COMPOSER_HINT
        warn = words is not COMPOSER_HINT
        self.hint.setText(words)
        if self.hint.property("warn") != warn:
            self.hint.setProperty("warn", warn)
            self.hint.style().unpolish(self.hint)
            self.hint.style().polish(self.hint)

    def _turn_finished(self, turn: Turn) -> None:
        self.finish_later(partial(self._on_turn_finished, turn))

    def _on_turn_finished(self, turn: Turn) -> None:
        message = final_message(turn)
        if message is not None:
            # the transcript shows stored rows too: a record goes in as its row
            stats = turn.stats.as_row() if turn.stats is not None else None
            self.transcript.update_message(self._shown(message), stats)
        if turn.steps:
            calls = [call.as_row() for call in turn.calls]
            self.transcript.set_tool_calls(turn.assistant_message_id, calls, turn.steps)

    def _on_tool_decided(self, step_id: int, decision: str) -> None:
        """An approval answered: the focus goes back to the composer (its buttons go)."""
        self.presenter.answer_approval(step_id, decision)
        focused = QApplication.focusWidget()
        if focused is not None and self.transcript.isAncestorOf(focused):
            self.composer.setFocus()
        self.transcript.scroll_to_bottom()  # follow the reply again

    def _on_approval(self, reply_id: int, request: Any) -> None:
        """A tool call waits for the person: its card asks; Allow once takes the focus unless
        the person is typing."""
        card = self.transcript.ask_tool(reply_id, request)
        if card is not None and not person_is_typing():
            card.focus_answer()
        if card is not None:  # once laid out: its tool and server in view
            QTimer.singleShot(0, self, lambda: reveal(self.transcript, card))

    def _on_message_action(self, action: str, message_id: int) -> None:
        p = self.presenter
        if action == "copy":
            p.say("Copied.")
        elif action == "regenerate":
            p.regenerate(message_id)
        elif action == "regenerate_with":
            self.regenerate_with(message_id)
        elif action == "edit":
            self.edit_message(message_id)
        elif action == "delete":
            self.delete_message(message_id)
        elif action == "continue":
            p.continue_reply(message_id)
        elif action in ("fit_drop", "fit_raise"):
            p.fit_context(message_id, raise_n_ctx=action == "fit_raise")

    def ask_context(self, offer: ContextOffer) -> ContextChoice | None:
        """ "Raise context": the person picks a size or cancels (tests replace this)."""
        return choose_context(self, offer)

    def regenerate_with(self, message_id: int, at: QPoint | None = None) -> QMenu:
        """ "Regenerate with…": a menu of agents; the chosen one writes a new version."""
        menu = self.regenerate_menu(message_id)
        menu.popup(at or QCursor.pos())
        return menu

    def regenerate_menu(self, message_id: int) -> QMenu:
        menu = QMenu(self)
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        for agent in self._agents():
            action = menu.addAction(agent.name)
            action.triggered.connect(
                lambda _c=False, a=agent: self.presenter.regenerate(message_id, agent=a)
            )
        return menu

    # composer --------------------------------------------------------------------------------
    def say_in_composer(self, words: str) -> None:
        """Words under the composer (an agent that cannot see images, files left out) until
        the text or the files change."""
        self._note = words
        self.check_fit()

    def _forget_note(self) -> None:
        if self._note:
            self._note = ""
            self._fit_timer.start()

    def _update_send_enabled(self) -> None:
        if self.busy:
            self.send_button.setEnabled(True)
            return
        content = not self.composer.document().isEmpty() or bool(self.files.row.attachments())
        self.send_button.setEnabled(content and self.agent is not None and self.files.ready)
        self.send_button.setToolTip("Send (Enter)" if self.files.ready else "Reading the files…")

    def _send_or_stop(self) -> None:
        if self.busy:
            self.presenter.stop()
        else:
            self.send()

    def send(self) -> None:
        """Send the composer's text and files to this conversation's agent (Enter, or Send);
        with files, once the checks passed (``ComposerFiles.submit``)."""
        agent = self.agent
        if agent is None or self.busy:
            return
        text = self.composer.toPlainText()
        self.files.submit(
            [(agent, self.conversation_id)],
            text,
            lambda chosen: self._deliver(text, chosen[0]),
            self.say_in_composer,
        )

    def _deliver(self, text: str, attachments: list[Attachment]) -> bool:
        editing = self.presenter.editing is not None
        row = self.files.row
        passed = row.edited() if editing and attachments == row.attachments() else attachments
        if passed is None and not text.strip():  # kept files and no words: say them again
            passed = attachments
        if not self.presenter.send(text, passed):
            return False
        self.composer.clear()
        self.composer.setFocus()  # Send clicked: the next message is typed here again
        if editing:
            self.edit_banner.hide()
            self.composer_area.setVisible(self._composer_shown)
        return True

    def stop(self) -> None:
        """Esc: stop this conversation's reply, or leave editing."""
        if self.busy:
            self.presenter.stop()
        elif self.presenter.editing is not None:
            self.cancel_edit()
            self.composer.clear()

    def edit_message(self, message_id: int) -> None:
        """Put a sent message back in the composer; sending makes a new branch."""
        text = self.presenter.begin_edit(message_id)
        if text is None:
            return
        self.composer.setPlainText(text)
        self.files.row.clear(release=True)  # the draft's files go, as its text did
        own = self.services.chat.attachments_of([message_id]).get(message_id, [])
        self.files.row.add_ready(own, kept=True)
        self.edit_banner.show()
        self.composer_area.show()
        self.composer.setFocus()
        cursor = self.composer.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.composer.setTextCursor(cursor)

    def cancel_edit(self) -> None:
        self.presenter.cancel_edit()
        self.files.row.clear(release=True)
        self.edit_banner.hide()
        self.composer_area.setVisible(self._composer_shown)

    def delete_message(self, message_id: int) -> None:
        if self.busy:
            return
        if self._confirm(
            "Delete message",
            "Delete this message? Its other versions and what follows it are kept.",
        ):
            self.presenter.delete_message(message_id)

    def last_reply(self) -> Message | None:
        return next((m for m in reversed(self.transcript.path) if m.role == "assistant"), None)

    def _on_busy(self, busy: bool) -> None:
        self.send_button.setText("Stop" if busy else "Send")
        self.send_button.setToolTip("Stop the reply (Esc)" if busy else "Send (Enter)")
        self.send_button.setProperty("streaming", busy)
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)
        self.agent_button.setEnabled(not busy)
        self.transcript.set_busy(busy)
        self._update_send_enabled()
