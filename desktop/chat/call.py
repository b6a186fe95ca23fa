"""One model call, the one way every caller makes it: a conversation's turn
(``ChatService.run``, a call per round of tool calls) and a call outside any conversation
(``chat/one_shot.py``: prompt-set runs, ``simi bench``).

``ChatService`` builds a ``CallDeps`` once (its clock, key fetcher, provider factory, price
book and stats store) and hands it down, so nothing here takes ``ChatService`` back. A
``ModelCall`` then does, for one agent:

- the price book starts warming on a worker thread (a hosted API's calls are priced from it
  when they end; genai-prices takes a few hundred ms to import);
- ``open``: the key is read off the event loop (remote kinds: the keyring may answer slowly or
  sit behind an unlock prompt), then the provider is built (``ProviderFactory.for_agent``);
  ``aclose`` always closes it;
- ``stream``: one call's events into its ``StatsClock`` and the caller's ``CallSink``;
- ``stats`` / ``record``: the call's ``CallStats`` (``chat/call_stats.py``: the clock's
  figures and whose call it was, then priced), stored as its row, once ``prices_ready`` (one
  wait, whichever caller).

What a caller does on Stop or an error stays its own (``ChatService.run`` raises the
cancellation on; ``ask_once`` returns it): these are the parts both share.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Unpack
from urllib.parse import urlsplit

from desktop.chat.call_stats import CallPlace, CallStats
from desktop.chat.kinds import find_kind
from desktop.chat.pricing import price_call, provider_ref
from desktop.chat.stats_clock import StatsClock
from desktop.errors import UserError
from desktop.llm.events import Finished, ReasoningDelta, RunInfo, TextDelta, ToolCall
from desktop.store.agents import Agent

if TYPE_CHECKING:
    from desktop.chat.knowledge import KnowledgeService
    from desktop.chat.price_book import PriceBook
    from desktop.chat.providers import ProviderFactory
    from desktop.llm.provider import ChatRequest, Provider
    from desktop.store.attachments import AttachmentStore
    from desktop.store.stats import StatsStore

log = logging.getLogger("simi.chat")

# A call with a checkpoint hook (a turn's reply) has its text so far stored this often.
CHECKPOINT_INTERVAL_S = 1.0


@dataclass(frozen=True, slots=True)
class CallDeps:
    """What a model call needs from the app, built once by ``ChatService``.

    ``fetch_key``: reads a remote agent's key from the keyring (blocking: run off the loop),
    so that the factory then finds it without asking again (``AgentService.fetch_key``);
    None: the factory reads it where it runs. ``attachments``: where the files attached to a
    prompt are (None: a caller without any)."""

    clock: Callable[[], float]
    providers: ProviderFactory
    prices: PriceBook
    stats: StatsStore
    fetch_key: Callable[[Agent], object] | None = None
    attachments: AttachmentStore | None = None
    # the agents' knowledge collections: a call outside a conversation searches them too
    knowledge: KnowledgeService | None = None

    def warm_prices(self, agent: Agent) -> asyncio.Future[None] | None:
        """Start warming the price book on a worker thread (None: nothing to warm)."""
        if agent.is_local or self.prices.ready or not dataset_prices(agent):
            return None
        warming = asyncio.ensure_future(asyncio.to_thread(self.prices.warm))
        warming.add_done_callback(_log_warm_failure)
        return warming

    def priced(self, stats: CallStats, agent: Agent) -> CallStats:
        """A finished call's record with its price, at the prices in force: a later price
        change leaves history alone. Not warm yet (a call stopped early): only a reported
        cost, an override or local is known."""
        row = stats.as_row()  # chat/pricing.py prices any mapping of the columns
        priced = self.prices.price_if_ready(row, agent)
        overridden = (agent.price_input_per_m, agent.price_output_per_m) != (None, None)
        if priced is None and (overridden or not dataset_prices(agent)):
            priced = price_call(row, agent)  # no dataset needed (nor imported)
        if priced is None:
            return stats
        return replace(
            stats,
            cost_usd=priced.cost_usd,
            cost_input_usd=priced.cost_input_usd,
            cost_cached_usd=priced.cost_cached_usd,
            cost_output_usd=priced.cost_output_usd,
            price_source=priced.price_source,
        )


@dataclass(slots=True)
class CallSink:
    """Where a call's events go besides its clock. The lists are the caller's to keep: a turn
    keeps one reply across its calls (the next call's text goes on after the last).

    ``emit`` hears every event, after it is taken in; ``on_notice`` what the backend did on
    its own (``RunInfo.notice``); ``checkpoint`` stores the text so far, at most once every
    ``CHECKPOINT_INTERVAL_S`` while text arrives (it joins the parts: once a second, not per
    token, so the cost stays linear)."""

    parts: list[str] = field(default_factory=list)
    thoughts: list[str] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    emit: Callable[[Any], None] | None = None
    on_notice: Callable[[str], None] | None = None
    checkpoint: Callable[[], None] | None = None


class ModelCall:
    """One agent's model call on its provider: ``ask_once``'s one, or a turn's, which makes a
    call per round of tool calls on the same provider (``restart_clock`` between them: each
    call has its own clock and stats row).

    Made when the (first) call starts: its clock starts then, and the price book starts
    warming (for an agent whose calls it prices)."""

    def __init__(self, deps: CallDeps, agent: Agent) -> None:
        self.deps = deps
        self.agent = agent
        # the current call's clock (live TTFT and rate; its stats row)
        self.clock = StatsClock(deps.clock)
        self.warming = deps.warm_prices(agent)
        self.provider: Provider | None = None

    def restart_clock(self) -> StatsClock:
        """A new clock for the next call (or after work that is not the model's time, such
        as starting tool servers)."""
        self.clock = StatsClock(self.deps.clock)
        return self.clock

    async def open(self) -> Provider:
        """Build the agent's provider, its key read off the loop first (remote kinds)."""
        agent = self.agent
        if self.deps.fetch_key is not None and agent.key_ref is not None and _is_remote(agent):
            # a server of one's own without a key has nothing to read: no thread hop (~0.1 ms)
            await asyncio.to_thread(self.deps.fetch_key, agent)
        self.provider = self.deps.providers.for_agent(self.agent)
        return self.provider

    async def aclose(self) -> None:
        """Close the provider, if one was built (failures to close are not the call's)."""
        provider, self.provider = self.provider, None
        if provider is not None:
            with contextlib.suppress(Exception):
                await provider.aclose()

    async def stream(self, request: ChatRequest, sink: CallSink) -> str:
        """One call: its events into the clock and ``sink``; returns its finish reason
        ("error" when the stream ended without saying)."""
        provider = self.provider
        if provider is None:
            raise RuntimeError("stream before open")
        clock = self.clock
        clock.images_sent(image_estimate(request, self.agent.kind))
        parts, thoughts, asked = sink.parts, sink.thoughts, sink.tool_calls
        emit, on_notice, checkpoint = sink.emit, sink.on_notice, sink.checkpoint
        now = self.deps.clock
        interval = CHECKPOINT_INTERVAL_S
        last_checkpoint = now() if checkpoint is not None else 0.0
        finish = "error"
        async with contextlib.aclosing(provider.stream(request)) as events:  # type: ignore[type-var,unused-ignore]
            async for event in events:
                clock.on_event(event)
                # text first: nearly every event is, so it takes the fewest tests
                if isinstance(event, TextDelta):
                    parts.append(event.text)
                elif isinstance(event, ReasoningDelta):
                    thoughts.append(event.text)
                else:
                    if isinstance(event, ToolCall):
                        asked.append(event)
                    elif isinstance(event, RunInfo):
                        if event.notice and on_notice is not None:
                            on_notice(event.notice)
                    elif isinstance(event, Finished):
                        finish = event.reason
                    if emit is not None:
                        emit(event)
                    continue
                if checkpoint is not None:
                    t = now()
                    if t - last_checkpoint >= interval:
                        checkpoint()
                        last_checkpoint = t
                if emit is not None:
                    emit(event)
        return finish

    async def prices_ready(self) -> None:
        """Wait until the price book is warm (or failed to be): a hosted API's row is priced
        from it. Cancelled meanwhile: the caller records the row at once, priced with what is
        known without it."""
        if self.warming is not None:
            await asyncio.wait([self.warming])

    def stats(
        self,
        finish_reason: str,
        error: UserError | None = None,
        **place: Unpack[CallPlace],
    ) -> CallStats:
        """The current call's record: the clock's figures and whose call it was (the agent; a
        turn's message, conversation and call index, the tools it asked for; a prompt-set
        run's id), priced."""
        agent = self.agent
        stats = self.clock.stats(
            finish_reason,
            error.kind if error else None,
            agent_id=agent.id,
            agent_name=agent.name,
            provider_kind=agent.kind,
            endpoint_host=urlsplit(agent.base_url).hostname if agent.base_url else None,
            model_requested=agent.model,
            **place,
        )
        return self.deps.priced(stats, agent)

    def record(self, stats: CallStats) -> int | None:
        """Store the record as its row; its id (None: storing failed, logged)."""
        try:
            return self.deps.stats.record(stats.as_row())
        except Exception:
            log.exception("could not record inference stats")
            return None


def image_estimate(request: ChatRequest, agent_kind: str) -> int | None:
    """About how many prompt tokens the request's images take (``estimate_image_tokens`` for
    the agent's provider); None: it sends none."""
    images = [image for m in request.messages for image in m.images]
    if not images:
        return None
    from desktop.attach.images import estimate_image_tokens, profile_for  # Pillow: only now

    profile = profile_for(agent_kind)
    return sum(int(estimate_image_tokens(i.width, i.height, profile)) for i in images)


def dataset_prices(agent: Agent) -> bool:
    """Whether the price list can price this agent's calls: a hosted API it knows how to
    name. A server of one's own (llama.cpp, vLLM, Ollama) never is, so its calls neither wait
    for the list to load nor pay for importing it."""
    return provider_ref(agent.kind, agent.base_url) is not None


def _log_warm_failure(warming: asyncio.Future[None]) -> None:
    if not warming.cancelled() and warming.exception() is not None:
        log.warning("prices unavailable: costs stay unknown", exc_info=warming.exception())


def _is_remote(agent: Agent) -> bool:
    kind = find_kind(agent.kind)
    return kind is not None and kind.remote
