"""The Anthropic provider against replayed Messages API streams (tests/data/anthropic_*)."""

from __future__ import annotations

import asyncio

from desktop.llm.errors import ProviderUnavailable
from desktop.llm.events import Finished, ReasoningDelta, RunInfo, TextDelta, Usage
from desktop.llm.provider import ChatRequest, Sampling
from tests.helpers.fault_server import FaultServer, Reply, fixture, replay
from tests.llm.streams import HISTORY, list_models, make, model_pages, only, reasoning, run, text


def test_thinking_is_reasoning_then_text_with_cached_prompt_usage() -> None:
    with FaultServer(replay("anthropic_thinking.sse")) as server:
        events, error = asyncio.run(run(make("anthropic", server.url)))
    assert error is None
    assert reasoning(events) == "The user wants a greeting in French."
    assert text(events) == "Bonjour à tous !"
    kinds = [type(e) for e in events if isinstance(e, TextDelta | ReasoningDelta)]
    assert kinds.index(TextDelta) > max(i for i, k in enumerate(kinds) if k is ReasoningDelta)
    assert only(events, RunInfo).model_reported == "claude-sonnet-4-5-20250929"
    usage = only(events, Usage)
    assert (usage.prompt_tokens, usage.cached_tokens, usage.output_tokens) == (1821, 1800, 42)
    assert usage.source == "reported"
    assert events[-1] == Finished("stop")


def test_request_sends_key_header_version_and_system_prompt_top_level() -> None:
    request = ChatRequest(
        model="claude-haiku-4-5",
        messages=HISTORY,
        sampling=Sampling(temperature=0.2, stop=("END",), seed=4),
    )
    with FaultServer(replay("anthropic_thinking.sse")) as server:
        asyncio.run(run(make("anthropic", server.url, key="sk-ant-abc123456"), request))
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/messages")
    assert sent.headers["x-api-key"] == "sk-ant-abc123456"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    body = sent.json()
    assert body["system"] == "Be brief."
    assert body["messages"] == [
        {"role": "user", "content": "One\n\nTwo"},
        {"role": "assistant", "content": "Ok"},
        {"role": "user", "content": "Three"},
    ]
    assert body["max_tokens"] == 4096 and body["stream"] is True
    assert body["stop_sequences"] == ["END"] and body["temperature"] == 0.2
    assert "seed" not in body


def test_thinking_budget_is_requested_on_top_of_max_tokens() -> None:
    with FaultServer(replay("anthropic_thinking.sse")) as server:
        provider = make("anthropic", server.url, thinking_budget_tokens=2000)
        asyncio.run(run(provider))
    body = server.requests[0].json()
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2000}
    assert body["max_tokens"] == 16 + 2000


def test_max_tokens_stop_reason_is_length() -> None:
    with FaultServer(replay("anthropic_max_tokens.sse")) as server:
        events, error = asyncio.run(run(make("anthropic", server.url)))
    assert error is None and text(events) == "One, two,"
    assert events[-1] == Finished("length")


def test_overloaded_error_event_after_text_keeps_text_and_is_retryable() -> None:
    with FaultServer(replay("anthropic_overloaded.sse")) as server:
        events, error = asyncio.run(run(make("anthropic", server.url, label="Claude")))
    assert text(events) == "Partial answer"
    assert isinstance(error, ProviderUnavailable) and error.retryable
    assert "Claude" in error.user_message and "Overloaded" in error.user_message
    assert not any(isinstance(e, Finished) for e in events)


def test_stream_without_message_stop_is_reported_as_cut_short() -> None:
    data = fixture("anthropic_thinking.sse")
    cut = data[: data.index(b"event: message_delta")]
    with FaultServer(Reply(body=[cut])) as server:
        events, error = asyncio.run(run(make("anthropic", server.url)))
    assert text(events) == "Bonjour à tous !"
    assert isinstance(error, ProviderUnavailable) and "before it was complete" in str(error)


def test_models_are_listed_across_pages() -> None:
    with FaultServer(model_pages("anthropic", "after_id=claude-haiku-4-5")) as server:
        models = asyncio.run(list_models(make("anthropic", server.url)))
    assert models == ["claude-3-haiku-20240307", "claude-haiku-4-5", "claude-sonnet-4-5-20250929"]
    assert server.requests[0].path.startswith("/v1/models?limit=")
    assert server.requests[0].headers["x-api-key"]
    assert len(server.requests) == 2
