"""RetryingProvider around real providers and a fault server that fails on cue."""

from __future__ import annotations

import asyncio

import pytest

from desktop.llm.errors import AuthError, ProviderUnavailable, RateLimited, Stalled
from desktop.llm.events import Finished, RunInfo, TextDelta
from desktop.llm.retry import RetryingProvider
from tests.helpers.fault_server import FaultServer, Reply, error_reply, fixture, replay
from tests.llm.streams import KINDS, make, only, run, text


class Sleeps:
    """Records the waits instead of waiting (so tests never depend on the clock)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def retried(kind: str, replies: list[Reply], **kw: object):  # type: ignore[no-untyped-def]
    sleeps = Sleeps()
    with FaultServer(replies) as server:
        provider = RetryingProvider(make(kind, server.url), sleep=sleeps, **kw)  # type: ignore[arg-type]
        events, error = asyncio.run(run(provider))
    return events, error, sleeps.delays, len(server.requests)


OK = replay("openrouter_reasoning.sse")
BUSY = error_reply(503, {"error": {"message": "busy"}})


def test_server_error_before_first_token_is_retried_with_backoff() -> None:
    events, error, delays, calls = retried("openai", [BUSY, BUSY, OK], base_delay_s=0.5)
    assert error is None and text(events) == "Hi!"
    assert delays == [0.5, 1.0] and calls == 3
    assert sum(isinstance(e, Finished) for e in events) == 1


def test_gives_up_after_the_last_attempt_with_the_servers_error() -> None:
    events, error, delays, calls = retried("openai", [BUSY], attempts=3, base_delay_s=1.0)
    assert isinstance(error, ProviderUnavailable) and "busy" in error.user_message
    assert delays == [1.0, 2.0] and calls == 3 and not events


def test_rate_limit_waits_as_long_as_the_server_asks() -> None:
    limited = error_reply(429, {"error": {"message": "slow"}}, **{"Retry-After": "4"})
    _, error, delays, calls = retried("openai", [limited, OK])
    assert error is None and delays == [4.0] and calls == 2


def test_rate_limit_longer_than_the_cap_is_shown_at_once() -> None:
    limited = error_reply(429, {"error": {"message": "slow"}}, **{"Retry-After": "120"})
    _, error, delays, calls = retried("openai", [limited, OK], max_delay_s=30)
    assert isinstance(error, RateLimited) and error.retry_after == 120
    assert delays == [] and calls == 1


def test_bad_key_is_not_retried() -> None:
    _, error, delays, calls = retried("openai", [error_reply(401, {}), OK])
    assert isinstance(error, AuthError) and delays == [] and calls == 1


def test_failure_after_the_first_token_is_not_retried_and_keeps_text() -> None:
    first = b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
    events, error, delays, calls = retried("openai", [Reply(body=[first], after="drop"), OK])
    assert isinstance(error, ProviderUnavailable) and text(events) == "Hel"
    assert delays == [] and calls == 1


def test_error_event_before_any_text_is_retried_and_stats_describe_the_answer() -> None:
    """Anthropic overload after message_start but before text: the retry answers, and only
    its RunInfo reaches the caller."""
    data = fixture("anthropic_overloaded.sse")
    start = data[: data.index(b"event: content_block_start")]
    start = start.replace(b"claude-sonnet-4-5-20250929", b"claude-failed-attempt")
    overloaded = (
        b"event: error\n"
        b'data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )
    replies = [Reply(body=[start, overloaded]), replay("anthropic_thinking.sse")]
    events, error, delays, calls = retried("anthropic", replies)
    assert error is None and text(events) == "Bonjour à tous !"
    assert only(events, RunInfo).model_reported == "claude-sonnet-4-5-20250929"
    assert calls == 2 and len(delays) == 1


def test_retry_hook_hears_each_wait() -> None:
    heard: list[tuple[int, float, str]] = []
    sleeps = Sleeps()
    with FaultServer([BUSY, OK]) as server:
        provider = RetryingProvider(
            make("openai", server.url),
            base_delay_s=2,
            sleep=sleeps,
            on_retry=lambda n, d, e: heard.append((n, d, e.kind)),
        )
        asyncio.run(run(provider))
    assert heard == [(1, 2, "unavailable")]


def test_cancel_during_backoff_stops_retrying() -> None:
    async def go(url: str) -> None:
        waiting = asyncio.Event()

        async def sleep(delay: float) -> None:
            waiting.set()
            await asyncio.Event().wait()

        provider = RetryingProvider(make("openai", url), sleep=sleep)
        task = asyncio.create_task(run(provider))
        await waiting.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with FaultServer([BUSY, OK]) as server:
        asyncio.run(go(server.url))
    assert len(server.requests) == 1


def test_text_is_not_duplicated_by_a_retry() -> None:
    events, _, _, _ = retried("openai", [BUSY, OK])
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hi", "!"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_stall_before_the_first_token_is_not_retried_but_offers_retry(kind: str) -> None:
    """Headers, then nothing: the server may be reading a long prompt. One wait of the stall
    timeout, then the error at once (not three silent ones), still retryable by the person."""
    sleeps = Sleeps()
    with FaultServer(Reply(body=[], after="stall")) as server:
        inner = make(kind, server.url, stall_timeout_s=0.3)
        events, error = asyncio.run(run(RetryingProvider(inner, attempts=3, sleep=sleeps)))
        calls = len(server.requests)
    assert isinstance(error, Stalled) and error.kind == "stalled"
    assert error.retryable  # the Retry button may help
    assert calls == 1 and sleeps.delays == [] and not text(events)
    assert "0.3 s" in error.user_message and "Retry" in error.user_message
    assert "long prompt" in error.user_message and "text so far" not in error.user_message


def test_a_gateway_timeout_is_not_retried_automatically_either() -> None:
    timed_out = error_reply(504, {"error": {"message": "upstream timed out"}})
    _, error, delays, calls = retried("openai", [timed_out, OK])
    assert isinstance(error, ProviderUnavailable) and error.retryable
    assert calls == 1 and delays == [] and "504" in error.user_message


@pytest.mark.parametrize("status", [502, 503, 408])
def test_transient_gateway_and_server_statuses_are_still_retried(status: int) -> None:
    failed = error_reply(status, {"error": {"message": "hiccup"}})
    _, error, delays, calls = retried("openai", [failed, OK])
    assert error is None and calls == 2 and len(delays) == 1


def test_the_headers_timing_passes_while_the_server_is_still_silent() -> None:
    from desktop.llm.events import Timing

    sleeps = Sleeps()
    with FaultServer(Reply(body=b"", after="stall")) as server:  # headers, then nothing
        inner = make("openai", server.url, stall_timeout_s=0.5)
        provider = RetryingProvider(inner, sleep=sleeps)
        events, error = asyncio.run(run(provider))
    assert isinstance(error, Stalled)
    # before any text the caller heard that the server answered: "waiting for the first
    # token", not "connecting"
    assert any(isinstance(e, Timing) and e.headers_ms is not None for e in events)
    assert not any(isinstance(e, TextDelta) for e in events)
