"""The HTTP side: an ASGI app (Starlette) with OpenAI's routes, behind ``Guard``.

- ``GET /v1/models``: every agent this client may call, as a model (``wire.model_ids``).
- ``POST /v1/chat/completions``: one reply from the agent named by ``model``, streamed as
  server-sent events or whole (``calls.ApiCall``).

Every refusal is OpenAI's error shape with its status (``wire.ApiError``); an unexpected
failure is logged and answered with a 500 in the same shape, never a traceback. No route reads
a file or takes a path.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from desktop.chat.call import CallDeps
from desktop.chat.one_shot import OneShot
from desktop.llm.events import Finished, ReasoningDelta, TextDelta, ToolCall
from desktop.llm.provider import ChatRequest
from desktop.serve import guard
from desktop.serve.activity import Activity, Served
from desktop.serve.calls import ApiCall, Runner, error_of, one_call
from desktop.serve.config import ServeConfig
from desktop.serve.gate import LocalGate
from desktop.serve.keys import KEY_PREFIX, ApiKeys
from desktop.serve.wire import (
    ApiError,
    ClientAsk,
    Completion,
    agent_request,
    finish_of,
    model_entry,
    model_ids,
    parse_ask,
    sse,
    tool_call_body,
)
from desktop.store.agents import Agent
from desktop.store.serving import ApiKeyRecord, ServedAgent, ServedAgentStore

log = logging.getLogger("simi.serve")

T = TypeVar("T")


@dataclass
class ServeContext:
    """What the routes need from the app: its agents and how each is served, the keys, the
    one call path's dependencies, the queue in front of local models, the request list."""

    config: ServeConfig
    agents: Callable[[], list[Agent]]
    served: ServedAgentStore
    keys: ApiKeys
    deps: CallDeps
    gate: LocalGate
    activity: Activity
    # an agent that runs its own tools answers as a conversation turn: (agent, request,
    # client) -> its runner, or None when the agent has no tools to run (``serve/turns.py``)
    turn_runner: Callable[[Agent, Any, str | None], Runner | None] | None = None
    # keep an API call as a conversation (the setting): (agent, request, reply, client)
    keep: Callable[[Agent, Any, OneShot, str | None], None] | None = None
    # what changes whenever the agents or how they are served may have: the model list is
    # kept between requests while it stays the same (None: read them for every request)
    version: Callable[[], object] | None = None


def error_response(error: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    extra = dict(headers or {})
    if error.retry_after is not None:
        extra["Retry-After"] = str(error.retry_after)
    if error.status == 401:
        extra["WWW-Authenticate"] = "Bearer"
    return JSONResponse(error.body(), status_code=error.status, headers=extra)


class Guard:
    """Host, Origin and size rules around the app (``serve/guard.py`` says why)."""

    def __init__(self, app: ASGIApp, config: ServeConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            return  # no websockets
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        origin = headers.get("origin")
        try:
            guard.check_host(self.config, headers.get("host"))
            if not guard.origin_allowed(self.config, origin):
                raise ApiError(
                    403,
                    "Requests from this web page's origin are not allowed. Add it to the "
                    "server's allowed origins in SIMI Multi to let it call the server.",
                    type="permission_error",
                    code="origin_not_allowed",
                )
            if scope["method"] == "OPTIONS":
                response: Response = Response(
                    status_code=204, headers=guard.preflight_headers(self.config, origin)
                )
                await response(scope, receive, send)
                return
            length = headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > self.max_body):
                raise self.too_large()
        except ApiError as error:  # a listed page may read why (a 413, a 421)
            await error_response(error, guard.cors_headers(self.config, origin))(
                scope, receive, send
            )
            return
        cors = guard.cors_headers(self.config, origin)
        receive = self._capped(receive)

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start" and cors:
                message["headers"] = [
                    *message.get("headers", []),
                    *((k.lower().encode(), v.encode()) for k, v in cors.items()),
                ]
            await send(message)

        await self.app(scope, receive, send_with_cors)

    @property
    def max_body(self) -> int:
        return self.config.max_body_bytes

    def too_large(self) -> ApiError:
        mb = self.max_body / 1024 / 1024
        return ApiError(
            413,
            f"The request body is larger than the server takes ({mb:g} MB).",
            code="request_too_large",
        )

    def _capped(self, receive: Receive) -> Receive:
        """A body sent without Content-Length (chunked) is counted as it arrives."""
        seen = 0

        async def capped() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise _TooLarge
            return message

        return capped


class _TooLarge(Exception):
    pass


async def _body(request: Request, limit: int) -> Any:
    try:
        raw = await request.body()
    except _TooLarge:
        raise ApiError(
            413,
            f"The request body is larger than the server takes ({limit / 1024 / 1024:g} MB).",
            code="request_too_large",
        ) from None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "The body is not valid JSON.", code="invalid_json") from None


