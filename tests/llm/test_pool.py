"""One HTTP client per endpoint, kept across turns (``desktop.llm.pool`` through
``ProviderFactory``): a second turn reuses the connection and its stats say so; editing or
deleting the agent and exit close the client, never under a streaming reply."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from desktop.chat.providers import ProviderFactory
from desktop.llm.errors import ProviderUnavailable, Stalled
from desktop.llm.events import TextDelta, Timing
from desktop.llm.pool import ClientKey, ClientPool
from desktop.store.agents import Agent
from tests.helpers.fault_server import FaultServer, Reply, make_tls_files, ticking_tokens
from tests.helpers.servers import llama_server
from tests.llm.streams import REQUEST, make, run, text

KEY = "sk-pool-test-key-0123456789"


def tokens(count: int, **kw: object):  # type: ignore[no-untyped-def]
    """A handler answering every request with ``count`` tokens (a fresh stream each time)."""
    return lambda request: Reply(body=ticking_tokens(count), **kw)  # type: ignore[arg-type]


def remote(services, url: str, name: str = "Pooled", **changes: object) -> Agent:
    agent = Agent(name=name, kind="openai-compatible", base_url=url, model="m")
    return services.agents.create(agent.with_changes(**changes))


async def turn(factory: ProviderFactory, agent: Agent) -> tuple[list, Timing]:
    """One turn as ChatService runs it: a provider for the turn, streamed, then closed."""
    provider = factory.for_agent(agent)
    events: list = []
    try:
        async with contextlib.aclosing(provider.stream(REQUEST)) as stream:  # type: ignore[type-var]
            async for event in stream:
                events.append(event)
    finally:
        await provider.aclose()
    timing = next(e for e in events if isinstance(e, Timing) and e.headers_ms is not None)
    return events, timing


def test_second_turn_reuses_the_connection_and_its_stats_say_so(services) -> None:
    """Through the chat service: the stored stats row of the second turn has connect_ms 0."""
    with FaultServer(tokens(3), keep_alive=True) as server:
        agent = remote(services, server.url + "/v1")
        conv = services.conversations.create(agent.id)

        async def two_turns():  # type: ignore[no-untyped-def]
            chat = services.chat
            first = await chat.run(chat.begin(conv.id, agent, "one"))
            second = await chat.run(chat.begin(conv.id, agent, "two"))
            await chat.providers.aclose()
            return first, second

        first, second = asyncio.run(two_turns())
        connections, requests = server.connections, len(server.requests)
    assert (first.status, second.status) == ("complete", "complete")
    assert requests == 2 and connections == 1  # no new TCP connection for the second turn
    assert first.stats.connect_ms > 0
    assert second.stats.connect_ms == 0  # reused: no connect happened
    assert (first.stats.reused_connection, second.stats.reused_connection) == (0, 1)
    assert first.stats.tls_ms is None  # plain http: no handshake
    assert second.stats.headers_ms is not None
    stored = services.stats.for_message(second.assistant_message_id)
    assert stored["connect_ms"] == 0


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return make_tls_files(Path(tmp_path_factory.mktemp("tls")))


def test_tls_connection_is_reused_with_its_ca_bundle(services, tls) -> None:  # type: ignore[no-untyped-def]
    with FaultServer(tokens(2), tls=tls.server_context(), keep_alive=True) as server:
        agent = remote(services, server.url + "/v1", ca_bundle=str(tls.ca_pem))
        factory = ProviderFactory(services.agents, services.local)

        async def go():  # type: ignore[no-untyped-def]
            timings = [(await turn(factory, agent))[1] for _ in range(3)]
            await factory.aclose()
            return timings

        first, *later = asyncio.run(go())
        connections = server.connections
    assert connections == 1 and factory.clients.created == 1
    assert first.connect_ms is not None and first.connect_ms > 0  # TCP + TLS handshake
    assert first.tls_ms is not None and 0 < first.tls_ms <= first.connect_ms
    assert first.reused is False
    assert [t.connect_ms for t in later] == [0.0, 0.0]
    assert [(t.reused, t.tls_ms) for t in later] == [(True, None), (True, None)]


def test_editing_the_agent_closes_its_client_and_the_next_turn_connects_anew(services) -> None:
    with FaultServer(tokens(2), keep_alive=True) as server:
        agent = remote(services, server.url + "/v1")
        factory = ProviderFactory(services.agents, services.local)

        async def go():  # type: ignore[no-untyped-def]
            await turn(factory, agent)
            client = factory.for_agent(agent)
            await client.aclose()  # a provider built and closed without a call
            kept = next(iter(factory.clients._entries.values())).client
            factory.close_endpoint(agent)  # the editor saved new settings
            await asyncio.sleep(0)  # the idle client's close runs as a task
            await factory.clients.aclose()  # waits for closes under way
            closed = kept.is_closed
            _, timing = await turn(factory, agent)
            await factory.aclose()
            return closed, timing

        closed, timing = asyncio.run(go())
        connections = server.connections
    assert closed and len(factory.clients) == 0
    assert connections == 2 and timing.connect_ms is not None and timing.connect_ms > 0


def test_closing_under_a_streaming_reply_waits_for_the_reply_to_end(services) -> None:
    with FaultServer(tokens(20, chunk_delay_s=0.01), keep_alive=True) as server:
        agent = remote(services, server.url + "/v1")
        factory = ProviderFactory(services.agents, services.local)

        async def go():  # type: ignore[no-untyped-def]
            provider = factory.for_agent(agent)
            events: list = []
            (entry,) = factory.clients._entries.values()
            async with contextlib.aclosing(provider.stream(REQUEST)) as stream:  # type: ignore[type-var]
                async for event in stream:
                    events.append(event)
                    if sum(isinstance(e, TextDelta) for e in events) == 2:
                        factory.close_endpoint(agent)  # the agent is deleted meanwhile
                        await factory.aclose()  # and the app exits: neither cuts the reply
            open_after_reply = not entry.client.is_closed
            await provider.aclose()
            return events, open_after_reply, entry.client.is_closed

        events, open_after_reply, closed = asyncio.run(go())
    assert text(events).startswith("tok0 tok1 ") and text(events).count("tok") == 20
    assert open_after_reply and closed  # closed when the turn let go of it


def test_a_kept_connection_the_server_closed_is_replaced_at_once(services) -> None:
    """The server dropped the idle connection just as the second turn's request went out:
    the request goes again on a new connection, without the retry wrapper (one attempt)."""
    answers = [Reply(body=ticking_tokens(1)), Reply(raw=b""), Reply(body=ticking_tokens(2))]
    with FaultServer(answers, keep_alive=True) as server:
        agent = remote(services, server.url + "/v1")
        factory = ProviderFactory(services.agents, services.local, retry_attempts=1)

        async def go():  # type: ignore[no-untyped-def]
            await turn(factory, agent)
            events, timing = await turn(factory, agent)
            await factory.aclose()
            return events, timing

        events, timing = asyncio.run(go())
        connections, requests = server.connections, len(server.requests)
    assert text(events) == "tok0 tok1 " and requests == 3 and connections == 2
    assert timing.connect_ms is not None and timing.connect_ms > 0  # the new connection's


def test_a_new_connection_closed_without_an_answer_is_not_sent_again() -> None:
    with FaultServer(Reply(raw=b"")) as server:
        events, error = asyncio.run(run(make("openai", server.url)))
        requests = len(server.requests)
    assert isinstance(error, ProviderUnavailable) and requests == 1 and not events


def test_endpoints_that_differ_get_their_own_clients(services) -> None:
    with FaultServer(tokens(1), keep_alive=True) as server:
        url = server.url + "/v1"
        a = remote(services, url, "A")
        b = remote(services, url, "B")  # the same endpoint: shares A's client
        c = remote(services, url, "C", stall_timeout_s=5.0)  # another stall timeout
        factory = ProviderFactory(services.agents, services.local)

        async def go() -> None:
            for agent in (a, b, c, a):
                await turn(factory, agent)
            await factory.aclose()

        asyncio.run(go())
        connections = server.connections
    assert factory.clients.created == 2 and connections == 2


def test_a_stall_through_the_factory_is_one_request_and_one_wait(services) -> None:
    """The CLI case: headers, then nothing. One stall timeout, not three silent attempts."""
    with FaultServer(Reply(body=[], after="stall")) as server:
        agent = remote(services, server.url + "/v1", stall_timeout_s=1.0)
        factory = ProviderFactory(services.agents, services.local)

        async def go() -> BaseException | None:
            try:
                await turn(factory, agent)
            except Stalled as exc:
                return exc
            finally:
                await factory.aclose()
            return None

        error = asyncio.run(go())
        requests = len(server.requests)
    assert isinstance(error, Stalled) and error.retryable and requests == 1


def test_outside_an_event_loop_nothing_is_pooled(services) -> None:
    agent = remote(services, "http://127.0.0.1:9/v1")
    factory = ProviderFactory(services.agents, services.local)
    provider = factory.for_agent(agent)
    assert len(factory.clients) == 0
    asyncio.run(provider.aclose())


def test_a_pool_key_holds_no_api_key() -> None:
    key = ClientKey.of("https://api.example/v1/", KEY)
    assert KEY not in repr(key) and key.key_digest and key.base_url == "https://api.example/v1"
    assert key != ClientKey.of("https://api.example/v1", "sk-another-key-0123456789")
    assert ClientPool().lease(key) is None  # no running loop


@pytest.mark.slow
def test_second_turn_to_a_real_llama_server_reuses_the_connection(services) -> None:
    with llama_server() as base_url:
        agent = remote(services, base_url, model="smollm2", max_tokens=4)
        factory = ProviderFactory(services.agents, services.local)

        async def go():  # type: ignore[no-untyped-def]
            first = await turn(factory, agent)
            second = await turn(factory, agent)
            await factory.aclose()
            return first, second

        (events1, first), (events2, second) = asyncio.run(go())
    assert text(events1) and text(events2)
    assert first.connect_ms is not None and first.connect_ms > 0
    assert second.connect_ms == 0.0 and factory.clients.created == 1
