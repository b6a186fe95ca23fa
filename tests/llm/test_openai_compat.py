"""The OpenAI-compatible provider against real and deliberately broken peers on loopback."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest

from desktop.llm.errors import AuthError, BadResponse, ProviderUnavailable, RateLimited
from desktop.llm.events import Finished, TextDelta
from desktop.llm.openai_compat import OpenAICompatProvider
from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
from tests.helpers.servers import closed_port, llama_server

REQUEST = ChatRequest(
    model="smollm2",
    messages=(ChatMessage("user", "Say hi."),),
    sampling=Sampling(max_tokens=12, temperature=0.0, seed=1),
)


async def collect(provider: OpenAICompatProvider) -> list:
    try:
        return [e async for e in provider.stream(REQUEST)]
    finally:
        await provider.aclose()


@pytest.mark.slow
def test_streams_text_from_llama_cpp_server() -> None:
    with llama_server() as base:
        events = asyncio.run(collect(OpenAICompatProvider(base, None, label="llama.cpp")))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.strip()
    assert isinstance(events[-1], Finished) and events[-1].reason in ("stop", "length")
    assert sum(isinstance(e, Finished) for e in events) == 1


@pytest.mark.slow
def test_wrong_key_is_an_auth_error_naming_the_server() -> None:
    with llama_server(api_key="sk-right") as base, pytest.raises(AuthError) as info:
        asyncio.run(collect(OpenAICompatProvider(base, "sk-wrong", label="My box")))
    assert "My box" in info.value.user_message and "sk-wrong" not in info.value.user_message


def test_connection_refused_says_what_to_check() -> None:
    base = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(ProviderUnavailable) as info:
        asyncio.run(collect(OpenAICompatProvider(base, None, label="Box")))
    assert "Cannot reach Box" in info.value.user_message


class RawServer:
    """Stands in for a misbehaving OpenAI-compatible server: answers with fixed raw bytes."""

    def __init__(self, response: bytes, close_early: bool = False) -> None:
        self.response = response
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.recv(65536)
            conn.sendall(self.response)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw_server() -> Iterator[type[RawServer]]:
    servers: list[RawServer] = []

    def make(response: bytes) -> RawServer:
        server = RawServer(response)
        servers.append(server)
        return server

    yield make  # type: ignore[misc]
    for s in servers:
        s.close()


SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


def test_dropped_connection_mid_stream_is_unavailable(raw_server) -> None:
    chunk = b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n'
    server = raw_server(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 9999\r\n\r\n"
        + chunk
    )
    provider = OpenAICompatProvider(f"http://127.0.0.1:{server.port}/v1", None, label="Flaky")
    seen: list = []

    async def run() -> None:
        try:
            async for e in provider.stream(REQUEST):
                seen.append(e)
        finally:
            await provider.aclose()

    with pytest.raises(ProviderUnavailable) as info:
        asyncio.run(run())
    assert any(isinstance(e, TextDelta) and e.text == "Hel" for e in seen)
    assert "dropped" in info.value.user_message


def test_garbage_in_stream_is_bad_response(raw_server) -> None:
    server = raw_server(SSE_HEAD + b"data: {not json\n\n")
    with pytest.raises(BadResponse):
        asyncio.run(collect(OpenAICompatProvider(f"http://127.0.0.1:{server.port}/v1", None)))


def test_429_carries_retry_after(raw_server) -> None:
    server = raw_server(
        b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 20\r\nContent-Length: 2\r\n"
        b"Connection: close\r\n\r\n{}"
    )
    with pytest.raises(RateLimited) as info:
        asyncio.run(collect(OpenAICompatProvider(f"http://127.0.0.1:{server.port}/v1", None)))
    assert info.value.retry_after == 20 and "20 s" in info.value.user_message