Catalog = tuple[dict[str, Agent], dict[int, ServedAgent]]


class ApiRoutes:
    def __init__(self, ctx: ServeContext) -> None:
        self.ctx = ctx
        self._catalog: tuple[object, Catalog] | None = None  # (version, model ids, served)

    # who is asking -----------------------------------------------------------------------
    def client(self, request: Request) -> ApiKeyRecord | None:
        """The key the request carries, checked (``ApiError`` 401): None when it carries none
        and none is required."""
        token = guard.bearer(request.headers.get("authorization"))
        if token is None:
            if self.ctx.config.keys_required:
                raise guard.unauthorized()
            return None
        record = self.ctx.keys.verify(token)
        if record is None:
            if not self.ctx.config.keys_required and not token.startswith(KEY_PREFIX):
                return None  # SDKs must send some key ("not-needed"): no key needed here
            raise guard.unauthorized()  # a wrong or revoked SIMI key is said, needed or not
        self.ctx.keys.store.touch(record.id)  # "last used", beside the key on the page
        return record

    def callable_agents(self, key: ApiKeyRecord | None) -> dict[str, tuple[Agent, ServedAgent]]:
        """model id -> (agent, how it is served), for what this client may call. The ids are
        made over every agent, so an agent's id is the same whichever others are served."""
        agents, served = self.catalog()
        names = {n.casefold() for n in self.ctx.config.agents}
        found = {}
        for model_id, agent in agents.items():
            how = served.get(agent.id or 0, ServedAgent(agent.id or 0))
            if (
                how.exposed
                and (not names or agent.name.casefold() in names)
                and (key is None or key.allows(agent.id))
            ):
                found[model_id] = (agent, how)
        return found

    def catalog(self) -> Catalog:
        """Every agent by model id, and how each is served: read again only when the
        context's version changed (reading them costs ~20 µs an agent, on every request)."""
        version = self.ctx.version() if self.ctx.version is not None else None
        kept = self._catalog
        if kept is not None and version is not None and kept[0] == version:
            return kept[1]
        agents = model_ids([a for a in self.ctx.agents() if a.id is not None])
        catalog = (agents, self.ctx.served.all())
        self._catalog = (version, catalog)
        return catalog

    # routes ---------------------------------------------------------------------------------
    async def models(self, request: Request) -> Response:
        key = self.client(request)
        created = int(time.time())
        data = [
            model_entry(model_id, agent, created)
            for model_id, (agent, _served) in self.callable_agents(key).items()
        ]
        return JSONResponse({"object": "list", "data": data})

    async def completions(self, request: Request) -> Response:
        ctx = self.ctx
        peer = request.client.host if request.client else ""
        entry: Served | None = None
        try:
            key = self.client(request)
            body = await _body(request, ctx.config.max_body_bytes)
            model = body.get("model") if isinstance(body, dict) else None
            entry = ctx.activity.begin(
                key.name if key else "",
                peer,
                str(model or ""),
                bool(body.get("stream")) if isinstance(body, dict) else False,
            )
            ask = parse_ask(body)
            found = self.callable_agents(key).get(ask.model)
            if found is None:
                raise ApiError(
                    404,
                    f"The model '{ask.model}' does not exist or this key may not call it. "
                    "GET /v1/models lists the agents it may call.",
                    code="model_not_found",
                    param="model",
                )
            agent, served = found
            entry.agent = agent.name
            chat_request = agent_request(agent, ask, client_sampling=served.client_sampling)
            return await self._answer(request, entry, (agent, served), chat_request, ask, key)
        except ApiError as error:
            if entry is not None:
                entry.state, entry.status, entry.error = "refused", error.status, error.message
                ctx.activity.changed(entry)
            return error_response(error)
        except ClientDisconnect:
            return Response(status_code=499)

    async def _answer(
        self,
        request: Request,
        entry: Served,
        found: tuple[Agent, ServedAgent],
        chat_request: ChatRequest,
        ask: ClientAsk,
        key: ApiKeyRecord | None,
    ) -> Response:
        ctx = self.ctx
        agent, served = found
        client = key.name if key else None
        runner = (
            ctx.turn_runner(agent, chat_request, client)
            if ctx.turn_runner is not None and served.run_tools and not ask.tools
            else None
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ctx.config.queue_timeout_s
        placed: float | None = None
        if agent.is_local:
            if ctx.gate.running >= ctx.gate.slots or ctx.gate.waiting:
                entry.state = "waiting"
                ctx.activity.changed(entry)
            # 429 / 503 here; a client that leaves while it waits gives its place up
            placed = await _until_disconnect(request, ctx.gate.enter(deadline))

        def done(result: OneShot | None) -> None:
            if placed is not None:
                ctx.gate.leave(placed)
            if result is None:  # cancelled before it began
                entry.state = "cancelled"
                ctx.activity.changed(entry)
                return
            entry.take_stats(result.stats, result.stats_id)
            entry.state = {"complete": "done"}.get(result.status, result.status)
            if result.status == "error":
                entry.error = result.error_text or ""
            ctx.activity.changed(entry)
            # a turn (its own tools) is a conversation already
            if ctx.keep is not None and runner is None and result.status != "error":
                try:
                    ctx.keep(agent, chat_request, result, client)
                except Exception:
                    log.exception("could not keep the API call as a conversation")

        call = ApiCall(runner or one_call(ctx.deps, agent, chat_request, client), on_done=done)
        entry.state = "answering"
        ctx.activity.changed(entry)
        try:
            await _until_disconnect(request, call.first_output(deadline))
        except ApiError as error:
            entry.status = error.status
            raise
        except asyncio.CancelledError:
            call.cancel()
            raise
        except ClientDisconnect:
            call.cancel()
            raise
        completion = Completion(ask.model, f"{entry.id:x}{int(entry.started * 1000):x}")
        if ask.stream:
            return DisconnectAwareStream(
                _chunks(call, completion, ask.include_usage),
                on_disconnect=call.cancel,
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        text: list[str] = []
        calls: list[ToolCall] = []
        finish: str | None = None  # no Finished: the call failed (or ended without saying)

        async def collect() -> None:
            nonlocal finish
            async for event in call.events():
                if isinstance(event, TextDelta):
                    text.append(event.text)
                elif isinstance(event, ToolCall):
                    calls.append(event)
                elif isinstance(event, Finished):
                    finish = event.reason

        try:
            await _until_disconnect(request, collect())
        except (asyncio.CancelledError, ClientDisconnect):
            call.cancel()
            raise
        if finish is None or finish == "error":  # partial text is not a reply
            result = call.result() or await _ended(call)
            if result is not None and result.status == "error":
                raise error_of(result)
            raise ApiError(500, "The agent's call ended without a reply.", type="server_error")
        return JSONResponse(completion.whole("".join(text), calls, finish_of(finish), call.usage()))

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/v1/chat/completions", self.completions, methods=["POST"]),
                # clients that leave out /v1 (some editors' "OpenAI-compatible" settings)
                Route("/models", self.models, methods=["GET"]),
                Route("/chat/completions", self.completions, methods=["POST"]),
            ],
            exception_handlers={
                ApiError: _refused,
                404: _not_found,
                405: _not_allowed,
                500: _server_error,
            },
        )


