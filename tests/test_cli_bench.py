"""`simi bench`, run as a user runs it: a subprocess on a real SIMI_HOME, against remote agents
served by ``FaultServer`` (tests/helpers/fault_server.py: a loopback HTTP server standing in
for OpenAI-compatible providers)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.fault_server import FaultServer, Recorded, Reply, error_reply, ticking_tokens
from tests.test_cli import simi

OVERFLOW = {"error": {"message": "maximum context length is 16", "code": "context_length_exceeded"}}


def _reply(request: Recorded, slow_seen: list[str]) -> Reply:
    prompt = request.json()["messages"][-1]["content"]
    if request.json()["model"] == "flaky" and prompt == "second":
        return error_reply(400, OVERFLOW)
    if prompt == "slow" and not slow_seen:  # endless the first time only
        slow_seen.append(prompt)
        return Reply(body=ticking_tokens(None), chunk_delay_s=0.02)
    return Reply(body=ticking_tokens(4))


@pytest.fixture
def server(simi_home: Path) -> Iterator[FaultServer]:
    """Two remote agents on one loopback server: "Steady", and "Flaky" (refuses "second");
    the prompt "slow" streams without end the first time it is asked."""
    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths
    from desktop.store.agents import Agent

    slow_seen: list[str] = []
    with FaultServer(lambda request: _reply(request, slow_seen)) as fault:
        services = Services.open(AppPaths.from_env())
        try:
            for name, model in (("Steady", "steady"), ("Flaky", "flaky")):
                services.agents.create(
                    Agent(
                        name=name,
                        kind="openai-compatible",
                        base_url=fault.url + "/v1",
                        model=model,
                    )
                )
        finally:
            services.close()
        yield fault


def _prompts(tmp_path: Path, text: str, name: str = "prompts.txt") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_bench_prints_progress_on_stderr_and_the_table_on_stdout(cli_env, server, tmp_path) -> None:
    prompts = _prompts(tmp_path, "first\nsecond\n")
    out = simi(cli_env, "bench", "--agents", "Steady,Flaky", "--prompts", prompts, "--repeat", "2")
    assert out.returncode == 0, out.stderr
    progress = [line for line in out.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == 8 and progress[-1].startswith("[8/8] ")
    assert any(
        line.startswith("[")
        and "Prompt 1 · Steady · run 2: " in line
        and "ms to first token" in line
        for line in progress
    )
    errors = [line for line in progress if "Flaky" in line and "error" in line]
    assert len(errors) == 2 and all("Prompt 2 · Flaky" in line for line in errors)

    lines = out.stdout.splitlines()
    assert lines[0].split()[:4] == ["agent", "calls", "cancelled", "errors"]
    assert "TTFT p50" in lines[0] and "prefill p50" in lines[0] and "cost" in lines[0]
    steady = next(line for line in lines if line.startswith("Steady"))
    flaky = next(line for line in lines if line.startswith("Flaky"))
    assert steady.split()[1:4] == ["4", "0", "0"] and flaky.split()[1:4] == ["4", "0", "2"]
    assert " ms" in steady and "unknown" in steady  # a self-hosted server has no price
    assert "Stored as run 1" in out.stdout

    # the run is stored: it reopens (here: its calls are in `simi stats` too)
    stats = json.loads(simi(cli_env, "stats", "--json").stdout)
    assert {r["agent"]: r["calls"] for r in stats} == {"Steady": 4, "Flaky": 4}


def test_bench_json_has_the_run_its_summary_and_every_call(cli_env, server, tmp_path) -> None:
    prompts = _prompts(tmp_path, '"first"\n{"prompt": "second"}\n', name="set.jsonl")
    out = simi(
        cli_env, "bench", "--agents", "Flaky", "--prompts", prompts, "--json", "--title", "T"
    )
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert set(record) == {"run", "summary", "calls"}
    assert record["run"]["title"] == "T" and record["run"]["status"] == "complete"
    assert record["run"]["prompts"] == ["first", "second"] and record["run"]["agents"] == ["Flaky"]
    (summary,) = record["summary"]
    assert summary["agent_name"] == "Flaky" and (summary["calls"], summary["errors"]) == (2, 1)
    assert summary["ttft_p50_ms"] is not None and summary["cost_usd"] is None
    assert [(c["prompt_index"], c["status"]) for c in record["calls"]] == [
        (1, "complete"),
        (2, "error"),
    ]
    assert record["calls"][0]["output_tokens"] is not None and record["calls"][1]["error"]

    csv_out = simi(cli_env, "bench", "--agents", "Steady", "--prompts", prompts, "--csv")
    assert csv_out.returncode == 0, csv_out.stderr
    header, row = csv_out.stdout.splitlines()
    assert header.startswith("agent_name,calls,errors,ttft_p50_ms") and row.startswith(
        "Steady,2,0,"
    )


def test_an_unknown_agent_is_a_usage_error_that_lists_the_agents(cli_env, server, tmp_path) -> None:
    prompts = _prompts(tmp_path, "first\n")
    out = simi(cli_env, "bench", "--agents", "Steady,Nobody", "--prompts", prompts)
    assert out.returncode == 2 and out.stdout == ""
    assert "Nobody" in out.stderr and "Steady" in out.stderr and "Flaky" in out.stderr
    missing = simi(cli_env, "bench", "--prompts", prompts)
    assert missing.returncode == 2 and "--agents" in missing.stderr
    assert not server.requests  # nothing was sent


def test_ctrl_c_stores_the_run_as_cancelled_and_resume_does_the_rest(
    cli_env, server, tmp_path
) -> None:
    prompts = _prompts(tmp_path, "first\nslow\nsecond\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "desktop", "bench", "--agents", "Steady", "--prompts", prompts],
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the first call's line: the slow one is being sent
        assert first.startswith("[1/3] Prompt 1 · Steady · run 1: "), first
        for _ in range(1000):  # until the slow call is being answered
            if len(server.requests) == 2:
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "Prompt 2 · Steady · run 1: cancelled" in stderr
    steady = next(line for line in stdout.splitlines() if line.startswith("Steady"))
    assert steady.split()[1:4] == ["2", "1", "0"]  # one complete, one cancelled; no third
    assert "Cancelled" in stdout and "simi bench --resume 1" in stdout
    assert len(server.requests) == 2

    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths

    services = Services.open(AppPaths.from_env())
    try:
        (run,) = services.compare.runs()
        assert run.status == "cancelled"
        assert [c.status for c in services.compare.calls(run.id)] == ["complete", "cancelled"]
    finally:
        services.close()

    resumed = simi(cli_env, "bench", "--resume", "1", "--json")
    assert resumed.returncode == 0, resumed.stderr
    prompts_sent = [r.json()["messages"][-1]["content"] for r in server.requests]
    assert prompts_sent == ["first", "slow", "slow", "second"]  # only the missing calls
    record = json.loads(resumed.stdout)
    assert record["run"]["status"] == "complete"
    assert [c["status"] for c in record["calls"]] == ["complete"] * 3
    assert "[2/3] Prompt 2 · Steady · run 1: " in resumed.stderr

    both = simi(cli_env, "bench", "--resume", "1", "--agents", "Steady")
    assert both.returncode == 2 and "--resume" in both.stderr
