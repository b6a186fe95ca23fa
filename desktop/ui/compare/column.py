"""One column of a comparison: an ordinary ``ConversationPane`` on its own conversation, under
a header that names the column (blind: only its letter), its live figures, its own Stop and
"Continue with this one".

The pane's own header and composer are hidden (the compare view has one composer for all);
streaming, stop, errors, the transcript and its stats footer (with Timeline) are the pane's.
A blind column shows its replies as written by its letter, without footers (they name the
model), until ``reveal``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QLabel, QMessageBox, QPushButton, QSizePolicy, QWidget

from desktop.chat.format import cost_text
from desktop.chat.services import Services
from desktop.chat.session import Turn
from desktop.store.agents import Agent
from desktop.store.attachments import Attachment
from desktop.store.conversations import Message
from desktop.ui.conversation.pane import ConversationPane
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.widgets import ask, hbox, plain, vbox

# Narrower, a reply's bubble sticks out of its column (bubble.py's one-paragraph reply is at
# least 260 px wide): more columns than fit scroll sideways (3 at 1280 px, 6 at 2560 px).
MIN_COLUMN_WIDTH_PX = 400
LIVE_INTERVAL_MS = 250  # the live figures update four times a second while streaming
MARKS = {
    "ttft": "fastest first token",
    "decode": "fastest decode",
    "cost": "cheapest",
}


def fair_agent(agent: Agent, seed: int | None, temperature: float | None) -> Agent:
    """The agent a column sends with: "same seed and temperature for all" overrides both."""
    if seed is None and temperature is None:
        return agent
    return replace(
        agent,
        seed=agent.seed if seed is None else seed,
        temperature=agent.temperature if temperature is None else temperature,
    )


def figures_text(
    ttft_ms: float | None,
    tok_s: float | None,
    tokens: int | None,
    cost: str | None,
) -> str:
    """ "TTFT 212 ms · 41 tok/s · 57 tokens · $0.0004": only what is known."""
    parts = []
    if ttft_ms is not None:
        parts.append(f"TTFT {ttft_ms:,.0f} ms")
    if tok_s is not None:
        parts.append(f"{tok_s:,.0f} tok/s")
    if tokens is not None:
        parts.append(f"{tokens:,} tokens")
    if cost:
        parts.append(cost)
    return " · ".join(parts)


class CompareColumn(QFrame):
    """One agent's side of a comparison.

    Signals:
        finished(): this column's reply ended (complete, stopped or failed).
        continue_requested(int): "Continue with this one" for this conversation id.
    """

    finished = Signal()
    continue_requested = Signal(int)

    def __init__(
        self,
        services: Services,
        agent: Agent | None,
        agent_name: str,
        label: str,
        position: int,
        *,
        conversation_id: int | None = None,
        blind: bool = False,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("CompareColumn")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setMinimumWidth(MIN_COLUMN_WIDTH_PX)
        self.agent = agent  # the agent as sent with (fair seed/temperature applied)
        self.agent_id = agent.id if agent is not None else None
        self.agent_name = agent_name  # kept when the agent was deleted
        self.label = label
        self.position = position
        self.blind = blind
        self.last_turn: Turn | None = None
        self.marks: list[str] = []
        # Where the rest of a reply's end goes (the view's TurnQueue.add: a later loop turn,
        # one column a turn); alone, a column finishes at once.
        self.later: Callable[[Callable[[], None]], None] = lambda job: job()
        self.pane = ConversationPane(
            services,
            agent,
            conversation_id,
            agents=services.agents.list,
            confirm=self._confirm,
            parent=self,
        )
        self.pane.set_header_visible(False)
        self.pane.set_composer_visible(False)
        empty = self.pane.transcript.empty  # a narrow column: "Chat with …" wraps
        empty.title.setWordWrap(True)
        empty.hint.setText("Enter in the box below sends to every column.")
        if blind:
            self.pane.transcript.set_footer_mode("never")  # the footer names the model
            self.pane.set_shown_name(label)
        elif conversation_id is not None:
            self.pane.show_path()
        self._waiting = ""

        layout = vbox(self, (0, 0, 0, 0), 0)
        layout.addWidget(self._build_header())
        layout.addWidget(self.pane, 1)
        p = self.pane.presenter
        p.busy_changed.connect(self._on_busy)
        p.turn_finished.connect(self._on_turn_finished)
        p.waiting_changed.connect(self._on_waiting)
        p.conversation_changed.connect(lambda _id: self._update_buttons())
        self._live = QTimer(self)
        self._live.setInterval(LIVE_INTERVAL_MS)
        self._live.timeout.connect(self._show_live)
        self._show_title()
        self._on_busy(False)
        self._show_last_stats()

    def _build_header(self) -> QWidget:
        header = QFrame()
        header.setObjectName("ChatHeader")
        column = vbox(header, (12, 8, 12, 8), 4)
        top = hbox(None, (0, 0, 0, 0), 8)
        self.title = ElidedLabel()
        self.title.setObjectName("HeaderTitle")
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        top.addWidget(self.title, 1)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setAccessibleName(f"Stop column {self.label}")
        self.stop_button.setToolTip("Stop this column's reply (the others go on)")
        self.stop_button.clicked.connect(self.pane.presenter.stop)
        top.addWidget(self.stop_button)
        column.addLayout(top)
        self.figures = plain(QLabel())  # figures, or an error's words
        self.figures.setObjectName("HeaderSubtitle")
        self.figures.setWordWrap(True)
        self.figures.setAccessibleName(f"Figures of column {self.label}")
        self.figures.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        column.addWidget(self.figures)
        bottom = hbox(None, (0, 0, 0, 0), 8)
        self.badges = ElidedLabel()  # one line; the whole text in its tooltip
        self.badges.setObjectName("CompareMarks")
        self.badges.setAccessibleName(f"Marks of column {self.label}")
        self.badges.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        bottom.addWidget(self.badges, 1)
        self.continue_button = QPushButton("Continue with this one")
        self.continue_button.setAccessibleName(f"Continue with column {self.label}")
        self.continue_button.setToolTip("Open this column's conversation as an ordinary chat")
        self.continue_button.clicked.connect(self._continue)
        bottom.addWidget(self.continue_button)
        column.addLayout(bottom)
        return header

    def _confirm(self, title: str, text: str) -> bool:
        yes, no = QMessageBox.StandardButton.Yes, QMessageBox.StandardButton.No
        return ask(self, title, text, yes | no, QMessageBox.StandardButton.NoButton) == yes

    # state -----------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self.pane.busy

    @property
    def conversation_id(self) -> int | None:
        return self.pane.conversation_id

    @property
    def shown_name(self) -> str:
        return self.label if self.blind else f"{self.label} · {self.agent_name}"

    def stats(self) -> dict[str, Any] | None:
        """The last reply's stats row (None while streaming, or for a reply without one)."""
        turn = self.last_turn
        if turn is not None:
            stats = turn.stats if turn.status != "error" else None
            return stats.as_row() if stats is not None else None  # as stored rows are
        reply = self.last_reply()
        if reply is None or reply.status == "error":
            return None
        return self.pane.services.stats.for_messages([reply.id]).get(reply.id)

    def last_reply(self) -> Message | None:
        return self.pane.last_reply()

    def failed(self) -> bool:
        turn = self.last_turn
        if turn is not None:
            return turn.status == "error"
        reply = self.last_reply()
        return reply is not None and reply.status == "error"

    def _show_title(self) -> None:
        self.title.setText(self.shown_name)
        self.setAccessibleName(f"Column {self.shown_name}")

    def reveal(self) -> None:
        """A vote was cast: show the agent's name, its replies' names and their footers."""
        if not self.blind:
            return
        self.blind = False
        self.pane.transcript.set_footer_mode("always")
        self.pane.set_shown_name(None)
        self._show_title()

    def use_agent(self, agent: Agent) -> None:
        """Answer with this version of the agent (e.g. the fair seed and temperature)."""
        self.agent = agent
        self.pane.set_agent(agent)

    def send(self, text: str, attachments: Sequence[Attachment] = ()) -> bool:
        self.last_turn = None
        self.set_marks([])
        return self.pane.presenter.send(text, attachments)

    def stop(self) -> None:
        self.pane.presenter.stop()

    def _continue(self) -> None:
        if self.conversation_id is not None:
            self.continue_requested.emit(self.conversation_id)

    def _update_buttons(self) -> None:
        busy = self.busy
        self.stop_button.setEnabled(busy)
        self.continue_button.setEnabled(not busy and self.conversation_id is not None)

    # figures ---------------------------------------------------------------------------------
    def _on_busy(self, busy: bool) -> None:
        self._update_buttons()
        if busy:
            self._waiting = ""
            self.figures.setText("waiting for the first token…")
            self._live.start()
        else:
            self._live.stop()

    def _on_waiting(self, _message_id: int, what: str) -> None:
        self._waiting = what
        if what:
            self.figures.setText(what)

    def _show_live(self) -> None:
        turn = self.pane.presenter.turn
        clock = turn.clock if turn is not None else None
        if clock is None or clock.first_token is None:
            return
        ttft = (clock.first_token - clock.started) * 1000
        self.figures.setText(
            figures_text(ttft, clock.live_decode_tok_s(), clock.tokens, None) + " · streaming…"
        )

    def _on_turn_finished(self, turn: Turn) -> None:
        self.last_turn = turn
        if turn.status == "error":
            why = turn.error.user_message if turn.error is not None else "failed"
            self.figures.setText(f"failed: {why}")
        else:
            stats = turn.stats.as_row() if turn.stats is not None else None
            self._show_stats(stats, stopped=turn.status == "cancelled")
        self.later(self.finished.emit)  # after the pane's own end (queued before this)

    def _show_last_stats(self) -> None:
        reply = self.last_reply()
        if reply is None:
            self.figures.setText("")
        elif reply.status == "error":
            self.figures.setText(f"failed: {reply.error_text or 'error'}")
        else:
            self._show_stats(self.stats(), stopped=reply.status == "cancelled")

    def _show_stats(self, row: dict[str, Any] | None, *, stopped: bool) -> None:
        row = row or {}
        cost = None
        if row.get("cost_usd") is not None or row.get("price_source") == "local":
            cost = cost_text(row.get("cost_usd"), row.get("price_source"))
        elif row:
            cost = "cost unknown"
        text = figures_text(
            row.get("ttft_ms"), row.get("decode_tok_s"), row.get("output_tokens"), cost
        )
        if stopped:
            text = f"{text} · stopped" if text else "stopped"
        self.figures.setText(text or "done")

    def set_marks(self, marks: list[str]) -> None:
        """The figures this column won once every column finished (keys of ``MARKS``)."""
        self.marks = marks
        whole = " · ".join(f"★ {MARKS[m]}" for m in marks)
        short = {"ttft": "first token", "decode": "decode", "cost": "cost"}
        # several marks share the line with Continue: short words, the whole in the tooltip
        self.badges.setText(
            whole if len(marks) < 2 else "★ best " + ", ".join(short[m] for m in marks)
        )
        self.badges.setToolTip(whole)


def winners(columns: list[CompareColumn]) -> dict[CompareColumn, list[str]]:
    """Which column had the fastest first token, the fastest decode, the lowest cost (among
    the columns that finished with that figure; none when fewer than two have it, or all tie)."""
    rows = [(c, c.stats()) for c in columns if not c.failed()]
    found: dict[CompareColumn, list[str]] = {c: [] for c in columns}
    for mark, key, best in (
        ("ttft", "ttft_ms", min),
        ("decode", "decode_tok_s", max),
        ("cost", "cost_usd", min),
    ):
        values = [(c, row[key]) for c, row in rows if row and row.get(key) is not None]
        if len(values) < 2:
            continue
        top = best(v for _c, v in values)
        if all(v == top for _c, v in values):
            continue
        for column, value in values:
            if value == top:
                found[column].append(mark)
    return found
