"""An agentic turn as a timeline (``desktop/chat/turn_timeline.py``), from hand-built stats rows
and tool steps shaped as ``ChatService.run`` stores them: the parts in order, their durations,
the turn's totals in words, a denied call as an instant, an unknown cost kept unknown; and a
real two-call turn (loopback OpenAI-compatible server + the SDK's MCP test server) whose rows
feed the per-agent summary's tool figures."""

from __future__ import annotations

from typing import Any

import pytest

from desktop.chat.turn_timeline import build_turn_timeline, calls_suffix, calls_tooltip
from desktop.store.stats import StatsFilter
from desktop.store.tool_steps import ToolStep
from tests.chat.test_tool_turns import always, answer, call, run_turn
from tests.helpers.fault_server import FaultServer
from tests.helpers.tool_turns import add_mcp_server, tool_agent

BASE: dict[str, Any] = {
    "agent_name": "Tooly",
    "provider_kind": "openai",
    "endpoint_host": "api.openai.com",
    "model_requested": "gpt-4o-mini",
    "token_source": "reported",
    "price_source": "genai-prices",
}
CALL1: dict[str, Any] = {
    **BASE,
    "call_index": 1,
    "started_at": "2026-12-01T11:00:00.000+00:00",
    "headers_ms": 200.0,
    "ttft_ms": 350.0,
    "stream_ms": 400.0,
    "decode_ms": 400.0,
    "total_ms": 800.0,
    "prompt_tokens": 300,
    "cached_tokens": 0,
    "output_tokens": 25,
    "decode_tok_s": 60.0,
    "finish_reason": "tool_calls",
    "tool_calls": 1,
    "tool_ms": 80.0,
    "cost_usd": 0.0001,
}
CALL2: dict[str, Any] = {
    **BASE,
    "call_index": 2,
    # call 1 ended at 0.800 s; 1.5 s waiting for the person, then the tool's 80 ms
    "started_at": "2026-12-01T11:00:02.380+00:00",
    "headers_ms": 150.0,
    "ttft_ms": 300.0,
    "stream_ms": 2100.0,
    "decode_ms": 2100.0,
    "total_ms": 2400.0,
    "prompt_tokens": 350,
    "cached_tokens": 300,
    "output_tokens": 120,
    "decode_tok_s": 56.7,
    "finish_reason": "stop",
    "cost_usd": 0.0002,
}


def step(**changes: Any) -> ToolStep:
    fields: dict[str, Any] = {
        "message_id": 7,
        "call_index": 1,
        "position": 0,
        "call_id": "c1",
        "server": "tools",
        "tool": "add",
        "arguments": '{"a": 2, "b": 3}',
        "status": "done",
        "approval": "once",
        "result": "5",
        "size": 1,
        "duration_ms": 80.0,
    }
    return ToolStep(**{**fields, **changes})


def test_the_turn_is_call_1_then_approval_then_the_tool_then_call_2_in_order() -> None:
    turn = build_turn_timeline([CALL2, CALL1], [step()])  # rows in any order: call_index wins
    assert [(p.label, p.kind) for p in turn.parts] == [
        ("call 1", "call"),
        ("waiting for your approval", "wait"),
        ("add on tools", "tool"),
        ("call 2", "call"),
    ]
    call1, wait, tool, call2 = turn.parts
    assert (call1.start_ms, call1.duration_ms) == (0.0, 800.0)
    assert wait.start_ms == 800.0 and wait.duration_ms == pytest.approx(1500.0)
    assert tool.start_ms == pytest.approx(2300.0) and tool.figure == "80 ms"
    assert call2.start_ms == pytest.approx(2380.0) and call2.figure == "2.40 s"
    # each call keeps its own detailed timeline
    assert [t.fact("ttft").value for t in turn.call_timelines] == ["350 ms", "300 ms"]
    # the chart draws the same parts to scale on one lane
    widths = {s.key: s.duration_ms for s in turn.chart.segments}
    assert widths["call2"] / widths["call1"] == pytest.approx(3.0)
    assert turn.chart.span_ms == pytest.approx(4780.0)


def test_the_totals_add_the_calls_and_the_tools_in_words() -> None:
    totals = build_turn_timeline([CALL1, CALL2], [step()]).totals
    assert (totals.calls, totals.tool_calls) == (2, 1)
    assert totals.wall_ms == pytest.approx(4780.0)
    assert (totals.model_ms, totals.tool_ms) == (3200.0, 80.0)
    assert (totals.prompt_tokens, totals.cached_tokens, totals.output_tokens) == (650, 300, 145)
    assert totals.cost_usd == pytest.approx(0.0003)
    assert totals.text() == (
        "2 model calls · 1 tool call · 4.78 s in all: 3.20 s model, 80 ms tools, "
        "1.50 s waiting for your approval"
    )
    assert (
        totals.tokens_text()
        == "Tokens over the calls: 650 in (300 cached) → 145 out · cost $0.0003"
    )


