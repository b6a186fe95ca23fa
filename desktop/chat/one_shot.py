"""One request to one agent, outside any conversation: a prompt-set run's call
(``ask_once``: the agent's system prompt and one prompt) and an API client's call
(``call_once`` with the request the server built, ``desktop/serve``).

``call_once`` makes the call the way a conversation's turn does (``chat/call.py``: the key read
off the loop, ``ProviderFactory.for_agent`` with its retry, ``StatsClock``, pricing when the
call ends) and records one ``inference_stats`` row with its place (a prompt-set run's id; an
API call's source and key) and no message or conversation. Nothing else is stored: the caller
(``chat/prompt_runs.py``, the server) keeps the reply.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Unpack

from desktop.chat.attachments import images_problem, message_parts, with_parts
from desktop.chat.call import CallDeps, CallSink, ModelCall
from desktop.chat.call_stats import CallPlace, CallStats
from desktop.chat.knowledge import Retrieval, retrieve
from desktop.chat.stats_clock import StatsClock
from desktop.errors import UserError
from desktop.llm.events import StreamEvent
from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
from desktop.store.agents import Agent
from desktop.store.attachments import Attachment
from desktop.store.knowledge import Source

log = logging.getLogger("simi.chat")


@dataclass(frozen=True, slots=True)
class OneShot:
    """What one call gave: ``status`` complete / cancelled / error; ``text`` what arrived
    (partial when cancelled or failed); ``error_text`` the error's finished message;
    ``stats`` its record (``chat/call_stats.py``), ``stats_id`` its stored row's id (None only
    if recording failed)."""

    text: str
    status: str
    error_text: str | None
    stats_id: int | None
    stats: CallStats | None
    error_kind: str | None = None  # the UserError's kind ("rate_limited", "auth", …)
    reasoning: str = ""
    notice: str | None = None  # what the backend did on its own (RunInfo.notice)
    retry_after: float | None = None  # a rate limit's own wait (RateLimited.retry_after)
    # the passages the agent's knowledge collections gave the last question, numbered
    sources: tuple[Source, ...] = ()

    @property
    def finish_reason(self) -> str | None:
        return self.stats.finish_reason if self.stats else None


def sampling_of(agent: Agent) -> Sampling:
    """The agent's sampling parameters, as every request from it carries them."""
    return Sampling(
        temperature=agent.temperature,
        top_p=agent.top_p,
        max_tokens=agent.max_tokens,
        seed=agent.seed,
        stop=agent.stop,
    )


def request_once(agent: Agent, prompt: str, prompt_run_id: int | None = None) -> ChatRequest:
    messages: list[ChatMessage] = []
    if agent.system_prompt.strip():
        messages.append(ChatMessage("system", agent.system_prompt))
    messages.append(ChatMessage("user", prompt))
    return ChatRequest(
        model=agent.model,
        messages=tuple(messages),
        sampling=sampling_of(agent),
        session_key=f"prompt-run:{prompt_run_id}" if prompt_run_id is not None else None,
        cache_owner=str(agent.id) if agent.id is not None else None,
    )


async def ask_once(
    deps: CallDeps,
    agent: Agent,
    prompt: str,
    *,
    prompt_run_id: int | None = None,
    on_event: Callable[[StreamEvent], None] | None = None,
    on_clock: Callable[[StatsClock], None] | None = None,
    attachments: Sequence[Attachment] = (),
) -> OneShot:
    """Stream one reply to ``prompt`` (``call_once`` with the agent's system prompt), with
    its ``attachments``."""
    return await call_once(
        deps,
        agent,
        request_once(agent, prompt, prompt_run_id),
        on_event=on_event,
        on_clock=on_clock,
        attachments=attachments,
        prompt_run_id=prompt_run_id,
    )


