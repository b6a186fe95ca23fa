"""The presenter of one conversation: its agent, its turns, and what its view is told.

A ``ConversationPresenter`` owns one conversation (stored on its first message) answered by one
agent. It starts every kind of turn (send, edit, retry, regenerate, continue, fit-context),
streams it in its own asyncio task, and feeds its view from the turn's own events and final
``turn.stats``: nothing it was handed is read back from the store. Several presenters stream at
once (one per pane); each stops only its own reply.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from PySide6.QtCore import QObject, QTimer, Signal

from desktop.chat.agent_status import idle_status
from desktop.chat.context_offer import ContextChoice, ContextOffer, offer_for
from desktop.chat.services import Services
from desktop.chat.session import Turn
from desktop.chat.tool_loop import ApprovalRequest, CallStarted, StepChanged
from desktop.errors import UserError
from desktop.llm.events import ReasoningDelta, StreamEvent, TextDelta
from desktop.store.agents import Agent
from desktop.store.attachments import Attachment
from desktop.store.conversations import Message
from desktop.ui.conversation.tool_presenter import Approvals, step_status
from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.text_format import format_stats

log = logging.getLogger("simi.ui.presenter")

FLUSH_INTERVAL_MS = 33  # ~30 repaints/s however fast tokens arrive (ARCHITECTURE.md)
RATE_INTERVAL_S = 0.5  # the live rate on the status line updates twice a second


class ConversationPresenter(QObject):
    """One conversation with one agent.

    Signals:
        agent_changed(object): the agent that answers next (``Agent`` or None).
        conversation_changed(int): the conversation was stored (first message).
        busy_changed(bool): a reply started (True) or ended (False) streaming.
        status_changed(str): a one-line status, e.g. "SmolLM2 (local) · generating… 41 tok/s".
        turn_started(object): a ``Turn`` began; its ``user_message``/``reply`` are the rows to
            show (a regenerate or an edit emits ``path_changed`` instead).
        text_appended(int, str): reply id and the text since the last flush (<= 30x/s).
        reasoning_appended(int, str): the same for thinking text.
        waiting_changed(int, str): reply id and what it waits for before its first token
            ("connecting · 3 s", "loading the model", "queued: …"); "" once text flows.
        turn_finished(object): the finished ``Turn`` (complete / cancelled / error, with stats).
        path_changed(object): the shown branch changed; re-show it (focus message id or None).
        message_removed(int): a message left the path (a failed reply replaced by a retry).
        listing_changed(): title or order of the conversation changed (the list refreshes).
        tool_step_changed(int, object): reply id and a ``ToolStep`` that was asked or changed.
        approval_requested(int, object): reply id and an ``ApprovalRequest``; the turn waits
            until ``answer_approval(step id, "once" | "always" | "deny")`` (or Stop).
        sources_found(int, object): reply id and the passages (``Source``s, numbered) the
            agent's knowledge collections gave the question; said once, before the first
            token (the search runs before the model call), and only when there are some.
    """

    agent_changed = Signal(object)
    conversation_changed = Signal(int)
    busy_changed = Signal(bool)
    status_changed = Signal(str)
    turn_started = Signal(object)
    text_appended = Signal(int, str)
    reasoning_appended = Signal(int, str)
    waiting_changed = Signal(int, str)
    turn_finished = Signal(object)
    path_changed = Signal(object)
    message_removed = Signal(int)
    listing_changed = Signal()
    tool_step_changed = Signal(int, object)
    approval_requested = Signal(int, object)
    sources_found = Signal(int, object)

    def __init__(
        self,
        services: Services,
        agent: Agent | None,
        conversation_id: int | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.services = services
        self._agent = agent
        self._conversation_id = conversation_id
        self._task: asyncio.Task[None] | None = None
        # Read by the view, written only here: the turn streaming now (None when idle), the
        # user message being edited in the composer (sending makes a branch), the status line.
        self.turn: Turn | None = None
        self.editing: int | None = None
        self.status = ""
        self._text: list[str] = []
        self._text_flushed = 0
        self._thoughts: list[str] = []
        self._thoughts_flushed = 0
        self._last_rate_at = 0.0
        self._waiting = ""  # what the streaming reply waits for, as last said
        self._tool_phase = False  # between a model call that asked for tools and the next
        self._call_label = ""  # " · call 2" once the turn's second model call began
        self._sources_said = False  # the turn's sources (if any) were said
        self.approvals = Approvals(self._ask)
        # Which context size to raise to, asked of the person (the pane shows a dialog); None
        # changes nothing. Without a view nothing is raised.
        self.ask_context: Callable[[ContextOffer], ContextChoice | None] = lambda _offer: None
        self._timer = QTimer(self)
        self._timer.setInterval(FLUSH_INTERVAL_MS)
        self._timer.timeout.connect(self._flush)
        self.show_idle_status()

    # state -----------------------------------------------------------------------------------
    @property
    def agent(self) -> Agent | None:
        return self._agent

    @property
    def conversation_id(self) -> int | None:
        return self._conversation_id

    @property
    def busy(self) -> bool:
        return self._task is not None

    @property
    def streamed_text(self) -> str:
        """The reply text so far (the stored prefix of a "Continue" included)."""
        return "".join(self._text)

    def say(self, text: str) -> None:
        """Put ``text`` on this conversation's status line."""
        self._set_status(text)

    def _set_status(self, text: str) -> None:
        self.status = text
        self.status_changed.emit(text)

    def show_idle_status(self) -> None:
        """The agent's idle status; only a change is said, so the same words again (after the
        model header was read in the background, or another model's state changed) never
        cover what the window said since on the status line."""
        if not self.busy:
            agent = self._agent
            text = idle_status(self.services.local, agent) if agent else ""
            if text != self.status:
                self._set_status(text)

    def set_agent(self, agent: Agent | None) -> None:
        """Make ``agent`` answer this conversation from now on (an explicit choice)."""
        self._agent = agent
        if self._conversation_id is not None and agent is not None and agent.id is not None:
            self.services.conversations.set_agent(self._conversation_id, agent.id)
            self.listing_changed.emit()
        self.agent_changed.emit(agent)
        self.show_idle_status()

    def adopt(self, conversation_id: int, agent: Agent | None) -> None:
        """A new chat's presenter (nothing sent, nothing typed) becomes a stored
        conversation's, answered by ``agent``; nothing is stored."""
        assert self._conversation_id is None and not self.busy and self.editing is None
        self._conversation_id = conversation_id
        self._agent = agent
        self.agent_changed.emit(agent)
        self.show_idle_status()

    def refresh_agent(self, agents: dict[int, Agent]) -> None:
        """The agents were edited or deleted: hold the current version of ours."""
        agent = self._agent
        fresh = agents.get(agent.id) if agent is not None and agent.id is not None else None
        if fresh != agent:
            self._agent = fresh
            self.agent_changed.emit(fresh)
            self.show_idle_status()

    def agent_for(self, message_id: int) -> Agent | None:
        """The agent that wrote a reply (for retry and continue), else this conversation's."""
        message = self.services.conversations.message(message_id)
        agent = None
        if message is not None and message.agent_id is not None:
            agent = self.services.agents.get(message.agent_id)
        return agent or self._agent

    # turns -----------------------------------------------------------------------------------
    def send(self, text: str, attachments: Sequence[Attachment] | None = None) -> bool:
        """Send ``text`` with ``attachments`` (stored already) to this conversation's agent.
        An edited question makes a branch, and keeps its attachments when ``attachments`` is
        None. False when nothing was sent (busy, no agent, nothing to send, or the store
        failed)."""
        agent = self._agent
        if self.busy or agent is None or not (text.strip() or attachments):
            return False
        editing = self.editing
        try:
            if self._conversation_id is None:
                conv = self.services.conversations.create(agent.id)
                self._conversation_id = conv.id
                self.conversation_changed.emit(conv.id)
            chat = self.services.chat
            if editing is not None:
                turn = chat.begin_edit(self._conversation_id, agent, editing, text, attachments)
            else:
                turn = chat.begin(self._conversation_id, agent, text, attachments or ())
        except Exception:
            log.exception("could not start a turn")
            self._set_status("Could not store the message; see the log for details.")
            return False
        self.editing = None
        self._start(turn)
        self.listing_changed.emit()
        return True

    def retry(
        self, message_id: int, *, agent: Agent | None = None, drop_oldest_turns: int = 0
    ) -> None:
        """Replace a failed reply with a new attempt by the agent that wrote it (or ``agent``),
        optionally leaving the oldest turns out of the request."""
        chat = self.services.chat
        if self._begin(
            "Could not retry this message.",
            agent or self.agent_for(message_id),
            lambda conv, a: chat.begin_retry(
                conv, a, message_id, drop_oldest_turns=drop_oldest_turns
            ),
        ):
            self.message_removed.emit(message_id)

    def regenerate(self, message_id: int, agent: Agent | None = None) -> None:
        """A new version of a reply by this conversation's agent (or ``agent``: "Regenerate
        with…"); earlier versions stay (‹ 1/2 ›)."""
        chat = self.services.chat
        self._begin(
            "Could not regenerate this reply.",
            agent or self._agent,
            lambda conv, a: chat.begin_regenerate(conv, a, message_id),
        )

    def continue_reply(self, message_id: int) -> None:
        """Carry on a reply cut off by max tokens (or stopped); the text goes on in place."""
        chat = self.services.chat
        self._begin(
            "Could not continue this reply.",
            self.agent_for(message_id),
            lambda conv, a: chat.begin_continue(conv, a, message_id),
        )

    def _begin(
        self, failure: str, agent: Agent | None, begin: Callable[[int, Agent], Turn]
    ) -> bool:
        """Start the turn ``begin(conversation_id, agent)`` stores, unless busy or missing a
        conversation or agent; a store failure is logged and said (``failure``)."""
        conv = self._conversation_id
        if self.busy or conv is None or agent is None:
            return False
        try:
            turn = begin(conv, agent)
        except Exception:
            log.exception(failure)
            self._set_status(failure)
            return False
        self._start(turn)
        return True

    def fit_context(self, message_id: int, *, raise_n_ctx: bool) -> asyncio.Task[None] | None:
        """A reply failed with "context too long": drop the oldest turns (this request only)
        or raise the agent's n_ctx, then retry. Tokenizing and reading the model's header run
        off the GUI thread; a raise is offered first (``ask_context``: the sizes, their memory
        and the trained context) and changes nothing unless the person picks a size."""
        agent = self.agent_for(message_id)
        conversation_id = self._conversation_id
        if self.busy or conversation_id is None or agent is None:
            return None
        if not agent.is_local:
            self._set_status("Only local agents can be refitted; start a new chat.")
            return None
        self._set_status("Counting tokens…")
        services = self.services

        async def go() -> None:
            fit = await run_blocking(
                services.chat.plan_context_fit, conversation_id, agent, message_id
            )
            chosen, drop = agent, 0
            if raise_n_ctx:
                offer = await run_blocking(
                    offer_for, agent, fit.raise_n_ctx_to, services.local.model_info
                )
                choice = self.ask_context(offer)
                if choice is None:
                    self._set_status(f"{agent.name}'s context is unchanged.")
                    return
                chosen = await run_blocking(
                    services.agents.update, agent.with_changes(n_ctx=choice.n_ctx)
                )
                if self._agent is not None and self._agent.id == chosen.id:
                    self._agent = chosen
                    self.agent_changed.emit(chosen)
                note = f"Raised {chosen.name}'s context to {choice.n_ctx:,} tokens."
                if choice.drops_turns:  # the trained size: still leave the oldest turns out
                    refit = await run_blocking(
                        services.chat.plan_context_fit, conversation_id, chosen, message_id
                    )
                    drop = refit.plan.drop_turns
                    note += f" Leaving out the {drop} oldest turn(s) for this reply."
            elif not fit.plan.fits:
                self._set_status(
                    "Even the newest message alone does not fit in "
                    f"{fit.plan.n_ctx:,} tokens; use Raise context instead."
                )
                return
            else:
                drop = fit.plan.drop_turns
                note = f"Leaving out the {drop} oldest turn(s) for this reply."
            self.retry(message_id, agent=chosen, drop_oldest_turns=drop)
            self._set_status(note)

        return start(go(), name="fit-context")

    def stop(self) -> None:
        """Cancel this conversation's streaming reply; its partial text is kept (cancelled)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def answer_approval(self, step_id: int, decision: str) -> None:
        """The person's answer to a waiting tool call: "once", "always" or "deny"."""
        self.approvals.answer(step_id, decision)

    def _ask(self, request: ApprovalRequest) -> None:
        turn = self.turn
        if turn is not None:
            self.approval_requested.emit(turn.assistant_message_id, request)

    async def wait(self) -> None:
        """Until the current reply (if any) has finished and been stored."""
        task = self._task
        if task is not None:
            await asyncio.wait({task})

    # messages --------------------------------------------------------------------------------
    def begin_edit(self, message_id: int) -> str | None:
        """Start editing a sent question; returns its text for the composer (None: can't)."""
        if self.busy:
            return None
        message = self.services.conversations.message(message_id)
        if message is None or message.role != "user":
            return None
        self.editing = message_id
        return message.content

    def cancel_edit(self) -> None:
        self.editing = None

    def delete_message(self, message_id: int) -> None:
        if self.busy:
            return
        self.services.conversations.delete_message(message_id)
        self.path_changed.emit(None)
        self.listing_changed.emit()

    def switch_version(self, message_id: int, step: int) -> None:
        if self.busy:
            return
        new_id = self.services.conversations.switch_version(message_id, step)
        if new_id is not None:
            self.path_changed.emit(new_id)

    # streaming -------------------------------------------------------------------------------
    def _start(self, turn: Turn) -> None:
        assert self._task is None, "one reply at a time in a conversation"
        self.turn = turn
        self._text = [turn.prefix] if turn.prefix else []
        self._text_flushed = len(self._text)
        self._thoughts = [turn.reasoning] if turn.reasoning else []
        self._thoughts_flushed = len(self._thoughts)
        self._last_rate_at = 0.0
        self._waiting = ""
        self._tool_phase = False
        self._call_label = ""
        self._sources_said = False
        task = self._task = asyncio.ensure_future(self._run(turn))
        task.add_done_callback(lambda _t: self._cancelled_early(task, turn))
        self._timer.start()
        self.busy_changed.emit(True)
        if turn.kind in ("regenerate", "edit"):
            self.path_changed.emit(None)
        self.turn_started.emit(turn)
        self._set_status(f"{turn.agent.name} · waiting for the first token…")

    def _on_event(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self._thoughts.append(event.text)
        elif isinstance(event, StepChanged | CallStarted):
            self._on_turn_event(event)

    def _on_turn_event(self, event: StepChanged | CallStarted) -> None:
        turn = self.turn
        if turn is None:
            return
        name = turn.agent.name
        if isinstance(event, CallStarted):
            self._tool_phase = False
            self._call_label = f" · call {event.call_index}"
            self._set_status(f"{name}{self._call_label}…")
            return
        self._tool_phase = True
        self._flush()  # the text before the call is on screen before its card
        self.tool_step_changed.emit(turn.assistant_message_id, event.step)
        status = step_status(name, event.step)
        if status is not None:
            self._set_status(status)

    async def _run(self, turn: Turn) -> None:
        try:
            await self.services.chat.run(turn, on_event=self._on_event, approve=self.approvals.ask)
        except asyncio.CancelledError:
            self._store_cancelled(turn)
        except Exception:  # a bug below: keep the window alive, show it on the message
            log.exception("turn failed unexpectedly")
            if turn.error is None:
                turn.error = UserError("Something went wrong inside SIMI Multi.")
            turn.status = "error"
        finally:
            self._end(turn)

    def _store_cancelled(self, turn: Turn) -> None:
        if turn.status == "streaming":  # cancelled before ChatService.run got going
            self.services.conversations.finish_message(
                turn.assistant_message_id, content=turn.text, status="cancelled"
            )
            turn.status = "cancelled"

    def _cancelled_early(self, task: asyncio.Task[None], turn: Turn) -> None:
        """Stop came before the task first ran: ``_run``'s own cleanup never started."""
        if self._task is task:
            self._store_cancelled(turn)
            self._end(turn)

    def _end(self, turn: Turn) -> None:
        self._timer.stop()
        self._flush()
        if self._waiting:  # ended (failed, stopped) before any text
            self._waiting = ""
            self.waiting_changed.emit(turn.assistant_message_id, "")
        self._task = None
        self.turn = None
        self._set_status(summary(turn))
        self.turn_finished.emit(turn)
        self.busy_changed.emit(False)
        self.listing_changed.emit()

    def _flush(self) -> None:
        turn = self.turn
        if turn is None:
            return
        if not self._sources_said and turn.retrieval is not None:  # searched: once a turn
            self._sources_said = True
            if turn.sources:
                self.sources_found.emit(turn.assistant_message_id, turn.sources)
        if self._thoughts_flushed < len(self._thoughts):
            new = "".join(self._thoughts[self._thoughts_flushed :])
            self._thoughts_flushed = len(self._thoughts)
            self.reasoning_appended.emit(turn.assistant_message_id, new)
        if self._text_flushed < len(self._text):
            new = "".join(self._text[self._text_flushed :])
            self._text_flushed = len(self._text)
            self.text_appended.emit(turn.assistant_message_id, new)
        clock = turn.clock
        if clock is None:
            return
        if self._tool_phase:  # the status line says what the tool does
            if self._waiting:
                self._waiting = ""
                self.waiting_changed.emit(turn.assistant_message_id, "")
            return
        agent = turn.agent
        name = agent.name + self._call_label
        if clock.first_token is None or self._waiting:  # nothing to say once text flows
            loading = agent.is_local and self.services.local.state == "loading"
            waiting = clock.waiting_for(remote=not agent.is_local, loading_model=loading) or ""
            if waiting != self._waiting:  # at most once a second, and once at the 1st token
                self._waiting = waiting
                self.waiting_changed.emit(turn.assistant_message_id, waiting)
                if waiting:
                    self._set_status(f"{name} · {waiting}")
        now = clock.now()
        if clock.first_token is not None and now - self._last_rate_at >= RATE_INTERVAL_S:
            self._last_rate_at = now
            rate = clock.live_decode_tok_s()
            self._set_status(f"{name} · generating…" + (f" {rate:.0f} tok/s" if rate else ""))


def final_message(turn: Turn) -> Message | None:
    """The reply as ``ChatService`` stored it at the end of ``turn`` (no read-back)."""
    if turn.reply is None:
        return None
    error = turn.error
    return replace(
        turn.reply,
        content=turn.text,
        status=turn.status,
        reasoning=turn.reasoning,
        error_text=error.user_message if error is not None and turn.status == "error" else None,
        error_kind=error.kind if error is not None and turn.status == "error" else None,
    )


def summary(turn: Turn) -> str:
    """The status line after a turn: its stats, or why it failed or stopped."""
    stats = format_stats(turn.stats.as_row() if turn.stats is not None else None)
    if turn.status == "error":
        message = turn.error.user_message if turn.error else "failed"
        return f"{turn.agent.name} · failed: {message}"
    notice = f" · {turn.notice}" if turn.notice else ""
    if turn.status == "cancelled":
        return f"{turn.agent.name} · {stats or 'stopped'}" + notice  # the stats end "stopped"
    return (stats or f"{turn.agent.name} · done") + notice
