"""`simi ask` with an agent that has tools, and `simi agents edit --tools`, run as a user runs
them: `python -m desktop` in a subprocess on a real SIMI_HOME.

The model is a loopback ``FaultServer`` replaying ``tool_reply`` streams (it stands in for any
OpenAI-compatible server whose model calls tools); the tools are the real MCP test server
written with the SDK (``tests/helpers/mcp_server.py``, stdio). A terminal is a pseudo-terminal
(``os.openpty``) on the child's stdin, standing in for a person typing at one."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop.chat.services import Services
from desktop.chat.tool_loop import DENIED_TEXT, NO_APPROVER_TEXT
from desktop.cli import main
from desktop.settings.paths import AppPaths
from tests.helpers.cli import run_text
from tests.helpers.fault_server import FaultServer, Reply
from tests.helpers.tool_server import Call, tool_reply
from tests.helpers.tool_turns import add_mcp_server, tool_agent

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Allow? [y] once  [a] always for this agent  [n] no: "


def answer(text: str) -> Reply:
    return tool_reply("openai", [], text=text)


def add_call(a: int = 2, b: int = 3, text: str = "") -> Reply:
    return tool_reply("openai", [Call("c1", "add", json.dumps({"a": a, "b": b}))], text=text)


@contextlib.contextmanager
def opened(cli_env: dict) -> Iterator[Any]:
    services = Services.open(AppPaths.from_env(cli_env))
    try:
        yield services
    finally:
        services.close()


@contextlib.contextmanager
def model(cli_env: dict, replies: list[Reply]) -> Iterator[FaultServer]:
    """The model server, the MCP test server "tools" and the agent "Tooly" allowed all of
    its tools, stored in the app folder (closed again before the CLI runs)."""
    with FaultServer(replies) as server:
        with opened(cli_env) as services:
            add_mcp_server(services)
            tool_agent(services, server.url + "/v1")
        yield server


def ask_args(*extra: str) -> list[str]:
    return [sys.executable, "-m", "desktop", "ask", "--agent", "Tooly", "--json", *extra]


def record_of(stdout: str) -> dict[str, Any]:
    return json.loads(stdout.strip().splitlines()[-1])


def ask_piped(cli_env: dict, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_text(ask_args(*extra, "What is 2+3?"), cli_env, stdin=subprocess.DEVNULL)


@contextlib.contextmanager
def asked_on_terminal(cli_env: dict) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The CLI asking "What is 2+3?" with a pseudo-terminal as stdin: yields the process and
    the terminal's other end, where the person types; the terminal is closed after."""
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            ask_args("What is 2+3?"),
            cwd=ROOT,
            env=cli_env,
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        os.close(slave)
        yield proc, master
    finally:
        os.close(master)


def ask_on_terminal(cli_env: dict, typed: bytes) -> tuple[int, str, str]:
    """The CLI with a pseudo-terminal as stdin; ``typed`` is what the person types (the
    terminal holds it until the CLI reads it)."""
    with asked_on_terminal(cli_env) as (proc, master):
        os.write(master, typed)
        out, err = proc.communicate(timeout=120)
    return proc.returncode, out.decode(), err.decode()


def tool_results(request: Any) -> list[str]:
    return [m["content"] for m in request.json()["messages"] if m["role"] == "tool"]


def steps_of(cli_env: dict, message_id: int) -> list[Any]:
    with opened(cli_env) as services:
        return services.tools.steps.for_message(message_id)


def test_without_a_terminal_a_call_is_refused_and_the_model_told(cli_env: dict) -> None:
    with model(cli_env, [add_call(), answer("I could not add them.")]) as server:
        done = ask_piped(cli_env)
        assert len(server.requests) == 2
        assert tool_results(server.requests[1]) == [NO_APPROVER_TEXT]
    assert done.returncode == 0, done.stderr
    note = (
        "simi: did not run add (tools): stdin is not a terminal; "
        "pass --allow-tools to allow tool calls"
    )
    assert done.stderr.count(note) == 1, done.stderr
    assert "Allow?" not in done.stderr and "Traceback" not in done.stderr
    assert done.stdout.startswith("I could not add them.")  # stdout: the reply only
    record = record_of(done.stdout)
    assert (record["calls"], record["tool_calls"], record["status"]) == (2, 1, "complete")
    (step,) = steps_of(cli_env, record["message_id"])
    assert step.status == "refused"


