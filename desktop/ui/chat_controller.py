"""Runs one turn at a time on the asyncio loop and paints its text at a bounded rate."""

from __future__ import annotations

import asyncio
import logging
import time

from PySide6.QtCore import QObject, QTimer, Signal

from desktop.chat.session import ChatService, Turn
from desktop.llm.errors import UserError
from desktop.llm.events import ReasoningDelta, StreamEvent, TextDelta
from desktop.store.agents import Agent
from desktop.ui.text_format import format_stats

log = logging.getLogger("simi.ui.chat")

FLUSH_INTERVAL_MS = 33  # ~30 repaints/s however fast tokens arrive (ARCHITECTURE.md)
RATE_INTERVAL_S = 0.5  # speed in the status bar updates twice a second, not per token


class ChatController(QObject):
    """Streams ``ChatService.run`` in an asyncio task; deltas are buffered and flushed by a timer.

    Signals:
        busy_changed(bool): a turn started (True) or ended (False).
        turn_started(object): the ``Turn`` that begins streaming.
        text_appended(int, str): assistant message id and the text that arrived since the
            last flush (<= 30x/s; a view appends it, so a flush costs what is new, not the
            whole reply).
        reasoning_appended(int, str): the same for thinking text (ReasoningDelta).
        status_changed(str): a one-line status, e.g. "SmolLM2 (local) · generating… 41 tok/s".
        turn_finished(object): the finished ``Turn`` (status complete / cancelled / error).
    """

    busy_changed = Signal(bool)
    turn_started = Signal(object)
    text_appended = Signal(int, str)
    reasoning_appended = Signal(int, str)
    status_changed = Signal(str)
    turn_finished = Signal(object)

    def __init__(self, chat: ChatService, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._chat = chat
        self._task: asyncio.Task[None] | None = None
        self._turn: Turn | None = None
        self._parts: list[str] = []
        self._flushed = 0  # how many of _parts the view already has
        self._thoughts: list[str] = []
        self._thoughts_flushed = 0
        self._pending = False
        self._deltas = 0
        self._first: float | None = None
        self._last: float | None = None
        self._last_rate_at = 0.0
        self._timer = QTimer(self)
        self._timer.setInterval(FLUSH_INTERVAL_MS)
        self._timer.timeout.connect(self._flush)

    # state -----------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return self._task is not None

    @property
    def turn(self) -> Turn | None:
        return self._turn

    @property
    def text(self) -> str:
        return "".join(self._parts)

    # starting and stopping -------------------------------------------------------------------
    def send(self, conversation_id: int, agent: Agent, text: str) -> Turn:
        """Store the user message and start streaming the reply."""
        turn = self._chat.begin(conversation_id, agent, text)
        self._start(turn)
        return turn

    def retry(
        self,
        conversation_id: int,
        agent: Agent,
        failed_message_id: int,
        drop_oldest_turns: int = 0,
    ) -> Turn:
        turn = self._chat.begin_retry(
            conversation_id, agent, failed_message_id, drop_oldest_turns=drop_oldest_turns
        )
        self._start(turn)
        return turn

    def regenerate(self, conversation_id: int, agent: Agent, reply_id: int) -> Turn:
        """Another version of a reply (the earlier ones stay)."""
        turn = self._chat.begin_regenerate(conversation_id, agent, reply_id)
        self._start(turn)
        return turn

    def edit(self, conversation_id: int, agent: Agent, user_id: int, text: str) -> Turn:
        """Send an edited question as a new branch."""
        turn = self._chat.begin_edit(conversation_id, agent, user_id, text)
        self._start(turn)
        return turn

    def continue_reply(self, conversation_id: int, agent: Agent, reply_id: int) -> Turn:
        """Carry on a reply that was cut off; the text goes on in the same message."""
        turn = self._chat.begin_continue(conversation_id, agent, reply_id)
        self._start(turn)
        return turn

    def _start(self, turn: Turn) -> None:
        assert self._task is None, "one turn at a time"
        self._turn = turn
        self._parts = [turn.prefix] if turn.prefix else []
        self._flushed = len(self._parts)
        self._thoughts = [turn.reasoning] if turn.reasoning else []
        self._thoughts_flushed = len(self._thoughts)
        self._pending = False
        self._deltas = 0
        self._first = self._last = None
        self._last_rate_at = 0.0
        self._task = asyncio.ensure_future(self._run(turn))
        self._timer.start()
        self.busy_changed.emit(True)
        self.turn_started.emit(turn)
        self.status_changed.emit(f"{turn.agent.name} · waiting for the first token…")

    def stop(self) -> None:
        """Cancel the streaming turn; ChatService keeps the partial text as ``cancelled``."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def wait(self) -> None:
        """Until the current turn (if any) has finished and been stored."""
        task = self._task
        if task is not None:
            await asyncio.wait({task})

    # streaming -------------------------------------------------------------------------------
    def _on_event(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            now = time.perf_counter()
            if self._first is None:
                self._first = now
            self._last = now
            self._deltas += 1
            self._parts.append(event.text)
            self._pending = True
        elif isinstance(event, ReasoningDelta):
            self._thoughts.append(event.text)
            self._pending = True

    async def _run(self, turn: Turn) -> None:
        try:
            await self._chat.run(turn, on_event=self._on_event)
        except asyncio.CancelledError:
            if turn.status == "streaming":  # cancelled before ChatService.run got going
                self._chat.conversations.finish_message(
                    turn.assistant_message_id, content=turn.text, status="cancelled"
                )
                turn.status = "cancelled"
        except Exception:  # a bug below: keep the window alive, show it on the message
            log.exception("turn failed unexpectedly")
            if turn.error is None:
                turn.error = UserError("Something went wrong inside SIMI Multi.")
            turn.status = "error"
        finally:
            self._timer.stop()
            self._flush()
            self._task = None
            self._turn = None
            self.status_changed.emit(self.summary(turn))
            self.turn_finished.emit(turn)
            self.busy_changed.emit(False)

    def _flush(self) -> None:
        turn = self._turn
        if turn is None:
            return
        if self._pending:
            self._pending = False
            if self._thoughts_flushed < len(self._thoughts):
                new = "".join(self._thoughts[self._thoughts_flushed :])
                self._thoughts_flushed = len(self._thoughts)
                self.reasoning_appended.emit(turn.assistant_message_id, new)
            if self._flushed < len(self._parts):
                new = "".join(self._parts[self._flushed :])
                self._flushed = len(self._parts)
                self.text_appended.emit(turn.assistant_message_id, new)
        now = time.perf_counter()
        if self._first is not None and now - self._last_rate_at >= RATE_INTERVAL_S:
            self._last_rate_at = now
            rate = ""
            if self._deltas > 1 and self._last and self._last > self._first:
                rate = f" {(self._deltas - 1) / (self._last - self._first):.0f} tok/s"
            self.status_changed.emit(f"{turn.agent.name} · generating…{rate}")

    @staticmethod
    def summary(turn: Turn) -> str:
        stats = format_stats(turn.stats)
        if turn.status == "error":
            message = turn.error.user_message if turn.error else "failed"
            return f"{turn.agent.name} · failed: {message}"
        notice = f" · {turn.notice}" if turn.notice else ""
        if turn.status == "cancelled":
            return f"{turn.agent.name} · stopped" + (f" · {stats}" if stats else "") + notice
        return (stats or f"{turn.agent.name} · done") + notice
