"""MCP servers at run time: one ``McpConnection`` per server, started on first use.

Contract (the agentic loop of issue 18 builds on it):

- ``McpManager(config)``; ``await manager.tools(server)`` → ``tuple[ToolInfo, ...]`` (starts the
  server when it is not running); ``await manager.call(server, tool, arguments, timeout=None)``
  → ``ToolResult``; ``manager.state(server)`` → ``ServerState`` (stopped | starting | ready,
  with its tools | failed, with why and its stderr's last ``STDERR_LINES`` lines);
  ``await manager.check(server)`` starts it and returns the state without raising;
  ``await manager.aclose()`` at the app's exit stops every server. ``on_state`` listeners
  hear ``(server name, ServerState)`` on every change (on the loop's thread).
- A tool's own error comes back as ``ToolResult(is_error=True)``, as does a call the server
  refused (unknown tool, arguments that do not fit its schema): both go back to the model as
  errors. A server that cannot start, stops during a call or answers nonsense raises
  ``ToolServerError`` (a ``UserError``); a call past its timeout (``timeout`` or the server's
  ``timeout_s``) is cancelled and raises ``ToolTimeout``. Cancelling the awaiting task cancels
  the call (the SDK tells the server with ``notifications/cancelled``).
- A server that died (mid-call, or while idle: each call is preceded by a ping) is started
  again on the next call.
- Results are text: ``TextContent`` joined; images, audio and resources described in words
  (never rendered: the UI shows ``text`` as plain text). ``size`` counts the whole text,
  ``text`` keeps at most ``max_result_chars`` (``MAX_RESULT_CHARS``) with a note saying so.

Child processes get a minimal environment (``child_environment``): PATH, HOME, LANG, TMPDIR,
the server's configured env and its secret env (from the keyring); never the app's own
variables (SIMI_HOME, HF_TOKEN, API keys…). The SDK's ``stdio_client`` adds its own short safe
list under ours (HOME, LOGNAME, PATH, SHELL, TERM, USER). The command is resolved with
``shutil.which`` against that PATH before anything is spawned, so "not found" says which PATH
was searched (a GUI app often has a shorter PATH than a terminal) and suggests an absolute path.

All async (asyncio; the window runs on qasync). Each connection lives in its own task that
holds the SDK's context managers (anyio cancel scopes must be entered and left in one task).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from desktop.errors import UserError
from desktop.settings.version import app_version
from desktop.store.tools import McpServer
from desktop.tools.config import McpConfig
from desktop.tools.environment import child_environment, child_path, resolve_command
from desktop.tools.errors import ToolServerError, ToolTimeout
from desktop.tools.results import ServerState, Status, ToolInfo, ToolResult, content_text, cut
from desktop.tools.stderr import StderrTail

__all__ = [
    "MAX_RESULT_CHARS",
    "McpConnection",
    "McpManager",
    "ServerState",
    "Status",
    "ToolInfo",
    "ToolResult",
    "child_environment",
    "child_path",
    "content_text",
    "resolve_command",
]

log = logging.getLogger("simi.tools")

MAX_RESULT_CHARS = 100_000
STDERR_LINES = 20
PING_TIMEOUT_S = 10.0
# Starting may take longer than a call (npx or uvx may fetch the package on the first run).
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 8.0  # the SDK closes stdin, waits 2 s, then SIGTERM, 2 s, SIGKILL


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _words(exc: BaseException) -> str:
    exc = _leaf(exc)
    if isinstance(exc, UserError):
        return exc.user_message
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _seconds(value: float) -> str:
    return f"{value:g}"


def _connection_closed(exc: BaseException) -> bool:
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED

    leaf = _leaf(exc)
    return isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED


# one server -------------------------------------------------------------------------------------
class McpConnection:
    """One server's connection: started on demand, stopped by ``aclose``."""

    def __init__(
        self,
        server: McpServer,
        config: McpConfig,
        *,
        parent_env: Mapping[str, str] | None = None,
        max_result_chars: int = MAX_RESULT_CHARS,
        on_state: Callable[[ServerState], None] | None = None,
    ) -> None:
        self.server = server
        self._config = config
        self._parent_env = parent_env
        self._max_chars = max_result_chars
        self._on_state = on_state
        self._state = ServerState()
        self._session: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self._stderr: StderrTail | None = None

    @property
    def state(self) -> ServerState:
        return self._state

    def _set(self, state: ServerState) -> None:
        self._state = state
        if self._on_state is not None:
            self._on_state(state)

    def stderr_tail(self) -> tuple[str, ...]:
        """What the server has written on stderr so far (its last lines; never waits)."""
        return self._stderr.lines() if self._stderr is not None else ()

    async def _fail(self, why: str) -> ToolServerError:
        tail = await self._stderr.settled_lines() if self._stderr is not None else ()
        self._set(ServerState("failed", why=why, stderr_tail=tail))
        message = f"MCP server “{self.server.name}” {why}"
        if tail:
            message += "\nIts last output:\n" + "\n".join(tail)
        return ToolServerError(message, tail)

    @property
    def running(self) -> bool:
        return self._session is not None and self._task is not None and not self._task.done()

    async def session(self) -> Any:
        """The live ``ClientSession``, starting the server when it is not running."""
        async with self._lock:
            if self.running:
                return self._session
            await self._shutdown()
            return await self._start()

    async def tools(self) -> tuple[ToolInfo, ...]:
        await self.session()
        return self._state.tools

    async def _transport(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        """Enters the SDK transport (in the connection's task); returns its stream pair."""
        server = self.server
        if server.transport == "http":
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            bearer = await asyncio.to_thread(self._config.bearer_value, server)
            headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
            client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
            await stack.enter_async_context(client)
            return await stack.enter_async_context(
                streamable_http_client(server.url, http_client=client)
            )
        from mcp.client.stdio import StdioServerParameters, stdio_client

        secret_values = await asyncio.to_thread(self._config.secret_env_values, server)
        env = child_environment(server, secret_values, self._parent_env)
        command = resolve_command(server, env["PATH"])
        tail = self._stderr = StderrTail(STDERR_LINES)
        stack.callback(tail.close_writer)
        errlog = tail.writer
        params = StdioServerParameters(
            command=command, args=list(server.args), env=env, cwd=server.cwd or None
        )
        streams = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        tail.close_writer()  # the child has its own copy: the reader ends when the child does
        return streams

    async def _run(self, ready: asyncio.Future[Any]) -> None:
        from mcp import ClientSession
        from mcp_types import Implementation

        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._transport(stack)
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        client_info=Implementation(name="SIMI Multi", version=app_version()),
                    )
                )
                await session.initialize()
                tools = await self._list_tools(session)
                self._session = session
                self._set(ServerState("ready", tools=tools))
                ready.set_result(session)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError("stopped"))
            if not isinstance(exc, Exception):
                raise
            log.info("MCP server %s: connection ended: %s", self.server.name, _words(exc))
        finally:
            self._session = None

    async def _list_tools(self, session: Any) -> tuple[ToolInfo, ...]:
        tools: list[ToolInfo] = []
        cursor: str | None = None
        from mcp_types import PaginatedRequestParams

        while True:
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            for t in page.tools:
                tools.append(
                    ToolInfo(self.server.name, t.name, t.description or "", dict(t.input_schema))
                )
            cursor = page.next_cursor
            if not cursor:
                return tuple(tools)

    async def _start(self) -> Any:
        self._stop = asyncio.Event()
        self._set(ServerState("starting"))
        ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(ready), name=f"mcp:{self.server.name}")
        limit = max(self.server.timeout_s, START_TIMEOUT_S)
        try:
            async with asyncio.timeout(limit):
                return await asyncio.shield(ready)
        except TimeoutError:
            err = await self._fail(f"did not start within {_seconds(limit)} s.")
            await self._shutdown()
            raise err from None
        except asyncio.CancelledError:
            await asyncio.shield(self._shutdown())
            self._set(ServerState("stopped"))
            raise
        except UserError as exc:  # command not found (before any spawn), a secret not there
            await self._shutdown()
            self._set(ServerState("failed", why=exc.user_message))
            raise
        except Exception as exc:
            where = self.server.url if self.server.transport == "http" else self.server.command
            if _connection_closed(exc):
                why = f"exited while starting ({where})."
            elif isinstance(_leaf(exc), OSError):
                why = f"could not be started ({where}): {_words(exc)}."
            else:
                why = f"could not be reached or did not answer as an MCP server ({where}): "
                why += f"{_words(exc)}."
            err = await self._fail(why)
            await self._shutdown()
            raise err from exc

    async def _shutdown(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            self._stop.set()
            try:
                await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT_S)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            except Exception:
                pass
        elif task is not None:
            with contextlib.suppress(BaseException):
                task.result()
        self._session = None

    async def _live_session(self) -> Any:
        """The session after a ping: a server that died while idle is started again."""
        from mcp import MCPError

        session = await self.session()
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                await session.send_ping()
            return session
        except (MCPError, TimeoutError, OSError) as exc:
            log.info("MCP server %s did not answer a ping (%s): restarting", self.server.name, exc)
        async with self._lock:
            if self._session is session:
                await self._shutdown()
        return await self.session()

    async def call(
        self, tool: str, arguments: Mapping[str, Any] | None, timeout: float | None = None
    ) -> ToolResult:
        from mcp import MCPError
        from pydantic import ValidationError as PydanticError

        limit = timeout if timeout is not None else self.server.timeout_s
        name = self.server.name
        started = time.perf_counter()
        session = await self._live_session()
        try:
            async with asyncio.timeout(limit):
                result = await session.call_tool(tool, dict(arguments or {}))
        except TimeoutError:
            raise ToolTimeout(
                f"{tool} on {name} did not answer within {_seconds(limit)} s; the call was "
                "cancelled."
            ) from None
        except MCPError as exc:
            if _connection_closed(exc):
                async with self._lock:
                    if self._session is session or self._session is None:
                        err = await self._fail(
                            f"stopped during the call to {tool}. It is started again on the "
                            "next call."
                        )
                        await self._shutdown()
                        raise err from exc
                raise ToolServerError(f"MCP server “{name}” stopped during the call.") from exc
            text = f"The server refused the call: {exc.message or exc.code}"
            return self._result(tool, text, True, started)
        except PydanticError as exc:
            raise ToolServerError(
                f"MCP server “{name}” answered the call to {tool} with something that is not "
                f"a tool result ({exc.error_count()} problems)."
            ) from exc
        return self._result(tool, content_text(result), bool(result.is_error), started)

    def _result(self, tool: str, text: str, is_error: bool, started: float) -> ToolResult:
        shown, truncated = cut(text, self._max_chars)
        return ToolResult(
            server=self.server.name,
            tool=tool,
            text=shown,
            is_error=is_error,
            size=len(text),
            duration_ms=(time.perf_counter() - started) * 1000.0,
            truncated=truncated,
        )

    async def aclose(self) -> None:
        async with self._lock:
            await self._shutdown()
            if self._state.status != "failed":
                self._set(ServerState("stopped"))


