"""The OpenAI-compatible provider against the real llama_cpp.server and replayed streams."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from desktop.llm.connection import test_connection as check_connection
from desktop.llm.errors import AuthError, ContextTooLong
from desktop.llm.events import Finished, ReasoningDelta, RunInfo, TextDelta, Timing, Usage
from desktop.llm.openai_compat import OpenAICompatProvider
from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
from tests.helpers.fault_server import FaultServer, Reply, replay
from tests.helpers.servers import llama_server
from tests.llm.streams import cancel_after_deltas, make, only, reasoning, run, text

KEY = "sk-local-right-key-123"
REQUEST = ChatRequest(
    model="smollm2",
    messages=(ChatMessage("user", "Say hi."),),
    sampling=Sampling(max_tokens=12, temperature=0.0, seed=1),
)


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    """One real llama_cpp.server (starter model, API key on) for this module's slow tests."""
    with llama_server(api_key=KEY) as base:
        yield base


@pytest.mark.slow
def test_streams_text_with_counted_usage_and_client_timing(llama: str) -> None:
    provider = OpenAICompatProvider(llama, KEY, label="llama.cpp")
    events, error = asyncio.run(run(provider, REQUEST))
    assert error is None and text(events).strip()
    assert sum(isinstance(e, Finished) for e in events) == 1
    assert isinstance(events[-1], Finished) and events[-1].reason in ("stop", "length")
    # llama_cpp.server sends no usage: the provider counts, one token per delta, and says so.
    usage = only(events, Usage)
    assert usage.source == "counted"
    assert usage.output_tokens == sum(isinstance(e, TextDelta) for e in events)
    assert usage.prompt_tokens and usage.prompt_tokens > 0
    timing = next(e for e in events if isinstance(e, Timing))
    assert timing.connect_ms is not None and timing.headers_ms is not None
    assert timing.headers_ms >= timing.connect_ms
    assert only(events, RunInfo).model_reported == "smollm2"


@pytest.mark.slow
def test_models_list_and_connection_report_from_the_real_server(llama: str) -> None:
    async def go() -> tuple[list[str], object]:
        provider = OpenAICompatProvider(llama, KEY, label="My box")
        try:
            return await provider.list_models(), await check_connection(provider, label="My box")
        finally:
            await provider.aclose()

    models, report = asyncio.run(go())
    assert len(models) == 1 and models[0].endswith(".gguf")
    assert report.ok and report.model_count == 1  # type: ignore[attr-defined]
    assert "My box" in report.message  # type: ignore[attr-defined]


@pytest.mark.slow
def test_wrong_key_is_an_auth_error_naming_the_server(llama: str) -> None:
    provider = OpenAICompatProvider(llama, "sk-wrong-key-456", label="My box")
    events, error = asyncio.run(run(provider, REQUEST))
    assert isinstance(error, AuthError) and "My box" in error.user_message
    assert "sk-wrong-key-456" not in error.user_message and not events


@pytest.mark.slow
def test_cancel_mid_reply_stops_the_call_and_the_server_serves_the_next(llama: str) -> None:
    long = ChatRequest(
        model="smollm2",
        messages=(ChatMessage("user", "Count from 1 to 500, one number per line."),),
        sampling=Sampling(max_tokens=400, temperature=0.0),
    )

    async def go() -> tuple[int, str]:
        provider = OpenAICompatProvider(llama, KEY, label="llama.cpp")
        cancelled_at = await cancel_after_deltas(provider, long, 1)
        events, error = await run(provider, REQUEST)
        assert error is None
        return cancelled_at, text(events)

    cancelled_at, after = asyncio.run(go())
    assert cancelled_at < 400
    assert after.strip()


def test_request_asks_for_usage_and_sends_bearer_key() -> None:
    with FaultServer(replay("openrouter_reasoning.sse")) as server:
        asyncio.run(run(make("openai", server.url, key="sk-or-abc123456")))
    sent = server.requests[0]
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == "Bearer sk-or-abc123456"
    body = sent.json()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}


def test_openrouter_reasoning_cost_and_cached_tokens_are_reported() -> None:
    with FaultServer(replay("openrouter_reasoning.sse")) as server:
        events, error = asyncio.run(run(make("openai", server.url)))
    assert error is None
    assert reasoning(events) == "Thinking briefly." and text(events) == "Hi!"
    assert any(isinstance(e, ReasoningDelta) for e in events)
    usage = only(events, Usage)
    assert usage == Usage(
        prompt_tokens=12,
        cached_tokens=8,
        output_tokens=40,
        reasoning_tokens=37,
        source="reported",
        cost_usd=0.0000912,
    )
    assert only(events, RunInfo).model_reported == "deepseek/deepseek-r1"
    assert events[-1] == Finished("stop")


def test_llama_cpp_server_timings_become_timing_and_reported_usage() -> None:
    with FaultServer(replay("llamacpp_timings.sse")) as server:
        events, error = asyncio.run(run(make("openai", server.url, key=None)))
    assert error is None and text(events) == "Hello world."
    server_timing = [e for e in events if isinstance(e, Timing) and e.decode_ms is not None]
    assert server_timing == [
        Timing(
            prefill_ms=12.5,
            decode_ms=30.0,
            prompt_eval_tokens=7,
            decode_tokens=3,
            reported_by="server",
        )
    ]  # predicted_n: the evaluations predicted_ms covers (decode speed 100 tok/s, as it says)
    assert only(events, Usage) == Usage(
        prompt_tokens=12, cached_tokens=5, output_tokens=3, source="reported"
    )
    assert "authorization" not in server.requests[0].headers


def test_context_overflow_body_from_llama_cpp_server_is_context_too_long() -> None:
    reply = replay("openai_context_too_long.json", status=400, chunked=False)
    with FaultServer(reply) as server:
        _, error = asyncio.run(run(make("openai", server.url, label="llama.cpp")))
    assert isinstance(error, ContextTooLong)
    assert "llama.cpp" in error.user_message and "2048" in error.user_message


def test_empty_200_reply_says_the_prompt_may_not_fit() -> None:
    """llama_cpp.server answers a streamed over-long prompt with 200 and no events."""
    with FaultServer(Reply(body=b"")) as server:
        events, error = asyncio.run(run(make("openai", server.url)))
    assert error is not None and "context" in error.user_message and not events[1:]
