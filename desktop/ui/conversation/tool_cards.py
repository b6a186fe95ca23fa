"""The tool calls of a reply, as cards in its bubble (above the reply's text).

A ``ToolCard`` is one ``ToolStep`` (``store/tool_steps.py``): "<tool> · <server>" and its
state in words. While the call waits for the person it shows the arguments as indented JSON,
the tool's description and Allow once / Always allow for <agent> / Deny; once answered the
buttons go. A finished call is collapsed (size and duration in its status line) with a "Show
result" toggle that unfolds the arguments and the result, as plain text in read-only editors
(``setPlainText``: a result's markup is shown as characters, never rendered). An error is in
the error colour and always visible as one line. ``ToolSteps`` holds a reply's cards in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import shiboken6
from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QFont, QFontDatabase, QResizeEvent, QTextLayout, QTextOption
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QToolButton,
    QWidget,
)

from desktop.chat.tool_loop import ApprovalRequest, pretty_json
from desktop.store.tool_steps import ToolStep
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.widgets import FlowLayout, vbox

ARGUMENT_LINES = 10  # the arguments' box grows to this many lines, then scrolls
RESULT_LINES = 14
AGENT_NAME_CHARS = 24  # "Always allow for <name>": a longer name is cut (whole in the tooltip)
ALWAYS_TIP = (
    "Run {tool} from now on without asking, for this agent only; revoke in Settings → Tools"
)


def size_text(chars: int) -> str:
    return "1 char" if chars == 1 else f"{chars:,} chars"


def duration_text(ms: float | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.1f} s" if ms < 60_000 else f"{ms / 60_000:.1f} min"


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def status_text(step: ToolStep) -> tuple[str, str]:
    """The card's state in words and its tone ("", "wait", "error", "muted")."""
    status = step.status
    if status == "asked":
        return "Checking the call…", "muted"
    if status == "waiting":
        return "Waiting for your approval", "wait"
    if status == "running":
        return "Running…", "muted"
    if status == "done" and not step.is_error:
        size = size_text(step.size) + (", cut" if step.truncated else "")
        parts = ["Done", size, duration_text(step.duration_ms)]
        return " · ".join(p for p in parts if p), ""
    if status in ("done", "error"):
        why = first_line(step.result) or "the tool failed without saying why"
        return f"Tool error · {why}", "error"
    if status == "timeout":
        why = first_line(step.result)
        return "Timed out" + (f" · {why}" if why else ""), "error"
    if status == "denied":
        return "Denied", "muted"
    if status in ("invalid", "refused"):
        return f"Not run: {first_line(step.result) or 'the call could not be run'}", "error"
    if status == "cancelled":
        return "Stopped", "muted"
    return status, "muted"


def person_is_typing() -> bool:
    """Whether the keyboard focus is in a text field holding text (any pane's composer, a
    search box): an approval then leaves the focus there, so a space typed next never
    presses Allow once."""
    widget = QApplication.focusWidget()
    if isinstance(widget, QPlainTextEdit):
        return not widget.isReadOnly() and bool(widget.toPlainText())
    if isinstance(widget, QLineEdit):
        return not widget.isReadOnly() and bool(widget.text())
    return False


def reveal(area: QScrollArea, card: QWidget, margin: int = 12) -> None:
    """Scroll ``area`` so the card's top (its tool and server) is in view, unless the whole
    card is already; a card taller than the view shows from its top."""
    if not shiboken6.isValid(card) or not shiboken6.isValid(area):
        return
    content = area.widget()
    if content is None:
        return
    top = card.mapTo(content, QPoint(0, 0)).y()
    bar = area.verticalScrollBar()
    view = area.viewport().height()
    if top < bar.value() or top + card.height() > bar.value() + view:
        bar.setValue(max(bar.minimum(), min(bar.maximum(), top - margin)))


def _repolish(widget: QWidget) -> None:
    widget.style().unpolish(widget)
    widget.style().polish(widget)


def visual_lines(text: str, font: QFont, width: float, most: int) -> int:
    """How many lines ``text`` takes wrapped at ``width`` (word boundaries, else anywhere, as
    the boxes wrap), counting up to ``most``."""
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    count = 0
    for paragraph in text.split("\n"):
        layout = QTextLayout(paragraph, font)
        layout.setTextOption(option)
        layout.beginLayout()
        while count < most:
            line = layout.createLine()
            if not line.isValid():
                break
            line.setLineWidth(width)
            count += 1
        layout.endLayout()
        if count >= most:
            break
    return max(1, count)


