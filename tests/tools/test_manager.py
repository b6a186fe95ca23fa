"""``McpManager`` against a real MCP server written with the SDK (``tests/helpers/mcp_server.py``),
over stdio and streamable HTTP, with the real keyring for secrets. No fakes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop.settings.paths import AppPaths
from desktop.settings.secrets import SecretStore
from desktop.store.db import open_database
from desktop.store.tools import McpServer, ToolStore
from desktop.tools.config import McpConfig
from desktop.tools.errors import ToolServerError, ToolTimeout
from desktop.tools.manager import McpManager

ROOT = Path(__file__).resolve().parents[2]
SERVER_ARGS = ("-m", "tests.helpers.mcp_server", "--stdio")


@pytest.fixture
def config(simi_home: Path, secret_service_env: dict[str, str]) -> Iterator[McpConfig]:
    paths = AppPaths.from_env()
    paths.ensure()
    db = open_database(paths.db_path)
    yield McpConfig(ToolStore(db), SecretStore())
    db.conn.close()


def stdio_server(name: str = "tools", **changes: object) -> McpServer:
    base = McpServer(name=name, command=sys.executable, args=SERVER_ARGS, cwd=str(ROOT))
    return base.with_changes(**changes)


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_stdio_server_lists_its_tools_and_answers_calls(config: McpConfig) -> None:
    config.add(stdio_server())
    manager = McpManager(config)

    async def scenario() -> None:
        assert manager.state("tools").status == "stopped"
        tools = {t.name: t for t in await manager.tools("tools")}
        assert {"add", "echo", "fail", "sleep", "crash", "big", "env"} <= set(tools)
        assert tools["add"].required == ("a", "b")
        assert tools["echo"].description == "Return the text unchanged."
        assert manager.state("tools").describe().startswith("ready, ")

        added = await manager.call("tools", "add", {"a": 2, "b": 3})
        assert (added.text, added.is_error) == ("5", False)
        assert added.size == 1 and added.duration_ms > 0
        # HTML in a result stays the characters it was (the UI shows text, never markup)
        echoed = await manager.call("tools", "echo", {"text": "<b>hi</b> & ünïcode"})
        assert echoed.text == "<b>hi</b> & ünïcode"

        failed = await manager.call("tools", "fail", {"message": "the disk is full"})
        assert failed.is_error and "the disk is full" in failed.text
        # arguments a model got wrong come back as an error result, not an exception
        malformed = await manager.call("tools", "add", {"a": "three"})
        assert malformed.is_error and malformed.text
        unknown = await manager.call("tools", "no_such_tool", {})
        assert unknown.is_error and "no_such_tool" in unknown.text
        await manager.aclose()
        assert manager.state("tools").status == "stopped"

    run(scenario())


def test_a_hanging_tool_hits_its_timeout_and_stop_cancels_a_call(config: McpConfig) -> None:
    config.add(stdio_server(timeout_s=0.5))
    manager = McpManager(config)

    async def scenario() -> None:
        with pytest.raises(ToolTimeout) as caught:
            await manager.call("tools", "sleep", {"seconds": 30})
        assert caught.value.user_message.startswith("sleep on tools did not answer within 0.5 s")
        # the connection survives a timed-out call
        assert (await manager.call("tools", "echo", {"text": "still here"})).text == "still here"

        call = asyncio.create_task(manager.call("tools", "sleep", {"seconds": 30}, timeout=60))
        await asyncio.sleep(0.3)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert (await manager.call("tools", "add", {"a": 1, "b": 1})).text == "2"
        await manager.aclose()

    run(scenario())


def test_a_crash_mid_call_is_reported_and_the_next_call_restarts_it(config: McpConfig) -> None:
    config.add(stdio_server())
    manager = McpManager(config)

    async def scenario() -> None:
        first_pid = int((await manager.call("tools", "pid")).text)
        with pytest.raises(ToolServerError) as caught:
            await manager.call("tools", "crash")
        assert "stopped during the call to crash" in caught.value.user_message
        assert "crashing on purpose" in caught.value.user_message
        state = manager.state("tools")
        assert state.status == "failed" and "test server: crashing on purpose" in state.stderr_tail

        second_pid = int((await manager.call("tools", "pid")).text)
        assert second_pid != first_pid and manager.state("tools").status == "ready"

        # a server killed while idle is started again by the next call too
        os.kill(second_pid, signal.SIGKILL)
        await asyncio.sleep(0.2)
        assert (await manager.call("tools", "add", {"a": 4, "b": 4})).text == "8"
        third_pid = int((await manager.call("tools", "pid")).text)
        assert third_pid not in (first_pid, second_pid)
        await manager.aclose()
        assert gone(third_pid)

    run(scenario())


def test_a_missing_command_says_which_path_was_searched(config: McpConfig) -> None:
    config.add(McpServer(name="npxish", command="simi-no-such-command-xyz", args=("serve",)))
    manager = McpManager(config, parent_env={"PATH": "/nowhere/bin:/also/not", "HOME": "/tmp"})

    async def scenario() -> None:
        with pytest.raises(ToolServerError) as caught:
            await manager.tools("npxish")
        text = caught.value.user_message
        assert "“simi-no-such-command-xyz” was not found" in text
        assert "Searched PATH: /nowhere/bin:/also/not" in text
        assert "absolute path" in text
        assert manager.state("npxish").status == "failed"
        assert (await manager.check("npxish")).why == manager.state("npxish").why

    run(scenario())


def test_a_server_that_exits_at_start_shows_why_with_its_stderr(config: McpConfig) -> None:
    code = "import sys; print('config file missing: /etc/x.toml', file=sys.stderr); sys.exit(2)"
    config.add(McpServer(name="broken", command=sys.executable, args=("-c", code)))
    manager = McpManager(config)

    async def scenario() -> None:
        state = await manager.check("broken")
        assert state.status == "failed"
        assert "config file missing: /etc/x.toml" in state.stderr_tail
        assert "exited while starting" in state.why

    run(scenario())


def test_a_server_that_logs_heavily_keeps_only_its_last_lines(config: McpConfig) -> None:
    """200,000 lines (~3 MB) on stderr, then exit: the tail is its last 20 lines; nothing of
    it is kept on disk or in memory beyond them."""
    code = (
        "import sys\nfor i in range(200_000): print(f'log line {i}', file=sys.stderr)\n"
        "print('x' * 100_000, file=sys.stderr); sys.exit(2)"
    )
    config.add(McpServer(name="noisy", command=sys.executable, args=("-c", code)))
    manager = McpManager(config)
    before = set(Path(tempfile.gettempdir()).glob("simi-mcp-*"))

    async def scenario() -> None:
        state = await manager.check("noisy")
        assert state.status == "failed"
        tail = state.stderr_tail
        assert len(tail) == 20 and tail[-2] == "log line 199999"
        assert len(tail[-1]) <= 4096  # a huge line is kept cut
        await manager.aclose()

    run(scenario())
    assert set(Path(tempfile.gettempdir()).glob("simi-mcp-*")) == before


def test_the_child_sees_a_minimal_environment_with_its_own_secret(
    config: McpConfig, monkeypatch: pytest.MonkeyPatch, simi_home: Path
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_parent_secret_0001")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret-0002")
    server = stdio_server(env={"PLAIN_SETTING": "blue"}, secret_env=("SERVICE_TOKEN",))
    config.add(server, secret_values={"SERVICE_TOKEN": "tok-child-secret-0003"})
    manager = McpManager(config)

    async def scenario() -> dict[str, str]:
        names = ("SIMI_HOME", "HF_TOKEN", "OPENAI_API_KEY", "PLAIN_SETTING", "SERVICE_TOKEN")
        seen = {n: (await manager.call("tools", "env", {"name": n})).text for n in names}
        seen["PATH"] = (await manager.call("tools", "env", {"name": "PATH"})).text
        await manager.aclose()
        return seen

    seen = run(scenario())
    assert isinstance(seen, dict)
    assert os.environ["SIMI_HOME"] == str(simi_home)
    assert seen["SIMI_HOME"] == seen["HF_TOKEN"] == seen["OPENAI_API_KEY"] == "<unset>"
    assert seen["PLAIN_SETTING"] == "blue"
    assert seen["SERVICE_TOKEN"] == "tok-child-secret-0003"
    assert os.environ["PATH"].split(os.pathsep)[0] in seen["PATH"]


def test_a_result_over_the_limit_is_truncated_with_a_note(config: McpConfig) -> None:
    config.add(stdio_server())
    manager = McpManager(config, max_result_chars=1_000)

    async def scenario() -> None:
        small = await manager.call("tools", "big", {"n": 1_000})
        assert (small.size, small.truncated, len(small.text)) == (1_000, False, 1_000)
        result = await manager.call("tools", "big", {"n": 250_000})
        assert result.size == 250_000 and result.truncated and not result.is_error
        assert result.text.startswith("x" * 1_000)
        assert result.text.endswith(
            "[truncated: the tool returned 250,000 characters; the first 1,000 are shown]"
        )
        await manager.aclose()

    run(scenario())


def test_aclose_leaves_no_child_process(config: McpConfig) -> None:
    config.add(stdio_server("one"))
    config.add(stdio_server("two"))
    manager = McpManager(config)

    async def scenario() -> list[int]:
        pids = [int((await manager.call(n, "pid")).text) for n in ("one", "two")]
        assert not any(gone(p) for p in pids)
        await manager.aclose()
        return pids

    pids = run(scenario())
    assert isinstance(pids, list) and all(gone(p) for p in pids)


# streamable HTTP -------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """The same test server over streamable HTTP, requiring a bearer key."""
    port = _free_port()
    command = [sys.executable, "-m", "tests.helpers.mcp_server", "--http", str(port)]
    proc = subprocess.Popen(
        [*command, "--bearer", "bearer-key-0004"],
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            break
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def test_http_server_with_a_bearer_key_lists_and_calls(config: McpConfig, http_server: str) -> None:
    config.add(McpServer(name="web", transport="http", url=http_server), bearer="bearer-key-0004")
    config.add(McpServer(name="nokey", transport="http", url=http_server))
    manager = McpManager(config)

    async def scenario() -> None:
        names = {t.name for t in await manager.tools("web")}
        assert {"add", "echo"} <= names
        assert (await manager.call("web", "add", {"a": 20, "b": 22})).text == "42"
        refused = await manager.check("nokey")
        assert refused.status == "failed" and http_server in refused.why
        await manager.aclose()

    run(scenario())