# every server -----------------------------------------------------------------------------------
class McpManager:
    """Every configured server's connection (see the module's docstring for the contract)."""

    def __init__(
        self,
        config: McpConfig,
        *,
        parent_env: Mapping[str, str] | None = None,
        max_result_chars: int = MAX_RESULT_CHARS,
    ) -> None:
        self.config = config
        self._parent_env = parent_env
        self._max_chars = max_result_chars
        self._connections: dict[str, McpConnection] = {}
        self.on_state: list[Callable[[str, ServerState], None]] = []

    def _key(self, name: str) -> str:
        return name.casefold()

    def state(self, server: str) -> ServerState:
        conn = self._connections.get(self._key(server))
        return conn.state if conn is not None else ServerState()

    def _notify(self, name: str, state: ServerState) -> None:
        for listener in list(self.on_state):
            listener(name, state)

    async def connection(self, server: str) -> McpConnection:
        """The server's connection (not started yet): a configuration edited since the last
        start gets a fresh connection, the old one is stopped."""
        stored = self.config.require(server)
        if not stored.enabled:
            raise ToolServerError(f"MCP server “{stored.name}” is turned off.")
        key = self._key(stored.name)
        conn = self._connections.get(key)
        if conn is not None and conn.server.to_public_dict() != stored.to_public_dict():
            await conn.aclose()
            conn = None
        if conn is None:
            conn = McpConnection(
                stored,
                self.config,
                parent_env=self._parent_env,
                max_result_chars=self._max_chars,
                on_state=lambda state: self._notify(stored.name, state),
            )
            self._connections[key] = conn
        return conn

    async def tools(self, server: str) -> tuple[ToolInfo, ...]:
        return await (await self.connection(server)).tools()

    async def check(self, server: str) -> ServerState:
        """Starts the server if needed and returns its state; never raises a ``UserError``."""
        try:
            conn = await self.connection(server)
            await conn.tools()
            return conn.state
        except ToolServerError:
            return self.state(server)
        except UserError as exc:
            return ServerState("failed", why=exc.user_message)

    async def call(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> ToolResult:
        return await (await self.connection(server)).call(tool, arguments, timeout)

    async def stop(self, server: str) -> None:
        conn = self._connections.pop(self._key(server), None)
        if conn is not None:
            await conn.aclose()

    async def aclose(self) -> None:
        """Stops every server (the app's exit)."""
        connections, self._connections = list(self._connections.values()), {}
        await asyncio.gather(*(c.aclose() for c in connections), return_exceptions=True)
