"""The transcript: message bubbles in a scroll area that follows a streaming reply.

Bubbles are QLabels: plain text while a reply streams (updated at most ~30x/s by the
controller), Markdown once it has finished. Very long texts are cut for display only.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QColor, QFont, QResizeEvent, QTextCharFormat, QTextCursor, QTextDocument
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from desktop.store.conversations import Message
from desktop.ui.text_format import format_stats, stats_tooltip, truncate_for_display
from desktop.ui.theme import current_colors

BUBBLE_MAX_WIDTH = 820
STICK_MARGIN_PX = 32
BUBBLE_PADDING_PX = 14
NATURAL_WIDTH_SCAN = 2_000  # longer texts simply take the full bubble width


def render_markdown(text: str, code_bg: str, font: QFont | None = None) -> str:
    """Markdown to HTML for a QLabel, with a tinted background behind code."""
    doc = QTextDocument()
    if font is not None:
        doc.setDefaultFont(font)
    doc.setMarkdown(text, QTextDocument.MarkdownFeature.MarkdownDialectGitHub)
    background = QColor(code_bg)
    block = doc.begin()
    while block.isValid():
        fmt = block.blockFormat()
        if fmt.nonBreakableLines() or fmt.hasProperty(fmt.Property.BlockCodeFence):
            fmt.setBackground(background)
            fmt.setLeftMargin(4)
            QTextCursor(block).setBlockFormat(fmt)
        else:
            it = block.begin()
            while not it.atEnd():
                fragment = it.fragment()
                if fragment.isValid() and fragment.charFormat().fontFixedPitch():
                    cursor = QTextCursor(doc)
                    cursor.setPosition(fragment.position())
                    cursor.setPosition(
                        fragment.position() + fragment.length(), QTextCursor.MoveMode.KeepAnchor
                    )
                    char = QTextCharFormat()
                    char.setBackground(background)
                    cursor.mergeCharFormat(char)
                it += 1
        block = block.next()
    return doc.toHtml()


def _repolish(widget: QWidget) -> None:
    style = widget.style()
    style.unpolish(widget)
    style.polish(widget)


class MessageBubble(QFrame):
    """One message. Signals: retry_requested(int) with the failed message's id."""

    retry_requested = Signal(int)

    def __init__(self, message: Message, stats: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.message_id = message.id
        self.role = message.role
        self.status = message.status
        self._content = ""
        self._markdown = False
        self._rendered_bg = ""
        self._max_width = BUBBLE_MAX_WIDTH
        self.setObjectName("Bubble")
        self.setProperty("role", message.role)
        self.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Minimum)

        layout = QVBoxLayout(self)
        pad = BUBBLE_PADDING_PX
        layout.setContentsMargins(pad, 10, pad, 10)
        layout.setSpacing(6)

        label_text = "You" if message.role == "user" else message.agent_name or "Assistant"
        self.label = QLabel(label_text)
        self.label.setObjectName("BubbleLabel")
        if message.model:
            self.label.setToolTip(f"Model: {message.model}")
        layout.addWidget(self.label)

        self.body = QLabel()
        self.body.setObjectName("BubbleText")
        self.body.setWordWrap(True)
        self.body.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.LinksAccessibleByMouse
        )
        self.body.setOpenExternalLinks(True)
        self.body.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        layout.addWidget(self.body)

        self.stopped = QLabel("stopped")
        self.stopped.setObjectName("StoppedMarker")
        self.stopped.hide()
        layout.addWidget(self.stopped)

        self.error_box = QFrame()
        self.error_box.setObjectName("ErrorBox")
        error_layout = QHBoxLayout(self.error_box)
        error_layout.setContentsMargins(10, 8, 8, 8)
        error_layout.setSpacing(10)
        self.error_text = QLabel()
        self.error_text.setObjectName("ErrorText")
        self.error_text.setWordWrap(True)
        self.error_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        error_layout.addWidget(self.error_text, 1)
        self.retry_button = QPushButton("Retry")
        self.retry_button.setObjectName("RetryButton")
        self.retry_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.retry_button.clicked.connect(lambda: self.retry_requested.emit(self.message_id))
        error_layout.addWidget(self.retry_button, 0, Qt.AlignmentFlag.AlignTop)
        self.error_box.hide()
        layout.addWidget(self.error_box)

        self.footer = QLabel()
        self.footer.setObjectName("StatsFooter")
        self.footer.hide()
        layout.addWidget(self.footer)

        self.update_from(message, stats)

    # content ---------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """What the bubble shows, as plain text."""
        if self._markdown:
            return self._content
        return self.body.text()

    @property
    def is_markdown(self) -> bool:
        """True once a finished reply is rendered as Markdown."""
        return self._markdown

    def set_streaming_text(self, text: str) -> None:
        """Plain text while the reply streams (called by a ~30 Hz timer, not per token)."""
        self._markdown = False
        if self.body.textFormat() != Qt.TextFormat.PlainText:
            self.body.setTextFormat(Qt.TextFormat.PlainText)
        shown = truncate_for_display(text) if text else "…"
        self._content = shown
        self.body.setText(shown)
        self._fit_width()

    def _set_markdown(self, text: str) -> None:
        self._markdown = True
        self._content = truncate_for_display(text)
        self._render_markdown()
        self._fit_width()

    def _render_markdown(self) -> None:
        code_bg = current_colors().code_bg
        self._rendered_bg = code_bg
        self.body.setTextFormat(Qt.TextFormat.RichText)
        self.body.setText(render_markdown(self._content, code_bg, self.body.font()))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if (
            event.type() in (QEvent.Type.PaletteChange, QEvent.Type.StyleChange)
            and self._markdown
            and self._rendered_bg != current_colors().code_bg
        ):
            self._render_markdown()

    # width -----------------------------------------------------------------------------------
    def set_max_width(self, width: int) -> None:
        self._max_width = width
        self.setMaximumWidth(width)
        self._fit_width()

    def _natural_width(self, text: str, label: QLabel) -> int:
        """Width of the longest line, so short messages get snug bubbles that do not wrap."""
        inner = self._max_width - 2 * BUBBLE_PADDING_PX - 2
        if len(text) > NATURAL_WIDTH_SCAN or "```" in text:
            return inner
        metrics = label.fontMetrics()
        widest = max((metrics.horizontalAdvance(line) for line in text.split("\n")), default=0)
        return min(inner, widest + 4)

    def _fit_width(self) -> None:
        inner = self._max_width - 2 * BUBBLE_PADDING_PX - 2
        self.body.setMinimumWidth(min(self._natural_width(self._content, self.body), inner))
        if not self.error_box.isHidden():
            room = inner - self.retry_button.sizeHint().width() - 30
            natural = self._natural_width(self.error_text.text(), self.error_text)
            self.error_text.setMinimumWidth(max(120, min(natural, room)))

    def update_from(self, message: Message, stats: dict[str, Any] | None) -> None:
        """Show the stored state of the message: text, status marker, error, stats."""
        self.status = message.status
        content = message.content
        if message.status == "streaming":
            self.set_streaming_text(content)
        elif message.role == "assistant" and content:
            self._set_markdown(content)
        else:
            self._markdown = False
            self._content = truncate_for_display(content)
            self.body.setTextFormat(Qt.TextFormat.PlainText)
            self.body.setText(self._content)
        # an error with no text at all: no empty paragraph above the error box
        self.body.setVisible(bool(content) or message.status == "streaming")

        self.stopped.setVisible(message.status == "cancelled")
        if message.status == "cancelled" and message.error_text:
            self.stopped.setToolTip(message.error_text)

        failed = message.status == "error"
        self.error_box.setVisible(failed)
        if failed:
            self.error_text.setText(message.error_text or "The reply failed.")
        state = "error" if failed else message.status
        if self.property("state") != state:
            self.setProperty("state", state)
            _repolish(self)

        line = format_stats(stats) if message.role == "assistant" else ""
        if message.status in ("streaming", "error"):
            line = ""
        self.footer.setText(line)
        self.footer.setToolTip(stats_tooltip(stats))
        self.footer.setVisible(bool(line))
        self._fit_width()