class FitText(QPlainTextEdit):
    """A read-only monospace box exactly as tall as its wrapped text, up to ``lines`` lines;
    longer texts scroll. Filled with ``setPlainText`` only: markup shows as characters."""

    def __init__(self, lines: int) -> None:
        super().__init__()
        self._lines = lines
        self._text = ""

    def set_text(self, text: str) -> None:
        self._text = text
        self.setPlainText(text)
        self._fit()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self._fit()

    def _fit(self) -> None:
        margin = self.document().documentMargin()
        width = max(20.0, self.viewport().width() - 2 * margin - 4)
        lines = visual_lines(self._text, self.font(), width, self._lines + 1)
        policy = Qt.ScrollBarPolicy  # a scroll bar only when the text is taller than the box
        fits = lines <= self._lines
        self.setVerticalScrollBarPolicy(
            policy.ScrollBarAlwaysOff if fits else policy.ScrollBarAsNeeded
        )
        lines = min(lines, self._lines)
        chrome = max(0, self.height() - self.viewport().height())
        self.setFixedHeight(chrome + int(2 * margin) + lines * self.fontMetrics().lineSpacing())


def _text_box(name: str, accessible: str, lines: int) -> FitText:
    box = FitText(lines)
    box.setObjectName(name)
    box.setReadOnly(True)
    box.setAccessibleName(accessible)
    box.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
    box.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    box.setTextInteractionFlags(
        Qt.TextInteractionFlag.TextSelectableByMouse
        | Qt.TextInteractionFlag.TextSelectableByKeyboard
    )
    box.setTabChangesFocus(True)
    return box


