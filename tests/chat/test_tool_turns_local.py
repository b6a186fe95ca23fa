"""An agentic turn on the real starter model (llama.cpp in its worker process): SmolLM2's chat
template has no tool support, so its calls are held to a grammar (and the turn says so); the
call runs on the real MCP test server and its result goes back; past the round limit the
grammar allows an answer only, so the turn always ends with text."""

from __future__ import annotations

import asyncio

import pytest

from desktop.local.starter import STARTER_AGENT_NAME
from tests.helpers.tool_turns import add_mcp_server

pytestmark = pytest.mark.slow


def test_the_starter_calls_a_tool_under_the_grammar_and_answers(services) -> None:
    add_mcp_server(services)
    agent = services.agents.by_name(STARTER_AGENT_NAME)
    agent = services.agents.update(
        agent.with_changes(
            system_prompt="You are a helpful assistant.", temperature=0.0, seed=1, max_tokens=48
        )
    )
    services.tools.tools.set_agent_tools(agent.id, [("tools", "add")])
    services.tools.tools.add_grant(agent.id, "tools", "add")
    conv = services.conversations.create(agent.id)
    turn = services.chat.begin(conv.id, agent, "Use the add tool to add 2 and 3.")

    async def main():
        try:
            return await services.chat.run(turn)
        finally:
            await services.aclose()

    turn = asyncio.run(main())
    assert turn.status == "complete", turn.error
    assert "grammar" in (turn.notice or "")
    steps = services.tools.steps.for_message(turn.assistant_message_id)
    assert steps and steps[0].tool == "add" and steps[0].server == "tools"
    assert steps[0].status == "done" and steps[0].approval == "granted"
    # every model call a stats row, the calls that asked for tools say so
    rows = services.stats.calls_for_messages([turn.assistant_message_id])[turn.assistant_message_id]
    assert [r["call_index"] for r in rows] == list(range(1, len(rows) + 1))
    assert len(rows) == len({s.call_index for s in steps}) + (steps[-1].status != "refused")
    assert all(r["finish_reason"] == "tool_calls" for r in rows[:-1])
    assert rows[-1]["finish_reason"] in ("stop", "length", "tool_calls")
    assert all(r["prompt_tokens"] for r in rows)
