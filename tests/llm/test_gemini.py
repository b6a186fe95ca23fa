"""The Gemini provider against replayed streamGenerateContent streams (tests/data/gemini_*)."""

from __future__ import annotations

import asyncio

from desktop.llm.errors import BadResponse, ProviderUnavailable
from desktop.llm.events import Finished, RunInfo, TextDelta, Usage
from desktop.llm.provider import ChatRequest, Sampling
from tests.helpers.fault_server import FaultServer, Reply, fixture, replay, sse_chunks
from tests.llm.streams import (
    HISTORY,
    REQUEST,
    list_models,
    make,
    model_pages,
    only,
    reasoning,
    run,
    text,
)


def test_thoughts_are_reasoning_and_usage_counts_cache_and_thinking() -> None:
    with FaultServer(replay("gemini_thinking.sse")) as server:
        events, error = asyncio.run(run(make("gemini", server.url, include_thoughts=True)))
    assert error is None
    assert reasoning(events) == "**Planning the reply**\n\nA short greeting will do."
    assert text(events) == "Hello there!"
    assert only(events, RunInfo).model_reported == "gemini-2.5-flash"
    usage = only(events, Usage)
    assert usage.prompt_tokens == 1290 and usage.cached_tokens == 1024
    assert usage.reasoning_tokens == 25 and usage.output_tokens == 3 + 25
    assert events[-1] == Finished("stop")
    assert server.requests[0].json()["generationConfig"]["thinkingConfig"] == {
        "includeThoughts": True
    }


def test_request_uses_system_instruction_model_role_and_key_header() -> None:
    request = ChatRequest(
        model="models/gemini-2.5-flash",
        messages=HISTORY,
        sampling=Sampling(max_tokens=64, temperature=0.5, top_p=0.9, seed=3, stop=("x",)),
    )
    with FaultServer(replay("gemini_thinking.sse")) as server:
        asyncio.run(run(make("gemini", server.url, key="AIzaFixtureKey_0123456789abcdef"), request))
    sent = server.requests[0]
    assert sent.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert sent.headers["x-goog-api-key"] == "AIzaFixtureKey_0123456789abcdef"
    assert "AIza" not in sent.path
    body = sent.json()
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    assert body["generationConfig"] == {
        "temperature": 0.5,
        "topP": 0.9,
        "maxOutputTokens": 64,
        "seed": 3,
        "stopSequences": ["x"],
    }


def test_safety_stop_is_an_error_that_keeps_the_text_so_far() -> None:
    with FaultServer(replay("gemini_safety.sse")) as server:
        events, error = asyncio.run(run(make("gemini", server.url, label="Gemini")))
    assert text(events) == "Here is how"
    assert isinstance(error, BadResponse) and "SAFETY" in error.user_message
    assert "Gemini" in error.user_message


def test_error_object_inside_the_stream_is_unavailable_after_text() -> None:
    with FaultServer(replay("gemini_error_event.sse")) as server:
        events, error = asyncio.run(run(make("gemini", server.url)))
    assert text(events) == "Partial"
    assert isinstance(error, ProviderUnavailable) and "overloaded" in error.user_message


def test_stream_that_ends_without_finish_reason_is_cut_short() -> None:
    frames = sse_chunks(fixture("gemini_thinking.sse"))[:-1]
    with FaultServer(Reply(body=frames)) as server:
        events, error = asyncio.run(run(make("gemini", server.url)))
    assert text(events) == "Hello"
    assert isinstance(error, ProviderUnavailable)
    assert not any(isinstance(e, Finished) for e in events)


def test_models_list_follows_pages_and_leaves_out_embedding_models() -> None:
    with FaultServer(model_pages("gemini", "pageToken=fixture-page-2")) as server:
        models = asyncio.run(list_models(make("gemini", server.url)))
    assert models == ["gemini-2.5-flash", "gemini-2.5-pro"]
    assert all(r.headers.get("x-goog-api-key") for r in server.requests)


def test_text_deltas_arrive_one_per_frame() -> None:
    with FaultServer(replay("gemini_thinking.sse")) as server:
        events, _ = asyncio.run(run(make("gemini", server.url), REQUEST))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hello", " there!"]
