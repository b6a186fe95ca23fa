"""``ApiServer``: the local API server on the running asyncio loop; the window's Server page and
``simi serve`` both run this one.

It runs uvicorn's server on the loop it is started from (in the window, the qasync loop the
chats run on) rather than on a thread of its own: an API call then shares the window's local
worker pool, kept HTTP connections, price book and stats store as they are, with no lock or
second loop between them, and all the server does per token is write a few bytes. uvicorn is
maintained, speaks HTTP/1.1 with keep-alive and chunked bodies, and is already installed (the
MCP SDK brings it, with Starlette).

The socket is bound here, before uvicorn sees it, so a port in use or an address this machine
does not have is a ``ServeError`` with words for the person (uvicorn itself would exit the
process). uvicorn's signal handling is left out: the CLI stops it on Ctrl+C itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from desktop.errors import UserError
from desktop.serve.activity import Activity
from desktop.serve.app import ServeContext, build_app
from desktop.serve.calls import Runner
from desktop.serve.config import ServeConfig
from desktop.serve.gate import LocalGate
from desktop.serve.keys import ApiKeys
from desktop.serve.wire import model_ids
from desktop.store.agents import Agent, AgentStore
from desktop.store.serving import ApiKeyStore, ServedAgent, ServedAgentStore
from desktop.store.watch import data_version

if TYPE_CHECKING:
    from desktop.chat.services import Services

log = logging.getLogger("simi.serve")

LOCAL_SLOTS = 3  # local API calls at once: the pool's most workers (local/pool.MAX_WORKERS)


class ServeError(UserError):
    kind = "serve"


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port``, or a ``ServeError`` that says what to change."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror:
        raise ServeError(f"“{host}” is not an address of this machine.") from None
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServeError(
                f"Port {port} is already in use by another program. Choose another port, "
                "or stop the program that uses it."
            ) from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise ServeError(
                f"This user may not open port {port}; choose a port above 1023."
            ) from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise ServeError(f"“{host}” is not an address of this machine.") from None
        raise ServeError(
            f"The server could not listen on {host}:{port} ({exc.strerror})."
        ) from None
    return sock


class _CoalescingTransport:
    """A connection's transport whose writes in one turn of the loop leave as one ``send``.

    uvicorn writes a streamed reply's headers and its first chunk (and later the last chunk
    and the end of the body) with a ``write`` each, in the same turn of the loop. Each
    ``write`` is a system call that wakes the client, and a client on the same core then
    runs between the two: one wake-up more before the first token reaches it (about half a
    millisecond of TTFT, ``bench/serve.py``). Held until the loop's next turn, they leave
    together; a write alone leaves at that next turn, which is no later than the client
    could have read it anyway. Everything else is the real transport's."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._held: list[bytes] = []
        self._loop = asyncio.get_running_loop()

    def write(self, data: bytes) -> None:
        if not data:
            return
        if not self._held:
            self._loop.call_soon(self._flush)
        self._held.append(data)

    def _flush(self) -> None:
        if self._held:
            data = b"".join(self._held)
            self._held.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()  # what was written goes out before the connection closes
        self._transport.close()

    def abort(self) -> None:
        self._held.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _protocol() -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol (pure Python, always installed: httpcore needs h11, so the
    server is the same everywhere) on a coalescing transport."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class CoalescingH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(_CoalescingTransport(transport))  # type: ignore[arg-type]

    return CoalescingH11Protocol


def _uvicorn_server(app: Any) -> Any:
    import uvicorn

    class QuietServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield  # the window and the CLI handle their own signals

    config = uvicorn.Config(
        app,
        http=_protocol(),
        lifespan="off",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=3,
        server_header=False,
        h11_max_incomplete_event_size=64 * 1024,
    )
    return QuietServer(config)


