"""The transcript: a window of message bubbles over the conversation's active path.

Only a window of the path (``PAGE`` messages, at most ``MAX_LOADED``) exists as widgets; the
window grows by a page when the person scrolls to its top or bottom and sheds the far end,
so a 5,000-message conversation opens as fast as a short one and memory stays bounded.

A streaming reply is plain text appended at the end of a QTextDocument (incremental layout:
the cost per flush depends on the new text, not on the reply so far). When the reply ends it
is rendered once as Markdown: prose as rich text, fenced code highlighted with a Copy button.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QCoreApplication, QEvent, QSize, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QDesktopServices,
    QEnterEvent,
    QGuiApplication,
    QPainter,
    QPaintEvent,
    QResizeEvent,
)
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLayout,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from desktop.store.conversations import Message, Versions
from desktop.ui.markdown import Code, Prose, code_html, prose_html, split_segments
from desktop.ui.stream_text import StreamText
from desktop.ui.text_format import format_stats, stats_tooltip, truncate_for_display
from desktop.ui.theme import current_colors

BUBBLE_MAX_WIDTH = 820
STICK_MARGIN_PX = 32
BUBBLE_PADDING_PX = 14
BUBBLE_CORNER_PX = 20  # the rounded bottom edge and padding repainted when a bubble grows
NATURAL_WIDTH_SCAN = 2_000  # longer texts simply take the full bubble width
PAGE = 40  # messages built by "Show earlier/later messages"
BATCH = 8  # messages built per event-loop turn while the view nears an unbuilt edge, at most
PREFETCH_BUDGET_S = 0.008  # ... and fewer when building them takes longer than this
FIRST_SCREEN = 12  # messages built at once when a conversation opens; the rest follow
PREFETCH_SCREENS = 1.5  # build ahead while the view is this many heights from an edge
MAX_LOADED = 120  # bubbles alive at most; the far end of the window is shed beyond this
FOOTER_MODES = ("always", "hover", "never")

# What a bubble asks the window to do: (action, message id).
ACTIONS = ("copy", "regenerate", "edit", "delete", "continue", "retry", "fit_drop", "fit_raise")

Fetch = Callable[[list[Message]], tuple[dict[int, dict[str, Any]], dict[int, Versions]]]


def _repolish(widget: QWidget) -> None:
    style = widget.style()
    style.unpolish(widget)
    style.polish(widget)


def open_link(url: str) -> None:
    """Links open in the system browser, and only when clicked (never on hover or render)."""
    qurl = QUrl(url)
    if qurl.scheme() in ("http", "https", "mailto"):
        QDesktopServices.openUrl(qurl)


def _tool(text: str, tip: str, name: str = "BubbleAction") -> QToolButton:
    button = QToolButton()
    button.setObjectName(name)
    button.setText(text)
    button.setToolTip(tip)
    button.setAutoRaise(True)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    return button


class CodeBlock(QFrame):
    """Highlighted code with its language and a Copy button."""

    def __init__(self, code: str, language: str, dark: bool) -> None:
        super().__init__()
        self.setObjectName("CodeBlock")
        self.code = code
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        head = QFrame()
        head.setObjectName("CodeHeader")
        head_layout = QHBoxLayout(head)
        head_layout.setContentsMargins(10, 2, 4, 2)
        lang = QLabel(language or "text")
        lang.setObjectName("CodeLanguage")
        head_layout.addWidget(lang, 1)
        self.copy_button = _tool("Copy", "Copy this code", "CodeCopy")
        self.copy_button.clicked.connect(self.copy)
        self._reset_timer = QTimer(self)
        self._reset_timer.setSingleShot(True)
        self._reset_timer.setInterval(1500)
        self._reset_timer.timeout.connect(self._reset_copy)
        head_layout.addWidget(self.copy_button)
        layout.addWidget(head)
        self.label = QLabel()
        self.label.setObjectName("CodeText")
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setContentsMargins(10, 8, 10, 8)
        self.label.setText(code_html(code, language, dark))
        layout.addWidget(self.label)

    def _reset_copy(self) -> None:
        self.copy_button.setText("Copy")

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.code)
        self.copy_button.setText("Copied")
        self._reset_timer.start()


def _prose_label(html_text: str) -> QLabel:
    label = QLabel()
    label.setObjectName("BubbleText")
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setTextInteractionFlags(
        Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.LinksAccessibleByMouse
    )
    label.setOpenExternalLinks(False)
    label.linkActivated.connect(open_link)
    label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
    label.setText(html_text)
    return label


class MessageBubble(QFrame):
    """One message.

    Signals:
        action_requested(str, int): one of ACTIONS for this message id.
        version_step(int, int): show the previous (-1) or next (+1) version of the message.
        retry_requested(int): the failed message's Retry button (also an action).
    """

    action_requested = Signal(str, int)
    version_step = Signal(int, int)
    retry_requested = Signal(int)

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
        self._rendered_dark: bool | None = None
        self._max_width = BUBBLE_MAX_WIDTH
        self._footer_mode = footer_mode
        self._hovered = False
        self._stats: dict[str, Any] | None = None
        self._stream: StreamText | None = None  # the text of a streaming reply
        self.before_grow: Callable[[int], None] | None = None  # see StreamText.before_grow
        self.segments: list[QWidget] = []
        self.setObjectName("Bubble")
        self.setProperty("role", message.role)
        self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Minimum)
        # Growing by a line repaints only what changed (see resizeEvent), not the whole bubble.
        self.setAttribute(Qt.WidgetAttribute.WA_StaticContents, True)

        layout = QVBoxLayout(self)
        pad = BUBBLE_PADDING_PX
        layout.setContentsMargins(pad, 10, pad, 8)
        layout.setSpacing(6)

        # Parts most messages never show (version arrows, thinking, the stopped marker, the
        # error box) are built the first time they are needed: a bubble is ~12 widgets instead
        # of ~24, which is most of what paging through a long conversation costs.
        self._layout = layout
        self._head = QHBoxLayout()
        self._head.setSpacing(2)
        label_text = "You" if message.role == "user" else message.agent_name or "Assistant"
        self.label = QLabel(label_text)
        self.label.setObjectName("BubbleLabel")
        if message.model:
            self.label.setToolTip(f"Model: {message.model}")
        self._head.addWidget(self.label)
        self._head.addStretch(1)
        layout.addLayout(self._head)
        self._version_parts: tuple[QToolButton, QLabel, QToolButton] | None = None
        self._thinking_parts: tuple[QToolButton, QFrame, StreamText] | None = None
        self._stopped: QLabel | None = None
        self._error_parts: tuple[QFrame, QLabel, QPushButton, dict[str, QPushButton]] | None = None
        self._busy = False

        self.body_box = QWidget()
        self.body_box.setAttribute(Qt.WidgetAttribute.WA_StaticContents, True)
        self.body_layout = QVBoxLayout(self.body_box)
        self.body_layout.setContentsMargins(0, 0, 0, 0)
        self.body_layout.setSpacing(8)
        layout.addWidget(self.body_box)
        self.body = QLabel()  # user messages and short plain texts
        self.body.setObjectName("BubbleText")
        self.body.setWordWrap(True)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.body.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self.body_layout.addWidget(self.body)

        self.footer = QLabel()
        self.footer.setObjectName("StatsFooter")
        self.footer.setWordWrap(True)
        self.footer.hide()
        layout.addWidget(self.footer)

        actions = QHBoxLayout()
        actions.setSpacing(0)
        actions.setContentsMargins(0, 0, 0, 0)
        self.action_buttons: dict[str, QToolButton] = {}
        for key, text, tip in (
            ("copy", "Copy", "Copy this message"),
            ("edit", "Edit", "Edit and send again (a new branch; this one stays)"),
            ("regenerate", "Regenerate", "Write another version of this reply"),
            ("continue", "Continue", "Carry on from where this reply stopped"),
            ("delete", "Delete", "Delete this message"),
        ):
            button = _tool(text, tip)
            button.clicked.connect(self._action_slot(key))
            actions.addWidget(button)
            self.action_buttons[key] = button
        actions.addStretch(1)
        self.copy_button = self.action_buttons["copy"]
        layout.addLayout(actions)

        self.update_from(message, stats, versions)

    # parts built on first use -----------------------------------------------------------------
    def _versions_ui(self) -> tuple[QToolButton, QLabel, QToolButton]:
        if self._version_parts is None:
            prev = _tool("‹", "Previous version", "VersionButton")
            label = QLabel()
            label.setObjectName("VersionLabel")
            nxt = _tool("›", "Next version", "VersionButton")
            prev.clicked.connect(lambda: self.version_step.emit(self.message_id, -1))
            nxt.clicked.connect(lambda: self.version_step.emit(self.message_id, 1))
            for widget in (prev, label, nxt):
                widget.hide()
                self._head.addWidget(widget)
            self._version_parts = (prev, label, nxt)
        return self._version_parts

    @property
    def prev_button(self) -> QToolButton:
        return self._versions_ui()[0]

    @property
    def version_label(self) -> QLabel:
        return self._versions_ui()[1]

    @property
    def next_button(self) -> QToolButton:
        return self._versions_ui()[2]

    def _thinking_ui(self) -> tuple[QToolButton, QFrame, StreamText]:
        if self._thinking_parts is None:
            button = QToolButton()
            button.setObjectName("ThinkingToggle")
            button.setCheckable(True)
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
            button.setArrowType(Qt.ArrowType.RightArrow)
            button.setAutoRaise(True)
            button.toggled.connect(self._toggle_thinking)
            box = QFrame()  # draws the rule at the left of the thinking text
            box.setObjectName("ThinkingBox")
            box_layout = QVBoxLayout(box)
            box_layout.setContentsMargins(10, 0, 0, 0)
            text = StreamText()
            text.setObjectName("ThinkingText")
            box_layout.addWidget(text)
            for widget in (button, box, text):
                widget.hide()
            at = self._layout.indexOf(self.body_box)
            self._layout.insertWidget(at, button, 0, Qt.AlignmentFlag.AlignLeft)
            self._layout.insertWidget(at + 1, box)
            self._thinking_parts = (button, box, text)
        return self._thinking_parts

    @property
    def thinking_button(self) -> QToolButton:
        return self._thinking_ui()[0]

    @property
    def thinking_box(self) -> QFrame:
        return self._thinking_ui()[1]

    @property
    def thinking(self) -> StreamText:
        return self._thinking_ui()[2]

    @property
    def stopped(self) -> QLabel:
        if self._stopped is None:
            self._stopped = QLabel("stopped")
            self._stopped.setObjectName("StoppedMarker")
            self._stopped.hide()
            self._layout.insertWidget(self._layout.indexOf(self.body_box) + 1, self._stopped)
        return self._stopped

    def _error_ui(self) -> tuple[QFrame, QLabel, QPushButton, dict[str, QPushButton]]:
        if self._error_parts is None:
            box = QFrame()
            box.setObjectName("ErrorBox")
            error_layout = QHBoxLayout(box)
            error_layout.setContentsMargins(10, 8, 8, 8)
            error_layout.setSpacing(10)
            text = QLabel()
            text.setObjectName("ErrorText")
            text.setWordWrap(True)
            text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            error_layout.addWidget(text, 1)
            retry = QPushButton("Retry")
            retry.setObjectName("RetryButton")
            retry.setCursor(Qt.CursorShape.PointingHandCursor)
            retry.clicked.connect(self._retry)
            error_layout.addWidget(retry, 0, Qt.AlignmentFlag.AlignTop)
            # "Context too long" offers two ways out (local agents): leave out the oldest
            # turns, or raise the agent's context size; both then retry.
            fit: dict[str, QPushButton] = {}
            for key, label, tip in (
                (
                    "fit_drop",
                    "Drop oldest turns",
                    "Send again without the oldest turns (they stay in the conversation)",
                ),
                (
                    "fit_raise",
                    "Raise context",
                    "Raise the agent's context size (n_ctx) and send again",
                ),
            ):
                button = QPushButton(label)
                button.setObjectName("RetryButton")
                button.setToolTip(tip)
                button.setCursor(Qt.CursorShape.PointingHandCursor)
                button.clicked.connect(self._fit_slot(key))
                button.hide()
                error_layout.addWidget(button, 0, Qt.AlignmentFlag.AlignTop)
                fit[key] = button
            box.hide()
            self._layout.insertWidget(self._layout.indexOf(self.footer), box)
            self._error_parts = (box, text, retry, fit)
            self._enable_parts()
        return self._error_parts

    @property
    def error_box(self) -> QFrame:
        return self._error_ui()[0]

    @property
    def error_text(self) -> QLabel:
        return self._error_ui()[1]

    @property
    def retry_button(self) -> QPushButton:
        return self._error_ui()[2]

    @property
    def fit_buttons(self) -> dict[str, QPushButton]:
        return self._error_ui()[3]

    # actions ---------------------------------------------------------------------------------
    def _action_slot(self, key: str) -> Callable[[], None]:
        # A plain closure: lambdas with default arguments on clicked(bool) upset PySide's
        # reference counting of True/False (a crash at interpreter exit after many clicks).
        return lambda: self._act(key)

    def _act(self, key: str) -> None:
        if key == "copy":
            QGuiApplication.clipboard().setText(self.message.content)
        self.action_requested.emit(key, self.message_id)

    def _fit_slot(self, key: str) -> Callable[[], None]:
        return lambda: self.action_requested.emit(key, self.message_id)

    def _retry(self) -> None:
        self.retry_requested.emit(self.message_id)
        self.action_requested.emit("retry", self.message_id)

    def set_busy(self, busy: bool) -> None:
        """While a reply streams, nothing that starts another turn or reshapes the path."""
        self._busy = busy
        for key in ("edit", "regenerate", "continue", "delete"):
            self.action_buttons[key].setEnabled(not busy)
        self._enable_parts()

    def _enable_parts(self) -> None:
        if self._error_parts is not None:
            _box, _text, retry, fit = self._error_parts
            for button in (retry, *fit.values()):
                button.setEnabled(not self._busy)
        if self._version_parts is not None:
            self._show_versions(self._versions)

    def _toggle_thinking(self, shown: bool) -> None:
        self.thinking.setVisible(shown)
        self.thinking_box.setVisible(shown)
        self.thinking_button.setArrowType(
            Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow
        )

    def _show_thinking_label(self) -> None:
        busy = self.status == "streaming"
        words = 0 if busy else len(self.message.reasoning.split())
        text = "Thinking…" if busy else "Thinking"
        if words:
            text += f" ({words:,} words)"
        self.thinking_button.setText(text)

    # content ---------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """What the bubble shows, as plain text."""
        if self._stream is not None:
            return self._stream.toPlainText() or "…"
        if self._markdown:
            return self._content
        return self.body.text()

    @property
    def is_markdown(self) -> bool:
        """True once a finished reply is rendered as Markdown."""
        return self._markdown

    def _clear_segments(self) -> None:
        for widget in self.segments:
            self.body_layout.removeWidget(widget)
            widget.hide()
            widget.deleteLater()
        self.segments = []
        if self._stream is not None:
            self.body_layout.removeWidget(self._stream)
            self._stream.dispose()
        self._stream = None

    def _stream_widget(self) -> StreamText:
        if self._stream is None:
            self._clear_segments()
            self._markdown = False
            self.body.hide()
            self._stream = StreamText()
            self._stream.setObjectName("BubbleText")
            self._stream.before_grow = self._before_grow
            self.body_layout.addWidget(self._stream)
            self.body_box.show()
            self._fit_width()
        assert self._stream is not None
        return self._stream

    def _before_grow(self, pixels: int) -> None:
        if self.before_grow is not None:
            self.before_grow(pixels)

    def set_streaming_text(self, text: str) -> None:
        """Replace the streamed text (a bubble built mid-stream, or a reopened conversation)."""
        self._clear_segments()
        self._stream_widget()
        self._stream_widget().set_all(text)

    def append_text(self, text: str) -> bool:
        """Add streamed text at the end (called at most ~30x/s with what arrived since).

        True when the bubble's height may have changed (the text grew a line, or began).
        """
        began = self._stream is None
        return self._stream_widget().append_text(text) or began

    def append_reasoning(self, text: str) -> None:
        if self.thinking_button.isHidden():
            self.thinking_button.show()
            self._show_thinking_label()
        self.thinking.append_text(text)

    def _render(self) -> None:
        """The finished reply as Markdown: prose labels and code blocks."""
        self._clear_segments()
        colors = current_colors()
        self._rendered_dark = colors.dark
        self.body.hide()
        for segment in split_segments(self._content):
            widget: QWidget
            if isinstance(segment, Code):
                widget = CodeBlock(segment.code, segment.language, colors.dark)
            else:
                assert isinstance(segment, Prose)
                widget = _prose_label(prose_html(segment.text, colors, self.font()))
            self.body_layout.addWidget(widget)
            self.segments.append(widget)

    def code_blocks(self) -> list[CodeBlock]:
        return [w for w in self.segments if isinstance(w, CodeBlock)]

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if (
            event.type() in (QEvent.Type.PaletteChange, QEvent.Type.StyleChange)
            and self._markdown
            and self._rendered_dark is not None
            and self._rendered_dark != current_colors().dark
        ):
            self._render()

    # footer ----------------------------------------------------------------------------------
    def set_footer_mode(self, mode: str) -> None:
        self._footer_mode = mode
        self._show_footer()

    def _show_footer(self) -> None:
        shown = bool(self.footer.text()) and (
            self._footer_mode == "always" or (self._footer_mode == "hover" and self._hovered)
        )
        self.footer.setVisible(shown)

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

    def _natural_width(self, text: str, label: QLabel) -> int:
        """Width of the longest line, so short messages get snug bubbles that do not wrap."""
        inner = self._max_width - 2 * BUBBLE_PADDING_PX - 2
        if len(text) > NATURAL_WIDTH_SCAN or "```" in text or "|" in text:
            return inner
        metrics = label.fontMetrics()
        widest = max((metrics.horizontalAdvance(line) for line in text.split("\n")), default=0)
        return min(inner, widest + 4)

    def _fit_width(self) -> None:
        inner = self._max_width - 2 * BUBBLE_PADDING_PX - 2
        if self._stream is not None or len(self.segments) > 1 or self.code_blocks():
            self.body_box.setMinimumWidth(inner)
        elif self.segments:
            self.body_box.setMinimumWidth(
                max(260, min(self._natural_width(self._content, self.body), inner))
            )
        else:
            self.body_box.setMinimumWidth(min(self._natural_width(self._content, self.body), inner))
        if self._error_parts is not None and not self._error_parts[0].isHidden():
            _box, text, retry, fit = self._error_parts
            buttons = [b for b in (retry, *fit.values()) if not b.isHidden()]
            # the text wraps beside every button shown (Retry, and the two context ones)
            room = inner - sum(b.sizeHint().width() + 10 for b in buttons) - 20
            natural = self._natural_width(text.text(), text)
            text.setMinimumWidth(max(120, min(natural, room)))

    # state -----------------------------------------------------------------------------------
    def _show_versions(self, versions: Versions | None) -> None:
        self._versions = versions
        many = versions is not None and versions.count > 1
        if not many and self._version_parts is None:
            return
        prev, label, nxt = self._versions_ui()
        for w in (prev, label, nxt):
            w.setVisible(many)
        if versions is not None and many:
            label.setText(f"{versions.index + 1}/{versions.count}")
            prev.setEnabled(versions.index > 0 and not self._busy)
            nxt.setEnabled(versions.index < versions.count - 1 and not self._busy)

    @property
    def version_text(self) -> str:
        """ "‹ 2/3 ›" as shown, or "" when the message has one version."""
        if self._version_parts is None or self.version_label.isHidden():
            return ""
        return f"‹ {self.version_label.text()} ›"

    def update_from(
        self,
        message: Message,
        stats: dict[str, Any] | None,
        versions: Versions | None = None,
    ) -> None:
        """Show the stored state of the message: text, status marker, error, stats."""
        self.message = message
        self.status = message.status
        self._stats = stats
        content = message.content
        assistant = message.role == "assistant"
        if versions is not None or not hasattr(self, "_versions"):
            self._show_versions(versions)
        if message.status == "streaming":
            if self._stream is None:
                self.set_streaming_text(content)
        elif assistant and content:
            self._markdown = True
            self._content = truncate_for_display(content)
            self._render()
        else:
            self._clear_segments()
            self._markdown = False
            self._content = truncate_for_display(content)
            self.body.setTextFormat(Qt.TextFormat.PlainText)
            self.body.setText(self._content)
            self.body.setVisible(bool(content))
        # an error with no text at all: no empty paragraph above the error box
        self.body_box.setVisible(bool(content) or message.status == "streaming")

        thinking = self._thinking_parts
        if message.reasoning and (
            message.status != "streaming" or thinking is None or not thinking[2].length
        ):
            self.thinking.set_all(message.reasoning)
            self.thinking_button.show()
            self._show_thinking_label()
        elif message.status != "streaming" and thinking is not None:
            thinking[2].set_all(message.reasoning)
            thinking[0].setVisible(bool(message.reasoning))
            self._show_thinking_label()

        cut = message.status in ("cancelled", "interrupted")
        if cut:
            self.stopped.setText(
                "stopped"
                if message.status == "cancelled"
                else "interrupted: SIMI Multi stopped while this reply was streaming"
            )
            self.stopped.setToolTip(message.error_text or "")
            self.stopped.show()
        elif self._stopped is not None:
            self._stopped.hide()

        failed = message.status == "error"
        if failed:
            box, text, _retry, fit = self._error_ui()
            text.setText(message.error_text or "The reply failed.")
            for button in fit.values():
                button.setVisible(message.error_kind == "context_too_long")
            box.show()
        elif self._error_parts is not None:
            self._error_parts[0].hide()
        state = "error" if failed else message.status
        if self.property("state") != state:
            self.setProperty("state", state)
            _repolish(self)

        finished = message.status not in ("streaming",)
        finish_reason = (stats or {}).get("finish_reason")
        self.action_buttons["copy"].setVisible(bool(content))
        self.action_buttons["edit"].setVisible(message.role == "user")
        self.action_buttons["regenerate"].setVisible(assistant and finished and not failed)
        self.action_buttons["continue"].setVisible(
            assistant
            and bool(content)
            and (cut or (message.status == "complete" and finish_reason == "length"))
        )
        self.action_buttons["delete"].setVisible(finished)

        line = ""
        if assistant and message.status not in ("streaming", "error"):
            line = format_stats(stats, message.agent_name, message.model)
        self.footer.setText(line)
        self.footer.setToolTip(stats_tooltip(stats))
        self._show_footer()
        self._fit_width()


def _fill_surface(widget: QWidget, event: QPaintEvent) -> None:
    """The opaque transcript background (opaque, so Qt can blit when it scrolls)."""
    painter = QPainter(widget)
    painter.fillRect(event.rect(), QColor(current_colors().surface))
    painter.end()


class _Body(QWidget):
    """The transcript's content: opaque (so the view can blit it) and static when it grows."""

    def __init__(self) -> None:
        super().__init__()
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent, True)
        self.setAttribute(Qt.WidgetAttribute.WA_StaticContents, True)

    def minimumSizeHint(self) -> QSize:
        # The scroll area makes the content at least this tall. Qt's default is the height at
        # the *narrowest* width (word-wrapped bubbles are taller there), which left a blank
        # gap under the last message: use the height at the width the content has.
        layout = self.layout()
        if layout is None:
            return super().minimumSizeHint()
        if layout.hasHeightForWidth():
            return QSize(0, layout.totalHeightForWidth(self.width()))
        return QSize(0, layout.totalSizeHint().height())

    def paintEvent(self, event: QPaintEvent) -> None:
        _fill_surface(self, event)


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


