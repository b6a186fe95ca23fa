"""The figures of an agentic turn stay true around Stop and tool errors (issue 25, item 8):
Stop while a tool waits for approval or runs still records the model call that asked for it as
a call that finished with its tool calls (it did: the tools are what was stopped), and a tool's
error that quotes a known secret is stored and sent on with the secret blanked out. Driven like
``test_tool_turns.py``: ``ChatService.run`` against a loopback OpenAI-compatible server that
streams scripted tool calls and the real MCP test server (stdio, the SDK)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from desktop.chat.tool_loop import ApprovalRequest, StepChanged
from desktop.store.tools import McpServer
from tests.helpers.fault_server import FaultServer, Reply
from tests.helpers.tool_server import Call, tool_reply
from tests.helpers.tool_turns import ROOT, SERVER_ARGS, add_mcp_server, tool_agent

SECRET = "tok-live-7Qx2mZr9Lw4e"


def calls(*pairs: tuple[str, dict[str, Any]]) -> Reply:
    return tool_reply(
        "openai", [Call(f"c{i}", name, json.dumps(args)) for i, (name, args) in enumerate(pairs)]
    )


def stop_when(services: Any, turn: Any, ready: Any, approve: Any = None) -> None:
    """Run the turn; Stop (cancel its task) once ``ready(event)`` says so."""

    async def main() -> None:
        now = asyncio.Event()

        def on_event(event: Any) -> None:
            if ready(event):
                now.set()

        task = asyncio.ensure_future(services.chat.run(turn, on_event=on_event, approve=approve))
        try:
            await asyncio.wait_for(now.wait(), 30)
            await asyncio.sleep(0.1)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        finally:
            await services.aclose()

    asyncio.run(main())


def rows_of(services: Any, turn: Any) -> list[tuple[Any, ...]]:
    rows = services.stats.calls_for_messages([turn.assistant_message_id])
    return [
        (r["call_index"], r["finish_reason"], r["tool_calls"])
        for r in rows.get(turn.assistant_message_id, [])
    ]


def test_stop_while_a_call_waits_for_approval_keeps_the_call_that_asked_for_it(
    services,
) -> None:
    add_mcp_server(services)

    async def never(_request: ApprovalRequest) -> str:
        await asyncio.Event().wait()  # the person never answers: they press Stop
        return "deny"

    with FaultServer([calls(("add", {"a": 1, "b": 2})), tool_reply("openai", [])]) as server:
        agent = tool_agent(services, server.url + "/v1")
        turn = services.chat.begin(services.conversations.create(agent.id).id, agent, "1+2")
        stop_when(
            services,
            turn,
            lambda e: isinstance(e, StepChanged) and e.step.status == "waiting",
            approve=never,
        )
        assert len(server.requests) == 1
    assert rows_of(services, turn) == [(1, "tool_calls", 1)]
    assert [s.status for s in services.tools.steps.for_message(turn.assistant_message_id)] == [
        "cancelled"
    ]
    assert [s.status for s in turn.steps] == ["cancelled"]
    assert turn.stats and turn.stats.finish_reason == "tool_calls"
    assert services.conversations.message(turn.assistant_message_id).status == "cancelled"


def test_stop_while_a_tool_runs_keeps_the_call_with_every_tool_call_it_made(services) -> None:
    add_mcp_server(services)
    asked = calls(("add", {"a": 2, "b": 2}), ("sleep", {"seconds": 60}))
    with FaultServer([asked, tool_reply("openai", [])]) as server:
        agent = tool_agent(services, server.url + "/v1")
        for tool in ("add", "sleep"):
            services.tools.tools.add_grant(agent.id, "tools", tool)
        turn = services.chat.begin(services.conversations.create(agent.id).id, agent, "go")
        stop_when(
            services,
            turn,
            lambda e: (
                isinstance(e, StepChanged) and e.step.tool == "sleep" and e.step.status == "running"
            ),
        )
        assert len(server.requests) == 1
    steps = services.tools.steps.for_message(turn.assistant_message_id)
    assert [(s.tool, s.status) for s in steps] == [("add", "done"), ("sleep", "cancelled")]
    assert rows_of(services, turn) == [(1, "tool_calls", 2)]
    (row,) = services.stats.calls_for_messages([turn.assistant_message_id])[
        turn.assistant_message_id
    ]
    assert row["tool_ms"] == round(steps[0].duration_ms, 1)  # the add ran; the sleep was cut


def test_a_tool_error_quoting_a_known_secret_is_stored_and_sent_without_it(
    services, secret_service_env
) -> None:
    """The server's key is a secret env value (in the keyring, so the app knows it); the tool
    fails with an error that quotes it."""
    server = McpServer(name="tools", command=sys.executable, args=SERVER_ARGS, cwd=str(ROOT))
    services.tools.manager.config.add(
        server.with_changes(secret_env=("API_TOKEN",)), secret_values={"API_TOKEN": SECRET}
    )
    replies = [calls(("fail_env", {"name": "API_TOKEN"})), tool_reply("openai", [], text="Hm.")]
    with FaultServer(replies) as fault:
        agent = tool_agent(services, fault.url + "/v1")
        services.tools.tools.add_grant(agent.id, "tools", "fail_env")
        turn = services.chat.begin(services.conversations.create(agent.id).id, agent, "go")

        async def main() -> None:
            try:
                await services.chat.run(turn)
            finally:
                await services.aclose()

        asyncio.run(main())
        second = fault.requests[1].body.decode()
    (step,) = services.tools.steps.for_message(turn.assistant_message_id)
    assert (step.status, step.is_error) == ("done", True)
    assert "authentication failed with API_TOKEN=[redacted]" in step.result
    assert SECRET not in step.result
    assert SECRET not in second and "API_TOKEN=[redacted]" in second
    assert turn.status == "complete" and turn.text == "Hm."
