"""The main window's chat page: a stack of conversation panes, one per open conversation.

Every open conversation keeps its pane (and so its stream, its draft and its scroll position)
while another is shown. Idle panes beyond ``MAX_IDLE_PANES`` are closed, oldest use first;
their unsent drafts (text and files) are kept and put back when the conversation opens again.
At most one pane is a new chat not stored yet; its first message makes it that conversation's
pane. A new one is then made ahead, ``SPARE_AFTER_MS`` later (building a pane holds the GUI
thread 8-12 ms), so that picking an agent or New chat only re-aims it, and opening a stored
conversation that has no pane takes the new chat's over while it is untouched.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QStackedWidget, QWidget

from desktop.store.agents import Agent
from desktop.store.attachments import Attachment
from desktop.ui.conversation.pane import ConversationPane

# Idle panes kept alive besides the shown one and those streaming.
MAX_IDLE_PANES = 8
# After a new chat was stored, the next new chat's pane is made this much later.
SPARE_AFTER_MS = 300  # a turn of its own (8-12 ms), while the first reply streams


class PaneStack(QStackedWidget):
    """Signals (about the shown pane, or any pane for ``listing_changed``):
    shown_status(str): its status line.
    shown_agent(object): the agent that answers it (``Agent`` or None).
    listing_changed(object): a conversation's title or order changed (its id; the list
    moves that row).
    """

    shown_status = Signal(str)
    shown_agent = Signal(object)
    listing_changed = Signal(object)

    def __init__(
        self,
        make_pane: Callable[[Agent | None, int | None, QWidget], ConversationPane],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("PaneStack")
        self._make_pane = make_pane
        self._panes: dict[int, ConversationPane] = {}  # by conversation id, oldest use first
        self._new: ConversationPane | None = None
        self._drafts: dict[int, str] = {}  # unsent text of conversations whose pane closed
        self._draft_files: dict[int, list[Attachment]] = {}  # and their files, ready to send
        self._spare = QTimer(self)
        self._spare.setSingleShot(True)
        self._spare.setInterval(SPARE_AFTER_MS)
        self._spare.timeout.connect(self._make_spare)

    # what is here ----------------------------------------------------------------------------
    @property
    def shown(self) -> ConversationPane | None:
        current = self.currentWidget()
        return current if isinstance(current, ConversationPane) else None

    @property
    def panes(self) -> list[ConversationPane]:
        return list(self._panes.values()) + ([self._new] if self._new is not None else [])

    @property
    def new_pane(self) -> ConversationPane | None:
        """The new chat, not stored yet (None when there is none)."""
        return self._new

    def pane_for(self, conversation_id: int | None) -> ConversationPane | None:
        return self._panes.get(conversation_id) if conversation_id is not None else None

    def is_streaming(self, conversation_id: int) -> bool:
        pane = self.pane_for(conversation_id)
        return pane is not None and pane.busy

    def agent_answering(self, agent_id: int) -> bool:
        """A reply by this agent streams in some pane."""
        return any(
            p.busy and p.presenter.turn is not None and p.presenter.turn.agent.id == agent_id
            for p in self.panes
        )

    # opening and closing ---------------------------------------------------------------------
    def _add(self, agent: Agent | None, conversation_id: int | None) -> ConversationPane:
        pane = self._make_pane(agent, conversation_id, self)  # built in place, top-down
        presenter = pane.presenter
        presenter.status_changed.connect(lambda text, p=pane: self._status(p, text))
        presenter.agent_changed.connect(lambda agent, p=pane: self._agent(p, agent))
        presenter.listing_changed.connect(
            lambda p=presenter: self.listing_changed.emit(p.conversation_id)
        )
        presenter.conversation_changed.connect(lambda cid, p=pane: self._stored(p, cid))
        self.addWidget(pane)
        if conversation_id is not None:
            self._keep(pane, conversation_id)
        return pane

    def _keep(self, pane: ConversationPane, conversation_id: int) -> None:
        """``pane`` is the conversation's; its draft, if its last pane closed, comes back."""
        self._panes[conversation_id] = pane
        if conversation_id in self._drafts:
            pane.composer.setPlainText(self._drafts.pop(conversation_id))
        if conversation_id in self._draft_files:
            pane.files.row.add_ready(self._draft_files.pop(conversation_id))

    def show_pane(self, pane: ConversationPane) -> None:
        self.setCurrentWidget(pane)
        if pane.size() != self.size():  # a new pane: lay it out now, not on the next pass
            pane.resize(self.size())
            if (layout := pane.layout()) is not None:
                layout.activate()
        conv_id = pane.conversation_id
        if conv_id is not None:  # most recently used last
            self._panes.pop(conv_id, None)
            self._panes[conv_id] = pane
        idle = [p for p in self._panes.values() if p is not pane and not p.busy]
        for old in idle[: max(0, len(idle) - MAX_IDLE_PANES)]:
            self.close_pane(old)
        pane.composer.setFocus()

    def open(
        self, conversation_id: int, agent: Agent | None, focus_id: int | None = None
    ) -> ConversationPane:
        """Show the conversation's pane (made with ``agent`` if it has none yet)."""
        pane = self._panes.get(conversation_id)
        if pane is None:
            pane = self._adopt_spare(conversation_id, agent) or self._add(agent, conversation_id)
            self.show_pane(pane)
            pane.show_path(focus_id)  # once it has its size: paging reads the view's height
        else:
            if focus_id is not None and not pane.busy:
                pane.show_path(focus_id)
            self.show_pane(pane)
        return pane

    def new_chat(self, agent: Agent | None) -> ConversationPane:
        """Show the new chat (made, or re-aimed at ``agent`` while nothing was sent)."""
        pane = self._new
        if pane is None:
            pane = self._new = self._add(agent, None)
        elif agent is not None and pane.agent != agent and not pane.busy:
            pane.set_agent(agent)
        self.show_pane(pane)
        return pane

    def close_pane(self, pane: ConversationPane) -> None:
        conv_id = pane.conversation_id
        if conv_id is not None:
            self._panes.pop(conv_id, None)
            draft = pane.composer.toPlainText()
            if draft.strip():
                self._drafts[conv_id] = draft
            if files := pane.files.row.attachments():
                self._draft_files[conv_id] = files
        if pane is self._new:
            self._new = None
        self.removeWidget(pane)
        pane.deleteLater()

    def forget(self, conversation_id: int) -> ConversationPane | None:
        """The conversation was deleted: drop its draft; returns its pane, if open."""
        self._drafts.pop(conversation_id, None)
        self._draft_files.pop(conversation_id, None)  # unsent: the next start collects them
        return self._panes.get(conversation_id)

    # what panes say --------------------------------------------------------------------------
    def _status(self, pane: ConversationPane, text: str) -> None:
        if pane is self.currentWidget():
            self.shown_status.emit(text)

    def _agent(self, pane: ConversationPane, agent: Agent | None) -> None:
        if pane is self.currentWidget():
            self.shown_agent.emit(agent)

    def _stored(self, pane: ConversationPane, conversation_id: int) -> None:
        """A new chat's first message stored it: it is now that conversation's pane (and the
        next new chat is made ahead)."""
        if pane is self._new:
            self._new = None
            self._spare.start()
        self._panes[conversation_id] = pane

    def _adopt_spare(self, conversation_id: int, agent: Agent | None) -> ConversationPane | None:
        """The new chat's pane, while untouched (nothing typed, attached or sent), becomes the
        conversation's: opening one then builds no pane (8-12 ms). The next new chat is made
        ahead again, with the agent shown then."""
        pane = self._new
        if (
            pane is None
            or pane.busy
            or pane.composer.toPlainText()
            or pane.files.row.attachments()
            or pane.presenter.editing is not None
        ):
            return None
        self._new = None
        pane.presenter.adopt(conversation_id, agent)
        self._keep(pane, conversation_id)
        self._spare.start()  # and the next new chat is made ahead again
        return pane

    def _make_spare(self) -> None:
        """The next new chat's pane, hidden until New chat or an agent is picked."""
        shown = self.shown
        if self._new is None and shown is not None and self.isVisible():  # not once closed
            self._new = self._add(shown.agent, None)
