"""One turn end to end on the real starter model (llama.cpp), stored in a real SQLite file."""

import asyncio

import pytest

from desktop.chat import call as model_call
from desktop.llm.events import TextDelta, Timing
from desktop.local.starter import STARTER_AGENT_NAME
from desktop.store.agents import Agent
from tests.helpers.fault_server import FaultServer, Reply, error_reply, ticking_tokens
from tests.helpers.servers import closed_port

pytestmark = pytest.mark.slow


def _starter(services, **changes):
    agent = services.agents.by_name(STARTER_AGENT_NAME)
    return agent.with_changes(**changes) if changes else agent


def test_turn_streams_reply_and_records_message_and_stats(services) -> None:
    agent = _starter(services, seed=7, max_tokens=40)
    conv = services.conversations.create(agent.id)
    turn = services.chat.begin(conv.id, agent, "Say hello in one short sentence.")
    deltas: list[str] = []
    timings: list[Timing] = []

    def on_event(event: object) -> None:
        if isinstance(event, TextDelta):
            deltas.append(event.text)
        elif isinstance(event, Timing) and event.decode_ms is not None:
            timings.append(event)

    result = asyncio.run(services.chat.run(turn, on_event=on_event))
    assert result.error is None and result.status == "complete"
    assert result.text.strip() and result.text == "".join(deltas)
    msgs = services.conversations.messages(conv.id)
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].status == "complete" and msgs[1].content == result.text
    row = services.stats.for_message(msgs[1].id)
    assert row["agent_name"] == STARTER_AGENT_NAME and row["provider_kind"] == "local"
    assert row["ttft_ms"] > 0 and row["decode_tok_s"] > 0 and row["prefill_tok_s"] > 0
    assert row["prompt_tokens"] > 10 and 0 < row["output_tokens"] <= 40
    assert row["finish_reason"] in ("stop", "length") and row["token_source"] == "reported"
    assert row["backend"] and row["n_ctx"] == agent.n_ctx and row["quantization"] == "Q4_1"
    assert services.conversations.get(conv.id).title.startswith("Say hello")
    # the decode speed is llama.cpp's own: its eval count over its eval time
    [timing] = timings
    assert timing.decode_tokens is not None and 0 < timing.decode_tokens <= row["output_tokens"]
    expected = timing.decode_tokens / (timing.decode_ms / 1000)
    assert row["decode_tok_s"] == round(expected, 2)


def test_second_turn_reuses_the_prompt_cache(services) -> None:
    agent = _starter(services, seed=1, max_tokens=16)
    conv = services.conversations.create(agent.id)
    first = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "Hi!")))
    second = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "And again?")))
    assert first.stats.cached_tokens == 0 or first.stats.load_ms is not None
    assert second.stats.cached_tokens > 10
    assert second.stats.prompt_eval_tokens < second.stats.prompt_tokens
    assert second.stats.load_ms is None  # the model stayed loaded


def test_max_tokens_finishes_with_length(services) -> None:
    agent = _starter(services, max_tokens=3, seed=3)
    conv = services.conversations.create(agent.id)
    result = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "Tell a story.")))
    assert result.stats.finish_reason == "length" and result.stats.output_tokens == 3


def test_stop_keeps_partial_text_and_marks_message_cancelled(services, monkeypatch) -> None:
    monkeypatch.setattr(model_call, "CHECKPOINT_INTERVAL_S", 0.0)
    agent = _starter(services, max_tokens=400, seed=5)
    conv = services.conversations.create(agent.id)
    turn = services.chat.begin(conv.id, agent, "Write a long essay about the sea.")
    checkpoints: list[str] = []

    async def main() -> None:
        task = asyncio.ensure_future(services.chat.run(turn, on_event=on_event))
        count = 0

        def on_event_inner(event) -> None:
            nonlocal count
            if isinstance(event, TextDelta):
                count += 1
                checkpoints.append(
                    services.conversations.message(turn.assistant_message_id).content
                )
                if count == 5:
                    task.cancel()

        holder["f"] = on_event_inner
        with pytest.raises(asyncio.CancelledError):
            await task

    holder: dict = {}

    def on_event(event) -> None:
        holder["f"](event)

    asyncio.run(main())
    msg = services.conversations.message(turn.assistant_message_id)
    assert msg.status == "cancelled" and msg.content == turn.text and msg.content
    assert any(checkpoints), "partial text was never checkpointed while streaming"
    assert services.stats.for_message(msg.id)["finish_reason"] == "cancelled"


def test_unreachable_server_becomes_error_on_the_message(services) -> None:
    agent = services.agents.create(
        Agent(
            name="Nowhere",
            kind="openai-compatible",
            base_url=f"http://127.0.0.1:{closed_port()}/v1",
            model="m",
        )
    )
    conv = services.conversations.create(agent.id)
    result = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "hello?")))
    assert result.status == "error"
    msg = services.conversations.message(result.assistant_message_id)
    assert msg.status == "error" and "Cannot reach" in msg.error_text
    assert services.stats.for_message(msg.id)["error_kind"] == "unavailable"
    # Retry replaces the failed reply and keeps the user's message.
    retry = services.chat.begin_retry(conv.id, agent, msg.id)
    assert retry.user_message_id == result.user_message_id
    assert retry.assistant_message_id != msg.id
    assert services.conversations.message(msg.id) is None


def test_retry_keeps_the_failed_calls_stats_row_and_it_counts(services) -> None:
    replies = [
        error_reply(401, {"error": {"message": "bad key"}}),
        Reply(body=ticking_tokens(3)),
    ]
    with FaultServer(replies) as server:
        agent = services.agents.create(
            Agent(name="Flaky", kind="openai-compatible", base_url=server.url + "/v1", model="m")
        )
        conv = services.conversations.create(agent.id)
        failed = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "hello?")))
        assert failed.status == "error"
        retry = services.chat.begin_retry(conv.id, agent, failed.assistant_message_id)
        done = asyncio.run(services.chat.run(retry))
    assert done.status == "complete" and done.text.startswith("tok0")
    # The view is as before: the failed reply is gone, the retry answers the same question.
    msgs = services.conversations.messages(conv.id)
    assert [m.id for m in msgs] == [failed.user_message_id, retry.assistant_message_id]
    # Its call is not: still counted, as the error it was.
    rows = services.stats.rows("Flaky")
    assert [(r["message_id"], r["error_kind"]) for r in rows] == [
        (retry.assistant_message_id, None),
        (None, failed.error.kind),
    ]
    (flaky,) = services.stats.per_agent("Flaky")
    assert (flaky["calls"], flaky["errors"]) == (2, 1)


def test_conversation_too_long_for_context_says_so(services) -> None:
    agent = services.agents.update(_starter(services).with_changes(n_ctx=256))
    conv = services.conversations.create(agent.id)
    result = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "word " * 600)))
    assert result.status == "error" and result.error.kind == "context_too_long"
    assert "context" in result.error.user_message and "256" in result.error.user_message


def test_history_and_system_prompt_are_sent(services) -> None:
    agent = _starter(services, system_prompt="Be terse.")
    conv = services.conversations.create(agent.id)
    services.conversations.add_message(conv.id, "user", "one")
    services.conversations.add_message(conv.id, "assistant", "two")
    turn = services.chat.begin(conv.id, agent, "three")
    request = services.chat.request_for(turn)
    assert [(m.role, m.content) for m in request.messages] == [
        ("system", "Be terse."),
        ("user", "one"),
        ("assistant", "two"),
        ("user", "three"),
    ]
