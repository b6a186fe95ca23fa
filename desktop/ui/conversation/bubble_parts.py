"""The pieces a message bubble is made of.

A reply's text is a ``MarkdownView`` (``md_view.py``). The parts most messages never show (the
version arrows, the thinking box, the error box) are classes of their own that a bubble builds
the first time it needs one: a bubble is ~12 widgets instead of ~24, which is most of what
paging through a long conversation costs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import shiboken6
from PySide6.QtCore import QEvent, QObject, QRect, QSize, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
    QWidgetItem,
)

from desktop.store.conversations import Versions
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.turns import in_turns
from desktop.ui.kit.widgets import FlowLayout, plain
from desktop.ui.markdown.stream_text import StreamText

if TYPE_CHECKING:
    from desktop.ui.stats.timeline_panel import TimelinePanel

NATURAL_WIDTH_SCAN = 2_000  # longer texts simply take the full bubble width


def tool_button(text: str, tip: str, name: str = "BubbleAction") -> QToolButton:
    button = QToolButton()
    button.setObjectName(name)
    button.setText(text)
    button.setToolTip(tip)
    button.setAutoRaise(True)
    button.setCursor(Qt.CursorShape.PointingHandCursor)
    return button


def natural_width(text: str, label: QWidget, inner: int) -> int:
    """Width of the longest line in ``label``'s font, at most ``inner``, so short texts get
    snug bubbles that do not wrap."""
    if len(text) > NATURAL_WIDTH_SCAN or "```" in text or "|" in text:
        return inner
    metrics = label.fontMetrics()
    widest = max((metrics.horizontalAdvance(line) for line in text.split("\n")), default=0)
    return min(inner, widest + 4)


# A bubble's actions, in the order they are laid out: (key, text, tooltip).
ACTIONS = (
    ("copy", "Copy", "Copy this message"),
    ("edit", "Edit", "Edit and send again (a new branch; this one stays)"),
    ("regenerate", "Regenerate", "Write another version of this reply"),
    ("regenerate_with", "Regenerate with…", "Another version, by an agent you choose"),
    ("continue", "Continue", "Carry on from where this reply stopped"),
    ("delete", "Delete", "Delete this message"),
)
_ORDER = {key: index for index, (key, _text, _tip) in enumerate(ACTIONS)}


class ActionsLayout(FlowLayout):
    """The bubble's row of actions: a ``FlowLayout`` that remembers its answers until it is
    invalidated (a bubble's layout asks for the height at a width many times per pass, and
    each answer walked every button's size hint in Python), and takes a button at its place
    in the ``ACTIONS`` order when one is built later."""

    def __init__(self) -> None:
        super().__init__()
        self._hfw: tuple[int, int] | None = None
        self._hint: QSize | None = None
        self._minimum: QSize | None = None
        self._placed: QRect | None = None

    def invalidate(self) -> None:
        self._hfw = self._hint = self._minimum = self._placed = None
        super().invalidate()

    def setGeometry(self, rect: QRect) -> None:
        if rect != self._placed:  # placed there already, and nothing changed since
            self._placed = QRect(rect)
            super().setGeometry(rect)

    def heightForWidth(self, width: int) -> int:
        if self._hfw is None or self._hfw[0] != width:
            self._hfw = (width, super().heightForWidth(width))
        return self._hfw[1]

    def sizeHint(self) -> QSize:
        if self._hint is None:
            self._hint = super().sizeHint()
        return QSize(self._hint)

    def minimumSize(self) -> QSize:
        if self._minimum is None:
            self._minimum = super().minimumSize()
        return QSize(self._minimum)

    def insert_widget(self, index: int, widget: QWidget) -> None:
        self.addChildWidget(widget)
        self._items.insert(index, QWidgetItem(widget))
        self.invalidate()


class ActionButtons(dict[str, QToolButton]):
    """A bubble's action buttons by key, each built the first time it is asked for (most
    bubbles show three or four of the six; a hidden one is not built until it shows).

    ``slot(key)`` is what a click calls; a button is built enabled or not as ``enabled(key)``
    says, and placed in the ``ACTIONS`` order (on screen and for Tab). Both are the bubble's
    own methods, handed weakly (``kit.weak``): None once the bubble is gone."""

    def __init__(
        self,
        layout: ActionsLayout,
        slot: Callable[[str], Callable[[], None] | None],
        enabled: Callable[[str], bool | None],
    ) -> None:
        super().__init__()
        self._row = layout
        self._slot = slot
        self._enabled = enabled

    def __missing__(self, key: str) -> QToolButton:
        _key, text, tip = ACTIONS[_ORDER[key]]
        button = tool_button(text, tip)
        if (on_click := self._slot(key)) is not None:
            button.clicked.connect(on_click)
        button.setEnabled(bool(self._enabled(key)))
        before = [k for k in self if _ORDER[k] < _ORDER[key]]
        after = [k for k in self if _ORDER[k] > _ORDER[key]]
        self._row.insert_widget(len(before), button)
        self[key] = button
        if before or after:  # Tab goes through them in their order, built early or late
            previous = self[max(before, key=_ORDER.__getitem__)] if before else None
            following = self[min(after, key=_ORDER.__getitem__)] if after else None
            if previous is not None:
                QWidget.setTabOrder(previous, button)
            if following is not None:
                QWidget.setTabOrder(button, following)
        return button

    def show(self, key: str, shown: bool) -> None:
        """Show or hide a button; one that is hidden and not built stays unbuilt."""
        if shown or key in self:
            self[key].setVisible(shown)


class VersionArrows:
    """‹ 2/3 › in a bubble's head: steps through the versions of a message (hidden at first)."""

    def __init__(self, step: Callable[[int], None]) -> None:
        self.prev = tool_button("‹", "Previous version", "VersionButton")
        self.label = plain(QLabel())
        self.label.setObjectName("VersionLabel")
        self.next = tool_button("›", "Next version", "VersionButton")
        self.prev.clicked.connect(lambda: step(-1))
        self.next.clicked.connect(lambda: step(1))
        self.widgets = (self.prev, self.label, self.next)
        for widget in self.widgets:
            widget.hide()

    def show(self, versions: Versions | None, busy: bool) -> None:
        """Shown when the message has more than one version; no stepping while ``busy``."""
        many = versions is not None and versions.count > 1
        for widget in self.widgets:
            widget.setVisible(many)
        if versions is not None and many:
            self.label.setText(f"{versions.index + 1}/{versions.count}")
            self.prev.setEnabled(versions.index > 0 and not busy)
            self.next.setEnabled(versions.index < versions.count - 1 and not busy)

    @property
    def text(self) -> str:
        """ "‹ 2/3 ›" as shown, or "" when hidden."""
        return "" if self.label.isHidden() else f"‹ {self.label.text()} ›"


