"""A remote agent through the server: SIMI's agent is backed by a real llama.cpp server
(``llama_cpp.server`` on the starter model, on loopback), and clients reach it through SIMI with
the ``openai`` SDK, ``curl`` and two at once. Each call is one stats row tagged as an API call
with the key's name."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import openai
import pytest

from tests.helpers.servers import llama_server
from tests.serve.support import chat_body, make_key, remote, serving, stats_rows

pytestmark = pytest.mark.slow

ASK = [{"role": "user", "content": "Say hi."}]


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    """One real llama_cpp.server for the module. By default it stops the reply it is writing
    when another request arrives (an empty reply for the first of two clients); a real server
    queues them, so this one is told to (its settings read the environment)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("INTERRUPT_REQUESTS", "false")
        with llama_server() as base:
            yield base


def test_the_sdk_streams_and_gets_whole_replies_through_simi(services, llama: str) -> None:
    remote(services, llama, model="smollm2", max_tokens=8)
    key = make_key(services, "editor")

    async def main():
        async with serving(services) as server:
            sdk = openai.AsyncOpenAI(base_url=server.address, api_key=key, max_retries=0)
            whole = await sdk.chat.completions.create(model="remote", messages=ASK)
            stream = await sdk.chat.completions.create(
                model="remote",
                messages=ASK,
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [chunk async for chunk in stream]
            await sdk.close()
            return whole, chunks

    whole, chunks = asyncio.run(main())
    assert whole.model == "remote" and whole.choices[0].message.content.strip()
    assert whole.choices[0].finish_reason in ("stop", "length")
    assert whole.usage.prompt_tokens > 0 and 0 < whole.usage.completion_tokens <= 8
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip()
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    rows = stats_rows(services)
    assert len(rows) == 2
    for row in rows:
        assert (row["source"], row["api_client"]) == ("api", "editor")
        assert row["agent_name"] == "Remote" and row["provider_kind"] == "openai-compatible"
        assert row["endpoint_host"] == "127.0.0.1" and row["output_tokens"] > 0
        assert row["message_id"] is None and row["conversation_id"] is None


def test_curl_gets_server_sent_events_ending_with_done(services, llama: str) -> None:
    import json

    remote(services, llama, model="smollm2", max_tokens=8)

    async def main() -> tuple[int, str]:
        async with serving(services) as server:
            curl = await asyncio.create_subprocess_exec(
                *("curl", "-sN", "--max-time", "60", f"{server.address}/chat/completions"),
                *("-H", "Content-Type: application/json"),
                *("-d", json.dumps(chat_body("remote", stream=True))),
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await curl.communicate()
            return curl.returncode, out.decode()

    code, out = asyncio.run(main())
    assert code == 0, out
    events = [line for line in out.splitlines() if line]
    assert events and all(e.startswith("data: ") for e in events), out
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text.strip()
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    (row,) = stats_rows(services)
    assert row["source"] == "api" and row["api_client"] is None  # no key: no client name


def test_two_clients_on_a_remote_agent_both_complete(services, llama: str) -> None:
    remote(services, llama, model="smollm2", max_tokens=6)

    async def main():
        async with serving(services) as server:
            sdk = openai.AsyncOpenAI(
                base_url=server.address, api_key=make_key(services, "two"), max_retries=0
            )
            first = sdk.chat.completions.create(model="remote", messages=ASK)
            second = sdk.chat.completions.create(
                model="remote", messages=ASK, stream=True, stream_options={"include_usage": True}
            )

            async def drain(stream_call):
                return [chunk async for chunk in await stream_call]

            replies = await asyncio.wait_for(asyncio.gather(first, drain(second)), 90)
            await sdk.close()
            return replies

    whole, chunks = asyncio.run(main())
    assert whole.choices[0].message.content.strip()
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).strip()
    assert [r["api_client"] for r in stats_rows(services)] == ["two", "two"]
