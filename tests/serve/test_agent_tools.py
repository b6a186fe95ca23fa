"""An agent that runs its own MCP tools for API clients (the Server page's "Runs its tools").

The model is ``FaultServer`` streaming scripted OpenAI tool calls (a stand-in for any model
that calls tools); the tool is the real MCP test server (stdio, the SDK). What a client and
the person notice: without the setting the agent's tools never run for a client; with it, a
tool the person allowed "always" runs and the client gets the answer made from its result;
a tool not allowed always is refused (nobody is there to ask); the turn is kept as a
conversation and each model call is a stats row tagged with the client.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from desktop.serve.config import ServeConfig
from desktop.serve.server import ApiServer
from tests.helpers.fault_server import FaultServer
from tests.helpers.tool_server import Call, tool_reply
from tests.helpers.tool_turns import add_mcp_server, tool_agent


def _ask(services: Any, body: dict[str, Any]) -> tuple[httpx.Response, ApiServer]:
    async def main() -> tuple[httpx.Response, ApiServer]:
        server = ApiServer(services, ServeConfig(port=0))
        await server.start()
        try:
            async with httpx.AsyncClient(base_url=server.address, timeout=60) as http:
                return await http.post("/chat/completions", json=body), server
        finally:
            await server.stop()
            await services.aclose()

    return asyncio.run(main())


def _body(**more: Any) -> dict[str, Any]:
    return {"model": "tooly", "messages": [{"role": "user", "content": "2+3?"}], **more}


def test_an_allowed_tool_runs_for_a_client_when_the_agent_says_so(services: Any) -> None:
    add_mcp_server(services)
    replies = [
        tool_reply("openai", [Call("c1", "add", json.dumps({"a": 2, "b": 3}))], text="Adding."),
        tool_reply("openai", [], text="It is 5."),
    ]
    with FaultServer(replies) as model:
        agent = tool_agent(services, model.url + "/v1", tools="tools:add")
        services.tools.tools.add_grant(agent.id, "tools", "add")  # "always allow"
        ApiServer(services, ServeConfig()).set_served(agent.id, run_tools=True)
        reply, _server = _ask(services, _body())
        second = model.requests[1].json()

    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["choices"][0]["message"]["content"] == "Adding.\n\nIt is 5."
    assert body["choices"][0]["finish_reason"] == "stop"
    assert "tool_calls" not in body["choices"][0]["message"]  # the agent's own, not the client's
    # the model heard the tool's result
    (result,) = [m for m in second["messages"] if m["role"] == "tool"]
    assert "5" in result["content"]
    # kept as a conversation, every model call a row tagged with the client
    (conv,) = [c for c in services.conversations.list() if c.title.startswith("API · ")]
    rows = services.db.execute(
        "select call_index, source, tool_calls from inference_stats where conversation_id = ?"
        " order by call_index",
        [conv.id],
    ).fetchall()
    assert rows == [(1, "api", 1), (2, "api", None)]


def test_a_tool_not_allowed_always_is_refused_for_a_client(services: Any) -> None:
    add_mcp_server(services)
    replies = [
        tool_reply("openai", [Call("c1", "add", json.dumps({"a": 2, "b": 3}))]),
        tool_reply("openai", [], text="I could not add them."),
    ]
    with FaultServer(replies) as model:
        agent = tool_agent(services, model.url + "/v1", tools="tools:add")
        ApiServer(services, ServeConfig()).set_served(agent.id, run_tools=True)
        reply, _server = _ask(services, _body())
        second = model.requests[1].json()

    assert reply.status_code == 200, reply.text
    (result,) = [m for m in second["messages"] if m["role"] == "tool"]
    assert "5" not in result["content"]  # it never ran
    assert reply.json()["choices"][0]["message"]["content"].endswith("I could not add them.")


def test_without_the_setting_the_agents_tools_never_run_for_a_client(services: Any) -> None:
    add_mcp_server(services)
    with FaultServer([tool_reply("openai", [], text="Plain.")]) as model:
        agent = tool_agent(services, model.url + "/v1", tools="tools:add")
        services.tools.tools.add_grant(agent.id, "tools", "add")
        reply, _server = _ask(services, _body())
        (request,) = [r.json() for r in model.requests]

    assert reply.status_code == 200
    assert "tools" not in request  # the agent's tools were not even offered
    assert not [c for c in services.conversations.list() if c.title.startswith("API · ")]