class ToolCard(QFrame):
    """One tool call of a reply.

    Signals:
        decided(int, str): the person answered this step id's approval: "once", "always",
            "deny".
    """

    decided = Signal(int, str)

    def __init__(self, step: ToolStep) -> None:
        super().__init__()
        self.setObjectName("ToolCard")
        self.step = step
        self.request: ApprovalRequest | None = None
        self._approval: QWidget | None = None
        self._details: QWidget | None = None
        self.buttons: dict[str, QPushButton] = {}
        layout = vbox(self, (10, 6, 10, 8), 4)
        self._layout = layout
        self.title = ElidedLabel()
        self.title.setObjectName("ToolTitle")
        layout.addWidget(self.title)
        self.status = ElidedLabel()
        self.status.setObjectName("ToolStatus")
        layout.addWidget(self.status)
        self.toggle = QToolButton()
        self.toggle.setObjectName("ToolToggle")
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        self.toggle.toggled.connect(self._unfold)
        self.toggle.hide()
        layout.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        self.update_step(step)

    # state -----------------------------------------------------------------------------------
    @property
    def status_words(self) -> str:
        return self.status.text()

    @property
    def expanded(self) -> bool:
        return self.toggle.isChecked()

    @property
    def waiting(self) -> bool:
        return self._approval is not None and not self._approval.isHidden()

    def update_step(self, step: ToolStep) -> None:
        self.step = step
        name = step.tool + (f" · {step.server}" if step.server else "")
        self.title.setText(name)
        words, tone = status_text(step)
        self.status.setText(words)
        self.status.setToolTip(step.result if tone == "error" and step.result else "")
        if self.status.property("tone") != tone:
            self.status.setProperty("tone", tone)
            _repolish(self.status)
        if self.property("state") != step.status:
            self.setProperty("state", step.status)
            _repolish(self)
        self.setAccessibleName(f"Tool call {name}: {words}")
        if step.status != "waiting" and self._approval is not None:
            self._approval.hide()
        final = step.final
        self.toggle.setVisible(final)
        self.toggle.setText(self._toggle_words(self.expanded))
        self.toggle.setAccessibleName(f"{self._toggle_words(self.expanded)} of {step.tool}")
        if self._details is not None and self.expanded:
            self._fill_details()

    def _toggle_words(self, shown: bool) -> str:
        has_result = self.step.status in ("done", "error", "timeout") or bool(self.step.result)
        what = "result" if has_result else "call"
        return f"Hide {what}" if shown else f"Show {what}"

    # approval --------------------------------------------------------------------------------
    def ask(self, request: ApprovalRequest) -> None:
        """Show the arguments, the description and the three answers (Allow once first)."""
        self.request = request
        if request.step.id == self.step.id and not self.step.final:
            self.update_step(request.step.with_changes(status="waiting"))
        if self._approval is not None:
            self._layout.removeWidget(self._approval)
            self._approval.deleteLater()
        self._approval = self._build_approval(request)
        self._layout.addWidget(self._approval)
        self._approval.show()  # now, not at the next layout pass: Allow once can take focus

    def _build_approval(self, request: ApprovalRequest) -> QWidget:
        tool = request.step.tool
        box = QWidget()
        box.setObjectName("ToolApproval")
        column = vbox(box, (0, 4, 0, 0), 6)
        if request.description:
            about = QLabel(request.description)
            about.setObjectName("ToolDescription")
            about.setWordWrap(True)
            about.setTextFormat(Qt.TextFormat.PlainText)
            column.addWidget(about)
        arguments = _text_box("ToolArguments", f"Arguments of {tool}", ARGUMENT_LINES)
        arguments.set_text(request.pretty_arguments or "{}")
        column.addWidget(arguments)
        self.arguments = arguments
        row = FlowLayout(spacing=6)
        agent = request.agent_name
        short = agent if len(agent) <= AGENT_NAME_CHARS else agent[: AGENT_NAME_CHARS - 1] + "…"
        for key, text, tip in (
            ("once", "Allow once", f"Run {tool} this time; ask again next time"),
            ("always", f"Always allow for {short}", ALWAYS_TIP.format(tool=tool)),
            ("deny", "Deny", "Do not run it; the model is told you said no"),
        ):
            button = QPushButton(text)
            button.setObjectName("ToolAllow" if key == "once" else "ToolAnswer")
            button.setToolTip(tip if key != "always" or short == agent else f"{tip} ({agent})")
            button.setAccessibleName(f"{text.replace(short, agent)}: {tool}")
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.setAutoDefault(False)
            button.clicked.connect(self._answer_slot(key))
            row.addWidget(button)
            self.buttons[key] = button
        column.addLayout(row)
        return box

    def _answer_slot(self, decision: str) -> Any:
        # A plain closure (see bubble.MessageBubble._action_slot).
        return lambda: self.answer(decision)

    def answer(self, decision: str) -> None:
        """The buttons go at once; the step's next change says what happened."""
        if self._approval is None or self._approval.isHidden() or self.step.id is None:
            return
        self.decided.emit(self.step.id, decision)  # first: the view moves the focus on
        self._approval.hide()
        self.status.setText("Denied" if decision == "deny" else "Allowed · starting…")

    def focus_answer(self) -> None:
        """Allow once takes the keyboard focus (Tab goes on to Always, then Deny)."""
        button = self.buttons.get("once")
        if button is not None and self.waiting:
            button.setFocus(Qt.FocusReason.OtherFocusReason)

    # the result ------------------------------------------------------------------------------
    def _unfold(self, shown: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)
        self.toggle.setText(self._toggle_words(shown))
        self.toggle.setAccessibleName(f"{self._toggle_words(shown)} of {self.step.tool}")
        if shown and self._details is None:
            self._details = self._build_details()
            self._layout.addWidget(self._details)
        if self._details is not None:
            if shown:
                self._fill_details()
            self._details.setVisible(shown)

    def set_expanded(self, shown: bool) -> None:
        self.toggle.setChecked(shown)

    def _build_details(self) -> QWidget:
        tool = self.step.tool
        box = QWidget()
        box.setObjectName("ToolDetails")
        column = vbox(box, (0, 2, 0, 0), 4)
        self.arguments_label = QLabel("Arguments")
        self.arguments_label.setObjectName("ToolPartLabel")
        column.addWidget(self.arguments_label)
        self.details_arguments = _text_box("ToolArguments", f"Arguments of {tool}", ARGUMENT_LINES)
        column.addWidget(self.details_arguments)
        self.result_label = QLabel("Result")
        self.result_label.setObjectName("ToolPartLabel")
        column.addWidget(self.result_label)
        self.result = _text_box("ToolResult", f"Result of {tool}", RESULT_LINES)
        column.addWidget(self.result)
        self.cut_note = QLabel()
        self.cut_note.setObjectName("ToolCutNote")
        self.cut_note.setWordWrap(True)
        column.addWidget(self.cut_note)
        return box

    def _fill_details(self) -> None:
        step = self.step
        self.details_arguments.set_text(pretty_json(step.arguments) or "{}")
        words = {
            "denied": "Sent to the model",
            "cancelled": "Sent to the model",
            "invalid": "Sent to the model",
            "refused": "Sent to the model",
        }
        self.result_label.setText(words.get(step.status, "Error" if step.is_error else "Result"))
        self.result.set_text(step.result)
        self.cut_note.setText(
            f"The tool returned {step.size:,} characters; the model got the first part only."
            if step.truncated
            else ""
        )
        self.cut_note.setVisible(step.truncated)


class ToolSteps(QWidget):
    """A reply's tool calls, one card each, in the order the model asked for them.

    Signals:
        decided(int, str): a card's approval was answered (step id, decision).
    """

    decided = Signal(int, str)

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("ToolSteps")
        self._column = vbox(self, spacing=6)
        self.cards: dict[int, ToolCard] = {}

    def set_steps(self, steps: Sequence[ToolStep]) -> None:
        for step in steps:
            self.update_step(step)

    def update_step(self, step: ToolStep) -> ToolCard | None:
        if step.id is None:
            return None
        card = self.cards.get(step.id)
        if card is None:
            card = ToolCard(step)
            card.decided.connect(self.decided)
            self.cards[step.id] = card
            self._column.addWidget(card)
            card.show()
        else:
            card.update_step(step)
        self.show()
        return card

    def ask(self, request: ApprovalRequest) -> ToolCard | None:
        card = self.update_step(request.step)
        if card is not None:
            card.ask(request)
        return card

    def card(self, step_id: int) -> ToolCard | None:
        return self.cards.get(step_id)

    def ordered(self) -> list[ToolCard]:
        return sorted(self.cards.values(), key=lambda c: c.step.position)