def test_allow_tools_runs_every_call_and_says_how_each_ended(cli_env: dict) -> None:
    calls = [
        Call("c1", "add", json.dumps({"a": 2, "b": 3})),
        Call("c2", "fail", json.dumps({"message": "the disk is full"})),
    ]
    replies = [tool_reply("openai", calls, text="Working."), answer("It is 5.")]
    with model(cli_env, replies) as server:
        done = ask_piped(cli_env, "--allow-tools")
        results = tool_results(server.requests[1])
    assert done.returncode == 0, done.stderr
    assert results[0] == "5" and "the disk is full" in results[1]
    # (a "simi: starting the tool servers…" line may come first on a slow machine)
    lines = [x for x in done.stderr.splitlines() if x.startswith("simi: ") and "…" not in x]
    assert lines[0] == "simi: running add (tools)"
    assert lines[1].startswith("simi: add → done, 1 char, ") and lines[1].endswith(" ms")
    assert lines[2] == "simi: running fail (tools)"
    assert lines[3].startswith("simi: fail → tool error: ") and "the disk is full" in lines[3]
    assert "Allow?" not in done.stderr
    assert done.stdout.startswith("Working.\n\nIt is 5.")
    record = record_of(done.stdout)
    assert (record["calls"], record["tool_calls"]) == (2, 2)
    steps = steps_of(cli_env, record["message_id"])
    assert [(s.tool, s.approval) for s in steps] == [("add", "auto"), ("fail", "auto")]


def test_on_a_terminal_yes_runs_the_call_after_asking_again_on_a_wrong_answer(
    cli_env: dict,
) -> None:
    with model(cli_env, [add_call(text="Adding."), answer("It is 5.")]) as server:
        code, out, err = ask_on_terminal(cli_env, b"\nmaybe\ny\n")
        assert tool_results(server.requests[1]) == ["5"]
    assert code == 0, err
    # the question: who, which tool on which server, the arguments as indented JSON
    assert 'Tooly wants to run add (server tools):\n  {\n    "a": 2,\n    "b": 3\n  }\n' in err
    assert err.count(QUESTION) == 3  # an empty line and "maybe" are asked again
    assert "simi: add → done, 1 char" in err
    assert out.startswith("Adding.\n\nIt is 5.") and "Allow?" not in out
    (step,) = steps_of(cli_env, record_of(out)["message_id"])
    assert (step.status, step.approval, step.result) == ("done", "once", "5")


def test_on_a_terminal_no_sends_the_denial_to_the_model(cli_env: dict) -> None:
    with model(cli_env, [add_call(), answer("OK, I won't.")]) as server:
        code, out, err = ask_on_terminal(cli_env, b"n\n")
        assert tool_results(server.requests[1]) == [DENIED_TEXT]
    assert code == 0, err
    assert "simi: add → denied" in err
    (step,) = steps_of(cli_env, record_of(out)["message_id"])
    assert (step.status, step.approval) == ("denied", "denied")


@pytest.mark.slow
def test_on_a_terminal_always_stores_a_grant_and_the_next_ask_is_not_asked(
    cli_env: dict,
) -> None:
    replies = [add_call(), answer("5"), add_call(1, 1), answer("2")]
    with model(cli_env, replies) as server:
        code, _out, err = ask_on_terminal(cli_env, b"a\n")
        assert code == 0, err
        with opened(cli_env) as services:
            agent = services.agents.by_name("Tooly")
            grants = services.tools.tools.grants(agent.id)
        assert [(g.server, g.tool) for g in grants] == [("tools", "add")]
        # a pipe now: the grant still lets the call run, unasked
        again = ask_piped(cli_env)
        assert tool_results(server.requests[3]) == ["2"]
    assert again.returncode == 0, again.stderr
    assert "simi: running add (tools), always allowed for this agent" in again.stderr
    assert "did not run" not in again.stderr