def test_a_granted_call_has_no_approval_wait_and_the_rest_is_between_calls() -> None:
    turn = build_turn_timeline([CALL1, CALL2], [step(approval="granted")])
    assert [p.label for p in turn.parts] == ["call 1", "add on tools", "between calls", "call 2"]
    assert turn.part("between1").kind == "gap"
    assert turn.totals.approval_ms == 0.0
    assert "waiting" not in turn.totals.text()


def test_a_denied_call_is_an_instant_with_its_status() -> None:
    denied = step(status="denied", approval="denied", duration_ms=None, result="denied")
    turn = build_turn_timeline([CALL1, CALL2], [denied])
    tool = turn.part("tool0")
    assert tool is not None and tool.instant and tool.figure == "denied by you"
    # an instant is a marker on the chart, not a segment
    assert "tool0" not in {s.key for s in turn.chart.segments}
    assert [m.key for m in turn.chart.markers] == ["tool0", "turn_done"]
    assert turn.totals.tool_ms == 0.0 and turn.totals.tool_calls == 1
    # the person was asked: the time before call 2 was the wait for the decision
    assert turn.part("approval1").duration_ms == pytest.approx(1580.0)


def test_an_unknown_price_keeps_the_turns_cost_unknown_never_zero() -> None:
    unpriced = {**CALL2, "price_source": None, "cost_usd": None}
    totals = build_turn_timeline([CALL1, unpriced], [step()]).totals
    assert totals.cost_usd is None and totals.cost == "—"
    assert "cost unknown" in totals.tokens_text()
    # a call that used no tokens (failed before any reply) had nothing to price
    failed = {**CALL2, "price_source": None, "cost_usd": None, "prompt_tokens": None,
              "output_tokens": None, "finish_reason": "error"}  # fmt: skip
    assert build_turn_timeline([CALL1, failed], [step()]).totals.cost_usd == pytest.approx(1e-4)
    local = [{**c, "provider_kind": "local", "price_source": "local", "cost_usd": 0.0}
             for c in (CALL1, CALL2)]  # fmt: skip
    assert build_turn_timeline(local, [step()]).totals.cost == "local"


def test_without_start_times_the_parts_are_laid_end_to_end() -> None:
    rows = [{**c, "started_at": None} for c in (CALL1, CALL2)]
    turn = build_turn_timeline(rows, [step(), step(position=1, tool="echo", duration_ms=20.0)])
    assert [p.label for p in turn.parts] == ["call 1", "add on tools", "echo on tools", "call 2"]
    assert turn.part("call2").start_ms == pytest.approx(900.0)
    assert turn.totals.wall_ms == pytest.approx(3300.0)


def test_the_footer_words_say_the_calls_and_the_tools_time() -> None:
    assert calls_suffix([CALL1, CALL2], [step()]) == "2 calls · tools 80 ms"
    assert calls_suffix([CALL2], []) == ""
    tip = calls_tooltip([CALL1, CALL2], [step()])
    lines = tip.splitlines()
    assert lines[0].startswith("This reply took 2 model calls · 1 tool call")
    assert lines[1].startswith("Call 1: 800 ms") and lines[1].endswith("→ add (80 ms)")
    assert lines[2].startswith("Call 2: 2.40 s")


def recorded_two_call_turn(services: Any) -> tuple[list[dict[str, Any]], list[ToolStep]]:
    """A turn recorded by ``ChatService.run``: the model (a loopback OpenAI-compatible server)
    calls add on the SDK's MCP test server over stdio, then answers. Returns its calls' stats
    rows and its tool steps."""
    add_mcp_server(services)
    script = [call("add", {"a": 2, "b": 3}), answer("It is 5.")]
    with FaultServer(script) as server:
        agent = tool_agent(services, server.url + "/v1", tools="tools:add")
        turn, _ = run_turn(services, agent, "2+3?", always("once"))
    message = turn.assistant_message_id
    rows = services.stats.calls_for_messages([message])[message]
    return rows, services.tools.steps.for_message(message)


def test_a_real_two_call_turn_feeds_the_summarys_tool_figures(services: Any) -> None:
    rows, steps = recorded_two_call_turn(services)
    timeline = build_turn_timeline(rows, steps)
    assert [p.kind for p in timeline.parts if p.kind in ("call", "tool")] == [
        "call",
        "tool",
        "call",
    ]
    assert timeline.totals.tool_ms == pytest.approx(steps[0].duration_ms)
    (summary,) = services.stats.summary(StatsFilter(agents=("Tooly",)))
    assert summary["calls"] == 2 and summary["tool_calls"] == 1
    assert summary["tool_ms"] is not None and summary["tool_ms"] > 0
    assert summary["tool_ms"] == pytest.approx(round(steps[0].duration_ms, 1))