class EmptyState(QWidget):
    def __init__(self) -> None:
        super().__init__()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(24, 80, 24, 24)
        layout.setSpacing(8)
        self.title = QLabel()
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


def _no_fetch(messages: list[Message]) -> tuple[dict[int, dict[str, Any]], dict[int, Versions]]:
    return {}, {}


class Transcript(QScrollArea):
    """A window of bubbles over the active path. Follows new text unless the person scrolled up.

    Signals:
        retry_requested(int): a failed reply's Retry button.
        action_requested(str, int): a bubble's action (ACTIONS) and its message id.
        version_step(int, int): a bubble's ‹ › buttons (message id, -1 or +1).
    """

    retry_requested = Signal(int)
    action_requested = Signal(str, int)
    version_step = Signal(int, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Transcript")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.Shape.NoFrame)
        # Scrolling blits (see scrollContentsBy): the view and the content paint opaquely.
        self.viewport().setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent, True)
        self._prescrolled = 0
        body = _Body()
        body.setObjectName("TranscriptBody")
        self._layout = QVBoxLayout(body)
        self._layout.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)  # see _Body
        self._layout.setContentsMargins(24, 16, 24, 16)
        self._layout.setSpacing(12)
        self.earlier_button = QPushButton("Show earlier messages")
        self.earlier_button.setObjectName("LoadMore")
        self.earlier_button.clicked.connect(self.load_earlier)
        self.later_button = QPushButton("Show later messages")
        self.later_button.setObjectName("LoadMore")
        self.later_button.clicked.connect(self.load_later)
        self.empty = EmptyState()
        self._layout.addWidget(self.earlier_button, 0, Qt.AlignmentFlag.AlignHCenter)
        self._layout.addWidget(self.empty)
        self._layout.addWidget(self.later_button, 0, Qt.AlignmentFlag.AlignHCenter)
        self._layout.addStretch(1)
        self.setWidget(body)
        self._bubbles: dict[int, MessageBubble] = {}
        self._rows: list[MessageRow] = []  # the window, in path order
        self._path: list[Message] = []
        self._start = 0
        self._end = 0
        self._fetch: Fetch = _no_fetch
        self._live: dict[int, list[str]] = {}  # streamed text not yet stored, per message
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
    def scrollContentsBy(self, dx: int, dy: int) -> None:
        """Scroll by blitting the view (QScrollArea moves its widget, which repaints it all).

        Moving the content with ``viewport().scroll`` copies what is on screen and paints only
        the strip that comes into view; the content widget ends where QScrollArea would put it.
        """
        dy += self._prescrolled
        self._prescrolled = 0
        if dx or dy:
            self.viewport().scroll(dx, dy)

    def prescroll(self, pixels: int) -> None:
        """A following reply is about to grow by ``pixels``: move the view up first.

        Called before the text marks anything dirty, so Qt can blit the view (a dirty area
        inside it forces a full repaint); the scroll bar catches up when the layout has grown,
        and scrollContentsBy then skips what was already moved.
        """
        bar = self.verticalScrollBar()
        if (
            not self._stick
            or self._loading
            or not self.viewport().isVisible()
            or bar.maximum() <= 0
            or bar.value() != bar.maximum()
        ):
            return
        # Anything still dirty in the view would make Qt repaint all of it instead of
        # blitting: paint it first (it was due anyway).
        QCoreApplication.sendPostedEvents(self.window(), QEvent.Type.UpdateRequest)
        self.viewport().scroll(0, -pixels)
        self._prescrolled += pixels

    def paintEvent(self, event: QPaintEvent) -> None:
        _fill_surface(self.viewport(), event)

    def _on_scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._stick = value >= bar.maximum() - STICK_MARGIN_PX and self._end >= len(self._path)
        if not self._loading and self._near_unbuilt_edge() and not self._page_timer.isActive():
            self._page_timer.start()

    def _near_unbuilt_edge(self) -> str | None:
        """ "top"/"bottom" when the view is within PREFETCH_SCREENS of an edge with more beyond."""
        bar = self.verticalScrollBar()
        zone = self.viewport().height() * PREFETCH_SCREENS
        if self._start > 0 and bar.value() - bar.minimum() < zone:
            return "top"
        if self._end < len(self._path) and bar.maximum() - bar.value() < zone:
            return "bottom"
        return None

    def _prefetch(self) -> None:
        """Build one BATCH of bubbles towards the edge the view is nearing; again next turn.

        Bubbles are built ahead of the scroll, a few per event-loop turn, so reaching the top
        of a long conversation never waits on a whole page being built at once.
        """
        if self._loading:
            return
        edge = self._near_unbuilt_edge()
        if edge == "top":
            self._grow_top(BATCH, PREFETCH_BUDGET_S)
        elif edge == "bottom":
            self._grow_bottom(BATCH, PREFETCH_BUDGET_S)
        if edge is not None and self._near_unbuilt_edge():
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
        if self._end < len(self._path):
            self._show_window(max(0, len(self._path) - FIRST_SCREEN), len(self._path))
            self._page_timer.start()
        self._stick = True
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    # window ----------------------------------------------------------------------------------
    @property
    def window_range(self) -> tuple[int, int]:
        """[start, end) of the path that exists as bubbles."""
        return self._start, self._end

    @property
    def path(self) -> list[Message]:
        return list(self._path)

    def bubbles(self) -> list[MessageBubble]:
        return [row.bubble for row in self._rows]

    def bubble(self, message_id: int) -> MessageBubble | None:
        return self._bubbles.get(message_id)

    def _make_row(
        self, message: Message, stats: dict[str, Any] | None, versions: Versions | None
    ) -> MessageRow:
        bubble = MessageBubble(message, stats, versions, self._footer_mode)
        bubble.before_grow = self._grow_hook(message.id)
        if message.status == "streaming" and message.id in self._live:
            bubble.set_streaming_text("".join(self._live[message.id]))
        bubble.set_max_width(self._bubble_width())
        # Queued: these rebuild the transcript, which must not delete the bubble while it is
        # still delivering its own click (PySide then miscounts references and crashes later).
        queued = Qt.ConnectionType.QueuedConnection
        bubble.retry_requested.connect(self.retry_requested, queued)
        bubble.action_requested.connect(self.action_requested, queued)
        bubble.version_step.connect(self.version_step, queued)
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
        self, messages: list[Message], budget_s: float | None = None, from_end: bool = False
    ) -> list[MessageRow]:
        """Rows for ``messages``; with a budget, as many as fit in it (at least one), taken
        from the end nearest the built window when ``from_end``."""
        stats, versions = self._fetch(messages)
        rows: list[MessageRow] = []
        began = time.perf_counter()
        for m in reversed(messages) if from_end else messages:
            rows.append(self._make_row(m, stats.get(m.id), versions.get(m.id)))
            if budget_s is not None and time.perf_counter() - began > budget_s:
                break
        if from_end:
            rows.reverse()
        return rows

    def _insert_rows(self, at: int, rows: list[MessageRow]) -> None:
        # layout: [earlier, empty, rows..., later, stretch]
        base = 2
        for offset, row in enumerate(rows):
            self._layout.insertWidget(base + at + offset, row)
            # shown (and polished) now: the layout would show it a loop turn later, and until
            # then it takes no room, so keeping the view in place would measure wrong heights
            row.show()
        self._rows[at:at] = rows

    def _drop_rows(self, rows: list[MessageRow]) -> None:
        for row in rows:
            self._bubbles.pop(row.bubble.message_id, None)
            self._layout.removeWidget(row)
            row.hide()  # deleteLater runs later; a visible orphan would still paint
            row.deleteLater()
            self._rows.remove(row)

    def _update_chrome(self) -> None:
        self.earlier_button.setVisible(self._start > 0)
        self.later_button.setVisible(self._end < len(self._path))
        self.empty.setVisible(not self._path)

    def _show_window(self, start: int, end: int) -> None:
        self._drop_rows(list(self._rows))
        self._start, self._end = start, end
        self._insert_rows(0, self._build(self._path[start:end]))
        self._update_chrome()

    def show_path(
        self, messages: list[Message], fetch: Fetch | None = None, focus_id: int | None = None
    ) -> None:
        """Show a conversation: the last page of it, or a page around ``focus_id``."""
        self._fetch = fetch or _no_fetch
        self._path = list(messages)
        ids = [m.id for m in self._path]
        if focus_id is not None and focus_id in ids:
            index = ids.index(focus_id)
            start = max(0, index - FIRST_SCREEN // 2)
            end = min(len(ids), start + FIRST_SCREEN)
            self._stick = False
        else:
            end = len(ids)
            start = max(0, end - FIRST_SCREEN)
            self._stick = True
        self._show_window(start, end)
        if focus_id is not None:
            self.reveal(focus_id)
        self._page_timer.start()  # the rest of the screen and a screen beyond, in batches

    def reveal(self, message_id: int) -> None:
        """Scroll so the message is in view and mark it briefly (search hits)."""
        ids = [m.id for m in self._path]
        if message_id not in ids:
            return
        index = ids.index(message_id)
        if not self._start <= index < self._end:
            start = max(0, index - FIRST_SCREEN // 2)
            self._show_window(start, min(len(ids), start + FIRST_SCREEN))
            self._page_timer.start()
        bubble = self._bubbles.get(message_id)
        if bubble is None:
            return
        self._stick = False
        self._unmark()
        bubble.setProperty("found", "true")
        _repolish(bubble)
        self._found_id = message_id
        self._scroll_to_found()
        self._scroll_timer.start()
        self._unmark_timer.start()

    def _scroll_to_found(self) -> None:
        bubble = self._bubbles.get(self._found_id) if self._found_id is not None else None
        row = bubble.parentWidget() if bubble is not None else None
        if row is not None:
            self.widget().layout().activate()
            self.ensureWidgetVisible(row, 0, 80)
            self._stick = False

    def _unmark(self) -> None:
        bubble = self._bubbles.get(self._found_id) if self._found_id is not None else None
        if bubble is not None:
            bubble.setProperty("found", "false")
            _repolish(bubble)

    def load_earlier(self) -> None:
        """A page of earlier messages ("Show earlier messages"); the view stays where it is."""
        self._grow_top(PAGE)

    def load_later(self) -> None:
        self._grow_bottom(PAGE)

    def _relayout_now(self) -> None:
        """Positions and the scroll range up to date now, not after posted layout requests.

        The scroll area sizes the content first, then the content lays out its rows once, at
        that size. (Activating the content's layout first would squeeze the rows into the old
        height and move every one of them twice: a repaint of the whole view.)
        """
        QCoreApplication.sendEvent(self, QEvent(QEvent.Type.LayoutRequest))
        layout = self.widget().layout()
        if layout is not None:
            layout.activate()

    def _anchor(self) -> tuple[MessageRow, int] | None:
        """The first row at the top of the view, and how far above the view's top it starts."""
        value = self.verticalScrollBar().value()
        for row in self._rows:
            if row.y() + row.height() > value:
                return row, value - row.y()
        return None

    def _restore(self, anchor: tuple[MessageRow, int] | None) -> None:
        self._relayout_now()
        if anchor is not None and anchor[0] in self._rows:
            self.verticalScrollBar().setValue(anchor[0].y() + anchor[1])

    def _grow_top(self, count: int, budget_s: float | None = None) -> None:
        self._grow(count, budget_s, top=True)

    def _grow_bottom(self, count: int, budget_s: float | None = None) -> None:
        self._grow(count, budget_s, top=False)

    def _grow(self, count: int, budget_s: float | None, top: bool) -> None:
        """Build up to ``count`` bubbles beyond one end of the window; shed the other end past
        MAX_LOADED; keep the row at the top of the view where it is on screen."""
        if self._loading or (self._start == 0 if top else self._end >= len(self._path)):
            return
        self._loading = True
        try:
            anchor = self._anchor()
            if top:
                messages = self._path[max(0, self._start - count) : self._start]
                rows = self._build(messages, budget_s, from_end=True)
                self._insert_rows(0, rows)
                self._start -= len(rows)
            else:
                messages = self._path[self._end : self._end + count]
                rows = self._build(messages, budget_s)
                self._insert_rows(len(self._rows), rows)
                self._end += len(rows)
            extra = (self._end - self._start) - MAX_LOADED
            if extra > 0 and top:
                self._drop_rows(self._rows[-extra:])
                self._end -= extra
            elif extra > 0:
                self._drop_rows(self._rows[:extra])
                self._start += extra
            self._update_chrome()
            self._restore(anchor)
        finally:
            self._loading = False

    # content ---------------------------------------------------------------------------------
    def clear(self) -> None:
        self._drop_rows(list(self._rows))
        self._bubbles.clear()
        self._path = []
        self._start = self._end = 0
        self._live.clear()
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
    ) -> MessageBubble | None:
        """Append to the path; the bubble is built when the window is at the end."""
        at_end = self._end == len(self._path)
        self._path.append(message)
        bubble = None
        if at_end:
            self._insert_rows(len(self._rows), [self._make_row(message, stats, versions)])
            self._end = len(self._path)
            bubble = self._bubbles[message.id]
            extra = (self._end - self._start) - MAX_LOADED
            if extra > 0 and self._stick:
                self._drop_rows(self._rows[:extra])
                self._start += extra
        self._update_chrome()
        return bubble

    def remove_message(self, message_id: int) -> None:
        ids = [m.id for m in self._path]
        if message_id in ids:
            index = ids.index(message_id)
            del self._path[index]
            if index < self._start:
                self._start -= 1
            if index < self._end:
                self._end -= 1
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
        """Streamed text since the last flush (the controller coalesces, ~30x/s)."""
        self._live.setdefault(message_id, []).append(text)
        bubble = self._bubbles.get(message_id)
        if bubble is not None and bubble.append_text(text):
            self._settle(bubble)
            if self._prescrolled:  # the content did not grow as announced: put the view back
                self.viewport().scroll(0, self._prescrolled)
                self._prescrolled = 0

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
        self._relayout_now()

    def append_reasoning(self, message_id: int, text: str) -> None:
        bubble = self._bubbles.get(message_id)
        if bubble is not None:
            bubble.append_reasoning(text)

    def update_message(
        self,
        message: Message,
        stats: dict[str, Any] | None,
        versions: Versions | None = None,
    ) -> None:
        self._live.pop(message.id, None)
        for i, m in enumerate(self._path):
            if m.id == message.id:
                self._path[i] = message
                break
        bubble = self._bubbles.get(message.id)
        if bubble is not None:
            bubble.update_from(message, stats, versions)

    # layout ----------------------------------------------------------------------------------
    def _bubble_width(self) -> int:
        width = self.viewport().width() - 48
        return max(240, min(BUBBLE_MAX_WIDTH, int(width * 0.82)))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        width = self._bubble_width()
        for bubble in self._bubbles.values():
            bubble.set_max_width(width)