def test_ctrl_c_while_the_question_waits_stops_the_reply(cli_env: dict) -> None:
    with model(cli_env, [add_call(text="Adding."), answer("never sent")]) as server:
        with asked_on_terminal(cli_env) as (proc, _terminal):
            assert proc.stderr is not None
            seen = b""
            deadline = time.monotonic() + 90
            while QUESTION.encode() not in seen and time.monotonic() < deadline:
                if select.select([proc.stderr], [], [], 1.0)[0]:
                    chunk = os.read(proc.stderr.fileno(), 4096)
                    if not chunk:
                        break
                    seen += chunk
            assert QUESTION.encode() in seen, seen.decode()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        assert len(server.requests) == 1  # the model was not called again
    err_text = seen.decode() + err.decode()
    assert proc.returncode == 130, err_text
    assert "simi: add → stopped" in err_text and "Traceback" not in err_text
    record = record_of(out.decode())
    assert record["status"] == "cancelled"
    (step,) = steps_of(cli_env, record["message_id"])
    assert step.status == "cancelled"


def simi(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``simi ARGS`` in this process (``desktop.cli.main``: the same code without a Python
    start per command)."""
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_agents_edit_tools_stores_shows_and_clears_them(
    cli_env: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    with opened(cli_env) as services:
        add_mcp_server(services, "files")
        add_mcp_server(services, "web")
        tool_agent(services, "http://127.0.0.1:9/v1", tools="")

    code, out, err = simi(capsys, "agents", "edit", "Tooly", "--tools", "files, web:search")
    assert code == 0, err
    assert "tools: files (all), web:search" in out
    assert "tools: files (all), web:search" in simi(capsys, "agents", "show", "Tooly")[1]
    shown = json.loads(simi(capsys, "agents", "show", "Tooly", "--json")[1])
    assert shown["tools"] == ["files", "web:search"]
    listed = simi(capsys, "agents", "list")[1].splitlines()
    tooly = next(x for x in listed if x.startswith("Tooly\t"))
    assert tooly.endswith("\ttools: files (all), web:search")
    assert not any(x.startswith("SmolLM2") and "tools:" in x for x in listed)

    code, out, err = simi(
        capsys, "agents", "edit", "Tooly", "--tools", "files,nope", "--model", "x"
    )
    assert code == 2
    assert "simi: tools: There is no MCP server called “nope”. Servers: files, web." in err
    code, _, err = simi(capsys, "agents", "edit", "Tooly", "--tools", ":add")
    assert code == 2 and "names no server" in err
    with opened(cli_env) as services:
        agent = services.agents.by_name("Tooly")
        assert agent.model == "m"  # nothing stored, not even the other change
        assert services.tools.tools.agent_tools(agent.id) == [("files", "*"), ("web", "search")]

    code, out, err = simi(capsys, "agents", "edit", "Tooly", "--tools", "")
    assert code == 0, err
    assert "tools: none" in out
    assert json.loads(simi(capsys, "agents", "show", "Tooly", "--json")[1])["tools"] == []
    with opened(cli_env) as services:
        assert services.tools.tools.agent_tools(services.agents.by_name("Tooly").id) == []


def test_a_question_cannot_drive_the_terminal_with_control_characters() -> None:
    """The model writes the arguments and the server names the tool: neither may send escape
    sequences to the person's terminal (ESC and the 8-bit CSI are shown escaped)."""
    from desktop.chat.tool_loop import ApprovalRequest, pretty_json
    from desktop.cli_tools_prompt import question
    from desktop.store.tool_steps import ToolStep

    raw = json.dumps({"text": "hi \x1b]0;owned\x07 \u009b2J"}, ensure_ascii=False)
    step = ToolStep(1, 1, 0, "c1", "tools", "ec\x1bho", raw)
    text = question(ApprovalRequest(step, "Tooly", "", pretty_json(raw)))
    assert "\x1b" not in text and "\x07" not in text and "\u009b" not in text
    assert text.startswith("Tooly wants to run ec\\x1bho (server tools):\n  {\n")
    assert "\\x9b2J" in text
