"""One message on screen: a bubble (text, status, error, stats footer, actions) and its row.

A reply is a ``MarkdownView``, while it streams and after: each block is rendered once it is
finished, only the unfinished tail is plain (the cost per flush depends on the new text, not on
the reply so far), and a stored reply is the same blocks, so nothing moves when a reply ends.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QEnterEvent, QGuiApplication, QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.store.conversations import Message, Versions
from desktop.ui.conversation.bubble_parts import (
    ActionButtons,
    ActionsLayout,
    ErrorBox,
    StatsFooter,
    ThinkingBox,
    VersionArrows,
    natural_width,
)
from desktop.ui.conversation.sources import Passage, SourceList, citation_tips
from desktop.ui.conversation.tool_cards import ToolSteps
from desktop.ui.kit.text_format import (
    REPLY_DISPLAY_LIMIT,
    footer_lines,
    stats_tooltip,
    truncate_for_display,
)
from desktop.ui.kit.weak import weak_method
from desktop.ui.kit.widgets import plain
from desktop.ui.markdown.render import BlockItem
from desktop.ui.markdown.view import MarkdownView

BUBBLE_MAX_WIDTH = 820
BUBBLE_PADDING_PX = 14
BUBBLE_CORNER_PX = 20  # the rounded bottom edge and padding repainted when a bubble grows


def _repolish(widget: QWidget) -> None:
    """The style again after a property its style sheet matches changed; a widget not yet
    polished gets it when it is (polishing twice costs a style-sheet match each time)."""
    if not widget.testAttribute(Qt.WidgetAttribute.WA_WState_Polished):
        return
    style = widget.style()
    style.unpolish(widget)
    style.polish(widget)


class MessageBubble(QFrame):
    """One message.

    Signals:
        action_requested(str, int): an action on this message id: "copy", "regenerate",
            "regenerate_with", "edit", "delete", "continue", "retry", "fit_drop" or "fit_raise".
        version_step(int, int): show the previous (-1) or next (+1) version of the message.
        retry_requested(int): the failed message's Retry button (also an action).
        tool_decided(int, str): a tool call's approval was answered (step id, "once" |
            "always" | "deny").
    """

    action_requested = Signal(str, int)
    version_step = Signal(int, int)
    retry_requested = Signal(int)
    tool_decided = Signal(int, str)

    def __init__(
        self,
        message: Message,
        stats: dict[str, Any] | None = None,
        versions: Versions | None = None,
        footer_mode: str = "always",
    ) -> None:
        super().__init__()
        self.message_id = message.id
        self.role = message.role
        self.status = message.status
        self.message = message
        self._content = ""
        self._markdown = False
        self._max_width = BUBBLE_MAX_WIDTH
        self._footer_mode = footer_mode
        self._hovered = False
        self._busy = False
        self._shown_versions: Versions | None = None
        self._view: MarkdownView | None = None  # a reply's text, streaming or finished
        self.attachments: QWidget | None = None  # a question's files, under its text
        self.before_grow: Callable[[int], None] | None = None  # see StreamText.before_grow
        self.setObjectName("Bubble")
        self.setProperty("role", message.role)
        self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Minimum)
        # Growing by a line repaints only what changed (see resizeEvent), not the whole bubble.
        self.setAttribute(Qt.WidgetAttribute.WA_StaticContents, True)

        layout = QVBoxLayout(self)
        pad = BUBBLE_PADDING_PX
        layout.setContentsMargins(pad, 10, pad, 8)
        layout.setSpacing(6)
        self._layout = layout
        self._head = QHBoxLayout()
        self._head.setSpacing(2)
        label_text = "You" if message.role == "user" else message.agent_name or "Assistant"
        self.label = plain(QLabel(label_text))
        self.label.setObjectName("BubbleLabel")
        if message.model:
            self.label.setToolTip(f"Model: {message.model}")
        self._head.addWidget(self.label)
        self._head.addStretch(1)
        layout.addLayout(self._head)

        self.body_box = QWidget()
        self.body_box.setAttribute(Qt.WidgetAttribute.WA_StaticContents, True)
        self.body_layout = QVBoxLayout(self.body_box)
        self.body_layout.setContentsMargins(0, 0, 0, 0)
        self.body_layout.setSpacing(8)
        layout.addWidget(self.body_box)

        # The actions wrap in a narrow bubble or at a large text size, never cut; a button is
        # built the first time it shows, the stats footer the first time it has something.
        self._actions = ActionsLayout()
        self.action_buttons = ActionButtons(  # weakly: no cycle for the collector
            self._actions, weak_method(self._action_slot), weak_method(self._may_act)
        )
        layout.addLayout(self._actions)

        self.update_from(message, stats, versions)

    # parts built on first use -----------------------------------------------------------------
    @cached_property
    def body(self) -> QLabel:
        """The person's messages and texts that are not a rendered reply (a reply is
        ``view``, so most replies never build this label)."""
        label = plain(QLabel())
        label.setObjectName("BubbleText")
        label.setWordWrap(True)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self.body_layout.insertWidget(0, label)
        return label

    @cached_property
    def footer(self) -> StatsFooter:
        """The stats line under a reply and its Timeline button (built when first needed)."""
        part = StatsFooter()
        part.hide()
        self._layout.insertWidget(self._actions_index(), part)
        return part

    @property
    def copy_button(self) -> QToolButton:
        return self.action_buttons["copy"]

    def _actions_index(self) -> int:
        return self._layout.indexOf(self._actions)

    @cached_property
    def _versions(self) -> VersionArrows:
        part = VersionArrows(lambda step: self.version_step.emit(self.message_id, step))
        for widget in part.widgets:
            self._head.addWidget(widget)
        return part

    @cached_property
    def _thinking(self) -> ThinkingBox:
        part = ThinkingBox()
        steps = self._built("tool_steps")
        at = self._layout.indexOf(steps if steps is not None else self.body_box)
        self._layout.insertWidget(at, part.button, 0, Qt.AlignmentFlag.AlignLeft)
        self._layout.insertWidget(at + 1, part.box)
        return part

    @cached_property
    def tool_steps(self) -> ToolSteps:
        """The reply's tool calls, below the thinking box and above the text."""
        part = ToolSteps()
        part.decided.connect(self.tool_decided)
        waiting = self._built("waiting")
        at = self._layout.indexOf(waiting if waiting is not None else self.body_box)
        self._layout.insertWidget(at, part)
        self._fit_width()
        return part

    def set_tool_steps(self, steps: list[Any]) -> None:
        """Stored tool calls (``ToolStep``s), collapsed; ``tool_steps`` updates and asks."""
        if steps or self._built("tool_steps") is not None:
            self.tool_steps.set_steps(steps)

    @cached_property
    def stopped(self) -> QLabel:
        label = plain(QLabel("stopped"))
        label.setObjectName("StoppedMarker")
        label.hide()
        self._layout.insertWidget(self._layout.indexOf(self.body_box) + 1, label)
        return label

    @cached_property
    def waiting(self) -> QLabel:
        label = plain(QLabel())
        label.setObjectName("WaitingNote")
        self._layout.insertWidget(self._layout.indexOf(self.body_box), label)
        return label

    def set_waiting(self, text: str) -> None:
        """What a reply with no text yet waits for ("connecting · 3 s"); "" hides it."""
        if text or self._built("waiting") is not None:
            self.waiting.setText(text)
            self.waiting.setVisible(bool(text))

    @cached_property
    def error_box(self) -> ErrorBox:
        part = ErrorBox(self._retry, lambda key: self.action_requested.emit(key, self.message_id))
        part.set_busy(self._busy)
        footer = self._built("footer")
        at = self._layout.indexOf(footer) if footer is not None else self._actions_index()
        self._layout.insertWidget(at, part)
        return part

    @cached_property
    def sources(self) -> SourceList:
        """The passages the reply was given ("Sources"), under its text (built for a reply
        that has some)."""
        part = SourceList()
        below = self._built("error_box")
        if below is None:
            below = self._built("footer")
        self._layout.insertWidget(
            self._layout.indexOf(below) if below is not None else self._actions_index(), part
        )
        return part

    def set_sources(self, sources: list[Passage]) -> None:
        """The reply's sources, listed under its text; "[n]" in its text links to source n."""
        if not sources and self._built("sources") is None:
            return
        self.sources.set_sources(sources)
        if self._view is not None:
            self._view.set_citations(citation_tips(sources))

    def open_source(self, number: int) -> None:
        """A citation "[n]" was clicked: source n is marked in the list and opened."""
        part = self._built("sources")
        if part is not None:
            part.open(number)

    def show_attachments(self, strip: QWidget) -> None:
        """A question's files under its text (``attach_view.AttachmentStrip``)."""
        if self.attachments is not None:
            self._layout.removeWidget(self.attachments)
            self.attachments.deleteLater()
        self.attachments = strip
        self._layout.insertWidget(self._layout.indexOf(self.body_box) + 1, strip)

    def _built(self, name: str) -> Any:
        """The part of that name if it was asked for already, else None (nothing is built)."""
        return self.__dict__.get(name)

    # The parts' widgets (asking for one builds its part).
    prev_button = property(lambda self: self._versions.prev)
    version_label = property(lambda self: self._versions.label)
    next_button = property(lambda self: self._versions.next)
    thinking_button = property(lambda self: self._thinking.button)
    thinking_box = property(lambda self: self._thinking.box)
    thinking = property(lambda self: self._thinking.text)
    error_text = property(lambda self: self.error_box.text)
    retry_button = property(lambda self: self.error_box.retry)
    fit_buttons = property(lambda self: self.error_box.fit)

    # actions ---------------------------------------------------------------------------------
    def _action_slot(self, key: str) -> Callable[[], None]:
        # A plain closure: lambdas with default arguments on clicked(bool) upset PySide's
        # reference counting of True/False (a crash at interpreter exit after many clicks).
        return lambda: self._act(key)

    def _act(self, key: str) -> None:
        if key == "copy":
            QGuiApplication.clipboard().setText(self.message.content)
        self.action_requested.emit(key, self.message_id)

    def _retry(self) -> None:
        self.retry_requested.emit(self.message_id)
        self.action_requested.emit("retry", self.message_id)

    def _may_act(self, key: str) -> bool:
        return key == "copy" or not self._busy

    def set_busy(self, busy: bool) -> None:
        """While a reply streams, nothing that starts another turn or reshapes the path."""
        self._busy = busy
        for key, button in self.action_buttons.items():
            button.setEnabled(self._may_act(key))
        if (error := self._built("error_box")) is not None:
            error.set_busy(busy)
        if (versions := self._built("_versions")) is not None:
            versions.show(self._shown_versions, busy)

    def mark_found(self, found: bool) -> None:
        """Highlight the bubble (a search hit the view jumped to)."""
        self.setProperty("found", "true" if found else "false")
        _repolish(self)

    # content ---------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """What the bubble shows, as plain text (a reply: its Markdown)."""
        if self._view is not None:
            return self._view.source or ("…" if self.status == "streaming" else "")
        return self.body.text()

    @property
    def is_markdown(self) -> bool:
        """True once a finished reply is rendered as Markdown."""
        return self._markdown

    @property
    def view(self) -> MarkdownView | None:
        """A reply's rendered text (None for the person's messages)."""
        return self._view

    def _drop_view(self) -> None:
        if self._view is not None:
            self.body_layout.removeWidget(self._view)
            self._view.dispose()
        self._view = None

    def _reply_view(self) -> MarkdownView:
        if self._view is None:
            if (body := self._built("body")) is not None:
                body.hide()
            self._view = MarkdownView()
            self._view.setObjectName("BubbleText")
            self._view.setAccessibleName(f"Reply from {self.message.agent_name or 'the assistant'}")
            self._view.before_grow = weak_method(self._before_grow)  # no cycle
            self._view.citation_clicked.connect(self.open_source)
            if (part := self._built("sources")) is not None:
                self._view.set_citations(citation_tips(list(part.sources.values())))
            self.body_layout.addWidget(self._view)
            self.body_box.show()
            self._fit_width()
        return self._view

    def _before_grow(self, pixels: int) -> None:
        if self.before_grow is not None:
            self.before_grow(pixels)

    def set_streaming_text(self, text: str) -> None:
        """Replace the streamed text (a bubble built mid-stream, or a reopened conversation)."""
        self._markdown = False
        self._reply_view().set_text(text, finished=False)

    def append_text(self, text: str) -> bool:
        """Add streamed text at the end (called at most ~30x/s with what arrived since).

        True when the bubble's height may have changed (the text grew a line, or began).
        """
        began = self._view is None
        return self._reply_view().append_text(text) or began

    def append_reasoning(self, text: str) -> None:
        part = self._thinking
        if part.button.isHidden():
            part.button.show()
            part.set_label(self.message.reasoning, self.status == "streaming")
        part.text.append_text(text)

    def _render(self, full: str) -> None:
        """The finished reply: the streamed view's tail becomes its last block when the text
        is what streamed (all of it, however long); otherwise (a stored reply, a text that
        changed) it is rendered afresh from ``self._content``."""
        view = self._reply_view()
        if not view.finished and view.source == full:
            self._content = full
            view.finish()
        elif view.source != self._content or not view.finished:
            view.set_text(self._content, finished=True)

    def code_blocks(self) -> list[BlockItem]:
        return self._view.code_items() if self._view is not None else []

    # footer ----------------------------------------------------------------------------------
    def set_footer_mode(self, mode: str) -> None:
        self._footer_mode = mode
        self._show_footer()

    def _show_footer(self) -> None:
        footer = self._built("footer")
        if footer is None:
            return
        shown = footer.has_content() and (
            self._footer_mode == "always" or (self._footer_mode == "hover" and self._hovered)
        )
        footer.setVisible(shown)

    def enterEvent(self, event: QEnterEvent) -> None:
        self._hovered = True
        self._show_footer()
        super().enterEvent(event)

    def leaveEvent(self, event: QEvent) -> None:
        self._hovered = False
        self._show_footer()
        super().leaveEvent(event)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        old = event.oldSize()
        if old.width() != event.size().width() or old.height() <= 0:
            self.update()
        else:
            # static contents: Qt repaints only the new strip, so the rounded bottom edge drawn
            # at the old height must be repainted too
            top = min(old.height(), event.size().height()) - BUBBLE_CORNER_PX
            self.update(0, top, self.width(), self.height() - top)

    # width -----------------------------------------------------------------------------------
    def set_max_width(self, width: int) -> None:
        self._max_width = width
        self.setMaximumWidth(width)
        self._fit_width()

    def _fit_width(self) -> None:
        inner = self._max_width - 2 * BUBBLE_PADDING_PX - 2
        view = self._view
        if view is not None and (
            not view.finished or len(view.items) != 1 or view.items[0].is_code
        ):
            self.body_box.setMinimumWidth(inner)
        else:
            snug = natural_width(self._content, view if view is not None else self.body, inner)
            # one rendered paragraph: no narrower than a short line of prose
            self.body_box.setMinimumWidth(max(260, snug) if view is not None else snug)
        error = self._built("error_box")
        if error is not None and not error.isHidden():
            error.fit_width(inner)
        steps = self._built("tool_steps")
        if steps is not None:  # a reply that used tools takes the bubble's whole width
            steps.setMinimumWidth(inner)

    # state -----------------------------------------------------------------------------------
    def _show_versions(self, versions: Versions | None) -> None:
        self._shown_versions = versions
        if (versions is not None and versions.count > 1) or self._built("_versions"):
            self._versions.show(versions, self._busy)

    @property
    def version_text(self) -> str:
        """ "‹ 2/3 ›" as shown, or "" when the message has one version."""
        part = self._built("_versions")
        return part.text if part is not None else ""

    def update_from(
        self,
        message: Message,
        stats: dict[str, Any] | None,
        versions: Versions | None = None,
    ) -> None:
        """Show the stored state of the message: text, status marker, error, stats.

        ``versions`` None keeps the versions shown before.
        """
        self.message = message
        self.status = message.status
        content = message.content
        assistant = message.role == "assistant"
        streaming = message.status == "streaming"
        if versions is not None:
            self._show_versions(versions)
        if streaming:
            if self._view is None:
                self.set_streaming_text(content)
        elif assistant and content:
            self._markdown = True
            self._content = truncate_for_display(content, REPLY_DISPLAY_LIMIT)
            self._render(content)
        else:
            self._drop_view()
            self._markdown = False
            self._content = truncate_for_display(content)
            self.body.setTextFormat(Qt.TextFormat.PlainText)
            self.body.setText(self._content)
            self.body.setVisible(bool(content))
        # an error with no text at all: no empty paragraph above the error box
        self.body_box.setVisible(bool(content) or streaming)

        thinking = self._built("_thinking")
        if message.reasoning and (not streaming or thinking is None or not thinking.text.length):
            self._thinking.show(message.reasoning, streaming)
        elif not streaming and thinking is not None:
            thinking.show(message.reasoning, streaming)

        cut = message.status in ("cancelled", "interrupted")
        if cut:
            self.stopped.setText(
                "stopped"
                if message.status == "cancelled"
                else "interrupted: SIMI Multi stopped while this reply was streaming"
            )
            self.stopped.setToolTip(message.error_text or "")
            self.stopped.show()
        elif (stopped := self._built("stopped")) is not None:
            stopped.hide()

        failed = message.status == "error"
        if failed:
            self.error_box.show_error(
                message.error_text or "The reply failed.", message.error_kind == "context_too_long"
            )
        elif (error := self._built("error_box")) is not None:
            error.hide()
        state = "error" if failed else message.status
        if self.property("state") != state:
            self.setProperty("state", state)
            _repolish(self)

        finish_reason = (stats or {}).get("finish_reason")
        actions = self.action_buttons
        actions.show("copy", bool(content))
        actions.show("edit", message.role == "user")
        for key in ("regenerate", "regenerate_with"):
            actions.show(key, assistant and not streaming and not failed)
        actions.show(
            "continue",
            assistant
            and bool(content)
            and (cut or (message.status == "complete" and finish_reason == "length")),
        )
        actions.show("delete", not streaming)

        line, shorter = "", []
        if assistant and message.status not in ("streaming", "error"):
            line, *shorter = footer_lines(stats, message.agent_name, message.model)
        tip = stats_tooltip(stats, message.agent_name, message.model)
        shown_stats = None if streaming else stats
        # no line and no stats: the footer stays hidden (its tooltip is never seen), unbuilt
        if line or shown_stats is not None or self._built("footer") is not None:
            self.footer.set_stats(line, tip, shown_stats, shorter)
        self._show_footer()
        self._fit_width()


class MessageRow(QWidget):
    """Aligns a bubble: the person's messages right, replies left."""

    def __init__(self, bubble: MessageBubble) -> None:
        super().__init__()
        self.setAttribute(Qt.WidgetAttribute.WA_StaticContents, True)
        self.bubble = bubble
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        if bubble.role == "user":
            layout.addStretch(1)
            layout.addWidget(bubble)
        else:
            layout.addWidget(bubble)
            layout.addStretch(1)
