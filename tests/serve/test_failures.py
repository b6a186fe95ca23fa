"""Calls that go wrong after the request was accepted: an upstream that drops mid-reply or
limits requests, a local queue that is full or too slow, a client that leaves while it waits.
The remote agents' upstream is ``FaultServer`` (a scripted stand-in for an OpenAI-compatible
API that misbehaves on purpose)."""

from __future__ import annotations

import asyncio
import json
import time

from desktop.serve.config import ServeConfig
from tests.helpers.fault_server import Reply, error_reply, ticking_tokens
from tests.serve.support import (
    STARTER_ID,
    assert_openai_error,
    chat_body,
    client,
    post_chat,
    remote_upstream,
    serving,
    stats_rows,
)

PATH = "/v1/chat/completions"


def _cut_short(_request) -> Reply:
    """Two tokens, then the connection drops: no finish reason, no [DONE]."""
    tokens = ticking_tokens(None)
    return Reply(body=[next(tokens), next(tokens)], after="drop")


# An upstream that limits requests: a 429 that asks to wait an hour.
SLOW_DOWN = error_reply(429, {"error": {"message": "slow down"}}, **{"Retry-After": "3600"})


def test_an_upstream_dropping_mid_stream_ends_the_stream_with_an_error_event(services) -> None:
    with remote_upstream(services, _cut_short):

        async def main():
            async with serving(services) as server, client(server) as http:
                response = await http.post(PATH, json=chat_body("remote", stream=True))
                return response, [e.state for e in server.activity.recent()]

        response, states = asyncio.run(main())
    assert response.status_code == 200  # the headers went out with the first token
    events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert "[DONE]" not in events
    text = "".join(json.loads(e)["choices"][0]["delta"].get("content") or "" for e in events[:-1])
    assert text == "tok0 tok1 "
    error = json.loads(events[-1])["error"]
    assert "dropped" in error["message"] and error["type"] == "server_error"
    assert "Traceback" not in response.text
    assert states == ["error"]
    (row,) = stats_rows(services)
    assert row["finish_reason"] == "error" and row["error_kind"] == "unavailable"


def test_an_upstream_dropping_mid_reply_is_not_a_complete_whole_reply(services) -> None:
    with remote_upstream(services, _cut_short):
        response = post_chat(services, chat_body("remote"))
    assert stats_rows(services)[0]["finish_reason"] == "error"
    assert response.status_code >= 500, response.text


def test_an_upstream_rate_limit_before_any_output_is_a_429(services) -> None:
    with remote_upstream(services, SLOW_DOWN):
        response = post_chat(services, chat_body("remote", stream=True))
    error = assert_openai_error(response, 429, "upstream_rate_limited")
    assert error["type"] == "rate_limit_error" and "3600" in error["message"]
    assert int(response.headers["retry-after"]) > 0


def test_an_upstream_rate_limits_wait_is_passed_on_in_retry_after(services) -> None:
    with remote_upstream(services, SLOW_DOWN):
        response = post_chat(services, chat_body("remote"))
    assert int(response.headers["retry-after"]) >= 3600


def test_a_full_local_queue_is_429_and_a_slow_one_503_both_with_retry_after(services) -> None:
    async def main():
        config = ServeConfig(port=0, queue_limit=1, queue_timeout_s=0.3)
        async with serving(services, config) as server, client(server) as http:
            server.gate.running = server.gate.slots  # every local place is taken
            waiting = asyncio.ensure_future(http.post(PATH, json=chat_body(STARTER_ID)))
            while server.gate.waiting == 0:
                await asyncio.sleep(0.01)
            states = [e.state for e in server.activity.recent()]
            full = await http.post(PATH, json=chat_body(STARTER_ID))
            t0 = time.monotonic()
            slow = await waiting
            waited = time.monotonic() - t0
            server.gate.running = 0
            return full, slow, waited, states

    full, slow, waited, states = asyncio.run(main())
    assert states == ["waiting"]  # the Server page shows it waiting
    assert_openai_error(full, 429, "queue_full")
    assert_openai_error(slow, 503, "queue_timeout")
    assert waited < 5
    for response in (full, slow):
        assert int(response.headers["retry-after"]) >= 1
    assert stats_rows(services) == []  # neither reached the model
    assert not services.local.worker.alive


def test_a_client_that_leaves_the_queue_gives_up_its_place(services) -> None:
    async def main() -> int:
        config = ServeConfig(port=0, queue_limit=4, queue_timeout_s=1.5)
        async with serving(services, config) as server:
            server.gate.running = server.gate.slots
            _reader, writer = await asyncio.open_connection("127.0.0.1", server.config.port)
            body = json.dumps(chat_body(STARTER_ID)).encode()
            writer.write(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
            while server.gate.waiting == 0:
                await asyncio.sleep(0.01)
            writer.close()
            await writer.wait_closed()
            await asyncio.sleep(1)
            left = server.gate.waiting
            while server.gate.waiting:  # the ghost's own timeout ends it (a quick stop)
                await asyncio.sleep(0.05)
            server.gate.running = 0
            return left

    assert asyncio.run(main()) == 0


def test_each_request_is_in_the_activity_list_with_its_outcome(services) -> None:
    with remote_upstream(services, lambda _r: Reply(body=ticking_tokens(3))):

        async def main():
            async with serving(services) as server, client(server) as http:
                seen = []
                server.activity.listeners.append(lambda e: seen.append(e.state))
                await http.post(PATH, json=chat_body("remote", stream=True))
                await http.post(PATH, json=chat_body("nope"))
                return server.activity.recent(), seen

        (refused, done), seen = asyncio.run(main())
    assert (refused.state, refused.status, refused.model) == ("refused", 404, "nope")
    assert "nope" in refused.error
    assert (done.state, done.agent, done.stream) == ("done", "Remote", True)
    (row,) = stats_rows(services)
    assert done.stats_id == row["id"] and done.output_tokens == 3
    assert seen[:3] == ["received", "answering", "done"]
