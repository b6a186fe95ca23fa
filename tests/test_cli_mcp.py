"""`simi mcp` on a real SIMI_HOME, the real keyring and the SDK-written test server
(tests/helpers/mcp_server.py) as the MCP server. One run as a subprocess, as a user runs it;
the rest in-process through `desktop.cli.main` (the same code, without a Python start each)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from desktop.cli import main
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[1]
SERVER = (sys.executable, "-m", "tests.helpers.mcp_server", "--stdio")


def simi(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *args: str,
    stdin: str = "",
) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_add_list_check_tools_and_remove_a_stdio_server(
    cli_env: dict,
    secret_service_env: dict,
    simi_home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    options = ["--env", "PLAIN=1", "--secret-env", "TOOL_TOKEN", "--timeout", "30"]
    options += ["--cwd", str(ROOT)]
    added = cli.simi(
        cli_env, "mcp", "add", "tools", *options, "--", *SERVER, stdin="tok-cli-secret-0007\n"
    )
    assert added.returncode == 0, added.stderr
    assert "Added MCP server “tools”" in added.stdout

    code, out, _ = simi(capsys, monkeypatch, "mcp", "list")
    assert code == 0
    assert out.startswith(f"tools\tstdio\t{sys.executable} -m tests.helpers.mcp_server")

    code, out, _ = simi(capsys, monkeypatch, "mcp", "list", "--check", "--json")
    checked = json.loads(out)
    assert checked[0]["secret_env"] == ["TOOL_TOKEN"] and checked[0]["env"] == {"PLAIN": "1"}
    assert checked[0]["timeout_s"] == 30.0
    assert checked[0]["state"]["status"] == "ready" and checked[0]["state"]["tools"] >= 7
    assert "tok-cli-secret-0007" not in out
    db_files = list(simi_home.glob("**/*.db*"))
    assert db_files and all(b"tok-cli-secret-0007" not in p.read_bytes() for p in db_files)

    code, out, err = simi(capsys, monkeypatch, "mcp", "tools", "tools")
    assert code == 0, err
    lines = out.splitlines()
    assert "add(a, b)\tAdd two numbers." in lines
    assert "echo(text)\tReturn the text unchanged." in lines
    assert "crash()\tExit the server process in the middle of the call." in lines

    code, out, _ = simi(capsys, monkeypatch, "mcp", "remove", "tools")
    assert code == 0 and "Removed MCP server “tools”" in out
    assert "No MCP servers yet" in simi(capsys, monkeypatch, "mcp", "list")[1]


def test_failures_are_said_in_words(
    secret_service_env: dict,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, _, _ = simi(capsys, monkeypatch, "mcp", "add", "npxish", "--", "simi-no-such-xyz", "-y")
    assert code == 0  # stored; it is checked when it starts
    code, out, _ = simi(capsys, monkeypatch, "mcp", "list", "--check")
    line = next(x for x in out.splitlines() if x.startswith("npxish"))
    assert "failed: MCP server “npxish”: the command “simi-no-such-xyz” was not found" in line
    assert "Searched PATH: " in line
    code, _, err = simi(capsys, monkeypatch, "mcp", "tools", "npxish")
    assert code == 1 and "Searched PATH: " in err and "Traceback" not in err

    code, _, err = simi(capsys, monkeypatch, "mcp", "tools", "nope")
    assert code == 1 and "There is no MCP server called “nope”. Servers: npxish." in err
    code, _, err = simi(capsys, monkeypatch, "mcp", "add", "NPXISH", "--", "other")
    assert code == 1 and "already an MCP server" in err
    code, _, err = simi(capsys, monkeypatch, "mcp", "add", "empty")
    assert code == 1 and "after --" in err
    code, _, err = simi(capsys, monkeypatch, "mcp", "add", "s", "--secret-env", "K", "--", "x")
    assert code == 1 and "No value was given for Value of K" in err

    code, _, err = simi(
        capsys,
        monkeypatch,
        *("mcp", "add", "web", "--url", "http://127.0.0.1:9/mcp", "--bearer"),
        stdin="bearer-cli-0008\n",
    )
    assert code == 0, err
    code, out, _ = simi(capsys, monkeypatch, "mcp", "list", "--json")
    assert {s["name"]: s["bearer"] for s in json.loads(out)} == {"npxish": False, "web": True}
    assert "bearer-cli-0008" not in out
