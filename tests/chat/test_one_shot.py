"""``ChatService.ask_once``: one prompt to one agent outside any conversation (a prompt-set
run's call), on the real starter model and, for remote agents, against ``FaultServer`` (a
loopback HTTP server standing in for an OpenAI-compatible API)."""

from __future__ import annotations

import asyncio

import pytest

from desktop.llm.events import TextDelta
from desktop.local.starter import STARTER_AGENT_NAME
from desktop.store.agents import Agent
from tests.helpers.fault_server import FaultServer, Reply, error_reply, ticking_tokens


def _remote(services, server: FaultServer, name: str = "Remote", **fields) -> Agent:
    return services.agents.create(
        Agent(name=name, kind="openai-compatible", base_url=server.url + "/v1", model="m", **fields)
    )


def _run_id(services) -> int:
    return services.compare.create_run(["p"], [(None, "x")]).id


def _conversations(services) -> int:
    return services.db.execute("SELECT count(*) FROM conversations").fetchone()[0]


@pytest.mark.slow
def test_the_starter_model_answers_once_and_the_call_is_recorded_for_the_run(services) -> None:
    agent = services.agents.by_name(STARTER_AGENT_NAME).with_changes(max_tokens=24, seed=3)
    run_id = _run_id(services)
    before = _conversations(services)
    seen: list[str] = []

    def on_event(event: object) -> None:
        if isinstance(event, TextDelta):
            seen.append(event.text)

    result = asyncio.run(
        services.chat.ask_once(agent, "Say hello.", prompt_run_id=run_id, on_event=on_event)
    )
    assert result.status == "complete" and result.error_text is None
    assert result.text.strip() and result.text == "".join(seen)
    assert _conversations(services) == before  # nothing but the stats row is stored
    (row,) = [r for r in services.stats.rows(STARTER_AGENT_NAME) if r["id"] == result.stats_id]
    assert row["prompt_run_id"] == run_id
    assert row["message_id"] is None and row["conversation_id"] is None
    assert row["ttft_ms"] > 0 and row["decode_tok_s"] > 0 and 0 < row["output_tokens"] <= 24
    assert row["price_source"] == "local" and row["cost_usd"] == 0
    assert result.stats.finish_reason == row["finish_reason"] in ("stop", "length")


def test_only_the_system_prompt_and_the_prompt_are_sent_with_the_agents_sampling(
    services,
) -> None:
    with FaultServer(Reply(body=ticking_tokens(3))) as server:
        agent = _remote(services, server, system_prompt="Be terse.")
        fair = agent.with_changes(seed=11, temperature=0.0)
        result = asyncio.run(services.chat.ask_once(fair, "What is 2+2?"))
    assert result.status == "complete" and result.text == "tok0 tok1 tok2 "
    body = server.requests[0].json()
    assert body["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "What is 2+2?"},
    ]
    assert body["seed"] == 11 and body["temperature"] == 0.0
    row = services.stats.rows("Remote")[0]
    assert row["id"] == result.stats_id and row["prompt_run_id"] is None


def test_a_failed_call_comes_back_as_an_error_with_its_row_never_raised(services) -> None:
    with FaultServer(error_reply(401, {"error": {"message": "bad key"}})) as server:
        agent = _remote(services, server)
        run_id = _run_id(services)
        result = asyncio.run(services.chat.ask_once(agent, "hello?", prompt_run_id=run_id))
    assert result.status == "error" and result.error_kind == "auth"
    assert result.error_text and "key" in result.error_text.lower()
    (row,) = services.stats.rows("Remote")
    assert row["error_kind"] == "auth" and row["prompt_run_id"] == run_id
    assert row["id"] == result.stats_id


def test_a_rate_limit_that_asks_too_long_a_wait_is_an_error_at_once(services) -> None:
    limited = error_reply(429, {"error": {"message": "slow down"}}, **{"Retry-After": "3600"})
    with FaultServer(limited) as server:
        agent = _remote(services, server)
        result = asyncio.run(services.chat.ask_once(agent, "hello?"))
    assert len(server.requests) == 1  # not retried: the wait is past the cap
    assert result.status == "error" and result.error_kind == "rate_limited"
    assert services.stats.rows("Remote")[0]["error_kind"] == "rate_limited"


def test_a_short_rate_limit_is_retried_and_the_call_counts_once(services) -> None:
    replies = [
        error_reply(429, {"error": {"message": "slow down"}}, **{"Retry-After": "0"}),
        Reply(body=ticking_tokens(2)),
    ]
    with FaultServer(replies) as server:
        agent = _remote(services, server)
        result = asyncio.run(services.chat.ask_once(agent, "hello?"))
    assert len(server.requests) == 2
    assert result.status == "complete" and result.text == "tok0 tok1 "
    (row,) = services.stats.rows("Remote")
    assert row["error_kind"] is None and row["id"] == result.stats_id


def test_cancelling_returns_the_partial_text_as_cancelled(services) -> None:
    endless = Reply(body=ticking_tokens(None), chunk_delay_s=0.01)
    with FaultServer(endless) as server:
        agent = _remote(services, server)

        async def main():
            deltas: list[str] = []

            def on_event(event: object) -> None:
                if isinstance(event, TextDelta):
                    deltas.append(event.text)
                    if len(deltas) == 3:
                        task.cancel()

            task = asyncio.ensure_future(services.chat.ask_once(agent, "go on", on_event=on_event))
            result = await task  # returned, not raised
            return result, deltas, task

        result, deltas, task = asyncio.run(main())
    assert not task.cancelled()
    assert result.status == "cancelled" and result.text == "".join(deltas)
    assert result.text.startswith("tok0 tok1 tok2")
    (row,) = services.stats.rows("Remote")
    assert row["finish_reason"] == "cancelled" and row["ttft_ms"] is not None
