"""API calls kept as conversations (the ``serve.keep_conversations`` setting, off by default):
each finished call becomes a conversation titled by its client, with the client's messages,
the agent's reply, and the reply's stats row attached to it, so it reads, branches, exports
and shows its timeline like a chat."""

from __future__ import annotations

from desktop.chat.one_shot import OneShot
from desktop.chat.turn_calls import title_from
from desktop.llm.provider import ChatRequest
from desktop.store.agents import Agent
from desktop.store.conversations import ConversationStore
from desktop.store.stats import StatsStore


def keep_as_conversation(
    conversations: ConversationStore,
    stats: StatsStore,
    agent: Agent,
    request: ChatRequest,
    result: OneShot,
    client: str | None,
) -> int:
    """Store the call as a new conversation; its id."""
    asked = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
    title = f"API · {client or 'no key'} · {title_from(asked) or agent.name}"
    conv = conversations.create(agent.id, title)
    for message in request.messages:
        if message.role in ("user", "assistant") and message.content.strip():
            conversations.add_message(
                conv.id,
                message.role,
                message.content,
                agent_id=agent.id if message.role == "assistant" else None,
                agent_name=agent.name if message.role == "assistant" else None,
            )
    reply = conversations.add_message(
        conv.id,
        "assistant",
        result.text,
        status="cancelled" if result.status == "cancelled" else "complete",
        agent_id=agent.id,
        agent_name=agent.name,
        model=agent.model,
        reasoning=result.reasoning,
    )
    if result.stats_id is not None:
        stats.attach(result.stats_id, reply.id, conv.id)
    return conv.id