async def _chunks(
    call: ApiCall, completion: Completion, include_usage: bool
) -> AsyncIterator[bytes]:
    """The reply as OpenAI's chunks: the role first, then text, reasoning and tool calls as
    they come, the finish reason, the usage (when asked for) and ``[DONE]``. The role goes out
    in one write with the first output (it is ready then): one wake-up less before the first
    token reaches the client."""
    role: bytes | None = sse(completion.chunk({"role": "assistant", "content": ""}))
    tool_index = 0
    finish: str | None = None
    async for event in call.events():
        if role is not None:
            if isinstance(event, TextDelta) and event.text:
                yield role + completion.text_frame(event.text)
                role = None
                continue
            yield role
            role = None
        if isinstance(event, TextDelta):
            if event.text:
                yield completion.text_frame(event.text)
        elif isinstance(event, ReasoningDelta):
            yield sse(completion.chunk({"reasoning_content": event.text}))
        elif isinstance(event, ToolCall):
            yield sse(completion.chunk({"tool_calls": [tool_call_body(event, tool_index)]}))
            tool_index += 1
        elif isinstance(event, Finished):
            finish = event.reason
    if role is not None:
        yield role
    if finish is None or finish == "error":
        result = call.result() or await _ended(call)
        message = (result.error_text if result else None) or "The agent's call failed."
        yield sse(ApiError(500, message, type="server_error").body())
        return
    yield sse(completion.chunk({}, finish_of(finish)))
    if include_usage:
        yield sse(completion.chunk({}, usage=call.usage()))
    yield sse("[DONE]")


