"""Run one turn: store the messages, stream from the agent's provider, record statistics.

The same service drives the window and the CLI, so a conversation in one looks the same in
the other.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from desktop.chat import one_shot
from desktop.chat.agents import AgentService
from desktop.chat.attachments import MessageParts, parts_of, vision_problem, with_parts
from desktop.chat.call import CallDeps, CallSink, ModelCall
from desktop.chat.call_stats import CallStats
from desktop.chat.knowledge import KnowledgeService, Retrieval, retrieve
from desktop.chat.one_shot import OneShot
from desktop.chat.price_book import PriceBook, refuse_on_loop
from desktop.chat.providers import ProviderFactory
from desktop.chat.stats_clock import StatsClock
from desktop.chat.tool_loop import (
    ANSWER_NOW,
    MAX_TOOL_ROUNDS,
    Approver,
    CallStarted,
    ToolBox,
    ToolRunner,
    history_of,
    tool_messages,
)
from desktop.chat.turn_calls import ContextFit, call_stats, context_fit, title_from
from desktop.errors import UserError
from desktop.llm.events import StreamEvent, TextDelta, ToolCall
from desktop.llm.provider import ChatMessage, ChatRequest
from desktop.local.context import without_oldest_turns
from desktop.store.agents import Agent
from desktop.store.attachments import Attachment, AttachmentStore
from desktop.store.conversations import ConversationStore, Message
from desktop.store.knowledge import Source
from desktop.store.stats import StatsStore
from desktop.store.tool_steps import ToolStep

log = logging.getLogger("simi.chat")

# Sent (not stored) after a cut-off reply to have the model carry on from where it stopped.
CONTINUE_PROMPT = "Continue exactly where your last reply stopped. Do not repeat anything."


@dataclass
class Turn:
    """One request/response in a conversation: the user message and the reply being written."""

    conversation_id: int
    agent: Agent
    user_message_id: int
    assistant_message_id: int
    text: str = ""
    status: str = "streaming"
    error: UserError | None = None
    stats: CallStats | None = None  # the last model call's record (``chat/call_stats.py``)
    reasoning: str = ""
    # Retry after "context too long": leave out this many of the oldest turns.
    drop_oldest_turns: int = 0
    # What the backend did on its own that the person should know (e.g. "no chat template in
    # the model file: using ChatML", "loaded 15 of 30 layers on the GPU after running out").
    notice: str | None = None
    # "Continue": the reply already holds ``prefix`` (cut off by max tokens); new text is
    # appended to it, in the same message.
    prefix: str = ""
    kind: str = "send"  # send / retry / regenerate / edit / continue
    # The rows as stored when the turn began (the view shows them without reading them back):
    # ``user_message`` when this turn wrote a new question, ``reply`` the message being written.
    user_message: Message | None = None
    reply: Message | None = None
    # The running call's stats clock (live rate, queue state); None until ``run`` starts.
    clock: StatsClock | None = None
    # An agentic turn: every model call's record in order (``stats`` is the last) and
    # every tool call (``store/tool_steps.py``).
    calls: list[CallStats] = field(default_factory=list)
    steps: list[ToolStep] = field(default_factory=list)
    # A turn an API client asked for (``desktop/serve``): its rows say so, with the key's name.
    source: str | None = None
    api_client: str | None = None
    # the question's attachments, when this turn wrote the question (send, edit)
    attachments: list[Attachment] = field(default_factory=list)
    # the passages the agent's knowledge collections gave the question (numbered as the
    # model was told to cite them), and the search's figures; None: no search this turn
    retrieval: Retrieval | None = None

    @property
    def sources(self) -> tuple[Source, ...]:
        return self.retrieval.sources if self.retrieval is not None else ()


class ChatService:
    def __init__(
        self,
        conversations: ConversationStore,
        stats: StatsStore,
        providers: ProviderFactory,
        clock: Callable[[], float] = time.perf_counter,
        *,
        agents: AgentService | None = None,
        prices: PriceBook | None = None,
        tools: ToolRunner | None = None,
        attachments: AttachmentStore | None = None,
        knowledge: KnowledgeService | None = None,
    ) -> None:
        self.conversations = conversations
        # the collections agents search (None: a service without knowledge, as in some tests)
        self.knowledge = knowledge
        # files attached to messages (None: a service without any, as in some tests)
        self.attachments = attachments
        self.stats = stats
        self.providers = providers
        # What a call cost (desktop.chat.pricing), priced when it ends; warmed off the loop.
        if prices is None:
            from desktop.settings.paths import AppPaths

            prices = PriceBook.in_folder(AppPaths.from_env().data_dir)
        self.prices = prices
        # What every model call needs (chat/call.py): a turn's and ask_once's. ``agents``:
        # where a remote agent's key is fetched off the loop before its provider is built
        # (None: the provider factory reads it where it runs).
        self.call_deps = CallDeps(
            clock=clock,
            providers=providers,
            prices=prices,
            stats=stats,
            fetch_key=agents.fetch_key if agents is not None else None,
            attachments=attachments,
            knowledge=knowledge,
        )
        # MCP tools for agents allowed some (None: no agent has tools; the CLI's light paths)
        self.tools = tools

    # building turns --------------------------------------------------------------------------
    def begin(
        self,
        conversation_id: int,
        agent: Agent,
        text: str,
        attachments: Sequence[Attachment] = (),
    ) -> Turn:
        """Store the user message (with its ``attachments``, already stored by
        ``AttachmentService.prepare``) and an empty streaming reply; return the turn to run."""
        conv = self.conversations.get(conversation_id)
        if conv is not None and not conv.title:
            title = text if text.strip() or not attachments else attachments[0].name
            self.conversations.rename(conversation_id, title_from(title))
        with self.conversations.transaction():
            user = self.conversations.add_message(
                conversation_id, "user", text, agent_id=agent.id, agent_name=agent.name
            )
            attached = self._attach(user.id, attachments)
        return self._answer_new(conversation_id, agent, user, attached, kind="send")

    def _answer_new(
        self,
        conversation_id: int,
        agent: Agent,
        user: Message,
        attached: list[Attachment],
        kind: str,
    ) -> Turn:
        """The turn that answers ``user``, a question this turn stored (with ``attached``):
        a new empty reply under it."""
        reply = self._new_reply(conversation_id, agent, user.id)
        return Turn(
            conversation_id,
            agent,
            user.id,
            reply.id,
            kind=kind,
            user_message=user,
            reply=reply,
            attachments=attached,
        )

    def _attach(self, message_id: int, attachments: Sequence[Attachment]) -> list[Attachment]:
        if not attachments:
            return []
        if self.attachments is None:
            raise ValueError("this chat service keeps no attachments")
        self.attachments.attach(message_id, attachments)
        return list(attachments)

    def attachments_of(self, message_ids: Sequence[int]) -> dict[int, list[Attachment]]:
        """message id -> its attachments in order, for the view (messages without any are
        left out)."""
        if self.attachments is None or not message_ids:
            return {}
        return self.attachments.of_messages(message_ids)

    def _message_in(self, conversation_id: int, message_id: int, role: str) -> Message:
        msg = self.conversations.message(message_id)
        if msg is None or msg.conversation_id != conversation_id:
            raise ValueError("message is not in this conversation")
        if msg.role != role:
            raise ValueError(f"message {message_id} is not a {role} message")
        return msg

    def begin_retry(
        self,
        conversation_id: int,
        agent: Agent,
        failed_message_id: int,
        drop_oldest_turns: int = 0,
    ) -> Turn:
        """Replace a failed or cancelled reply with a fresh attempt at the same user message.

        ``drop_oldest_turns``: send the conversation without that many of its oldest turns
        (they stay in the conversation; only this request leaves them out)."""
        failed = self._message_in(conversation_id, failed_message_id, "assistant")
        user_id = failed.parent_id
        if user_id is None:
            raise ValueError("no user message to retry")
        self.conversations.delete_message(failed_message_id)
        reply = self._new_reply(conversation_id, agent, user_id)
        return Turn(
            conversation_id,
            agent,
            user_id,
            reply.id,
            kind="retry",
            drop_oldest_turns=drop_oldest_turns,
            reply=reply,
        )

    def plan_context_fit(
        self,
        conversation_id: int,
        agent: Agent,
        failed_message_id: int,
        count_tokens: Callable[[list[ChatMessage]], int] | None = None,
    ) -> ContextFit:
        """For a local reply that failed with "context too long": how many oldest turns to
        leave out, or which context size would hold everything. Blocking (tokenizes): call it
        off the event loop (the window: ``run_blocking``); on the loop it raises."""
        refuse_on_loop("plan_context_fit")
        failed = self._message_in(conversation_id, failed_message_id, "assistant")
        probe = Turn(conversation_id, agent, failed.parent_id or 0, failed_message_id)
        return context_fit(self.request_for(probe).messages, agent, count_tokens)

    def begin_regenerate(self, conversation_id: int, agent: Agent, reply_id: int) -> Turn:
        """A new version of a reply; the earlier ones stay (switch with ‹ 1/2 ›)."""
        old = self._message_in(conversation_id, reply_id, "assistant")
        if old.parent_id is None:
            raise ValueError("no user message to answer again")
        reply = self._new_reply(conversation_id, agent, old.parent_id)
        return Turn(conversation_id, agent, old.parent_id, reply.id, kind="regenerate", reply=reply)

    def begin_edit(
        self,
        conversation_id: int,
        agent: Agent,
        user_id: int,
        text: str,
        attachments: Sequence[Attachment] | None = None,
    ) -> Turn:
        """An edited question becomes a new branch beside the old one, answered afresh. It
        keeps the old question's attachments unless ``attachments`` are given (``[]``: none)."""
        old = self._message_in(conversation_id, user_id, "user")
        with self.conversations.transaction():
            user = self.conversations.add_message(
                conversation_id,
                "user",
                text,
                agent_id=agent.id,
                agent_name=agent.name,
                parent_id=old.parent_id,
            )
            if attachments is None:
                attached = (
                    self.attachments.copy(old.id, user.id) if self.attachments is not None else []
                )
            else:
                attached = self._attach(user.id, attachments)
        return self._answer_new(conversation_id, agent, user, attached, kind="edit")

    def begin_continue(self, conversation_id: int, agent: Agent, reply_id: int) -> Turn:
        """Carry on a reply that stopped early (max tokens, Stop); text goes on the same one."""
        old = self._message_in(conversation_id, reply_id, "assistant")
        if old.parent_id is None:
            raise ValueError("no user message before this reply")
        self.conversations.set_status(reply_id, "streaming")
        return Turn(
            conversation_id,
            agent,
            old.parent_id,
            reply_id,
            text=old.content,
            reasoning=old.reasoning,
            prefix=old.content,
            kind="continue",
            reply=old,
        )

    def _new_reply(self, conversation_id: int, agent: Agent, parent_id: int) -> Message:
        return self.conversations.add_message(
            conversation_id,
            "assistant",
            "",
            status="streaming",
            agent_id=agent.id,
            agent_name=agent.name,
            model=agent.model,
            parent_id=parent_id,
        )

    def _path(self, turn: Turn) -> list[Message]:
        """The user and assistant messages the turn's reply follows, oldest first."""
        return [
            m
            for m in self.conversations.ancestors(turn.assistant_message_id)
            if m.role in ("user", "assistant")
        ]

    def attachments_on_path(self, turn: Turn) -> dict[int, list[Attachment]]:
        """The attachments of the questions the turn's reply follows (message id -> them)."""
        if self.attachments is None:
            return {}
        return self.attachments.of_messages(m.id for m in self._path(turn) if m.role == "user")

    def request_for(
        self,
        turn: Turn,
        *,
        with_tools: bool = False,
        parts: dict[int, MessageParts] | None = None,
        retrieval: Retrieval | None = None,
    ) -> ChatRequest:
        """The request for a turn; ``with_tools``: earlier replies' tool calls and results go
        in too (the agent offers tools; without them a reply is its text alone). A question's
        attachments go with it: ``parts`` as ``ChatService.run`` built them off the loop;
        None: built here (blocking: the first time, an image is resized). ``retrieval``: the
        passages found for the turn's question go before it, numbered, with the request to
        cite them (the stored question stays the person's words)."""
        agent = turn.agent
        history: list[ChatMessage] = []
        if agent.system_prompt.strip():
            history.append(ChatMessage("system", agent.system_prompt))
        path = self._path(turn)
        if parts is None and self.attachments is not None:
            found = self.attachments.of_messages(m.id for m in path if m.role == "user")
            parts = parts_of(self.attachments, found, agent.kind) if found else {}
        parts = parts or {}
        steps = (
            self.tools.steps.for_messages([m.id for m in path if m.role == "assistant"])
            if with_tools and self.tools is not None
            else {}
        )
        for m in path:
            if m.role == "assistant" and m.id in steps and m.status != "error":
                # its calls and their results, when this request offers tools again
                history.extend(history_of(m.content, steps[m.id]))
                continue
            if m.role == "assistant" and (m.status == "error" or not m.content):
                continue
            content = m.content
            if retrieval is not None and m.id == turn.user_message_id:
                content = retrieval.prompt(content)
            message = ChatMessage(m.role, content)  # type: ignore[arg-type]
            history.append(with_parts(message, parts.get(m.id)))
        if turn.drop_oldest_turns:
            history = without_oldest_turns(history, turn.drop_oldest_turns)
        if turn.prefix:
            history.append(ChatMessage("assistant", turn.prefix))
            history.append(ChatMessage("user", CONTINUE_PROMPT))
        return ChatRequest(
            model=agent.model,
            messages=tuple(history),
            sampling=one_shot.sampling_of(agent),
            session_key=f"conversation:{turn.conversation_id}",
            cache_owner=str(agent.id) if agent.id is not None else None,
        )

    # running ---------------------------------------------------------------------------------
    async def run(
        self,
        turn: Turn,
        on_event: Callable[[Any], None] | None = None,
        *,
        approve: Approver | None = None,
    ) -> Turn:
        """Stream the reply. Cancelling the task keeps the partial text as ``cancelled``.

        A ``UserError`` is stored on the message (with the text so far) and returned on the
        turn, not raised: the caller shows it with a Retry button.

        An agent with tools takes a model call per round of tool calls (``chat/tool_loop.py``;
        ``approve`` asks the person): each call is a stats record (``turn.calls``,
        ``turn.stats`` the last); ``on_event`` also hears ``StepChanged`` and ``CallStarted``.
        """
        agent = turn.agent
        # the first call's clock starts; genai-prices takes a few hundred ms to import: on a
        # worker thread, while the call runs (the row is priced when it ends)
        call = ModelCall(self.call_deps, agent)
        turn.clock = call.clock
        emit = on_event or (lambda _e: None)

        def took_notice(notice: str) -> None:
            turn.notice = notice

        parts: list[str] = [turn.prefix] if turn.prefix else []
        thoughts: list[str] = [turn.reasoning] if turn.reasoning else []
        sink = CallSink(
            parts,
            thoughts,
            emit=on_event,
            on_notice=took_notice,
            checkpoint=lambda: self.conversations.checkpoint(
                turn.assistant_message_id, "".join(parts), "".join(thoughts)
            ),
        )
        finish = "error"
        recorded = False  # the current call's row is stored (cancelled between calls)

        def collect() -> None:
            turn.text = "".join(parts)
            turn.reasoning = "".join(thoughts)

        try:
            attached = await self._attachment_parts(turn)  # a model that cannot see: ends here
            await call.open()
            box = ToolBox()
            if self.tools is not None and self.tools.agent_uses_tools(agent):
                box = await self.tools.toolbox(agent)
                if box.notices:
                    turn.notice = "; ".join(box.notices)
                # starting the servers is not the model's time
                turn.clock = call.restart_clock()
            # the knowledge search is: the person waits for it after Send
            retrieval = await self._retrieve(turn)
            request = self.request_for(
                turn, with_tools=bool(box), parts=attached, retrieval=retrieval
            )
            if box:
                request = replace(request, tools=box.specs)
            rounds = 0
            while True:
                calls: list[ToolCall] = []
                sink.tool_calls = calls
                finish = await call.stream(request, sink)
                if finish != "tool_calls" or not calls or self.tools is None or not box:
                    break
                rounds += 1
                collect()
                over = request.tool_choice == "none"
                call_index = len(turn.calls) + 1
                steps: list[ToolStep] | None = None
                try:
                    steps = await self.tools.run_calls(
                        agent,
                        box,
                        calls,
                        message_id=turn.assistant_message_id,
                        call_index=call_index,
                        first_position=len(turn.steps),
                        text_offset=len(turn.text),
                        approve=approve,
                        emit=emit,
                        over_limit=over,
                    )
                    round_text = turn.text[turn.steps[-1].text_offset if turn.steps else 0 :]
                    turn.steps.extend(steps)
                    await call.prices_ready()  # the call is priced like the last one
                except asyncio.CancelledError:
                    # Stop while a tool waited for approval or ran: the model call that asked
                    # for it still finished with its tool calls (those stored so far)
                    if steps is None:
                        steps = self._steps_of_call(turn, call_index)
                        turn.steps.extend(steps)
                    self._record_call(turn, call, "tool_calls", steps)
                    recorded = True
                    raise
                self._record_call(turn, call, "tool_calls", steps)
                recorded = True
                if over:  # it still asked for tools: refused, and the turn ends here
                    turn.notice = f"Stopped after {MAX_TOOL_ROUNDS} rounds of tool calls."
                    break
                recorded = False
                messages = [*request.messages, *tool_messages(steps, round_text.strip())]
                if rounds >= MAX_TOOL_ROUNDS:
                    messages.append(ChatMessage("user", ANSWER_NOW.format(rounds=rounds)))
                request = replace(
                    request,
                    messages=tuple(messages),
                    tool_choice="none" if rounds >= MAX_TOOL_ROUNDS else "auto",
                )
                if parts and not parts[-1].endswith("\n"):
                    parts.append("\n\n")  # the next call's text starts a paragraph
                    emit(TextDelta("\n\n", 0))
                turn.clock = call.restart_clock()
                emit(CallStarted(len(turn.calls) + 1))
        except asyncio.CancelledError:
            collect()
            await self._finish(turn, call, "cancelled", "cancelled", record=not recorded)
            raise
        except UserError as exc:
            collect()
            turn.error = exc
            log.info("turn failed (%s): %s", exc.kind, exc.user_message)
            await self._finish(turn, call, "error", "error", exc, priced=True)
            return turn
        except Exception as exc:  # a bug: keep the text, say so, and let it surface
            collect()
            turn.error = UserError(f"Something went wrong inside SIMI Multi: {type(exc).__name__}")
            await self._finish(turn, call, "error", "error", turn.error)
            raise
        finally:
            await call.aclose()
        collect()
        status = "cancelled" if finish == "cancelled" else "complete"
        await self._finish(turn, call, status, finish, record=not recorded, priced=True)
        return turn

    async def _retrieve(self, turn: Turn) -> Retrieval | None:
        """The passages of the agent's knowledge collections for the turn's question, found on
        the search thread; stored on the reply (a retried reply searched again). A search
        that fails is said on the turn and the question goes without passages."""
        knowledge = self.knowledge
        if knowledge is None or turn.prefix:
            return None  # "Continue" carries on the reply the passages went with
        question = self.conversations.message(turn.user_message_id)
        found, notice = await retrieve(
            knowledge,
            turn.agent.id,
            question.content if question is not None else "",
            turn.clock,
        )
        if notice:
            turn.notice = notice
        if found is None:
            return None
        knowledge.store.add_sources(turn.assistant_message_id, found.sources)
        turn.retrieval = found
        return found

    async def _attachment_parts(self, turn: Turn) -> dict[int, MessageParts]:
        """The attachments of the questions on the turn's path, ready to send, built on a
        worker thread (documents' text read, images sized for the agent's provider). Images
        for an agent that cannot see end the turn first: an ``AttachError`` in words, before
        any file is read or any model is loaded."""
        store = self.attachments
        if store is None:
            return {}
        found = self.attachments_on_path(turn)
        if not found:
            return {}
        problem = vision_problem(turn.agent, [a for items in found.values() for a in items])
        if problem:
            from desktop.attach.errors import AttachError

            raise AttachError(problem)
        return await asyncio.to_thread(parts_of, store, found, turn.agent.kind)

    async def ask_once(
        self,
        agent: Agent,
        prompt: str,
        *,
        prompt_run_id: int | None = None,
        on_event: Callable[[StreamEvent], None] | None = None,
        attachments: Sequence[Attachment] = (),
    ) -> OneShot:
        """One prompt (after the agent's system prompt, no history), no conversation stored:
        its stats row carries ``prompt_run_id``. Errors and Stop come back on the result
        (``chat/one_shot.py``). ``attachments`` (stored already) go with the prompt."""
        return await one_shot.ask_once(
            self.call_deps,
            agent,
            prompt,
            prompt_run_id=prompt_run_id,
            on_event=on_event,
            attachments=attachments,
        )

    async def _finish(
        self,
        turn: Turn,
        call: ModelCall,
        status: str,
        finish_reason: str,
        error: UserError | None = None,
        *,
        record: bool = True,
        priced: bool = False,
    ) -> None:
        """The reply's final text and status, and (``record``) the last call's stats row.
        ``priced``: once the price book is warm (or failed to be); stopped while waiting for
        it, finished at once, its cost unknown unless the provider reported one."""
        try:
            if priced:
                await call.prices_ready()
        finally:
            turn.status = status
            self.conversations.finish_message(
                turn.assistant_message_id,
                content=turn.text,
                status=status,
                error_text=error.user_message if error else None,
                error_kind=error.kind if error else None,
                reasoning=turn.reasoning,
            )
            if record:
                self._record_call(turn, call, finish_reason, (), error)
            self.conversations.touch(turn.conversation_id)

    def _steps_of_call(self, turn: Turn, call_index: int) -> list[ToolStep]:
        """The tool steps stored for one model call of the turn (Stop cut its calls short)."""
        if self.tools is None:
            return []
        try:
            stored = self.tools.steps.for_message(turn.assistant_message_id)
        except Exception:
            log.exception("could not read the turn's tool steps")
            return []
        return [s for s in stored if s.call_index == call_index]

    def _record_call(
        self,
        turn: Turn,
        call: ModelCall,
        finish_reason: str,
        steps: Sequence[ToolStep],
        error: UserError | None = None,
    ) -> None:
        """One model call's record (its index in the turn, the tools it asked for), stored."""
        stats = call_stats(
            call,
            finish_reason,
            error,
            message_id=turn.assistant_message_id,
            conversation_id=turn.conversation_id,
            call_index=len(turn.calls) + 1,
            steps=steps,
            source=turn.source,
            api_client=turn.api_client,
        )
        if turn.retrieval is not None and not turn.calls:  # the turn's first call searched
            stats = replace(stats, **turn.retrieval.stats_fields())
        call.record(stats)
        turn.calls.append(stats)
        turn.stats = stats