class ApiServer:
    """Start, stop, and what a client needs to know (``address``)."""

    def __init__(
        self, services: Services, config: ServeConfig, activity: Activity | None = None
    ) -> None:
        self.services = services
        self.config = config
        self.keys = ApiKeys(ApiKeyStore(services.db), services.secrets)
        self.served = ServedAgentStore(services.db)
        self.activity = activity or Activity()
        self.gate = LocalGate(LOCAL_SLOTS, config.queue_limit, config.queue_timeout_s)
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def address(self) -> str:
        """The base URL a client sets (``http://127.0.0.1:7464/v1``), with the bound port."""
        return self.config.base_url

    def context(self) -> ServeContext:
        services = self.services
        return ServeContext(
            config=self.config,
            agents=services.agents.list,
            served=self.served,
            keys=self.keys,
            deps=services.chat.call_deps,
            gate=self.gate,
            activity=self.activity,
            keep=self._keep if self.config.keep_conversations else None,
            turn_runner=self._turn_runner,
            version=self._agents_version,
        )

    def _agents_version(self) -> tuple[int, int, int]:
        """Changes when the agents or how they are served may have: another connection's
        commit, or a write through this process's stores."""
        return (data_version(self.services.db.conn), AgentStore.writes, ServedAgentStore.writes)

    def _turn_runner(self, agent: Agent, request: Any, client: str | None) -> Runner | None:
        from desktop.serve.turns import turn_runner

        return turn_runner(self.services, agent, request, client)

    def _keep(self, agent: Agent, request: Any, result: Any, client: str | None) -> None:
        from desktop.serve.keeping import keep_as_conversation

        services = self.services
        keep_as_conversation(services.conversations, services.stats, agent, request, result, client)

    def exposed(self) -> list[tuple[str, Agent, ServedAgent]]:
        """Every agent with its model id and how it is served (listed or not), by model id."""
        served = self.served.all()
        return [
            (model_id, agent, served.get(agent.id or 0, ServedAgent(agent.id or 0)))
            for model_id, agent in model_ids(
                [a for a in self.services.agents.list() if a.id is not None]
            ).items()
        ]

    def set_served(self, agent_id: int, **how: bool) -> None:
        """Change how an agent is served (``exposed``, ``client_sampling``, ``run_tools``):
        a running server follows from its next request."""
        self.served.set(replace(self.served.get(agent_id), **how))

    async def start(self) -> None:
        """Listen and serve (returns once listening). Raises ``ServeError`` (or a
        ``ValidationError`` for a setting that cannot work)."""
        if self.running:
            return
        config = self.config
        config.check()
        if config.keys_required and not self.keys.any():
            raise ServeError(
                f"Listening on {config.host} lets other machines reach the server, so it "
                "needs an API key: make one first (Server page, or `simi serve keys add "
                "NAME`)."
                if not config.loopback
                else "Keys are required, but there is no API key yet: make one first."
            )
        sock = bind(config.host, config.port)
        if config.port == 0:  # a free port chosen by the system (tests, benchmarks)
            self.config = config = replace(config, port=sock.getsockname()[1])
        self._socket = sock
        self._server = _uvicorn_server(build_app(self.context()))
        self._server.config.load()
        self._server.lifespan = self._server.config.lifespan_class(self._server.config)
        await self._server.startup(sockets=[sock])
        self._task = asyncio.ensure_future(self._run())
        log.info("API server listening on %s", self.address)

    async def _run(self) -> None:
        server = self._server
        try:
            await server.main_loop()
        finally:
            await server.shutdown(sockets=[self._socket] if self._socket else None)

    async def stop(self) -> None:
        """Stop listening; calls under way get a few seconds to end, then are cancelled."""
        task, server = self._task, self._server
        if task is None or server is None:
            return
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        self._task = self._server = self._socket = None
        log.info("API server stopped")

    async def serve_forever(self) -> None:
        """Start, then run until stopped (``simi serve``)."""
        await self.start()
        task = self._task
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task
