"""API calls kept as conversations (the ``serve.keep_conversations`` setting, off by default):
each finished call becomes a conversation titled by its client, with the client's messages,
the agent's reply, and the reply's stats row attached to it, so it reads, branches, exports
and shows its timeline like a chat."""

from __future__ import annotations

from collections.abc import Sequence

from desktop.chat.one_shot import OneShot
from desktop.chat.turn_calls import title_from
from desktop.llm.provider import ChatMessage, ChatRequest
from desktop.store.agents import Agent
from desktop.store.conversations import ConversationStore
from desktop.store.stats import StatsStore


def client_conversation(
    conversations: ConversationStore,
    agent: Agent,
    history: Sequence[ChatMessage],
    question: str,
    client: str | None,
) -> int:
    """A new conversation for an API client's call, titled by the client and its question,
    holding ``history`` (its user and assistant messages with text); its id."""
    title = f"API · {client or 'no key'} · {title_from(question) or agent.name}"
    conv = conversations.create(agent.id, title)
    for message in history:
        if message.role in ("user", "assistant") and message.content.strip():
            mine = message.role == "assistant"
            conversations.add_message(
                conv.id,
                message.role,
                message.content,
                agent_id=agent.id if mine else None,
                agent_name=agent.name if mine else None,
            )
    return conv.id


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
    conv_id = client_conversation(conversations, agent, request.messages, asked, client)
    reply = conversations.add_message(
        conv_id,
        "assistant",
        result.text,
        status="cancelled" if result.status == "cancelled" else "complete",
        agent_id=agent.id,
        agent_name=agent.name,
        model=agent.model,
        reasoning=result.reasoning,
    )
    if result.stats_id is not None:
        stats.attach(result.stats_id, reply.id, conv_id)
    return conv_id