async def _ended(call: ApiCall) -> OneShot | None:
    try:
        return await asyncio.shield(call.task)
    except asyncio.CancelledError:
        return None


async def _until_disconnect(request: Request, work: Awaitable[T]) -> T:
    """``work``'s result, unless the client goes away first (``ClientDisconnect``; the work
    is cancelled)."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request.receive))
    try:
        await asyncio.wait([task, gone], return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        gone.cancel()
    if not task.done():
        task.cancel()
        raise ClientDisconnect
    return task.result()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class DisconnectAwareStream(StreamingResponse):
    """A stream that stops its generation as soon as the client goes away: Starlette's own
    only notices at the next write on ASGI 2.4 servers, which may be a long prefill later."""

    def __init__(self, content: Any, *, on_disconnect: Callable[[], None], **kw: Any) -> None:
        super().__init__(content, **kw)
        self._on_disconnect = on_disconnect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        streaming = asyncio.ensure_future(self.stream_response(send))
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait([streaming, gone], return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not streaming.done():
                self._on_disconnect()
                streaming.cancel()
                await asyncio.gather(streaming, return_exceptions=True)
            gone.cancel()
        if streaming.done() and not streaming.cancelled():
            exc = streaming.exception()
            if exc is not None and not isinstance(exc, OSError):
                raise exc


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc)


async def _not_found(request: Request, exc: Exception) -> Response:
    return error_response(
        ApiError(404, f"There is no route {request.url.path}.", code="unknown_url")
    )


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return error_response(ApiError(405, f"{request.method} is not allowed on {request.url.path}."))


async def _server_error(request: Request, exc: Exception) -> Response:
    log.error("the API server failed on %s", request.url.path, exc_info=exc)
    return error_response(
        ApiError(
            500,
            "SIMI Multi's server failed on this request; its log has the details.",
            type="server_error",
        )
    )


def build_app(ctx: ServeContext) -> ASGIApp:
    return Guard(ApiRoutes(ctx).app(), ctx.config)
