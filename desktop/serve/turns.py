"""An agent that runs its own MCP tools for API clients (the Server page's "Runs its own tools",
off by default): the client's request becomes a conversation turn, so the agentic loop of
``ChatService.run`` runs as it does in the window, every model call a stats row tagged with
the client, every tool call a stored step.

Nobody is there to approve a tool call, so only the tools the person allowed "always" for
this agent run; any other call is refused and the model is told so (``ToolRunner``: nobody
could be asked). The conversation is kept (titled by the client): the tool steps and the
reply's timeline need it. The client gets the turn's text, never the agent's tool calls, and
one finish at the end with the usage of all its model calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from desktop.chat.one_shot import OneShot
from desktop.chat.stats_clock import StatsClock
from desktop.llm.events import Finished, Queued, ReasoningDelta, StreamEvent, TextDelta
from desktop.llm.provider import ChatRequest
from desktop.serve.calls import Runner
from desktop.serve.keeping import client_conversation
from desktop.serve.wire import ApiError, usage_body
from desktop.store.agents import Agent

if TYPE_CHECKING:
    from desktop.chat.services import Services

PASSED_ON = (TextDelta, ReasoningDelta, Queued)


def turn_runner(
    services: Services, agent: Agent, request: ChatRequest, client: str | None
) -> Runner | None:
    """The runner of a turn for ``agent`` (None: it has no tools to run; a plain call)."""
    tools = services.tools
    if not tools.agent_uses_tools(agent):
        return None
    asked = [m for m in request.messages if m.role in ("user", "assistant")]
    if not asked or asked[-1].role != "user":
        raise ApiError(
            400,
            "An agent that runs its own tools answers a conversation that ends with a user "
            "message.",
            param="messages",
        )

    async def run(
        on_event: Callable[[StreamEvent], None],
        on_clock: Callable[[StatsClock], None],
        set_usage: Callable[[dict[str, Any]], None],
    ) -> OneShot:
        chat, conversations = services.chat, services.conversations
        question = asked[-1].content
        conv_id = client_conversation(conversations, agent, asked[:-1], question, client)
        turn = chat.begin(conv_id, agent, question)
        turn.source, turn.api_client = "api", client
        told: list[StatsClock | None] = [None]  # the clock the call was last given

        def heard(event: object) -> None:
            clock = turn.clock  # a new one for each model call of the turn
            if clock is not None and clock is not told[0]:
                told[0] = clock
                on_clock(clock)
            if isinstance(event, PASSED_ON):
                on_event(event)

        done = await chat.run(turn, heard)
        calls = done.calls
        set_usage(
            usage_body(
                sum(c.prompt_tokens or 0 for c in calls),
                sum(c.cached_tokens or 0 for c in calls),
                sum(c.output_tokens or 0 for c in calls),
            )
        )
        reason = done.stats.finish_reason if done.stats is not None else "error"
        error = done.error
        if error is None:
            on_event(Finished("length" if reason == "length" else "stop"))
        row = services.stats.for_message(done.assistant_message_id)
        return OneShot(
            text=done.text,
            status="error" if error is not None else done.status,
            error_text=error.user_message if error else None,
            stats_id=int(row["id"]) if row else None,
            stats=done.stats,
            error_kind=error.kind if error else None,
            reasoning=done.reasoning,
            notice=done.notice,
        )

    return run
