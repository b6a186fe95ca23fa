"""A real MCP server written with the official SDK (``mcp.server.mcpserver.MCPServer``), for the
tests of ``desktop/tools``: ``python -m tests.helpers.mcp_server --stdio`` or ``--http PORT``
(streamable HTTP at ``http://127.0.0.1:PORT/mcp``; ``--bearer KEY`` refuses requests without
``Authorization: Bearer KEY``).

Tools: ``add(a, b)``, ``echo(text)``, ``fail(message)`` (an error result), ``sleep(seconds)``
(hangs), ``crash()`` (the process exits mid-call, after a line on stderr), ``big(n)`` (n
characters), ``env(name)`` (an environment variable's value, or "<unset>"), ``fail_env(name)``
(an error result quoting that value, as a tool that leaks its key in an error), ``pid()``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server: MCPServer = MCPServer("simi-test-tools")


@server.tool()
def add(a: float, b: float) -> str:
    """Add two numbers."""
    total = a + b
    return str(int(total) if total == int(total) else total)


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def fail(message: str) -> str:
    """Fail with the given message (a tool error result, as a tool reports a failure)."""
    raise ToolError(message)


@server.tool()
async def sleep(seconds: float) -> str:
    """Wait, then answer."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def crash() -> str:
    """Exit the server process in the middle of the call."""
    print("test server: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def big(n: int) -> str:
    """Return n characters."""
    return "x" * n


@server.tool()
def env(name: str) -> str:
    """Return an environment variable of the server process."""
    return os.environ.get(name, "<unset>")


@server.tool()
def fail_env(name: str) -> str:
    """Fail with an error that quotes an environment variable's value."""
    raise ToolError(f"authentication failed with {name}={os.environ.get(name, '<unset>')}")


@server.tool()
def pid() -> str:
    """The server process's id (tests check it is gone after a stop)."""
    return str(os.getpid())


def _http(port: int, bearer: str | None) -> None:
    import uvicorn
    from starlette.responses import PlainTextResponse

    app = server.streamable_http_app()
    if bearer:
        inner = app

        async def guarded(scope, receive, send):  # type: ignore[no-untyped-def]
            if scope["type"] == "http":
                headers = dict(scope.get("headers") or [])
                if headers.get(b"authorization") != f"Bearer {bearer}".encode():
                    await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
                    return
            await inner(scope, receive, send)

        app = guarded  # type: ignore[assignment]
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def main() -> None:
    parser = argparse.ArgumentParser()
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--stdio", action="store_true")
    group.add_argument("--http", type=int, metavar="PORT")
    parser.add_argument("--bearer")
    args = parser.parse_args()
    print("test server: started", file=sys.stderr, flush=True)
    if args.stdio:
        server.run("stdio")
    else:
        _http(args.http, args.bearer)


if __name__ == "__main__":
    main()
