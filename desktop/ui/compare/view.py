"""Compare: one prompt to 2-6 agents side by side, each column an ordinary conversation pane.

One composer sends the same text and files to every column at once (remote agents stream in
parallel; local ones wait their turn for the one llama.cpp worker, and their pane says
"queued"). A follow-up goes to every column's own conversation. When every column finished, the
fastest first token, fastest decode and cheapest are marked, and the vote bar asks which answer
is better. Blind: columns are "A", "B", … in a shuffled order until the first vote of a prompt
reveals them. A comparison is stored (``services.compare``) when its first prompt is sent and
reopens from "Saved comparisons" with its columns, transcripts and votes.

Every click is answered within a frame while replies stream: Send only queues the prompt (the
composer empties at once) and each column starts in a loop turn of its own (it builds its
question and reply bubbles); the end of replies updates the controls, the marks and the vote
bar once, in a later turn, however many columns ended together.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Sequence
from functools import partial

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QDoubleValidator, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QLabel,
    QLineEdit,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QWidget,
)

from desktop.chat.services import Services
from desktop.store.agents import Agent
from desktop.store.attachments import Attachment
from desktop.ui.compare.column import CompareColumn, fair_agent, winners
from desktop.ui.compare.composer import CompareComposer, files_title
from desktop.ui.compare.picker import MAX_AGENTS, MIN_AGENTS, AgentPicker
from desktop.ui.compare.vote import VoteBar
from desktop.ui.kit.turns import TurnQueue
from desktop.ui.kit.widgets import (
    FlowLayout,
    ask_text,
    hbox,
    push_button,
    vbox,
)

DEFAULT_SEED = 42
DEFAULT_TEMPERATURE = 0.7
TITLE_CHARS = 80


def column_label(position: int) -> str:
    return string.ascii_uppercase[position]


def _saved_pick(name: str, width: int, activated: Callable[[int], None]) -> QComboBox:
    """A menu of saved things (sets, comparisons) ``width`` characters wide, however long
    the names it lists."""
    pick = QComboBox()
    pick.setAccessibleName(name)
    pick.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    pick.setMinimumContentsLength(width)
    pick.activated.connect(activated)
    return pick


class CompareView(QWidget):
    """Signals: all_finished() when every column's reply to a prompt ended;
    continue_requested(int): open that conversation as an ordinary chat."""

    all_finished = Signal()
    continue_requested = Signal(int)

    def __init__(self, services: Services, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("CompareView")
        self.services = services
        self._columns: list[CompareColumn] = []  # those built so far (see columns)
        # A new set of columns is built one column per loop turn: four at once held the
        # window 28-38 ms (bench/frames.py). Asking for ``columns`` builds the rest now.
        self._building = TurnQueue(self)
        self.session_id: int | None = None
        self.prompt = ""  # the prompt the columns answered last (votes are stored with it)
        self._agents: list[Agent] = []  # as picked (column order unless blind)
        self._pending: set[int] = set()  # positions still answering the prompt
        # What a click or the end of replies leaves to later loop turns, one job a turn: each
        # column's start, then _sent; _settle, then _ask_vote.
        self._later = TurnQueue(self)
        self._starting: set[int] = set()  # positions sent to whose start is still queued
        self._sending = False  # between Send and _sent
        self._settling = False  # a _settle is queued
        self._ended = False  # a column's reply ended since the last _settle
        self._fair: tuple[int | None, float | None] = (None, None)  # as the session sends
        self.shuffle: Callable[[list[Agent]], list[Agent]] = lambda a: random.sample(a, len(a))
        self.ask_text: Callable[[str, str, str], str | None] = self._ask_text
        self.pick: Callable[[AgentPicker], bool] = lambda dialog: bool(dialog.exec())

        layout = vbox(self)
        layout.addWidget(self._build_bar())
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setChildrenCollapsible(False)
        self.empty = QLabel("Choose 2 to 6 agents with Agents… to compare their answers.")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        layout.addWidget(self.empty, 1)
        # six columns may not fit a small window: they scroll sideways, never widen it
        self.scroller = QScrollArea()
        self.scroller.setObjectName("CompareColumns")
        self.scroller.setFrameShape(QFrame.Shape.NoFrame)
        self.scroller.setWidgetResizable(True)
        self.scroller.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroller.setWidget(self.splitter)
        layout.addWidget(self.scroller, 1)
        self.vote_bar = VoteBar()
        self.vote_bar.voted.connect(self._on_vote)
        self.vote_bar.hide()
        layout.addWidget(self.vote_bar)
        layout.addWidget(self._build_composer())
        self.refresh()
        self._update_controls()
        self.setFocusProxy(self.composer)

    # building --------------------------------------------------------------------------------
    def _build_bar(self) -> QWidget:
        bar = QFrame()
        bar.setObjectName("ChatHeader")
        flow = FlowLayout(bar, 8)
        flow.setContentsMargins(12, 8, 12, 8)
        self.agents_button = push_button(
            "Agents…", self.pick_agents, tip="Choose the 2 to 6 agents to compare"
        )
        self.set_pick = _saved_pick("Saved agent sets", 8, self._on_set_picked)
        self.save_set_button = push_button(
            "Save as set…", self.save_set, tip="Save these agents as a set to compare again"
        )
        self.blind = QCheckBox("Blind")
        self.blind.setToolTip("Columns are A, B, … in a shuffled order until you vote")
        self.blind.toggled.connect(self._on_blind)
        self.fair = QCheckBox("Same seed and temperature")
        self.fair.setToolTip("Every agent answers with this seed and temperature (a fair run)")
        self.fair.toggled.connect(self._update_controls)
        self.seed = QSpinBox()
        self.seed.setAccessibleName("Seed")
        self.seed.setPrefix("seed ")
        self.seed.setRange(0, 99_999_999)
        self.seed.setMaximumWidth(self.seed.fontMetrics().horizontalAdvance("seed 000000") + 36)
        self.seed.setValue(DEFAULT_SEED)
        self.temperature_label = QLabel("temp.")
        self.temperature = QLineEdit(f"{DEFAULT_TEMPERATURE:g}")
        self.temperature.setAccessibleName("Temperature")
        self.temperature.setToolTip("Temperature, 0 to 2")
        validator = QDoubleValidator(0.0, 2.0, 2, self.temperature)
        validator.setNotation(QDoubleValidator.Notation.StandardNotation)
        self.temperature.setValidator(validator)
        digits = self.temperature.fontMetrics().horizontalAdvance("0.000")
        self.temperature.setMaximumWidth(digits + 24)
        self.new_button = push_button(
            "New comparison", self.new_comparison, tip="The same agents, new conversations"
        )
        # titles are long; the list shows all
        self.session_pick = _saved_pick("Saved comparisons", 12, self._on_session_picked)
        groups = (
            (self.agents_button, self.set_pick),
            (self.save_set_button,),
            (self.blind,),
            (self.fair,),  # apart from its fields: the page fits beside a wide sidebar
            (self.seed, self.temperature_label, self.temperature),
            (self.new_button,),
            (self.session_pick,),
        )
        height = self.agents_button.sizeHint().height()
        for widgets in groups:  # a group stays on one line when the bar wraps
            group = QWidget()
            group.setMinimumHeight(height)
            row = hbox(group, (0, 0, 0, 0), 8)
            for widget in widgets:
                row.addWidget(widget, 0, Qt.AlignmentFlag.AlignVCenter)
            flow.addWidget(group)
        return bar

    def _build_composer(self) -> QWidget:
        area = self.composer_area = CompareComposer(  # chips estimate for the first agent
            self.services, self, lambda: next((c.agent for c in self.columns if c.agent), None)
        )
        self.composer, self.files, self.hint = area.composer, area.files, area.hint
        self.send_button = area.send_button
        self.composer.submitted.connect(self._send_composer)
        self.composer.textChanged.connect(self._update_controls)
        self.files.changed.connect(self._update_controls)
        self.send_button.clicked.connect(self._send_or_stop)
        stop = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        stop.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        stop.activated.connect(self.stop_all)
        return area

    def _ask_text(self, title: str, label: str, text: str) -> str | None:
        value, ok = ask_text(self, title, label, text)
        return value if ok else None

    # state -----------------------------------------------------------------------------------
    @property
    def columns(self) -> list[CompareColumn]:
        """The columns, left to right; those still to be built are built now."""
        self._building.run_all()
        return self._columns

    @property
    def busy(self) -> bool:
        """A reply streams, or a sent prompt has columns still to start."""
        # (a column still to be built answers nothing yet)
        return bool(self._starting or self._sending) or any(c.busy for c in self._columns)

    @property
    def agents(self) -> list[Agent]:
        return list(self._agents)

    def fair_values(self) -> tuple[int | None, float | None]:
        if not self.fair.isChecked():
            return None, None
        try:
            temperature = min(max(float(self.temperature.text()), 0.0), 2.0)
        except ValueError:
            temperature = DEFAULT_TEMPERATURE
        return self.seed.value(), round(temperature, 2)

    def refresh(self) -> None:
        """Read the saved sets and comparisons again (the page was shown, or one was saved)."""
        compare = self.services.compare
        self.set_pick.clear()
        self.set_pick.addItem("Agent sets…", None)
        for agent_set in compare.sets():
            self.set_pick.addItem(agent_set.name, agent_set.id)
        self.session_pick.clear()
        self.session_pick.addItem("Comparisons…", None)
        for session in compare.sessions():
            names = " · ".join(
                c.label if session.blind and not session.revealed else c.agent_name
                for c in session.columns
            )
            title = session.title or "Untitled"
            self.session_pick.addItem(f"{title} ({names})", session.id)
            self.session_pick.setItemData(
                self.session_pick.count() - 1, session.updated_at, Qt.ItemDataRole.ToolTipRole
            )

    def _update_controls(self) -> None:
        busy = self.busy
        started = self.session_id is not None
        self.blind.setEnabled(not started and not busy)
        self.fair.setEnabled(not started and not busy)
        for widget in (self.seed, self.temperature_label, self.temperature):
            widget.setEnabled(self.fair.isChecked() and not started and not busy)
        self.agents_button.setEnabled(not busy)
        self.set_pick.setEnabled(not busy and self.set_pick.count() > 1)
        self.session_pick.setEnabled(not busy and self.session_pick.count() > 1)
        self.save_set_button.setEnabled(bool(self._agents) and all(a.id for a in self._agents))
        self.new_button.setEnabled(not busy and started)
        has_text = not self.composer.document().isEmpty() or bool(self.files.row.attachments())
        sendable = any(c.agent is not None for c in self._columns) and self.files.ready
        self.send_button.setText("Stop all" if busy else "Send")
        self.send_button.setAccessibleName("Stop all" if busy else "Send to every agent")
        self.send_button.setToolTip("Stop every column's reply (Esc)" if busy else "Send (Enter)")
        self.send_button.setProperty("streaming", busy)
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)
        self.send_button.setEnabled(busy or (has_text and sendable))
        self.empty.setVisible(not self._columns)
        self.scroller.setVisible(bool(self._columns))

    # columns ---------------------------------------------------------------------------------
    def set_agents(self, agents: list[Agent]) -> None:
        """Compare these agents (a new comparison); blind shuffles the column order."""
        if self.busy:
            return
        if not MIN_AGENTS <= len(agents) <= MAX_AGENTS:
            raise ValueError(f"compare {MIN_AGENTS} to {MAX_AGENTS} agents, not {len(agents)}")
        self._agents = list(agents)
        self.new_comparison()

    def new_comparison(self) -> None:
        """The same agents in new conversations (blind: shuffled again)."""
        if self.busy:
            return
        self.session_id = None
        self.prompt = ""
        self._fair = (None, None)
        blind = self.blind.isChecked()
        order = self.shuffle(self._agents) if blind else list(self._agents)
        self._build_columns([(a, a.id, a.name, None) for a in order], blind)

    def _build_columns(
        self, specs: list[tuple[Agent | None, int | None, str, int | None]], blind: bool
    ) -> None:
        self._later.run_all()  # the last prompt's marks and all_finished, for these columns
        self._building.clear()  # the columns of an earlier set not built yet
        for column in self._columns:
            column.setParent(None)
            column.deleteLater()
        self._columns = []
        self._pending.clear()
        self._ended = False
        self.vote_bar.hide()
        for position, spec in enumerate(specs):  # the first now, the others a turn each
            add = partial(self._add_column, position, spec, blind)
            if position == 0:
                add()
            else:
                self._building.add(add)
        self._update_controls()

    def _add_column(
        self,
        position: int,
        spec: tuple[Agent | None, int | None, str, int | None],
        blind: bool,
    ) -> None:
        agent, agent_id, name, conversation_id = spec
        column = CompareColumn(
            self.services,
            agent,
            name,
            column_label(position),
            position,
            conversation_id=conversation_id,
            blind=blind,
            parent=self.splitter,  # built in place, top-down
        )
        column.agent_id = agent_id
        # a column's end of a reply, the pane's final render first: a job per loop pass
        column.later = column.pane.finish_later = self._later.add
        column.pane.presenter.busy_changed.connect(lambda _busy: self._settle_later())
        column.finished.connect(lambda c=column: self._column_finished(c))
        column.continue_requested.connect(self.continue_requested)
        self.splitter.addWidget(column)
        self._columns.append(column)
        self.splitter.setSizes([1000] * len(self._columns))
        if position > 0 and not len(self._building):  # the last of a set built a turn later
            self._update_controls()

    def refresh_agents(self, agents: dict[int, Agent]) -> None:
        """Agents were edited elsewhere: each column answers with the current version (with
        this comparison's seed and temperature); a deleted one's column keeps its history."""
        for column in self.columns:
            fresh = agents.get(column.agent_id) if column.agent_id is not None else None
            if fresh is not None:
                column.use_agent(fair_agent(fresh, *self._fair))

    def pick_agents(self) -> None:
        """ "Agents…": tick 2-6 agents; the order ticked is the column order."""
        dialog = AgentPicker(self.services.agents.list(), self._agents, self)
        if self.pick(dialog):
            self.set_agents(dialog.chosen())
        dialog.deleteLater()

    def _on_set_picked(self, index: int) -> None:
        set_id = self.set_pick.itemData(index)
        self.set_pick.setCurrentIndex(0)
        chosen = next((s for s in self.services.compare.sets() if s.id == set_id), None)
        if chosen is None:
            return
        agents = [a for a in map(self.services.agents.get, chosen.agent_ids) if a is not None]
        if MIN_AGENTS <= len(agents) <= MAX_AGENTS:
            self.set_agents(agents)

    def save_set(self) -> None:
        name = self.ask_text("Save agent set", "Name of this set of agents:", "")
        if not name or not name.strip():
            return
        self.services.compare.save_set(name.strip(), [a.id for a in self._agents if a.id])
        self.refresh()
        self._update_controls()

    def _on_blind(self, _checked: bool) -> None:
        if self.session_id is None and self._agents and not self.busy:
            self.new_comparison()

    # sending ---------------------------------------------------------------------------------
    def _send_or_stop(self) -> None:
        if self.busy:
            self.stop_all()
        else:
            self._send_composer()

    def _send_composer(self) -> None:
        """Enter or Send: the text and files to every column, once the files passed the
        checks for every column's agent (``ComposerFiles.submit``)."""
        targets = [(c.agent, c.conversation_id) for c in self.columns if c.agent is not None]
        if self.busy or not targets:
            return
        self.composer_area.submit(targets, self.send)

    def send(self, text: str, attachments: Sequence[Sequence[Attachment]] | None = None) -> bool:
        """The same text to every column (a follow-up: to each column's own conversation),
        with ``attachments``: each answering column's own, in column order. False when nothing
        was sent (busy, no columns, nothing to send).

        Returns at once: the columns start one per loop turn, left to right (``start_now``
        starts those left at once)."""
        answering = [c for c in self.columns if c.agent is not None]
        files = dict(zip((c.position for c in answering), attachments or (), strict=False))
        if self.busy or not answering or not (text.strip() or any(files.values())):
            return False
        self._later.run_all()  # the last prompt's marks and all_finished come first
        compare = self.services.compare
        if self.session_id is None:
            seed, temperature = self._fair = self.fair_values()
            for column in self.columns:
                if column.agent is not None:
                    column.use_agent(fair_agent(column.agent, seed, temperature))
            session = compare.create_session(
                [(c.agent_id, c.agent_name) for c in self.columns],
                [c.conversation_id for c in self.columns],
                blind=any(c.blind for c in self.columns),
                title=" ".join(text.split())[:TITLE_CHARS] or files_title(files.values()),
                fair_seed=seed,
                fair_temperature=temperature,
            )
            self.session_id = session.id
        self.prompt = text
        self.vote_bar.hide()
        self._pending.clear()
        for column in answering:
            column.set_marks([])  # the last prompt's, gone at once
        self._sending = True
        for column in answering:  # each builds its question and reply: a turn each
            self._starting.add(column.position)
            own = list(files.get(column.position, ()))
            self._later.add(partial(self._start, column, own))
        self._later.add(self._sent)
        self._update_controls()  # "Stop all" at once
        return True

    def start_now(self) -> None:
        """Start every column still waiting for its turn, now (Stop all, closing)."""
        self._later.run_all()

    def _start(self, column: CompareColumn, files: Sequence[Attachment]) -> None:
        self._starting.discard(column.position)
        had = column.conversation_id
        if column.send(self.prompt, files):
            self._pending.add(column.position)
        now = column.conversation_id
        if now is not None and now != had and self.session_id is not None:
            self.services.compare.set_column_conversation(self.session_id, column.position, now)

    def _sent(self) -> None:
        """Every column started (or could not store the message): the comparison moves to
        the top of the saved ones."""
        self._sending = False
        if self.session_id is not None:
            self.services.compare.touch(self.session_id)
        self._update_controls()
        if not self._pending:  # no column stored the message: it goes back in the composer
            if self.composer.document().isEmpty():
                self.composer.setPlainText(self.prompt)
            self.composer_area.say("Could not store the message; see the log for details.")
        else:
            self.refresh()
        self._settle_later()  # columns that ended while others started: all ended?

    def stop_all(self) -> None:
        self.start_now()  # a prompt sent goes to every column, even stopped at once
        for column in self.columns:
            column.stop()

    def _column_finished(self, column: CompareColumn) -> None:
        """A column's reply ended: the rest waits for a later turn, once however many ended
        together (``_settle``)."""
        self._pending.discard(column.position)
        self._ended = True
        self._settle_later()

    def _settle_later(self) -> None:
        if not self._settling:
            self._settling = True
            self._later.add(self._settle)

    def _settle(self) -> None:
        """The controls follow the columns; once every column has answered, the winners are
        marked, and in the next turn the vote is asked for (then ``all_finished``)."""
        self._settling = False
        self._update_controls()
        if self._ended and not self._pending and not self.busy:
            self._ended = False
            self._mark_winners()
            self._later.add(self._ask_vote)

    def _ask_vote(self) -> None:
        self._ask_for_vote()  # shown, the bar takes its height from every column: a turn
        self.all_finished.emit()

    def _all_done(self) -> None:
        """Every column answered: mark the winners, ask for a vote."""
        self._mark_winners()
        self._ask_for_vote()

    def _mark_winners(self) -> None:
        for column, marks in winners(self.columns).items():
            column.set_marks(marks)

    def _ask_for_vote(self) -> None:
        answered = [c for c in self.columns if c.last_reply() is not None]
        self.vote_bar.set_labels([c.shown_name for c in self.columns])
        self.vote_bar.setVisible(len(answered) >= 2 and bool(self.prompt))

    # votes -----------------------------------------------------------------------------------
    def _on_vote(self, left: int, right: int, outcome: str) -> None:
        one, two = self.columns[left], self.columns[right]
        blind = one.blind or two.blind
        compare = self.services.compare

        def side(column: CompareColumn) -> tuple[int | None, str, int | None]:
            reply = column.last_reply()
            return column.agent_id, column.agent_name, reply.id if reply else None

        compare.add_vote(self.session_id, self.prompt, side(one), side(two), outcome, blind)
        if blind and self.session_id is not None:
            compare.reveal(self.session_id)
            for column in self.columns:
                column.reveal()
            self.vote_bar.rename([c.shown_name for c in self.columns])
        if self.session_id is not None:
            compare.touch(self.session_id)
        self.refresh()

    def votes(self) -> list[object]:
        if self.session_id is None:
            return []
        return list(self.services.compare.votes(self.session_id))

    # saved comparisons -----------------------------------------------------------------------
    def _on_session_picked(self, index: int) -> None:
        session_id = self.session_pick.itemData(index)
        self.session_pick.setCurrentIndex(0)
        if session_id is not None:
            self.open_session(session_id)

    def open_session(self, session_id: int) -> bool:
        """Reopen a stored comparison: its columns, their conversations, votes and marks."""
        if self.busy:
            return False
        session = self.services.compare.session(session_id)
        if session is None:
            return False
        get = self.services.agents.get
        specs = []
        for col in sorted(session.columns, key=lambda c: c.position):
            agent = get(col.agent_id) if col.agent_id is not None else None
            if agent is not None:
                agent = fair_agent(agent, session.fair_seed, session.fair_temperature)
            specs.append((agent, col.agent_id, col.agent_name, col.conversation_id))
        self._agents = [a for a, *_ in specs if a is not None]
        self.blind.blockSignals(True)
        self.blind.setChecked(session.blind)
        self.blind.blockSignals(False)
        self.fair.setChecked(session.fair_seed is not None)
        if session.fair_seed is not None:
            self.seed.setValue(session.fair_seed)
        if session.fair_temperature is not None:
            self.temperature.setText(f"{session.fair_temperature:g}")
        self._build_columns(specs, session.blind and not session.revealed)
        self.session_id = session.id
        self._fair = (session.fair_seed, session.fair_temperature)
        self.prompt = self._last_prompt()
        self._update_controls()
        if self.prompt and all(c.last_reply() is not None for c in self.columns):
            self._all_done()
            # keyed as votes name them: a vote's message id is None once that reply is deleted
            replies: dict[int | None, int] = {
                reply.id: c.position for c in self.columns if (reply := c.last_reply()) is not None
            }
            for vote in self.services.compare.votes(session.id):
                left = replies.get(vote.left_message_id)
                right = replies.get(vote.right_message_id)
                if left is not None and right is not None:
                    self.vote_bar.mark_voted(left, right)
        return True

    def _last_prompt(self) -> str:
        for column in self.columns:
            path = column.pane.transcript.path
            user = next((m for m in reversed(path) if m.role == "user"), None)
            if user is not None:
                return user.content
        return ""
