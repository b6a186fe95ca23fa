"""The transcript: a window of message bubbles over the conversation's active path.

Only a window of the path exists as widgets (which part, and what to build or shed next, is
``Paging``'s arithmetic): a screen when a conversation opens, then more in small batches
while the view nears an unbuilt edge, so a 5,000-message conversation opens as fast as a short
one and memory stays bounded. The view scrolls by blitting (``BlitScrollArea``) and follows a
streaming reply unless the person scrolled up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QLayout, QSizePolicy, QSpacerItem, QVBoxLayout, QWidget

from desktop.store.attachments import Attachment
from desktop.store.conversations import Message, Versions
from desktop.ui.conversation.attach_parts import AttachmentFiles
from desktop.ui.conversation.attach_view import AttachmentStrip
from desktop.ui.conversation.blit_scroll import BlitContent, BlitScrollArea
from desktop.ui.conversation.bubble import BUBBLE_MAX_WIDTH, MessageBubble, MessageRow
from desktop.ui.conversation.paging import (
    BATCH,
    PAGE,
    PREFETCH_BUDGET_S,
    Edge,
    Paging,
)
from desktop.ui.kit.widgets import plain, push_button

STICK_MARGIN_PX = 32  # the view follows new text while it is this close to the bottom
FOOTER_MODES = ("always", "hover", "never")

# Stats and versions of the messages about to be built; optionally a third item, the replies'
# tool calls and model calls: {message id: (ToolSteps, stats rows)} (an agentic reply's), a
# fourth, the questions' attachments: {message id: [Attachment, …]}, and a fifth, the
# replies' sources: {message id: [Source, …]}.
Fetch = Callable[[list[Message]], tuple[Any, ...]]


def _no_fetch(messages: list[Message]) -> tuple[Any, ...]:
    return {}, {}


class EmptyState(QWidget):
    """What a conversation with no messages shows: whom the person is about to chat with."""

    def __init__(self) -> None:
        super().__init__()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 80, 24, 24)
        layout.setSpacing(8)
        self.title = plain(QLabel())  # "Chat with" the agent's name
        self.title.setObjectName("EmptyTitle")
        self.title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hint = QLabel("Type a message below. Enter sends, Shift+Enter adds a line.")
        self.hint.setObjectName("EmptyHint")
        self.hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hint.setWordWrap(True)
        layout.addWidget(self.title)
        layout.addWidget(self.hint)

    def set_agent(self, name: str | None) -> None:
        self.title.setText(f"Chat with {name}" if name else "Create an agent to start")


class Transcript(BlitScrollArea):
    """A window of bubbles over the active path. Follows new text unless the person scrolled up.

    Signals:
        retry_requested(int): a failed reply's Retry button.
        action_requested(str, int): a bubble's action (see MessageBubble) and its message id.
        version_step(int, int): a bubble's ‹ › buttons (message id, -1 or +1).
        tool_decided(int, str): a tool call's approval was answered (step id, decision).
    """

    retry_requested = Signal(int)
    action_requested = Signal(str, int)
    version_step = Signal(int, int)
    tool_decided = Signal(int, str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Transcript")
        body = BlitContent()
        body.setObjectName("TranscriptBody")
        self._body = body
        self._layout = QVBoxLayout(body)
        self._layout.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)  # see BlitContent
        self._layout.setContentsMargins(24, 16, 24, 16)
        self._layout.setSpacing(12)
        self.earlier_button = push_button(
            "Show earlier messages", self.load_earlier, name="LoadMore"
        )
        self.later_button = push_button("Show later messages", self.load_later, name="LoadMore")
        self.empty = EmptyState()
        # [earlier, empty, space above, rows..., later, space below]: see _insert_rows. The
        # rows sit at the bottom of a view they do not fill while more are built above them
        # (a conversation opens at its newest message), else at the top (_update_chrome).
        self._above = QSpacerItem(0, 0, QSizePolicy.Policy.Minimum, QSizePolicy.Policy.Fixed)
        self._below = QSpacerItem(0, 0, QSizePolicy.Policy.Minimum, QSizePolicy.Policy.Expanding)
        self._layout.addWidget(self.earlier_button, 0, Qt.AlignmentFlag.AlignHCenter)
        self._layout.addWidget(self.empty)
        self._layout.addSpacerItem(self._above)
        self._layout.addWidget(self.later_button, 0, Qt.AlignmentFlag.AlignHCenter)
        self._layout.addSpacerItem(self._below)
        self.setWidget(body)
        self._paging: Paging[Message] = Paging()
        self._bubbles: dict[int, MessageBubble] = {}
        self._rows: list[MessageRow] = []  # the window, in path order
        self._fetch: Fetch = _no_fetch
        # stats and versions fetched for messages not built yet (a fetch asks for a batch, a
        # loop turn builds what fits in its budget): {message id: (stats, versions)}
        self._fetched: dict[int, tuple[Any, Any]] = {}
        self._owed = 0  # messages of the opening screen still to build above the window
        self._live: dict[int, list[str]] = {}  # streamed text not yet stored, per message
        # replies that used tools: steps by id, model calls; approvals waiting (asked again)
        self._tools: dict[int, tuple[dict[int, Any], list[dict[str, Any]]]] = {}
        self._asks: dict[int, dict[int, Any]] = {}
        self._attached: dict[int, list[Attachment]] = {}  # the questions' files, by message id
        self._sources: dict[int, list[Any]] = {}  # the replies' sources (Source), by message id
        self.files: AttachmentFiles | None = None  # where their thumbnails and copies come from
        self._held = False  # an approval card was revealed: no following until scroll_to_bottom
        self._footer_mode = "always"
        self._busy = False
        self._stick = True
        self._loading = False
        # Timers owned by the transcript (not singleShot closures tied to a bubble, which
        # PySide mishandles when the bubble is deleted before they fire).
        self._found_id: int | None = None
        self._scroll_timer = QTimer(self)
        self._scroll_timer.setSingleShot(True)
        self._scroll_timer.setInterval(0)
        self._scroll_timer.timeout.connect(self._scroll_to_found)
        self._unmark_timer = QTimer(self)
        self._unmark_timer.setSingleShot(True)
        self._unmark_timer.setInterval(2500)
        self._unmark_timer.timeout.connect(self._unmark)
        self._page_timer = QTimer(self)
        self._page_timer.setSingleShot(True)
        self._page_timer.setInterval(0)
        self._page_timer.timeout.connect(self._prefetch)
        self.earlier_button.hide()
        self.later_button.hide()
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range)

    # scrolling -------------------------------------------------------------------------------
    def may_prescroll(self) -> bool:
        return self._stick and not self._loading

    def _on_scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        at_end = not self._paging.has_more("bottom")
        self._stick = value >= bar.maximum() - STICK_MARGIN_PX and at_end and not self._held
        if not self._loading and self._near_unbuilt_edge() and not self._page_timer.isActive():
            self._page_timer.start()

    def _near_unbuilt_edge(self) -> Edge | None:
        bar = self.verticalScrollBar()
        return self._paging.near_edge(
            bar.value() - bar.minimum(), bar.maximum() - bar.value(), self.viewport().height()
        )

    def _prefetch(self) -> None:
        """Build bubbles towards the edge the view is nearing, one at a time for at most
        PREFETCH_BUDGET_S; again next turn.

        Bubbles are built ahead of the scroll, a few per event-loop turn, so reaching the top
        of a long conversation never waits on a whole page being built at once; the opening
        screen of a conversation is built the same way, newest first.
        """
        if self._loading:
            return
        edge = "top" if self._owed else self._near_unbuilt_edge()
        if edge is not None:
            self._grow(edge, max(BATCH, self._owed), PREFETCH_BUDGET_S)
            if self._owed or self._near_unbuilt_edge():
                self._page_timer.start()

    @property
    def prefetching(self) -> bool:
        """True while more bubbles are about to be built near the view's edge."""
        return self._page_timer.isActive()

    def _on_range(self, _minimum: int, maximum: int) -> None:
        if self._stick:
            self.verticalScrollBar().setValue(maximum)

    @property
    def following(self) -> bool:
        return self._stick

    def scroll_to_bottom(self) -> None:
        self._held = False
        if self._paging.has_more("bottom"):
            self._paging.show_last()
            self._rebuild()
            self._page_timer.start()
        self._stick = True
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    # window ----------------------------------------------------------------------------------
    @property
    def window_range(self) -> tuple[int, int]:
        """[start, end) of the path that exists as bubbles (the opening screen built)."""
        self.finish_opening()
        return self._paging.start, self._paging.end

    @property
    def path(self) -> list[Message]:
        return list(self._paging.path)

    def bubbles(self) -> list[MessageBubble]:
        """The bubbles built, in path order (the opening screen's, all of them)."""
        self.finish_opening()
        return [row.bubble for row in self._rows]

    def bubble(self, message_id: int) -> MessageBubble | None:
        """The message's bubble if it is built; one of the opening screen is built now."""
        bubble = self._bubbles.get(message_id)
        if bubble is None and self._owed:
            self.finish_opening()
            bubble = self._bubbles.get(message_id)
        return bubble

    @property
    def opening(self) -> bool:
        """True while the opening screen of a conversation is still being built (newest first,
        a few bubbles per event-loop turn)."""
        return self._owed > 0

    def finish_opening(self) -> None:
        """Build what is left of the opening screen now (something asks for its bubbles)."""
        if self._owed and not self._loading:
            self._grow("top", self._owed)

    def _index(self, message_id: int) -> int | None:
        return next((i for i, m in enumerate(self._paging.path) if m.id == message_id), None)

    def _make_row(
        self, message: Message, stats: dict[str, Any] | None, versions: Versions | None
    ) -> MessageRow:
        bubble = MessageBubble(message, stats, versions, self._footer_mode)
        bubble.before_grow = self._grow_hook(message.id)
        if sources := self._sources.get(message.id):
            bubble.set_sources(sources)
        if message.status == "streaming" and message.id in self._live:
            bubble.set_streaming_text("".join(self._live[message.id]))
        bubble.set_max_width(self._bubble_width())
        # Queued: these rebuild the transcript, which must not delete the bubble while it is
        # still delivering its own click (PySide then miscounts references and crashes later).
        queued = Qt.ConnectionType.QueuedConnection
        bubble.retry_requested.connect(self.retry_requested, queued)
        bubble.action_requested.connect(self.action_requested, queued)
        bubble.version_step.connect(self.version_step, queued)
        bubble.tool_decided.connect(self.tool_decided)
        if attached := self._attached.get(message.id):
            bubble.show_attachments(AttachmentStrip(attached, self.files))
        self._dress(bubble)
        if self._busy:
            bubble.set_busy(True)
        self._bubbles[message.id] = bubble
        return MessageRow(bubble)

    def _grow_hook(self, message_id: int) -> Callable[[int], None]:
        def grow(pixels: int) -> None:
            if self._rows and self._rows[-1].bubble.message_id == message_id:  # the followed one
                self.prescroll(pixels)

        return grow

    def _build(
        self,
        messages: list[Message],
        budget_s: float | None = None,
        edge: Edge = "bottom",
        insert: bool = False,
    ) -> list[MessageRow]:
        """Rows for ``messages`` (see Paging.build for the budget and ``edge``); with
        ``insert``, each row joins the layout at that edge as soon as it is built (so the
        budget holds its showing too)."""
        began = time.perf_counter()
        missing = [m for m in messages if m.id not in self._fetched]
        if missing and budget_s is not None:  # a few per turn: fetch half a page ahead, once
            ahead = self._paging.beyond(edge, PAGE // 2)
            missing = [m for m in ahead if m.id not in self._fetched] or missing
        if missing:
            stats, versions, *more = self._fetch(missing)
            for message_id, (steps, calls) in (more[0] if more else {}).items():
                self._tools[message_id] = ({s.id: s for s in steps}, list(calls))
            self._attached.update(more[1] if len(more) > 1 else {})
            self._sources.update(more[2] if len(more) > 2 else {})
            for m in missing:
                self._fetched[m.id] = (stats.get(m.id), versions.get(m.id))

        def make(message: Message) -> MessageRow:
            row = self._make_row(message, *self._fetched.pop(message.id, (None, None)))
            if insert:
                self._insert_rows(0 if edge == "top" else len(self._rows), [row], settle=False)
            return row

        if budget_s is not None:  # the fetch spent part of it
            budget_s = max(0.0, budget_s - (time.perf_counter() - began))
        return self._paging.build(messages, make, budget_s, edge)

    def _insert_rows(self, at: int, rows: list[MessageRow], settle: bool = True) -> None:
        """Put ``rows`` in the layout at ``at`` (in the window), shown; ``settle``: lay the
        transcript out now (else the caller does, once for all the rows it adds)."""
        if not rows:
            return
        base = 3  # after the "Show earlier" button, the empty state and the space above
        width = self._body.width()
        # Showing a widget activates its parents' layouts at their present size: the content,
        # not yet grown by the new row, would squeeze every row into it (each bubble laid out
        # twice per row added). Off while the rows go in; relayout_now lays them out once.
        self._layout.setEnabled(False)
        try:
            for offset, row in enumerate(rows):
                self._layout.insertWidget(base + at + offset, row)
                # sized as it will be, so its bubble is laid out once, at its width
                row.resize(width, row.heightForWidth(width))
                # shown (and polished) now: the layout would show it a loop turn later, and
                # until then it takes no room, so keeping the view in place would measure
                # wrong heights
                row.show()
        finally:
            self._layout.setEnabled(True)
        self._rows[at:at] = rows
        if settle:
            self.relayout_now()

    def _drop_rows(self, rows: list[MessageRow]) -> None:
        for row in rows:
            self._bubbles.pop(row.bubble.message_id, None)
            self._layout.removeWidget(row)
            row.hide()  # deleteLater runs later; a visible orphan would still paint
            row.deleteLater()
            self._rows.remove(row)

    def _update_chrome(self) -> None:
        more_above = self._paging.has_more("top")
        self.earlier_button.setVisible(more_above)
        self.later_button.setVisible(self._paging.has_more("bottom"))
        self.empty.setVisible(not self._paging.path)
        # rows that do not fill the view: at its bottom while more are built above them
        expanding, fixed = QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed
        above, below = (expanding, fixed) if more_above else (fixed, expanding)
        if self._above.sizePolicy().verticalPolicy() != above:
            self._above.changeSize(0, 0, QSizePolicy.Policy.Minimum, above)
            self._below.changeSize(0, 0, QSizePolicy.Policy.Minimum, below)
            self._layout.invalidate()

    def _rebuild(self) -> None:
        """Rows for the window as Paging now has it (after it was moved)."""
        self._owed = 0
        self._drop_rows(list(self._rows))
        self._insert_rows(0, self._build(self._paging.window))
        self._update_chrome()

    def show_path(
        self, messages: list[Message], fetch: Fetch | None = None, focus_id: int | None = None
    ) -> None:
        """Show a conversation: the last screen of it, or a screen around ``focus_id``.

        A conversation opens at its newest message: its last screen of bubbles is built from
        the bottom up, as many as PREFETCH_BUDGET_S allows per event-loop turn (the view at the
        bottom all along), then a screen and a half beyond, in the same way. A short one too:
        ten bubbles with code took 17 ms in one turn."""
        self._fetch = fetch or _no_fetch
        self._fetched.clear()
        focus = next((i for i, m in enumerate(messages) if m.id == focus_id), None)
        self._paging.open(messages, focus)
        self._stick = focus is None
        if focus is None and messages:
            self._drop_rows(list(self._rows))
            self._owed = self._paging.end - self._paging.start
            self._paging.start = self._paging.end  # nothing built yet: the screen is owed
            self._update_chrome()
            # half the budget in this turn: it also shows the pane and reads the messages
            self._grow("top", self._owed, PREFETCH_BUDGET_S / 2)
        else:
            self._rebuild()
        if focus_id is not None:
            self.reveal(focus_id)
        self._page_timer.start()  # the rest of the screen and a screen beyond, in batches

    def reveal(self, message_id: int) -> None:
        """Scroll so the message is in view and mark it briefly (search hits)."""
        self.finish_opening()
        index = self._index(message_id)
        if index is None:
            return
        if not self._paging.is_built(index):
            self._paging.show_around(index)
            self._rebuild()
            self._page_timer.start()
        bubble = self._bubbles.get(message_id)
        if bubble is None:
            return
        self._stick = False
        self._unmark()
        bubble.mark_found(True)
        self._found_id = message_id
        self._scroll_to_found()
        self._scroll_timer.start()
        self._unmark_timer.start()

    def _scroll_to_found(self) -> None:
        bubble = self._bubbles.get(self._found_id) if self._found_id is not None else None
        row = bubble.parentWidget() if bubble is not None else None
        if row is not None:
            self._layout.activate()
            self.ensureWidgetVisible(row, 0, 80)
            self._stick = False

    def _unmark(self) -> None:
        bubble = self._bubbles.get(self._found_id) if self._found_id is not None else None
        if bubble is not None:
            bubble.mark_found(False)

    def load_earlier(self) -> None:
        """A page of earlier messages ("Show earlier messages"); the view stays where it is."""
        self._grow("top", PAGE)

    def load_later(self) -> None:
        self._grow("bottom", PAGE)

    def _anchor(self) -> tuple[MessageRow, int] | None:
        """The first row at the top of the view, and how far above the view's top it starts."""
        value = self.verticalScrollBar().value()
        for row in self._rows:
            if row.y() + row.height() > value:
                return row, value - row.y()
        return None

    def _restore(self, anchor: tuple[MessageRow, int] | None) -> None:
        self.relayout_now()
        if anchor is not None and anchor[0] in self._rows:
            self.verticalScrollBar().setValue(anchor[0].y() + anchor[1])

    def _grow(self, edge: Edge, count: int, budget_s: float | None = None) -> None:
        """Build up to ``count`` bubbles beyond that edge of the window, shed the other end
        past MAX_LOADED, and keep the row at the top of the view where it is on screen."""
        if self._loading or not self._paging.has_more(edge):
            return
        self._loading = True
        try:
            anchor = self._anchor()
            rows = self._build(self._paging.beyond(edge, count), budget_s, edge, insert=True)
            if edge == "top":
                self._owed = max(0, self._owed - len(rows))
            shed = self._paging.grown(edge, len(rows))
            if shed:
                self._drop_rows(self._rows[-shed:] if edge == "top" else self._rows[:shed])
            self._update_chrome()
            self._restore(anchor)
        finally:
            self._loading = False

    # content ---------------------------------------------------------------------------------
    def clear(self) -> None:
        self._drop_rows(list(self._rows))
        self._bubbles.clear()
        self._fetched.clear()
        self._owed = 0
        self._paging.open([])
        self._live.clear()
        self._tools.clear()
        self._asks.clear()
        self._attached.clear()
        self._sources.clear()
        self._update_chrome()
        self._stick = True

    def set_agent_name(self, name: str | None) -> None:
        self.empty.set_agent(name)

    def set_footer_mode(self, mode: str) -> None:
        self._footer_mode = mode if mode in FOOTER_MODES else "always"
        for bubble in self._bubbles.values():
            bubble.set_footer_mode(self._footer_mode)

    def set_busy(self, busy: bool) -> None:
        self._busy = busy
        for bubble in self._bubbles.values():
            bubble.set_busy(busy)

    def add_message(
        self,
        message: Message,
        stats: dict[str, Any] | None = None,
        versions: Versions | None = None,
        attachments: list[Attachment] | None = None,
    ) -> MessageBubble | None:
        """Append to the path (a question with its ``attachments``, as the turn holds them);
        the bubble is built when the window is at the end."""
        if attachments:
            self._attached[message.id] = list(attachments)
        bubble = None
        if self._paging.append(message):
            self._insert_rows(len(self._rows), [self._make_row(message, stats, versions)])
            bubble = self._bubbles[message.id]
            if self._stick:  # the view is at the end: the top goes past MAX_LOADED
                shed = self._paging.shed("top")
                if shed:
                    self._drop_rows(self._rows[:shed])
        self._update_chrome()
        return bubble

    def remove_message(self, message_id: int) -> None:
        index = self._index(message_id)
        if index is not None:
            self._paging.remove(index)
        bubble = self._bubbles.get(message_id)
        if bubble is not None:
            row = bubble.parentWidget()
            if isinstance(row, MessageRow) and row in self._rows:
                self._drop_rows([row])
        self._update_chrome()

    def seed_live(self, message_id: int, text: str) -> None:
        """The text a streaming message starts from ("Continue" carries on stored text)."""
        self._live[message_id] = [text] if text else []

    def append_text(self, message_id: int, text: str) -> None:
        """Streamed text since the last flush (the caller coalesces deltas, ~30x/s)."""
        self._live.setdefault(message_id, []).append(text)
        bubble = self._bubbles.get(message_id)
        if bubble is not None and bubble.append_text(text):
            self._settle(bubble)
            self.undo_prescroll()  # anything still prescrolled was not matched by growth

    def _settle(self, bubble: MessageBubble) -> None:
        """Lay out the grown bubble now, bottom-up, instead of one posted request per level.

        Qt would propagate the new height one event-loop pass per widget (text, bubble, row,
        content, scroll bars) and paint in between, with the view already moved up by
        ``prescroll`` but the content not yet grown. Done here, the flush is one consistent
        frame: the blitted view plus the strip of new text.
        """
        row = bubble.parentWidget()
        for layout in (bubble.body_layout, bubble.layout(), row.layout() if row else None):
            if layout is not None:
                layout.activate()
        self.relayout_now()

    # tool calls ------------------------------------------------------------------------------
    def _dress(self, bubble: MessageBubble) -> None:
        """A bubble built (again): its tool calls, the approvals it waits for, its calls."""
        by_id, calls = self._tools.get(bubble.message_id, ({}, []))
        bubble.set_tool_steps(steps := sorted(by_id.values(), key=lambda s: s.position))
        for request in self._asks.get(bubble.message_id, {}).values():
            bubble.tool_steps.ask(request)
        if len(calls) > 1 and steps:
            bubble.footer.set_calls(calls, steps)

    def update_tool_step(self, message_id: int, step: Any) -> None:
        """A tool call of a streaming reply was asked for or changed (``ToolStep``)."""
        self._tools.setdefault(message_id, ({}, []))[0][step.id] = step
        if step.status != "waiting":
            self._asks.get(message_id, {}).pop(step.id, None)
        if (bubble := self._bubbles.get(message_id)) is not None:
            bubble.tool_steps.update_step(step)

    def ask_tool(self, message_id: int, request: Any) -> Any:
        """A tool call waits for the person (``ApprovalRequest``); its card, if built. The
        view stops following the reply (the card is revealed) until ``scroll_to_bottom``."""
        self._asks.setdefault(message_id, {})[request.step.id] = request
        self._held, self._stick = True, False
        bubble = self._bubbles.get(message_id)
        return bubble.tool_steps.ask(request) if bubble is not None else None

    def set_tool_calls(self, message_id: int, calls: list[Any], steps: list[Any]) -> None:
        """A turn that used tools ended: its model calls and steps, for the timeline."""
        self._asks.pop(message_id, None)
        self._fetched.pop(message_id, None)
        by_id = {**self._tools.get(message_id, ({}, []))[0], **{s.id: s for s in steps}}
        self._tools[message_id] = (by_id, list(calls))  # a stopped step is kept
        if (bubble := self._bubbles.get(message_id)) is not None and len(calls) > 1 and steps:
            bubble.footer.set_calls(calls, sorted(by_id.values(), key=lambda s: s.position))

    def set_sources(self, message_id: int, sources: Any) -> None:
        """A reply's sources (``Source``s), found while it streams; listed under its text."""
        self._sources[message_id] = list(sources)
        if (bubble := self._bubbles.get(message_id)) is not None:
            bubble.set_sources(self._sources[message_id])

    def set_waiting(self, message_id: int, text: str) -> None:
        """What a streaming reply waits for before its first token ("" once it flows)."""
        bubble = self._bubbles.get(message_id)
        if bubble is not None:
            bubble.set_waiting(text)

    def append_reasoning(self, message_id: int, text: str) -> None:
        bubble = self._bubbles.get(message_id)
        if bubble is not None:
            bubble.append_reasoning(text)

    def update_message(self, message: Message, stats: dict[str, Any] | None) -> None:
        """A message's new stored state (a reply that finished, or one that goes on); its
        versions are as shown."""
        self._live.pop(message.id, None)
        self._fetched.pop(message.id, None)
        index = self._index(message.id)
        if index is not None:
            self._paging.path[index] = message
        bubble = self._bubbles.get(message.id)
        if bubble is not None:
            bubble.update_from(message, stats)

    # layout ----------------------------------------------------------------------------------
    def _bubble_width(self) -> int:
        width = self.viewport().width() - 48
        return max(240, min(BUBBLE_MAX_WIDTH, int(width * 0.82)))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        width = self._bubble_width()
        for bubble in self._bubbles.values():
            bubble.set_max_width(width)
