"""A client's tools pass through to the agent's provider, and the calls the model makes come back
to the client in OpenAI's shape (whole and streamed); the client runs them and sends the results
in its next request. The provider is ``FaultServer`` replying with ``tool_reply``: a scripted
stand-in for an OpenAI-compatible API whose model calls tools."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai

from desktop.store.serving import ServedAgent
from tests.helpers.fault_server import FaultServer, Recorded, Reply, ticking_tokens
from tests.helpers.tool_server import Call, tool_reply
from tests.serve.support import make_key, remote, remote_upstream, serving

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather now in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ARGS = '{"city": "Oslo"}'
ASKED = [{"role": "user", "content": "Weather in Oslo?"}]


def _upstream(request: Recorded) -> Reply:
    """Calls the tool, unless the request already holds its result: then answers in text."""
    if any(m.get("role") == "tool" for m in request.json()["messages"]):
        return Reply(body=ticking_tokens(2))
    return tool_reply("openai", [Call("call_w1", "get_weather", ARGS)], pieces=3)


def _sdk(server, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.address, api_key=key, max_retries=0)


def _through_sdk(services, **create: Any) -> Any:
    """What OpenAI's SDK gets back from a server started for it, asked
    ``chat.completions.create(model="remote", **create)``: the reply, or a stream's chunks."""
    key = make_key(services, "sdk")

    async def main():
        async with serving(services) as server:
            sdk = _sdk(server, key)
            reply = await sdk.chat.completions.create(model="remote", **create)
            if create.get("stream"):
                reply = [chunk async for chunk in reply]
            await sdk.close()
            return reply

    return asyncio.run(main())


def test_the_clients_tools_go_upstream_and_the_call_comes_back_whole(services) -> None:
    with remote_upstream(services, _upstream, system_prompt="Agent rules.") as upstream:
        reply = _through_sdk(
            services,
            messages=[{"role": "system", "content": "Client rules."}, *ASKED],
            tools=[WEATHER],
        )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.id == "call_w1" and call.type == "function"
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {
        "city": "Oslo"
    }
    sent = upstream.requests[0].json()
    assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather"]
    assert sent["tools"][0]["function"]["parameters"] == WEATHER["function"]["parameters"]
    assert sent["tools"][0]["function"]["description"] == "The weather now in a city."
    assert sent["messages"][0] == {"role": "system", "content": "Agent rules.\n\nClient rules."}
    assert sent["messages"][1:] == ASKED


def test_a_streamed_tool_call_comes_back_in_chunks_by_index(services) -> None:
    with remote_upstream(services, _upstream) as upstream:
        chunks = _through_sdk(services, messages=ASKED, tools=[WEATHER], stream=True)
    calls: dict[int, dict[str, str]] = {}
    finishes = []
    for chunk in chunks:
        for choice in chunk.choices:
            finishes.append(choice.finish_reason)
            for delta in choice.delta.tool_calls or []:
                got = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                got["id"] += delta.id or ""
                got["name"] += delta.function.name or ""
                got["arguments"] += delta.function.arguments or ""
    assert calls == {0: {"id": "call_w1", "name": "get_weather", "arguments": ARGS}}
    assert [f for f in finishes if f] == ["tool_calls"]
    assert upstream.requests[0].json()["tools"][0]["function"]["name"] == "get_weather"


def test_the_tool_result_in_the_next_request_is_forwarded(services) -> None:
    history = [
        *ASKED,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ARGS},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_w1", "content": "-3 °C, snow"},
    ]
    with remote_upstream(services, _upstream) as upstream:
        reply = _through_sdk(services, messages=history, tools=[WEATHER])
    assert reply.choices[0].message.content == "tok0 tok1 "
    assert reply.choices[0].finish_reason == "stop"
    sent = upstream.requests[0].json()["messages"]
    assert sent[0] == ASKED[0]
    (call,) = sent[1]["tool_calls"]
    assert sent[1]["role"] == "assistant" and call["id"] == "call_w1"
    assert call["function"] == {"name": "get_weather", "arguments": ARGS}
    assert sent[2]["role"] == "tool" and sent[2]["tool_call_id"] == "call_w1"
    assert sent[2]["content"] == "-3 °C, snow"


def test_a_clients_sampling_reaches_the_provider_only_where_the_agent_allows(services) -> None:
    with FaultServer(lambda _r: Reply(body=ticking_tokens(1))) as upstream:
        agent = remote(services, upstream.url + "/v1", temperature=0.3, max_tokens=40)
        key = make_key(services, "sdk")

        async def main() -> None:
            async with serving(services) as server:
                sdk = _sdk(server, key)
                for _ in range(2):
                    await sdk.chat.completions.create(
                        model="remote", messages=ASKED, temperature=1.9, max_tokens=5
                    )
                    server.served.set(ServedAgent(agent.id, client_sampling=True))
                await sdk.close()

        asyncio.run(main())
    fixed, chosen = (r.json() for r in upstream.requests)
    assert fixed["temperature"] == 0.3 and fixed["max_tokens"] == 40
    assert chosen["temperature"] == 1.9 and chosen["max_tokens"] == 5
