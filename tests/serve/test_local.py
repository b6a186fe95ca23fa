"""The starter agent (a local llama.cpp model) through the server, with the official ``openai``
SDK and a raw socket: whole and streamed replies with their usage, two clients at once, and a
client that goes away mid-reply stops the generation."""

from __future__ import annotations

import asyncio
import json
import time

import openai
import pytest

from desktop.local.starter import STARTER_AGENT_NAME
from desktop.store.agents import Agent
from tests.serve.support import STARTER_ID, make_key, serving, starter, stats_rows

pytestmark = pytest.mark.slow

HELLO = [{"role": "user", "content": "Say hi."}]
# greedy, the starter answers this in a word or two and stops by itself ("stop")
YES_NO = [{"role": "user", "content": "Is the sky blue? Answer yes or no."}]


def _short_starter(services) -> Agent:
    return starter(services, max_tokens=24, temperature=0.0, seed=1)


async def _gate_free(server, within_s: float = 5) -> bool:
    """Whether the local queue empties within ``within_s`` (a call gives its place back once
    its stats row is stored, just after the reply went out)."""
    deadline = time.monotonic() + within_s
    while server.gate.running or server.gate.waiting:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def test_the_sdk_gets_whole_and_streamed_replies_with_usage(services) -> None:
    _short_starter(services)
    key = make_key(services, "sdk")

    async def main():
        async with serving(services) as server:
            sdk = openai.AsyncOpenAI(base_url=server.address, api_key=key, max_retries=0)
            models = await sdk.models.list()
            whole = await sdk.chat.completions.create(model=STARTER_ID, messages=YES_NO)
            stream = await sdk.chat.completions.create(
                model=STARTER_ID,
                messages=YES_NO,
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [chunk async for chunk in stream]
            await sdk.close()
            return models, whole, chunks

    models, whole, chunks = asyncio.run(main())
    (entry,) = [m for m in models.data if m.id == STARTER_ID]
    assert entry.owned_by == "simi" and entry.object == "model"

    assert whole.model == STARTER_ID and whole.object == "chat.completion"
    assert whole.choices[0].message.role == "assistant"
    assert whole.choices[0].message.content.strip()
    assert whole.choices[0].finish_reason == "stop"
    usage = whole.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details is not None
    assert isinstance(usage.prompt_tokens_details.cached_tokens, int)

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip()
    assert len({c.id for c in chunks}) == 1
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and not any(finishes[:-1])
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert last.usage.completion_tokens > 0 and last.usage.prompt_tokens == usage.prompt_tokens
    # the second call's prompt was the same: the local model reused its cache
    assert last.usage.prompt_tokens_details.cached_tokens > 0

    rows = stats_rows(services)
    assert [(r["source"], r["api_client"]) for r in rows] == [("api", "sdk")] * 2
    assert all(r["agent_name"] == STARTER_AGENT_NAME for r in rows)
    assert [r["finish_reason"] for r in rows] == ["stop", "stop"]
    assert rows[0]["output_tokens"] == usage.completion_tokens


def test_two_clients_on_the_local_agent_both_complete(services) -> None:
    starter(services, max_tokens=8)
    key = make_key(services, "sdk")

    async def main():
        async with serving(services) as server:
            sdk = openai.AsyncOpenAI(base_url=server.address, api_key=key, max_retries=0)
            replies = await asyncio.wait_for(
                asyncio.gather(
                    sdk.chat.completions.create(model=STARTER_ID, messages=HELLO),
                    sdk.chat.completions.create(
                        model=STARTER_ID, messages=[{"role": "user", "content": "Name a fruit."}]
                    ),
                ),
                60,
            )
            await sdk.close()
            assert await _gate_free(server)
            return replies

    replies = asyncio.run(main())
    for reply in replies:
        assert reply.choices[0].message.content.strip()
        assert reply.usage.completion_tokens > 0
    assert len(stats_rows(services)) == 2


async def _post_raw(port: int, body: dict) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    writer.write(
        (
            "POST /v1/chat/completions HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{port}\r\n"
            "Content-Type: application/json\r\n"
            "Connection: close\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        ).encode()
        + data
    )
    await writer.drain()
    return reader, writer


def test_a_client_that_goes_away_mid_stream_stops_the_generation(services) -> None:
    base = starter(services, max_tokens=8)
    # a copy of the starter (the same loaded model) that may write 400 tokens
    long = services.agents.clone(base, "Long")
    services.agents.update(long.with_changes(max_tokens=400, temperature=0.0, seed=1))
    count = {"role": "user", "content": "Count from 1 to 500, separated by commas."}

    async def main() -> tuple[int, float]:
        async with serving(services) as server:
            reader, writer = await _post_raw(
                server.config.port, {"model": "long", "messages": [count], "stream": True}
            )
            texts = 0
            while texts < 2:
                line = await asyncio.wait_for(reader.readline(), 30)
                assert line, "the stream ended before two text chunks"
                if line.startswith(b"data: {") and b'"content":"' in line:
                    delta = json.loads(line[6:])["choices"][0]["delta"]
                    texts += bool(delta.get("content"))
            writer.close()
            await writer.wait_closed()
            gone = time.monotonic()
            while time.monotonic() - gone < 10:
                rows = stats_rows(services)
                if rows and services.local.state != "busy" and server.gate.running == 0:
                    break
                await asyncio.sleep(0.05)
            freed_s = time.monotonic() - gone
            # the worker is free: the next request is answered at once
            async with asyncio.timeout(20):
                reader, writer = await _post_raw(
                    server.config.port, {"model": STARTER_ID, "messages": HELLO}
                )
                answer = await reader.read()  # to the end: the server closes after it
                writer.close()
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
            assert json.loads(answer.partition(b"\r\n\r\n")[2])["choices"][0]["message"]["content"]
            return len(rows), freed_s

    rows_then, freed_s = asyncio.run(main())
    assert rows_then == 1 and freed_s < 10
    cancelled, after = stats_rows(services)
    assert cancelled["agent_name"] == "Long" and cancelled["source"] == "api"
    assert cancelled["finish_reason"] == "cancelled"
    assert 2 <= cancelled["output_tokens"] < 400  # stopped long before its max
    assert after["finish_reason"] in ("stop", "length")
