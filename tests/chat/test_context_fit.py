"""A local conversation that outgrew its context: both ways out work on the real model."""

from __future__ import annotations

import asyncio

import pytest

from desktop.local.starter import STARTER_AGENT_NAME

pytestmark = pytest.mark.slow

LONG = " ".join(f"fact{i}" for i in range(120))  # ~300+ tokens each


def _overflowing(services):
    agent = services.agents.update(
        services.agents.by_name(STARTER_AGENT_NAME).with_changes(n_ctx=512, max_tokens=16, seed=1)
    )
    conv = services.conversations.create(agent.id)
    for i in range(3):
        services.conversations.add_message(conv.id, "user", f"Remember {i}: {LONG}")
        services.conversations.add_message(conv.id, "assistant", f"Noted {i}.")
    failed = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "Sum up?")))
    assert failed.status == "error" and failed.error.kind == "context_too_long"
    return agent, conv, failed


def test_dropping_the_oldest_turns_makes_the_reply_fit(services) -> None:
    agent, conv, failed = _overflowing(services)
    fit = services.chat.plan_context_fit(conv.id, agent, failed.assistant_message_id)
    assert fit.plan.fits and 1 <= fit.plan.drop_turns <= 3
    retry = services.chat.begin_retry(
        conv.id, agent, failed.assistant_message_id, drop_oldest_turns=fit.plan.drop_turns
    )
    sent = services.chat.request_for(retry).messages
    assert not any("Remember 0" in m.content for m in sent)  # the oldest turn is left out
    assert sent[-1].content == "Sum up?"
    done = asyncio.run(services.chat.run(retry))
    assert done.status == "complete"
    # Nothing was deleted from the conversation itself.
    contents = [m.content for m in services.conversations.messages(conv.id)]
    assert any(c.startswith("Remember 0") for c in contents)


def test_raising_the_context_size_makes_the_reply_fit(services) -> None:
    agent, conv, failed = _overflowing(services)
    fit = services.chat.plan_context_fit(conv.id, agent, failed.assistant_message_id)
    assert fit.raise_n_ctx_to > 512 and fit.raise_n_ctx_to % 1024 == 0
    bigger = services.agents.update(agent.with_changes(n_ctx=fit.raise_n_ctx_to))
    retry = services.chat.begin_retry(conv.id, bigger, failed.assistant_message_id)
    done = asyncio.run(services.chat.run(retry))
    assert done.status == "complete" and done.stats.n_ctx == fit.raise_n_ctx_to