class ThinkingBox:
    """A reply's reasoning, folded under a "Thinking" toggle (hidden at first).

    ``button`` toggles ``box``, which holds ``text`` behind a rule at its left.
    """

    def __init__(self) -> None:
        self.button = QToolButton()
        self.button.setObjectName("ThinkingToggle")
        self.button.setCheckable(True)
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.button.setArrowType(Qt.ArrowType.RightArrow)
        self.button.setAutoRaise(True)
        self.button.toggled.connect(self._unfold)
        self.box = QFrame()
        self.box.setObjectName("ThinkingBox")
        box_layout = QVBoxLayout(self.box)
        box_layout.setContentsMargins(10, 0, 0, 0)
        self.text = StreamText()
        self.text.setObjectName("ThinkingText")
        box_layout.addWidget(self.text)
        for widget in (self.button, self.box, self.text):
            widget.hide()

    def _unfold(self, shown: bool) -> None:
        self.text.setVisible(shown)
        self.box.setVisible(shown)
        self.button.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)

    def show(self, reasoning: str, streaming: bool) -> None:
        """The stored reasoning; the toggle shows when there is any."""
        self.text.set_all(reasoning)
        self.button.setVisible(bool(reasoning))
        self.set_label(reasoning, streaming)

    def set_label(self, reasoning: str, streaming: bool) -> None:
        text = "Thinking…" if streaming else "Thinking"
        words = 0 if streaming else len(reasoning.split())
        if words:
            text += f" ({words:,} words)"
        self.button.setText(text)