class MessageRow(QWidget):
    """Aligns a bubble: the person's messages right, replies left."""

    def __init__(self, bubble: MessageBubble) -> None:
        super().__init__()
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


class Transcript(QScrollArea):
    """Scrollable list of bubbles. Follows new text unless the person scrolled up.

    Signals: retry_requested(int) — forwarded from a bubble's Retry button.
    """

    retry_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Transcript")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.Shape.NoFrame)
        body = QWidget()
        body.setObjectName("TranscriptBody")
        self._layout = QVBoxLayout(body)
        self._layout.setContentsMargins(24, 16, 24, 16)
        self._layout.setSpacing(12)
        self.empty = EmptyState()
        self._layout.addWidget(self.empty)
        self._layout.addStretch(1)
        self.setWidget(body)
        self._bubbles: dict[int, MessageBubble] = {}
        self._stick = True
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range)

    # scrolling -------------------------------------------------------------------------------
    def _on_scrolled(self, value: int) -> None:
        self._stick = value >= self.verticalScrollBar().maximum() - STICK_MARGIN_PX

    def _on_range(self, _minimum: int, maximum: int) -> None:
        if self._stick:
            self.verticalScrollBar().setValue(maximum)

    @property
    def following(self) -> bool:
        return self._stick

    def scroll_to_bottom(self) -> None:
        self._stick = True
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    # content ---------------------------------------------------------------------------------
    def bubbles(self) -> list[MessageBubble]:
        return list(self._bubbles.values())

    def bubble(self, message_id: int) -> MessageBubble | None:
        return self._bubbles.get(message_id)

    def clear(self) -> None:
        for bubble in list(self._bubbles.values()):
            row = bubble.parentWidget()
            if row is not None:
                self._layout.removeWidget(row)
                row.hide()  # deleteLater runs later; a visible orphan would still paint
                row.deleteLater()
        self._bubbles.clear()
        self.empty.show()
        self._stick = True

    def set_agent_name(self, name: str | None) -> None:
        self.empty.set_agent(name)

    def add_message(self, message: Message, stats: dict[str, Any] | None = None) -> MessageBubble:
        bubble = MessageBubble(message, stats)
        bubble.set_max_width(self._bubble_width())
        bubble.retry_requested.connect(self.retry_requested)
        row = MessageRow(bubble)
        self._layout.insertWidget(self._layout.count() - 1, row)
        self._bubbles[message.id] = bubble
        self.empty.hide()
        return bubble

    def remove_message(self, message_id: int) -> None:
        bubble = self._bubbles.pop(message_id, None)
        if bubble is None:
            return
        row = bubble.parentWidget()
        if row is not None:
            self._layout.removeWidget(row)
            row.hide()
            row.deleteLater()
        self.empty.setVisible(not self._bubbles)

    def stream_text(self, message_id: int, text: str) -> None:
        bubble = self._bubbles.get(message_id)
        if bubble is not None:
            bubble.set_streaming_text(text)

    def update_message(self, message: Message, stats: dict[str, Any] | None) -> None:
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
