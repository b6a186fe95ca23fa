"""Agentic turns end to end: ``ChatService.run`` against a loopback OpenAI-compatible server
that streams scripted tool calls (``FaultServer`` + ``tool_reply``: it stands in for any model
that calls tools) and the real MCP test server written with the SDK (stdio), in a real SQLite
file. What a person would notice: the calls run only as approved, the model hears what
happened (result, error, denial), every model call is a stats row, Stop stops a running tool,
and a model that keeps calling tools is made to answer."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from desktop.chat.tool_loop import (
    ANSWER_NOW,
    DENIED_TEXT,
    MAX_TOOL_ROUNDS,
    NO_APPROVER_TEXT,
    ApprovalRequest,
    CallStarted,
    StepChanged,
)
from tests.helpers.fault_server import FaultServer, Reply
from tests.helpers.tool_server import Call, tool_reply
from tests.helpers.tool_turns import add_mcp_server, tool_agent


def answer(text: str) -> Reply:
    return tool_reply("openai", [], text=text)


def call(name: str, arguments: dict[str, Any] | str, text: str = "", cid: str = "c1") -> Reply:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return tool_reply("openai", [Call(cid, name, args)], text=text)


def run_turn(services: Any, agent: Any, prompt: str, approve: Any = None, conv_id: int = 0):
    """One turn (a new conversation unless ``conv_id``); the events it emitted."""
    events: list[Any] = []
    if not conv_id:
        conv_id = services.conversations.create(agent.id).id
    turn = services.chat.begin(conv_id, agent, prompt)

    async def main() -> Any:
        try:
            return await services.chat.run(turn, on_event=events.append, approve=approve)
        finally:
            await services.aclose()

    return asyncio.run(main()), events


def always(decision: str, seen: list[ApprovalRequest] | None = None):
    async def approve(request: ApprovalRequest) -> str:
        if seen is not None:
            seen.append(request)
        return decision

    return approve


def tool_messages(recorded: Any) -> list[dict[str, Any]]:
    return [m for m in recorded.json()["messages"] if m["role"] == "tool"]


def test_an_approved_call_runs_and_the_model_answers_from_its_result(services) -> None:
    add_mcp_server(services)
    seen: list[ApprovalRequest] = []
    replies = [call("add", {"a": 2, "b": 3}, text="Let me add those."), answer("It is 5.")]
    with FaultServer(replies) as server:
        agent = tool_agent(services, server.url + "/v1", tools="tools:add")
        turn, events = run_turn(services, agent, "2+3?", always("once", seen))
        first, second = (r.json() for r in server.requests)

    assert turn.status == "complete" and turn.error is None
    assert turn.text == "Let me add those.\n\nIt is 5."
    # the person saw the tool, its server and the arguments as indented JSON
    (asked,) = seen
    assert (asked.step.tool, asked.step.server, asked.agent_name) == ("add", "tools", "Tooly")
    assert json.loads(asked.pretty_arguments) == {"a": 2, "b": 3} and "\n" in asked.pretty_arguments
    # only the allowed tool was offered
    assert [t["function"]["name"] for t in first["tools"]] == ["add"]
    # the second call carries the first one's call and its result
    assistant = [m for m in second["messages"] if m["role"] == "assistant"][-1]
    assert assistant["tool_calls"][0]["function"]["name"] == "add"
    assert tool_messages(server.requests[1]) == [
        {"role": "tool", "tool_call_id": "c1", "content": "5"}
    ]
    # stored: the step with its result and how it was approved; a stats row per model call
    (step,) = services.tools.steps.for_message(turn.assistant_message_id)
    assert (step.status, step.result, step.approval, step.is_error) == ("done", "5", "once", False)
    assert step.duration_ms and step.duration_ms > 0
    assert step.text_offset == len("Let me add those.")
    rows = services.stats.calls_for_messages([turn.assistant_message_id])[turn.assistant_message_id]
    assert [(r["call_index"], r["finish_reason"], r["tool_calls"]) for r in rows] == [
        (1, "tool_calls", 1),
        (2, "stop", None),
    ]
    assert rows[0]["tool_ms"] == round(step.duration_ms, 1)
    assert [r.call_index for r in turn.calls] == [1, 2] and turn.stats is turn.calls[-1]
    # the view heard each change of the step, then the second call begin
    statuses = [e.step.status for e in events if isinstance(e, StepChanged)]
    assert statuses == ["asked", "waiting", "running", "done"]
    assert [e.call_index for e in events if isinstance(e, CallStarted)] == [2]
    stored = services.conversations.message(turn.assistant_message_id)
    assert (stored.status, stored.content) == ("complete", turn.text)


def test_a_denied_call_is_returned_to_the_model_as_denied(services) -> None:
    add_mcp_server(services)
    with FaultServer([call("echo", {"text": "secret"}), answer("OK, I won't.")]) as server:
        agent = tool_agent(services, server.url + "/v1")
        turn, _ = run_turn(services, agent, "echo it", always("deny"))
        (result,) = tool_messages(server.requests[1])
    assert result["content"] == DENIED_TEXT
    (step,) = services.tools.steps.for_message(turn.assistant_message_id)
    assert (step.status, step.approval, step.duration_ms) == ("denied", "denied", None)
    assert turn.text == "OK, I won't."


def test_always_allow_is_remembered_for_that_agent_and_tool(services) -> None:
    add_mcp_server(services)
    seen: list[ApprovalRequest] = []
    replies = [call("add", {"a": 1, "b": 1}), answer("2")]
    replies += [call("add", {"a": 2, "b": 2}), answer("4")]
    with FaultServer(replies) as server:
        agent = tool_agent(services, server.url + "/v1")
        first, _ = run_turn(services, agent, "1+1", always("always", seen))
        second, _ = run_turn(services, agent, "2+2", always("deny", seen), first.conversation_id)
    assert len(seen) == 1  # the second call was not asked about
    (grant,) = services.tools.tools.grants(agent.id)
    assert (grant.server, grant.tool) == ("tools", "add")
    (step,) = services.tools.steps.for_message(second.assistant_message_id)
    assert (step.approval, step.result) == ("granted", "4")


def test_without_an_approver_a_call_is_refused_and_the_model_told(services) -> None:
    add_mcp_server(services)
    with FaultServer([call("add", {"a": 1, "b": 2}), answer("I could not run it.")]) as server:
        agent = tool_agent(services, server.url + "/v1")
        turn, _ = run_turn(services, agent, "1+2", approve=None)
        (result,) = tool_messages(server.requests[1])
    assert result["content"] == NO_APPROVER_TEXT
    (step,) = services.tools.steps.for_message(turn.assistant_message_id)
    assert step.status == "refused"


def test_malformed_arguments_and_unknown_tools_go_back_as_errors_unasked(services) -> None:
    add_mcp_server(services)
    seen: list[ApprovalRequest] = []
    replies = [
        tool_reply(
            "openai", [Call("c1", "add", '{"a": 1, "b":'), Call("c2", "rm_rf", "{}")], pieces=2
        ),
        answer("Sorry."),
    ]
    with FaultServer(replies) as server:
        agent = tool_agent(services, server.url + "/v1", tools="tools:add")
        turn, _ = run_turn(services, agent, "go", always("once", seen))
        results = tool_messages(server.requests[1])
    assert seen == []
    assert "not valid JSON" in results[0]["content"]
    assert "no tool named “rm_rf”" in results[1]["content"] and "add" in results[1]["content"]
    steps = services.tools.steps.for_message(turn.assistant_message_id)
    assert [(s.status, s.is_error) for s in steps] == [("invalid", True), ("invalid", True)]
    assert turn.status == "complete"


def test_a_tool_error_is_shown_and_returned_as_an_error(services) -> None:
    add_mcp_server(services)
    replies = [call("fail", {"message": "the disk is full"}), answer("The tool failed.")]
    with FaultServer(replies) as server:
        agent = tool_agent(services, server.url + "/v1")
        turn, _ = run_turn(services, agent, "go", always("once"))
        (result,) = tool_messages(server.requests[1])
    assert "the disk is full" in result["content"]
    (step,) = services.tools.steps.for_message(turn.assistant_message_id)
    assert (step.status, step.is_error) == ("done", True)


def test_a_tool_past_its_timeout_is_an_error_and_the_turn_goes_on(services) -> None:
    add_mcp_server(services, timeout_s=1.0)
    with FaultServer([call("sleep", {"seconds": 30}), answer("It timed out.")]) as server:
        agent = tool_agent(services, server.url + "/v1")
        started = time.monotonic()
        turn, _ = run_turn(services, agent, "wait", always("once"))
        (result,) = tool_messages(server.requests[1])
    assert time.monotonic() - started < 20
    (step,) = services.tools.steps.for_message(turn.assistant_message_id)
    assert step.status == "timeout" and step.is_error
    assert "1 s" in result["content"] or "second" in result["content"]
    assert turn.text == "It timed out."


def test_a_model_that_keeps_calling_tools_is_made_to_answer(services) -> None:
    add_mcp_server(services)
    with FaultServer(call("add", {"a": 1, "b": 1})) as server:  # a tool call, every time
        agent = tool_agent(services, server.url + "/v1")
        services.tools.tools.add_grant(agent.id, "tools", "add")
        turn, _ = run_turn(services, agent, "loop")
        bodies = [r.json() for r in server.requests]
    assert len(bodies) == MAX_TOOL_ROUNDS + 1
    assert all("tool_choice" not in b for b in bodies[:-1])
    last = bodies[-1]
    assert last["tool_choice"] == "none"
    assert last["messages"][-1] == {
        "role": "user",
        "content": ANSWER_NOW.format(rounds=MAX_TOOL_ROUNDS),
    }
    steps = services.tools.steps.for_message(turn.assistant_message_id)
    assert [s.status for s in steps] == ["done"] * MAX_TOOL_ROUNDS + ["refused"]
    assert turn.status == "complete" and "8 rounds" in (turn.notice or "")
    rows = services.stats.calls_for_messages([turn.assistant_message_id])[turn.assistant_message_id]
    assert [r["call_index"] for r in rows] == list(range(1, MAX_TOOL_ROUNDS + 2))


def test_stop_cancels_a_running_tool_call(services) -> None:
    add_mcp_server(services)
    with FaultServer([call("sleep", {"seconds": 60}), answer("never")]) as server:
        agent = tool_agent(services, server.url + "/v1")
        services.tools.tools.add_grant(agent.id, "tools", "sleep")
        conv = services.conversations.create(agent.id)
        turn = services.chat.begin(conv.id, agent, "sleep")

        async def main() -> float:
            running = asyncio.Event()

            def on_event(event: Any) -> None:
                if isinstance(event, StepChanged) and event.step.status == "running":
                    running.set()

            task = asyncio.ensure_future(services.chat.run(turn, on_event=on_event))
            await asyncio.wait_for(running.wait(), 30)
            await asyncio.sleep(0.3)
            stopped = time.monotonic()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            took = time.monotonic() - stopped
            await services.aclose()
            return took

        took = asyncio.run(main())
        assert len(server.requests) == 1  # no second call after Stop
    assert took < 10
    (step,) = services.tools.steps.for_message(turn.assistant_message_id)
    assert step.status == "cancelled"
    assert services.conversations.message(turn.assistant_message_id).status == "cancelled"
    (row,) = services.stats.calls_for_messages([turn.assistant_message_id])[
        turn.assistant_message_id
    ]
    assert row["call_index"] == 1


def test_a_server_that_cannot_start_leaves_its_tools_out_and_says_so(services) -> None:
    add_mcp_server(services, name="gone", command="/nonexistent/mcp-server", args=())
    with FaultServer(answer("Hello without tools.")) as server:
        agent = tool_agent(services, server.url + "/v1", tools="gone")
        turn, _ = run_turn(services, agent, "hi")
        body = server.requests[0].json()
    assert "tools" not in body
    assert turn.status == "complete" and turn.text == "Hello without tools."
    assert "gone" in (turn.notice or "") and "/nonexistent/mcp-server" in (turn.notice or "")


def test_the_next_turn_carries_earlier_calls_and_results(services) -> None:
    add_mcp_server(services)
    replies = [call("add", {"a": 2, "b": 5}, text="Adding."), answer("7."), answer("Yes.")]
    with FaultServer(replies) as server:
        agent = tool_agent(services, server.url + "/v1")
        services.tools.tools.add_grant(agent.id, "tools", "add")
        first, _ = run_turn(services, agent, "2+5?")
        run_turn(services, agent, "sure?", conv_id=first.conversation_id)
        history = server.requests[2].json()["messages"]
    roles = [m["role"] for m in history]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    assert history[1]["content"] == "Adding." and history[1]["tool_calls"][0]["id"] == "c1"
    assert history[2]["content"] == "7" and history[3]["content"] == "7."


def test_a_server_that_crashes_mid_call_is_an_error_and_runs_again_next_call(services) -> None:
    add_mcp_server(services)
    replies = [call("crash", {}), call("add", {"a": 4, "b": 4}, cid="c2"), answer("8.")]
    with FaultServer(replies) as server:
        agent = tool_agent(services, server.url + "/v1")
        for tool in ("crash", "add"):
            services.tools.tools.add_grant(agent.id, "tools", tool)
        turn, _ = run_turn(services, agent, "crash, then add")
        (crashed,) = tool_messages(server.requests[1])
        added = tool_messages(server.requests[2])[-1]
    assert "stopped during the call" in crashed["content"]
    assert "crashing on purpose" in crashed["content"]  # its stderr, for whoever reads it
    assert added["content"] == "8"  # the server was started again for the next call
    steps = services.tools.steps.for_message(turn.assistant_message_id)
    assert [(s.tool, s.status, s.is_error) for s in steps] == [
        ("crash", "error", True),
        ("add", "done", False),
    ]
    assert turn.text == "8."


def test_a_result_over_the_size_limit_is_cut_with_a_note(services) -> None:
    add_mcp_server(services)
    with FaultServer([call("big", {"n": 250_000}), answer("Long.")]) as server:
        agent = tool_agent(services, server.url + "/v1")
        services.tools.tools.add_grant(agent.id, "tools", "big")
        turn, _ = run_turn(services, agent, "big")
        (result,) = tool_messages(server.requests[1])
    (step,) = services.tools.steps.for_message(turn.assistant_message_id)
    assert step.truncated and step.size == 250_000
    assert len(result["content"]) < 101_000
    assert "truncated: the tool returned 250,000 characters" in result["content"]


@pytest.mark.parametrize("kind", ["anthropic", "gemini"])
def test_the_loop_speaks_anthropic_and_gemini_too(services, secret_service_env, kind) -> None:
    """The same two-call turn over Anthropic's tool_use blocks and Gemini's function calls
    (the FaultServer stands in for their APIs; the key is in the real keyring)."""
    from desktop.store.agents import Agent
    from desktop.tools.config import parse_tool_list

    add_mcp_server(services)
    replies = [
        tool_reply(kind, [Call("c1", "add", '{"a": 2, "b": 3}')], text="Adding."),
        tool_reply(kind, [], text="It is 5.", finish="end_turn" if kind == "anthropic" else "STOP"),
    ]
    with FaultServer(replies) as server:
        agent = services.agents.create(
            Agent(name="Remote", kind=kind, base_url=server.url, model="m"), api_key="k-123"
        )
        services.tools.tools.set_agent_tools(agent.id, parse_tool_list("tools:add"))
        turn, _ = run_turn(services, agent, "2+3?", always("once"))
        second = server.requests[1].body.decode()
    assert turn.status == "complete", turn.error
    assert turn.text == "Adding.\n\nIt is 5."
    (step,) = services.tools.steps.for_message(turn.assistant_message_id)
    assert (step.status, step.result) == ("done", "5")
    assert '"5"' in second or ": 5" in second or "'5'" in second  # the result went back


def test_every_model_call_of_a_hosted_agents_turn_is_priced(services, secret_service_env) -> None:
    """An OpenAI agent (the FaultServer stands in for api.openai.com, reporting a model the
    price list knows): the call that asked for the tool is priced like the answer."""
    from desktop.store.agents import Agent

    add_mcp_server(services)

    def as_4o_mini(reply: Reply) -> Reply:  # the model the server reports, one with a price
        return Reply(body=[c.replace(b"gpt-test", b"gpt-4o-mini") for c in reply.body])

    replies = [as_4o_mini(call("add", {"a": 2, "b": 3})), as_4o_mini(answer("5."))]
    with FaultServer(replies) as server:
        agent = services.agents.create(
            Agent(name="Priced", kind="openai", base_url=server.url + "/v1", model="gpt-4o-mini"),
            api_key="sk-test",
        )
        services.tools.tools.set_agent_tools(agent.id, [("tools", "add")])
        services.tools.tools.add_grant(agent.id, "tools", "add")
        turn, _ = run_turn(services, agent, "2+3?")
    assert [r.call_index for r in turn.calls] == [1, 2]
    got = [(r.cost_usd, r.price_source, r.prompt_tokens, r.model_reported) for r in turn.calls]
    assert all(c and s for c, s, _, _ in got), got