class ErrorBox(QFrame):
    """Why a reply failed, with Retry, and for "context too long" two ways out (hidden at first).

    ``fit(key)`` is called with "fit_drop" (leave out the oldest turns) or "fit_raise" (raise
    the agent's context size); both then retry.
    """

    def __init__(self, retry: Callable[[], None], fit: Callable[[str], None]) -> None:
        super().__init__()
        self.setObjectName("ErrorBox")
        layout = self._row = QHBoxLayout(self)
        layout.setContentsMargins(10, 8, 8, 8)
        layout.setSpacing(10)
        self.text = plain(QLabel())  # an error's words (a server's, a tool's): never HTML
        self.text.setObjectName("ErrorText")
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.text, 1)
        self.retry = self._button("Retry", "", retry)
        self.fit: dict[str, QPushButton] = {}
        for key, label, tip in (
            (
                "fit_drop",
                "Drop oldest turns",
                "Send again without the oldest turns (they stay in the conversation)",
            ),
            ("fit_raise", "Raise context", "Raise the agent's context size (n_ctx) and send again"),
        ):
            self.fit[key] = self._button(label, tip, self._fit_slot(fit, key))
            self.fit[key].hide()
        self.hide()

    def _button(self, label: str, tip: str, slot: Callable[[], None]) -> QPushButton:
        button = QPushButton(label)
        button.setObjectName("RetryButton")
        if tip:
            button.setToolTip(tip)
        button.setCursor(Qt.CursorShape.PointingHandCursor)
        button.clicked.connect(slot)
        self._row.addWidget(button, 0, Qt.AlignmentFlag.AlignTop)
        return button

    @staticmethod
    def _fit_slot(fit: Callable[[str], None], key: str) -> Callable[[], None]:
        # A plain closure: lambdas with default arguments on clicked(bool) upset PySide's
        # reference counting of True/False (a crash at interpreter exit after many clicks).
        return lambda: fit(key)

    def show_error(self, text: str, context_too_long: bool) -> None:
        self.text.setText(text)
        for button in self.fit.values():
            button.setVisible(context_too_long)
        self.show()

    def set_busy(self, busy: bool) -> None:
        """No retrying while a reply streams."""
        for button in (self.retry, *self.fit.values()):
            button.setEnabled(not busy)

    def fit_width(self, inner: int) -> None:
        """The text wraps beside every button shown (Retry, and the two context ones)."""
        buttons = [b for b in (self.retry, *self.fit.values()) if not b.isHidden()]
        room = inner - sum(b.sizeHint().width() + 10 for b in buttons) - 20
        natural = natural_width(self.text.text(), self.text, inner)
        self.text.setMinimumWidth(max(120, min(natural, room)))