async def call_once(
    deps: CallDeps,
    agent: Agent,
    request: ChatRequest,
    *,
    on_event: Callable[[StreamEvent], None] | None = None,
    on_clock: Callable[[StatsClock], None] | None = None,
    attachments: Sequence[Attachment] = (),
    **place: Unpack[CallPlace],
) -> OneShot:
    """Stream one reply. Never raises a ``UserError`` (it becomes status "error"). Cancelling
    the task that awaits it ends the call with status "cancelled" and the text so far, and
    *returns* that (the cancellation is consumed: a caller that must stop too checks its own
    flag). ``on_clock`` gets the call's stats clock before it starts (live TTFT, tok/s);
    ``place`` goes into its stats row.

    ``attachments`` (stored in ``deps.attachments``) go with the request's last user message,
    made ready on a worker thread. Images (attached, or in the request already, as an API
    client sends them) for an agent that cannot see end the call before anything is sent:
    status "error", kind "attachment", the reason in words."""
    call = ModelCall(deps, agent)  # its clock starts; the price book starts warming
    if on_clock is not None:
        on_clock(call.clock)
    notices: list[str] = []
    sink = CallSink(emit=on_event, on_notice=notices.append)
    finish = "error"
    found: list[Retrieval] = []

    def done(status: str, reason: str, error: UserError | None = None) -> OneShot:
        stats = call.stats(reason, error, **place)
        if found:
            stats = replace(stats, **found[0].stats_fields())
        stats_id = call.record(stats)
        return OneShot(
            text="".join(sink.parts),
            status=status,
            error_text=error.user_message if error else None,
            stats_id=stats_id,
            stats=stats,
            error_kind=error.kind if error else None,
            reasoning="".join(sink.thoughts),
            notice=notices[-1] if notices else None,
            retry_after=getattr(error, "retry_after", None),
            sources=found[0].sources if found else (),
        )

    async def priced() -> None:
        """Wait for the price book; stopped meanwhile: the row is priced with what is known
        without it."""
        try:
            await call.prices_ready()
        except asyncio.CancelledError:
            _consume_cancel()

    try:
        try:
            request = await _with_attachments(deps, agent, request, attachments)
            request = await _with_knowledge(deps, agent, request, found, notices, call.clock)
            await call.open()
            finish = await call.stream(request, sink)
        finally:
            await call.aclose()
    except asyncio.CancelledError:
        _consume_cancel()
        return done("cancelled", "cancelled")
    except UserError as exc:
        log.info("one-shot call failed (%s): %s", exc.kind, exc.user_message)
        await priced()
        return done("error", "error", exc)
    except Exception as exc:  # a bug: recorded as the error it is, then it surfaces
        done(
            "error",
            "error",
            UserError(f"Something went wrong inside SIMI Multi: {type(exc).__name__}"),
        )
        raise
    await priced()
    return done("cancelled" if finish == "cancelled" else "complete", finish)


async def _with_knowledge(
    deps: CallDeps,
    agent: Agent,
    request: ChatRequest,
    found: list[Retrieval],
    notices: list[str],
    clock: StatsClock,
) -> ChatRequest:
    """The request with the passages of the agent's collections before its last question
    (numbered, with the request to cite them); ``found`` gets the search."""
    last = max((n for n, m in enumerate(request.messages) if m.role == "user"), default=None)
    if last is None:
        return request
    question = request.messages[last]
    retrieval, notice = await retrieve(deps.knowledge, agent.id, question.content, clock)
    if notice:
        notices.append(notice)
    if retrieval is None:
        return request
    found.append(retrieval)
    messages = list(request.messages)
    messages[last] = replace(question, content=retrieval.prompt(question.content))
    return replace(request, messages=tuple(messages))


async def _with_attachments(
    deps: CallDeps, agent: Agent, request: ChatRequest, attachments: Sequence[Attachment]
) -> ChatRequest:
    """``request`` with ``attachments`` on its last user message (documents before the text,
    images sized for the agent), after checking the agent can see its images."""
    images = sum(len(m.images) for m in request.messages)
    problem = images_problem(agent, images + sum(1 for a in attachments if a.kind == "image"))
    if problem:
        from desktop.attach.errors import AttachError

        raise AttachError(problem)
    if any(i.width == 0 for m in request.messages for i in m.images):
        # as a client sent them: checked, upright, stripped and sized like attached ones
        request = await asyncio.to_thread(_sized_images, request, agent.kind)
    if not attachments:
        return request
    store = deps.attachments
    if store is None:
        raise ValueError("attachments without an attachment store")
    parts = await asyncio.to_thread(message_parts, store, attachments, agent.kind)
    messages = list(request.messages)
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    if not users:
        messages.append(ChatMessage("user", ""))
        users.append(len(messages) - 1)
    messages[users[-1]] = with_parts(messages[users[-1]], parts)
    return replace(request, messages=tuple(messages))


def _consume_cancel() -> None:
    """This call handled the cancellation (it returns the cancelled result): take the
    request off the task, so an ``asyncio.timeout`` around the caller still works."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


def _sized_images(request: ChatRequest, agent_kind: str) -> ChatRequest:
    """``request`` with every image not prepared yet (an API client's) made ready for the
    agent's provider (``AttachError`` for one that cannot be read). Blocking: Pillow."""
    from desktop.attach.images import prepare_image_bytes, profile_for

    profile = profile_for(agent_kind)
    messages = tuple(
        replace(
            m,
            images=tuple(
                prepare_image_bytes(i.data, profile, name=i.name or f"image {n}")
                if i.width == 0
                else i
                for n, i in enumerate(m.images, 1)
            ),
        )
        if m.images
        else m
        for m in request.messages
    )
    return replace(request, messages=messages)
