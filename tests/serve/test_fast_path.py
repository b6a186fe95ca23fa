"""What the server keeps and merges to answer sooner, and that it never answers stale for it.

- The model list (agents by model id, and how each is served) is kept between requests: an
  agent made, renamed, hidden or deleted in this process, or by another connection to the same
  database (the ``simi`` command beside the window), is seen by the very next request.
- A streamed reply's headers and its first token leave in one write (one wake-up of the
  client instead of two: ``bench/serve.py``'s ``ttft_overhead_ms``).

The upstream is ``FaultServer`` (a scripted stand-in for an OpenAI-compatible server)."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import time
from collections.abc import Iterator

from desktop.serve.server import _CoalescingTransport
from desktop.settings.paths import AppPaths
from tests.helpers.fault_server import FaultServer, Reply, ticking_tokens
from tests.serve.support import chat_body, client, remote, root, serving


async def _ids(server) -> list[str]:
    async with client(server) as http:
        response = await http.get("/v1/models")
    assert response.status_code == 200, response.text
    return sorted(m["id"] for m in response.json()["data"])


def test_the_model_list_follows_every_change_at_the_next_request(services) -> None:
    with FaultServer(Reply(body=list(ticking_tokens(2)))) as upstream:
        base = upstream.url + "/v1"
        first = remote(services, base, name="Writer")

        async def main():
            seen = []
            async with serving(services) as server:
                seen.append(await _ids(server))
                second = remote(services, base, name="Reviewer")  # made here
                seen.append(await _ids(server))
                first_now = services.agents.update(first.with_changes(name="Editor"))  # renamed
                seen.append(await _ids(server))
                server.set_served(second.id, exposed=False)  # hidden from clients
                seen.append(await _ids(server))
                services.agents.delete(first_now)
                server.set_served(second.id, exposed=True)
                seen.append(await _ids(server))
                # another program's commit to the same file (the `simi` command beside the
                # window): a connection of its own, none of this process's stores
                other = sqlite3.connect(AppPaths.from_env().db_path)
                with other:
                    other.execute("UPDATE agents SET name = 'Critic' WHERE id = ?", [second.id])
                other.close()
                seen.append(await _ids(server))
                async with client(server) as http:  # and it answers under its new id at once
                    answer = await http.post("/v1/chat/completions", json=chat_body("critic"))
                return seen, answer

        seen, answer = asyncio.run(main())
    starter = "smollm2-local"
    assert seen == [
        [starter, "writer"],
        ["reviewer", starter, "writer"],
        ["editor", "reviewer", starter],
        ["editor", starter],
        ["reviewer", starter],
        ["critic", starter],
    ]
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "tok0 tok1 "


def _late_first_token() -> Iterator[bytes]:
    """The first token after a pause (the client is waiting by then), then the rest."""
    time.sleep(0.3)
    yield from ticking_tokens(3)


def test_a_streamed_replys_headers_and_first_token_reach_the_client_in_one_read(
    services,
) -> None:
    with FaultServer(lambda _request: Reply(body=_late_first_token())) as upstream:
        remote(services, upstream.url + "/v1")

        def first_read(address: str) -> bytes:
            host, port = address.removeprefix("http://").split(":")
            body = json.dumps(chat_body("remote", stream=True)).encode()
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(
                    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                return sock.recv(65536)  # blocks until the server's first write arrives

        async def main():
            async with serving(services) as server:
                reading = asyncio.ensure_future(asyncio.to_thread(first_read, root(server)))
                while not upstream.requests:  # the call is under way upstream
                    await asyncio.sleep(0.01)
                # (a client on another core often reads both at once anyway: the connection's
                # transport is the one that makes sure)
                transports = [c.transport for c in server._server.server_state.connections]
                return await reading, transports

        data, transports = asyncio.run(main())
    head, _, rest = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), data[:200]
    assert b"tok0" in rest, data  # the first token came with the headers, not a wake-up later
    assert transports and all(isinstance(t, _CoalescingTransport) for t in transports)


class _Recorder:
    """Stands in for asyncio's socket transport: what was written, in which calls."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = self.aborted = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


def test_writes_in_one_turn_of_the_loop_leave_together_and_close_sends_them_first() -> None:
    async def main():
        real = _Recorder()
        transport = _CoalescingTransport(real)  # type: ignore[arg-type]
        transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
        transport.write(b"data: first\n\n")
        assert real.writes == []  # held until the loop's next turn
        await asyncio.sleep(0)
        turns = [list(real.writes)]
        transport.write(b"data: second\n\n")
        await asyncio.sleep(0)
        turns.append(list(real.writes))
        transport.write(b"data: [DONE]\n\n")
        transport.close()  # what was written goes out before the close
        turns.append(list(real.writes))
        return real, transport, turns

    real, transport, turns = asyncio.run(main())
    assert turns == [
        [b"HTTP/1.1 200 OK\r\n\r\ndata: first\n\n"],
        [b"HTTP/1.1 200 OK\r\n\r\ndata: first\n\n", b"data: second\n\n"],
        [b"HTTP/1.1 200 OK\r\n\r\ndata: first\n\n", b"data: second\n\n", b"data: [DONE]\n\n"],
    ]
    assert real.closed
    assert transport.get_extra_info("peername") == "info:peername"  # the rest is the real one's


def test_an_aborted_connection_drops_what_was_held() -> None:
    async def main():
        real = _Recorder()
        transport = _CoalescingTransport(real)  # type: ignore[arg-type]
        transport.write(b"partial")
        transport.abort()
        await asyncio.sleep(0)
        return real

    real = asyncio.run(main())
    assert real.writes == [] and real.aborted
