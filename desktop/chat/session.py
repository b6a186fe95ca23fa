"""Run one turn: store the messages, stream from the agent's provider, record statistics.

The same service drives the window and the CLI, so a conversation in one looks the same in
the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from desktop.chat import one_shot
from desktop.chat.agents import AgentService
from desktop.chat.kinds import find_kind, load_params_for
from desktop.chat.one_shot import OneShot
from desktop.chat.price_book import PriceBook
from desktop.chat.pricing import price_call, provider_ref
from desktop.chat.providers import ProviderFactory
from desktop.chat.stats_clock import StatsClock
from desktop.errors import UserError
from desktop.llm.events import Finished, ReasoningDelta, RunInfo, StreamEvent, TextDelta
from desktop.llm.provider import ChatMessage, ChatRequest
from desktop.local.context import (
    DEFAULT_REPLY_RESERVE,
    FitPlan,
    PromptCounter,
    plan_fit,
    without_oldest_turns,
)
from desktop.store.agents import Agent
from desktop.store.conversations import ConversationStore, Message
from desktop.store.stats import StatsStore

log = logging.getLogger("simi.chat")

CHECKPOINT_INTERVAL_S = 1.0
TITLE_LENGTH = 60
# Sent (not stored) after a cut-off reply to have the model carry on from where it stopped.
CONTINUE_PROMPT = "Continue exactly where your last reply stopped. Do not repeat anything."


@dataclass(frozen=True, slots=True)
class ContextFit:
    """``plan``: turns to drop to fit the current n_ctx; ``raise_n_ctx_to``: a context size
    that holds the whole conversation plus room for the reply."""

    plan: FitPlan
    raise_n_ctx_to: int


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
    stats: dict[str, Any] | None = None
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
    ) -> None:
        self.conversations = conversations
        self.stats = stats
        self.providers = providers
        self._clock = clock
        # Where a remote agent's key is fetched off the loop before its provider is built
        # (None: the provider factory reads it where it runs).
        self._agents = agents
        # What a call cost (desktop.chat.pricing), priced when it ends; warmed off the loop.
        if prices is None:
            from desktop.settings.paths import AppPaths

            prices = PriceBook.in_folder(AppPaths.from_env().data_dir)
        self.prices = prices

    # building turns --------------------------------------------------------------------------
    def begin(self, conversation_id: int, agent: Agent, text: str) -> Turn:
        """Store the user message and an empty streaming reply; return the turn to run."""
        conv = self.conversations.get(conversation_id)
        if conv is not None and not conv.title:
            self.conversations.rename(conversation_id, _title_from(text))
        user = self.conversations.add_message(
            conversation_id, "user", text, agent_id=agent.id, agent_name=agent.name
        )
        reply = self._new_reply(conversation_id, agent, user.id)
        return Turn(conversation_id, agent, user.id, reply.id, user_message=user, reply=reply)

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
        _refuse_on_loop("plan_context_fit")
        failed = self._message_in(conversation_id, failed_message_id, "assistant")
        probe = Turn(conversation_id, agent, failed.parent_id or 0, failed_message_id)
        messages = self.request_for(probe).messages
        n_ctx = agent.n_ctx or 2048
        reserve = min(agent.max_tokens or DEFAULT_REPLY_RESERVE, 1024)
        counter = count_tokens or PromptCounter(load_params_for(agent).model_path)
        try:
            plan = plan_fit(messages, n_ctx, counter, reply_reserve=reserve)
        finally:
            close = getattr(counter, "close", None)
            if callable(close):
                close()
        needed = plan.tokens_before + reserve
        raise_to = -(-needed // 1024) * 1024  # whole KiB-tokens, like the usual presets
        return ContextFit(plan=plan, raise_n_ctx_to=raise_to)

    def begin_regenerate(self, conversation_id: int, agent: Agent, reply_id: int) -> Turn:
        """A new version of a reply; the earlier ones stay (switch with ‹ 1/2 ›)."""
        old = self._message_in(conversation_id, reply_id, "assistant")
        if old.parent_id is None:
            raise ValueError("no user message to answer again")
        reply = self._new_reply(conversation_id, agent, old.parent_id)
        return Turn(conversation_id, agent, old.parent_id, reply.id, kind="regenerate", reply=reply)

    def begin_edit(self, conversation_id: int, agent: Agent, user_id: int, text: str) -> Turn:
        """An edited question becomes a new branch beside the old one, answered afresh."""
        old = self._message_in(conversation_id, user_id, "user")
        user = self.conversations.add_message(
            conversation_id,
            "user",
            text,
            agent_id=agent.id,
            agent_name=agent.name,
            parent_id=old.parent_id,
        )
        reply = self._new_reply(conversation_id, agent, user.id)
        return Turn(
            conversation_id, agent, user.id, reply.id, kind="edit", user_message=user, reply=reply
        )

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

    def request_for(self, turn: Turn) -> ChatRequest:
        agent = turn.agent
        history: list[ChatMessage] = []
        if agent.system_prompt.strip():
            history.append(ChatMessage("system", agent.system_prompt))
        for m in self.conversations.ancestors(turn.assistant_message_id):
            if m.role not in ("user", "assistant"):
                continue
            if m.role == "assistant" and (m.status == "error" or not m.content):
                continue
            history.append(ChatMessage(m.role, m.content))  # type: ignore[arg-type]
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
    async def run(self, turn: Turn, on_event: Callable[[StreamEvent], None] | None = None) -> Turn:
        """Stream the reply. Cancelling the task keeps the partial text as ``cancelled``.

        A ``UserError`` is stored on the message (with the text so far) and returned on the
        turn, not raised: the caller shows it with a Retry button.
        """
        agent = turn.agent
        clock = turn.clock = StatsClock(self._clock)
        parts: list[str] = [turn.prefix] if turn.prefix else []
        thoughts: list[str] = [turn.reasoning] if turn.reasoning else []
        last_checkpoint = self._clock()
        finish = "error"
        provider = None
        # genai-prices takes a few hundred ms to import: on a worker thread, while the call
        # runs (the row is priced when it ends).
        warming = self._warm_prices(agent)

        def collect() -> None:
            turn.text = "".join(parts)
            turn.reasoning = "".join(thoughts)

        try:
            if self._agents is not None and _is_remote(agent):
                # The keyring may answer slowly or sit behind an unlock prompt: never on the
                # loop. The factory then finds the key just read (AgentService.fetch_key).
                await asyncio.to_thread(self._agents.fetch_key, agent)
            provider = self.providers.for_agent(agent)
            request = self.request_for(turn)
            async with contextlib.aclosing(provider.stream(request)) as events:  # type: ignore[type-var,unused-ignore]
                async for event in events:
                    clock.on_event(event)
                    if isinstance(event, RunInfo) and event.notice:
                        turn.notice = event.notice
                    if isinstance(event, TextDelta | ReasoningDelta):
                        (parts if isinstance(event, TextDelta) else thoughts).append(event.text)
                        now = self._clock()
                        if now - last_checkpoint >= CHECKPOINT_INTERVAL_S:
                            # joined once a second, not per token: cost stays linear
                            self.conversations.checkpoint(
                                turn.assistant_message_id, "".join(parts), "".join(thoughts)
                            )
                            last_checkpoint = now
                    elif isinstance(event, Finished):
                        finish = event.reason
                    if on_event is not None:
                        on_event(event)
        except asyncio.CancelledError:
            collect()
            self._finish(turn, clock, "cancelled", "cancelled")
            raise
        except UserError as exc:
            collect()
            turn.error = exc
            log.info("turn failed (%s): %s", exc.kind, exc.user_message)
            await self._finish_priced(turn, clock, "error", "error", warming, exc)
            return turn
        except Exception as exc:  # a bug: keep the text, say so, and let it surface
            collect()
            turn.error = UserError(f"Something went wrong inside SIMI Multi: {type(exc).__name__}")
            self._finish(turn, clock, "error", "error", turn.error)
            raise
        finally:
            if provider is not None:
                with contextlib.suppress(Exception):
                    await provider.aclose()
        collect()
        status = "cancelled" if finish == "cancelled" else "complete"
        await self._finish_priced(turn, clock, status, finish, warming)
        return turn

    async def ask_once(
        self,
        agent: Agent,
        prompt: str,
        *,
        prompt_run_id: int | None = None,
        on_event: Callable[[StreamEvent], None] | None = None,
    ) -> OneShot:
        """One prompt (after the agent's system prompt, no history), no conversation stored:
        its stats row carries ``prompt_run_id``. Errors and Stop come back on the result
        (``chat/one_shot.py``)."""
        return await one_shot.ask_once(
            self, agent, prompt, prompt_run_id=prompt_run_id, on_event=on_event
        )

    def _warm_prices(self, agent: Agent) -> asyncio.Future[None] | None:
        """Start warming the price book on a worker thread (None: nothing to warm)."""
        if agent.is_local or self.prices.ready or not _dataset_prices(agent):
            return None
        warming = asyncio.ensure_future(asyncio.to_thread(self.prices.warm))
        warming.add_done_callback(_log_warm_failure)
        return warming

    async def _finish_priced(
        self,
        turn: Turn,
        clock: StatsClock,
        status: str,
        finish_reason: str,
        warming: asyncio.Future[None] | None,
        error: UserError | None = None,
    ) -> None:
        """``_finish`` once the price book is warm (or failed to be). Stopped while waiting
        for it: finished at once, its cost unknown unless the provider reported one."""
        try:
            if warming is not None:
                await asyncio.wait([warming])
        except asyncio.CancelledError:
            self._finish(turn, clock, status, finish_reason, error)
            raise
        self._finish(turn, clock, status, finish_reason, error)

    def price_row(self, row: dict[str, Any], agent: Agent) -> None:
        """Price a finished call's stats row in place, at the prices in force: a later price
        change leaves history alone. Not warm yet (a call stopped early): only a reported
        cost, an override or local is known."""
        priced = self.prices.price_if_ready(row, agent)
        overridden = (agent.price_input_per_m, agent.price_output_per_m) != (None, None)
        if priced is None and (overridden or not _dataset_prices(agent)):
            priced = price_call(row, agent)  # no dataset needed (nor imported)
        if priced is not None:
            row.update(priced.fields())

    def _finish(
        self,
        turn: Turn,
        clock: StatsClock,
        status: str,
        finish_reason: str,
        error: UserError | None = None,
    ) -> None:
        turn.status = status
        agent = turn.agent
        self.conversations.finish_message(
            turn.assistant_message_id,
            content=turn.text,
            status=status,
            error_text=error.user_message if error else None,
            error_kind=error.kind if error else None,
            reasoning=turn.reasoning,
        )
        row = clock.row(finish_reason, error.kind if error else None)
        row.update(
            message_id=turn.assistant_message_id,
            conversation_id=turn.conversation_id,
            agent_id=agent.id,
            agent_name=agent.name,
            provider_kind=agent.kind,
            endpoint_host=urlsplit(agent.base_url).hostname if agent.base_url else None,
            model_requested=agent.model,
        )
        self.price_row(row, agent)
        try:
            self.stats.record(row)
        except Exception:
            log.exception("could not record inference stats")
        turn.stats = row
        self.conversations.touch(turn.conversation_id)


def _dataset_prices(agent: Agent) -> bool:
    """Whether the price list can price this agent's calls: a hosted API it knows how to
    name. A server of one's own (llama.cpp, vLLM, Ollama) never is, so its turns neither wait
    for the list to load nor pay for importing it."""
    return provider_ref(agent.kind, agent.base_url) is not None


def _log_warm_failure(warming: asyncio.Future[None]) -> None:
    if not warming.cancelled() and warming.exception() is not None:
        log.warning("prices unavailable: costs stay unknown", exc_info=warming.exception())


def _is_remote(agent: Agent) -> bool:
    kind = find_kind(agent.kind)
    return kind is not None and kind.remote


def _refuse_on_loop(what: str) -> None:
    """A blocking call made on a thread that runs an event loop is a bug: it would freeze the
    window (or every stream of the CLI) for as long as it takes."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # a worker thread, or no loop at all
    raise RuntimeError(f"{what} blocks: call it off the event loop (asyncio.to_thread)")


def _title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"
