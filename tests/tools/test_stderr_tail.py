"""An MCP server's stderr tail is collected without holding the event loop: a failed start
waits for the last lines its process wrote by sleeping on the loop, never by joining the
reader thread there (a grandchild that keeps the server's stderr open made that 0.2 s of a
frozen window per failure)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any, cast

import pytest

from desktop.store.tools import McpServer
from desktop.tools import manager, stderr
from desktop.tools.config import McpConfig
from desktop.tools.errors import ToolServerError
from desktop.tools.manager import McpConnection
from desktop.tools.stderr import StderrTail


class NoSecrets:
    """The configuration's keyring side, for a server that has no secrets."""

    def secret_env_values(self, server: McpServer) -> dict[str, str]:
        return {}


async def max_lag_while(work: Any, tick_s: float = 0.005) -> tuple[Any, float]:
    """Run ``work`` (a coroutine) with a ticker; its result and the loop's worst lag."""
    lags: list[float] = []

    async def ticker() -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(tick_s)
            lags.append(time.perf_counter() - started - tick_s)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    try:
        result = await work
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return result, max(lags, default=0.0)


def test_settled_lines_wait_without_holding_the_loop() -> None:
    """The write end stays open (as when a grandchild inherited it): the reader never ends,
    and the wait for it runs its full time on a loop that keeps ticking."""
    tail = StderrTail(5)
    keep_open = os.dup(tail.writer.fileno())  # another holder of the pipe's write end
    try:
        tail.writer.write("first\nsecond\n")
        tail.writer.flush()
        tail.close_writer()

        async def main() -> tuple[tuple[str, ...], float, float]:
            started = time.perf_counter()
            lines, lag = await max_lag_while(tail.settled_lines())
            return lines, lag, time.perf_counter() - started

        lines, lag, took = asyncio.run(main())
        assert lines == ("first", "second")
        assert took >= stderr.SETTLE_S * 0.9 and not tail.ended
        assert lag < 0.050, f"the loop stalled {lag * 1000:.0f} ms"
        assert tail.lines() == ("first", "second")  # never waits
    finally:
        os.close(keep_open)


def test_settled_lines_return_once_the_pipe_ends() -> None:
    tail = StderrTail(5)
    tail.writer.write("bye\n")
    tail.close_writer()

    async def main() -> tuple[tuple[str, ...], float]:
        started = time.perf_counter()
        lines = await tail.settled_lines(timeout=5.0)
        return lines, time.perf_counter() - started

    lines, took = asyncio.run(main())
    assert lines == ("bye",) and tail.ended and took < 1.0


def test_a_start_that_times_out_does_not_block_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that writes why on stderr and then never answers: the start times out while
    it still runs (its stderr open), and the failure names its line without the loop
    stalling for the tail (the old join held it 0.2 s)."""
    monkeypatch.setattr(manager, "START_TIMEOUT_S", 0.5)
    monkeypatch.setattr(manager, "STOP_TIMEOUT_S", 0.3)  # the start is cancelled, not stopped
    code = (
        "import sys\n"
        "print('waiting for a licence server', file=sys.stderr, flush=True)\n"
        "import time; time.sleep(1.0)\n"  # never answers (gone before the SDK's 2 s grace)
    )
    server = McpServer(name="mute", command=sys.executable, args=("-c", code), timeout_s=0.5)
    config = cast(McpConfig, NoSecrets())
    # The SDK is imported on first use, on the loop (~1 s of imports, not this test's subject)
    import mcp.client.stdio  # noqa: F401
    import mcp_types  # noqa: F401

    async def main() -> tuple[ToolServerError, float]:
        connection = McpConnection(server, config)

        async def start() -> ToolServerError:
            with pytest.raises(ToolServerError) as info:
                await connection.session()
            return info.value

        try:
            return await max_lag_while(start())
        finally:
            await connection.aclose()

    error, lag = asyncio.run(main())
    assert "did not start within 0.5 s" in error.user_message
    assert "waiting for a licence server" in error.stderr_tail
    assert lag < 0.100, f"the loop stalled {lag * 1000:.0f} ms"
