"""Every failure a remote call can meet, injected on loopback, for each provider kind.

Each case checks what a person sees: the error type (which decides Retry and wording), that
the message names the endpoint and says what to do, that text received before the failure was
yielded first, and that the API key never appears.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop.llm.errors import (
    AuthError,
    BadResponse,
    ContextTooLong,
    ModelNotFound,
    ProviderUnavailable,
    RateLimited,
    Stalled,
    UserError,
)
from desktop.llm.events import Finished, Timing
from tests.helpers.fault_server import (
    FaultServer,
    Recorded,
    Reply,
    error_reply,
    make_tls_files,
    replay,
    ticking_tokens,
)
from tests.helpers.servers import closed_port
from tests.llm.streams import KINDS, REQUEST, cancel_after_deltas, make, run, text

KEY = "sk-secret-key-ABCDEF123456"
GEMINI_KEY = "AIzaSecretKeyForTests_0123456789"
CONTEXT_BODIES = {
    "openai": {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your "
            "messages resulted in 9000 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    },
    "anthropic": {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
    },
    "gemini": {
        "error": {
            "code": 400,
            "message": "The input token count (1100000) exceeds the maximum number of tokens "
            "allowed (1048576).",
            "status": "INVALID_ARGUMENT",
        }
    },
}
OPENING_TEXT = {
    "openai": b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n',
    "anthropic": (
        b'event: message_start\ndata: {"type":"message_start","message":{"model":"m",'
        b'"usage":{"input_tokens":3}}}\n\n'
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"Hel"}}\n\n'
    ),
    "gemini": (
        b'data: {"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"}}]}\r\n\r\n'
    ),
}


def stream_of(kind: str) -> Iterator[bytes]:
    """Endless, slow token streams in each wire format (for cancel tests)."""
    n = 0
    if kind == "openai":
        yield from ticking_tokens(None)
    while True:
        n += 1
        if kind == "anthropic":
            delta = {"type": "content_block_delta", "index": 0}
            delta["delta"] = {"type": "text_delta", "text": f"t{n} "}  # type: ignore[assignment]
            yield f"event: content_block_delta\ndata: {json.dumps(delta)}\n\n".encode()
        else:
            frame = {"candidates": [{"content": {"parts": [{"text": f"t{n} "}]}}]}
            yield f"data: {json.dumps(frame)}\r\n\r\n".encode()


def assert_no_key(error: UserError) -> None:
    for secret in (KEY, GEMINI_KEY, "ABCDEF123456"):
        assert secret not in error.user_message
        assert secret not in str(error)


def call(kind: str, reply: Reply | list[Reply], **kw: object) -> tuple[list, UserError | None]:
    with FaultServer(reply) as server:
        return asyncio.run(run(make(kind, server.url, key=KEY, **kw)))  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("status", [401, 403])
def test_bad_key_is_auth_error_naming_the_endpoint(kind: str, status: int) -> None:
    _, error = call(kind, error_reply(status, {"error": {"message": "invalid x-api-key"}}))
    assert isinstance(error, AuthError) and not error.retryable
    assert f"Test {kind}" in error.user_message and "key" in error.user_message


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_model_is_model_not_found_naming_the_model(kind: str) -> None:
    body = {"error": {"message": "model: test-model not found", "type": "not_found_error"}}
    _, error = call(kind, error_reply(404, body))
    assert isinstance(error, ModelNotFound) and "test-model" in error.user_message


@pytest.mark.parametrize("kind", KINDS)
def test_http_429_becomes_rate_limited_with_retry_after(kind: str) -> None:
    _, error = call(
        kind, error_reply(429, {"error": {"message": "slow down"}}, **{"Retry-After": "7"})
    )
    assert isinstance(error, RateLimited) and error.retryable
    assert error.retry_after == 7 and "7 s" in error.user_message


def test_gemini_429_retry_delay_in_body_is_used() -> None:
    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "Resource has been exhausted (e.g. check quota).",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "23s"}],
        }
    }
    _, error = call("gemini", error_reply(429, body))
    assert isinstance(error, RateLimited) and error.retry_after == 23


def test_out_of_quota_429_is_not_retried() -> None:
    body = {"error": {"message": "You exceeded your current quota.", "code": "insufficient_quota"}}
    _, error = call("openai", error_reply(429, body))
    assert isinstance(error, RateLimited) and not error.retryable
    assert "billing" in error.user_message


@pytest.mark.parametrize("kind", KINDS)
def test_context_too_long_is_its_own_error(kind: str) -> None:
    _, error = call(kind, error_reply(400, CONTEXT_BODIES[kind]))
    assert isinstance(error, ContextTooLong) and "new conversation" in error.user_message


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("status", [500, 502, 503, 529])
def test_server_errors_are_retryable_unavailable(kind: str, status: int) -> None:
    _, error = call(kind, error_reply(status, {"error": {"message": "upstream hiccup"}}))
    assert isinstance(error, ProviderUnavailable) and error.retryable
    assert str(status) in error.user_message and "upstream hiccup" in error.user_message


@pytest.mark.parametrize("kind", KINDS)
def test_key_echoed_by_the_server_never_reaches_the_message(kind: str) -> None:
    """A server (or proxy) that echoes the request headers in its error bodies."""

    def echo(status: int):
        def handler(request: Recorded) -> Reply:
            echoed = {k: v for k, v in request.headers.items()}
            body = {"error": {"message": f"bad request, you sent {json.dumps(echoed)}"}}
            return error_reply(status, body)

        return handler

    for status in (401, 400, 500):
        with FaultServer(echo(status)) as server:
            key = GEMINI_KEY if kind == "gemini" else KEY
            _, error = asyncio.run(run(make(kind, server.url, key=key)))
        assert error is not None
        assert key in server.requests[0].body.decode() or key in str(server.requests[0].headers)
        assert_no_key(error)


@pytest.mark.parametrize("kind", KINDS)
def test_key_echoed_in_an_error_event_mid_stream_is_redacted(kind: str) -> None:
    message = f"upstream said: Authorization: Bearer {KEY}"
    if kind == "anthropic":
        event = {"type": "error", "error": {"type": "api_error", "message": message}}
        body = f"event: error\ndata: {json.dumps(event)}\n\n".encode()
    else:
        body = f"data: {json.dumps({'error': {'message': message, 'code': 500}})}\n\n".encode()
    _, error = call(kind, Reply(body=[OPENING_TEXT[kind], body]))
    assert error is not None
    assert_no_key(error)


@pytest.mark.parametrize("kind", KINDS)
def test_connection_refused_says_to_check_the_server(kind: str) -> None:
    provider = make(kind, f"http://127.0.0.1:{closed_port()}", key=KEY)
    _, error = asyncio.run(run(provider))
    assert isinstance(error, ProviderUnavailable)
    assert "refused" in error.user_message and "running" in error.user_message
    assert error.retryable is False  # said at once, not after silent retries


def test_dns_failure_says_to_check_the_host_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stands in for a resolver that does not know the host (no DNS traffic leaves the box)."""
    real = socket.getaddrinfo

    def resolve(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        if host == "api.nowhere.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    provider = make("openai", "https://api.nowhere.invalid", key=KEY, label="Groq")
    _, error = asyncio.run(run(provider))
    assert isinstance(error, ProviderUnavailable) and not error.retryable
    assert "api.nowhere.invalid" in error.user_message and "Groq" in error.user_message


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return make_tls_files(Path(tmp_path_factory.mktemp("tls")))


def test_untrusted_tls_certificate_is_refused_and_names_the_ca_bundle(tls) -> None:  # type: ignore[no-untyped-def]
    with FaultServer(replay("openrouter_reasoning.sse"), tls=tls.server_context()) as server:
        _, error = asyncio.run(run(make("openai", server.url, key=KEY)))
    assert isinstance(error, ProviderUnavailable) and not error.retryable
    assert "certificate" in error.user_message and "CA bundle" in error.user_message
    assert not server.requests  # nothing (no key) was sent over the untrusted connection


def test_custom_ca_bundle_lets_the_private_server_through_and_times_tls(tls) -> None:  # type: ignore[no-untyped-def]
    with FaultServer(replay("openrouter_reasoning.sse"), tls=tls.server_context()) as server:
        provider = make("openai", server.url, key=KEY, ca_bundle=str(tls.ca_pem))
        events, error = asyncio.run(run(provider))
    assert error is None and text(events) == "Hi!"
    timing = next(e for e in events if isinstance(e, Timing))
    assert timing.connect_ms is not None and timing.headers_ms is not None


@pytest.mark.parametrize("kind", KINDS)
def test_stall_between_chunks_fails_after_the_stall_timeout_keeping_text(kind: str) -> None:
    reply = Reply(body=[OPENING_TEXT[kind]], after="stall")
    events, error = call(kind, reply, stall_timeout_s=0.3)
    assert text(events) == "Hel"
    assert isinstance(error, Stalled) and "0.3 s" in error.user_message
    assert "stall timeout" in error.user_message and "text so far is kept" in error.user_message
    assert "middle of the reply" in error.user_message


@pytest.mark.parametrize("kind", KINDS)
def test_stall_after_the_headers_before_any_text_says_what_may_be_happening(kind: str) -> None:
    events, error = call(kind, Reply(body=[], after="stall"), stall_timeout_s=0.3)
    assert not text(events)
    assert isinstance(error, Stalled) and error.retryable
    assert "sent nothing for 0.3 s" in error.user_message
    assert "long prompt" in error.user_message and "Retry" in error.user_message
    assert "text so far" not in error.user_message  # there is none


def test_stall_while_listing_models_is_a_stall_of_the_list() -> None:
    async def go(url: str) -> UserError | None:
        provider = make("openai", url, stall_timeout_s=0.3)
        try:
            await provider.list_models()
        except UserError as exc:
            return exc
        finally:
            await provider.aclose()
        return None

    with FaultServer(Reply(body=[], content_type="application/json", after="stall")) as server:
        error = asyncio.run(go(server.url))
    assert isinstance(error, Stalled) and "listing its models" in error.user_message


def test_payload_too_large_says_the_request_is_too_big_not_the_model_name() -> None:
    page = b"<html><body><h1>413 Request Entity Too Large</h1></body></html>"
    _, error = call("openai", error_reply(413, page))
    assert isinstance(error, ContextTooLong)  # the pane offers to leave out older messages
    assert "HTTP 413" in error.user_message and "too large" in error.user_message
    assert "model name" not in error.user_message


# Each uncommon status in its own words: (status, error type, words it must say, retryable).
UNCOMMON = [
    (402, RateLimited, "payment is required", False),
    (405, BadResponse, "base URL", False),
    (408, ProviderUnavailable, "waiting for the request", True),
    (409, ProviderUnavailable, "conflicting", True),
    (410, ModelNotFound, "no longer offers the model “test-model”", False),
    (422, BadResponse, "sampling values", False),
    (451, BadResponse, "legal reasons", False),
    (502, ProviderUnavailable, "gateway in front of", True),
    (503, ProviderUnavailable, "unavailable or overloaded", True),
    (504, ProviderUnavailable, "gateway in front of", True),
]


@pytest.mark.parametrize(("status", "cls", "words", "retryable"), UNCOMMON)
def test_uncommon_statuses_read_right(status: int, cls: type, words: str, retryable: bool) -> None:
    _, error = call("openai", error_reply(status, {"error": {"message": "why"}}))
    assert type(error) is cls and error.retryable is retryable
    assert words in error.user_message and f"HTTP {status}: why" in error.user_message
    assert "Test openai (127.0.0.1)" in error.user_message
    if status != 422:
        assert "model name" not in error.user_message


def test_unprocessable_request_about_context_is_context_too_long() -> None:
    body = {"error": {"message": "This model's maximum context length is 4096 tokens."}}
    _, error = call("openai", error_reply(422, body))
    assert isinstance(error, ContextTooLong)


@pytest.mark.parametrize("kind", KINDS)
def test_connection_dropped_mid_stream_keeps_text(kind: str) -> None:
    events, error = call(kind, Reply(body=[OPENING_TEXT[kind]], after="drop"))
    assert text(events) == "Hel"
    assert isinstance(error, ProviderUnavailable) and "dropped" in error.user_message


@pytest.mark.parametrize("kind", KINDS)
def test_clean_close_before_the_end_marker_is_not_a_finished_reply(kind: str) -> None:
    events, error = call(kind, Reply(body=[OPENING_TEXT[kind]]))
    assert text(events) == "Hel" and not any(isinstance(e, Finished) for e in events)
    assert isinstance(error, ProviderUnavailable) and "before it was complete" in str(error)


@pytest.mark.parametrize("kind", KINDS)
def test_html_page_instead_of_event_stream_is_bad_response(kind: str) -> None:
    page = Reply(body=b"<html><body>Sign in to the Wi-Fi</body></html>", content_type="text/html")
    _, error = call(kind, page)
    assert isinstance(error, BadResponse) and "base URL" in error.user_message


@pytest.mark.parametrize("kind", KINDS)
def test_malformed_json_in_the_stream_is_bad_response_after_text(kind: str) -> None:
    bad = (
        b"event: content_block_delta\ndata: {not json\n\n"
        if kind == "anthropic"
        else b"data: {not json\n\n"
    )
    events, error = call(kind, Reply(body=[OPENING_TEXT[kind], bad]))
    assert text(events) == "Hel"
    assert isinstance(error, BadResponse) and "not valid JSON" in error.user_message


def test_openai_error_chunk_inside_200_stream_is_unavailable_after_text() -> None:
    events, error = call("openai", replay("openai_error_event.sse"))
    assert text(events) == "Half"
    assert isinstance(error, ProviderUnavailable) and "Sorry about that" in error.user_message


def test_openai_error_chunk_saying_context_is_context_too_long() -> None:
    chunk = {
        "error": {"message": "maximum context length exceeded", "code": "context_length_exceeded"}
    }
    _, error = call("openai", Reply(body=f"data: {json.dumps(chunk)}\n\n".encode()))
    assert isinstance(error, ContextTooLong)


@pytest.mark.parametrize("kind", KINDS)
def test_cancel_closes_the_http_stream_and_the_server_sees_it(kind: str) -> None:
    """Cancelled while the consumer is busy (the stream suspended between events), as when the
    user presses Stop: the server must see the disconnect before the provider is closed."""
    server = FaultServer(Reply(body=stream_of(kind), chunk_delay_s=0.02))

    async def go() -> tuple[int, bool]:
        provider = make(kind, server.url, key=KEY)
        seen = await cancel_after_deltas(provider, REQUEST, 3, then_busy=True)
        # The server notices within one chunk interval; 10 s only guards a hung test.
        noticed = await asyncio.to_thread(server.disconnected.wait, 10)
        await provider.aclose()
        return seen, noticed

    try:
        seen, noticed = asyncio.run(go())
    finally:
        server.close()
    assert noticed and seen == 3


def test_gemini_invalid_key_answered_with_400_is_an_auth_error() -> None:
    body = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}
            ],
        }
    }
    _, error = call("gemini", error_reply(400, body), label="Gemini")
    assert isinstance(error, AuthError) and "Gemini" in error.user_message


def test_redirect_is_not_followed_and_says_to_check_the_base_url() -> None:
    moved = Reply(status=301, body=b"", headers={"Location": "https://elsewhere.invalid/v1"})
    _, error = call("openai", moved)
    assert isinstance(error, BadResponse) and "base URL" in error.user_message