class StatsFooter(QWidget):
    """The line under a reply ("TTFT 85 ms · 112 tok/s · …") and its "Timeline" button, which
    opens the reply timeline panel for the message's stats row (so does clicking the line).

    ``text()`` is the line; ``panel`` the timeline panel once opened."""

    def __init__(self) -> None:
        super().__init__()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        self.line = ElidedLabel()  # one line at any width: the rest is in tooltip and timeline
        self.line.setObjectName("StatsFooter")
        self.line.installEventFilter(self)
        layout.addWidget(self.line, 1)
        self.timeline_button = tool_button(
            "Timeline", "How long each part of this reply took, drawn to scale"
        )
        self.timeline_button.setAccessibleName("Show the reply timeline")
        self.timeline_button.clicked.connect(self._clicked)
        layout.addWidget(self.timeline_button, 0, Qt.AlignmentFlag.AlignTop)
        self.stats: dict[str, Any] | None = None
        # an agentic reply: every model call's stats row in order, and its tool calls
        self.calls: list[dict[str, Any]] = []
        self.steps: list[Any] = []  # desktop.store.tool_steps.ToolStep
        self._said: tuple[str, str, tuple[str, ...]] = ("", "", ())  # set_stats' line, tip
        self.panel: TimelinePanel | None = None

    def text(self) -> str:
        return self.line.text()

    def set_stats(
        self,
        line: str,
        tooltip: str,
        stats: dict[str, Any] | None,
        shorter: Sequence[str] = (),
    ) -> None:
        """The line (or the first of the ``shorter`` wordings that fits) and the tooltip; the
        button shows when the row holds any time at all."""
        self._said = (line, tooltip, tuple(shorter))
        self._show_line()
        changed = stats is not None and stats != self.stats
        self.stats = stats
        timed = stats is not None and any(
            stats.get(key) is not None for key in ("ttft_ms", "total_ms")
        )
        self.timeline_button.setVisible(timed)
        self.line.setCursor(
            Qt.CursorShape.PointingHandCursor if timed else Qt.CursorShape.ArrowCursor
        )
        panel = self.panel
        if changed and panel is not None and shiboken6.isValid(panel) and panel.isVisible():
            self.open_timeline()  # an open panel follows the row (e.g. a retry finished)

    def set_calls(self, calls: Sequence[dict[str, Any]], steps: Sequence[Any]) -> None:
        """An agentic reply's model calls (stats rows, ``call_index`` order) and tool steps,
        for the timeline (call 1 → tool → call 2 …); empty for a one-call reply."""
        changed = (list(calls), list(steps)) != (self.calls, self.steps)
        self.calls = list(calls)
        self.steps = list(steps)
        self._show_line()
        panel = self.panel
        if changed and panel is not None and shiboken6.isValid(panel) and panel.isVisible():
            self.open_timeline()

    def _show_line(self) -> None:
        """The line and tooltip of ``set_stats``; a reply of several calls says so at the end
        ("… · 2 calls · tools 80 ms") and its tooltip lists the calls."""
        line, tooltip, shorter = self._said
        texts = [line, *shorter]
        if line and len(self.calls) > 1:
            # the turn's words only for a reply that used tools (loaded on the first one)
            from desktop.chat.turn_timeline import calls_suffix, calls_tooltip

            suffix = calls_suffix(self.calls, self.steps)
            texts = [f"{t} · {suffix}" if t else suffix for t in texts]
            tooltip = "\n\n".join(t for t in (calls_tooltip(self.calls, self.steps), tooltip) if t)
        self.line.set_texts(texts)
        self.setToolTip(tooltip)
        self.line.setToolTip(tooltip)

    def has_content(self) -> bool:
        return bool(self.text()) or not self.timeline_button.isHidden()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (
            watched is self.line
            and event.type() == QEvent.Type.MouseButtonRelease
            and isinstance(event, QMouseEvent)
            and event.button() == Qt.MouseButton.LeftButton
            and not self.timeline_button.isHidden()
        ):
            self._clicked()
            return True
        return super().eventFilter(watched, event)

    def _clicked(self) -> None:
        """The panel over three turns of the loop: built; styled and laid out (out of sight);
        shown. A new window's building, first layout and paint in one turn held the window
        17-19 ms (bench/frames.py)."""
        panel = self.open_timeline(show=False)

        def lay_out() -> None:
            panel.ensurePolished()  # the panel and its children
            if (layout := panel.layout()) is not None:
                layout.activate()  # the labels' text is laid out at the panel's size

        in_turns(panel, lay_out, panel.show)

    def open_timeline(self, show: bool = True) -> TimelinePanel:
        """The panel for this row, over the window (one per footer; shown again if open);
        ``show``: now (else the caller shows it)."""
        from desktop.ui.stats.timeline_panel import TimelinePanel  # built on first use only

        old = self.panel if self.panel is not None and shiboken6.isValid(self.panel) else None
        where = old.geometry() if old is not None and old.isVisible() else None
        if old is not None:
            old.close()
        panel = TimelinePanel(self.stats, self.window(), calls=self.calls, steps=self.steps)
        panel.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        if where is not None:
            panel.setGeometry(where)
        if show:
            panel.show()
        self.panel = panel
        return panel
