"""HTTP plumbing the remote providers share (OpenAI-compatible, Anthropic, Gemini).

One ``HttpEndpoint`` per provider instance owns (or borrows from ``desktop.llm.pool``, which
keeps one per endpoint across turns) an ``httpx.AsyncClient`` (``new_client``) with TLS
verification always on (optionally against a custom CA bundle), a *stall* timeout between
received chunks (not a whole-response timeout), and client-side connect/headers timing from
the httpx ``trace`` extension; every failure becomes a typed ``UserError`` through its
``EndpointErrors`` (``desktop.llm.http_errors``).

``HttpProvider`` is the base of the three providers: it posts a request, passes the timing on,
decodes each server-sent event's JSON object and hands it to the provider's ``ReplyReader``,
and reads (paged) model lists. Each provider module keeps only its wire format: URL, headers,
body, what each event means, and its usage. Provider JSON stays in the provider modules.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import functools
import json
import os
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Iterator
from typing import Any, ClassVar, TypedDict, Unpack
from urllib.parse import quote, urlsplit

import certifi
import httpx
import httpx_sse

from desktop.errors import UserError, ValidationError
from desktop.llm.errors import BadResponse, Stalled
from desktop.llm.events import (
    Finished,
    FinishReason,
    ReasoningDelta,
    RunInfo,
    StreamEvent,
    TextDelta,
    Timing,
    Usage,
)
from desktop.llm.http_errors import EndpointErrors, redact
from desktop.llm.provider import ChatRequest

ServerSentEvent = httpx_sse.ServerSentEvent
MAX_MODEL_PAGES = 20  # a guard against a server that never says a model list is done
DRAIN_S = 1.0  # how long the end of a complete reply's body is waited for (connection reuse)


class CallTimer:
    """Client-side timing of one HTTP call from httpx ``trace`` events.

    ``connect_ms``: TCP connect (including the DNS lookup anyio does first) plus the TLS
    handshake (``tls_ms``, https only); ``0.0`` when a kept-alive connection was reused
    (``reused``: no connect happened, the trace never saw ``connection.connect_tcp``);
    ``None`` before the headers.
    ``headers_ms``: from the start of the call until the response headers were read, connect
    included.
    """

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self._connect_started: float | None = None
        self._tls_started: float | None = None
        self.connect_ms: float | None = None
        self.tls_ms: float | None = None
        self.headers_ms: float | None = None

    async def trace(self, name: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if name == "connection.connect_tcp.started":
            self._connect_started = now
        elif name == "connection.start_tls.started":
            self._tls_started = now
        elif (
            name in ("connection.connect_tcp.complete", "connection.start_tls.complete")
            and self._connect_started is not None
        ):
            self.connect_ms = round((now - self._connect_started) * 1000, 3)
            if name == "connection.start_tls.complete" and self._tls_started is not None:
                self.tls_ms = round((now - self._tls_started) * 1000, 3)
        elif name.endswith(".receive_response_headers.complete"):
            self.headers_ms = round((now - self.started) * 1000, 3)

    def stale(self, exc: httpx.HTTPError) -> bool:
        """Whether ``exc`` is a kept-alive connection the server had closed (idle timeout)
        just as the request went out: the call reused a connection and it closed before any
        answer. Sending the request again on a new connection is then safe and expected."""
        closed = isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError)
        return closed and self._connect_started is None

    @property
    def reused(self) -> bool:
        """The call went over a connection opened by an earlier call."""
        return self.headers_ms is not None and self._connect_started is None

    def timing(self) -> Timing:
        reused = self.reused
        connect_ms = 0.0 if reused else self.connect_ms
        return Timing(
            connect_ms=connect_ms,
            headers_ms=self.headers_ms,
            tls_ms=None if reused else self.tls_ms,
            reused=reused if self.headers_ms is not None else None,
        )


def new_client(
    *,
    stall_timeout_s: float = 60.0,
    connect_timeout_s: float = 15.0,
    ca_bundle: str | None = None,
    keepalive_s: float | None = None,
) -> httpx.AsyncClient:
    """An HTTP client as every endpoint uses one: TLS always verified (against ``ca_bundle``
    when given), the stall timeout as the read timeout, no redirects followed. ``keepalive_s``:
    how long an idle connection is kept (None: httpx's 5 s)."""
    limits = httpx.Limits(
        max_connections=100,
        max_keepalive_connections=20,
        keepalive_expiry=5.0 if keepalive_s is None else keepalive_s,
    )
    return httpx.AsyncClient(
        timeout=httpx.Timeout(
            connect=connect_timeout_s, read=stall_timeout_s, write=30.0, pool=connect_timeout_s
        ),
        verify=tls_context(ca_bundle),
        follow_redirects=False,
        limits=limits,
    )


class HttpEndpoint(EndpointErrors):
    """One base URL of one provider: the client, its timeouts, and error translation."""

    def __init__(
        self,
        base_url: str,
        *,
        label: str,
        secrets: Iterable[str | None] = (),
        stall_timeout_s: float = 60.0,
        connect_timeout_s: float = 15.0,
        ca_bundle: str | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValidationError(
                {"base_url": f"“{base_url}” is not an http:// or https:// address."}
            )
        super().__init__(
            label=label,
            host=parts.hostname,
            secrets=secrets,
            connect_timeout_s=connect_timeout_s,
            stall_timeout_s=stall_timeout_s,
        )
        self.client = client or new_client(
            stall_timeout_s=stall_timeout_s,
            connect_timeout_s=connect_timeout_s,
            ca_bundle=ca_bundle,
        )
        self.owns_client = client is None

    async def aclose(self) -> None:
        if self.owns_client:
            await self.client.aclose()

    async def sse(
        self,
        url: str,
        *,
        body: dict[str, Any],
        headers: dict[str, str],
        model: str | None = None,
        images: bool = False,
    ) -> AsyncGenerator[Timing | ServerSentEvent, None]:
        """POST ``body`` and yield one ``Timing`` (connect/headers), then the server-sent events.

        Raises typed errors for HTTP statuses and transport failures (``images``: the body
        carries images, so a refusal of them is named as such). Close it with
        ``contextlib.aclosing`` so cancelling the consumer closes the HTTP stream at once.
        """
        for attempt in (1, 2):
            timer = CallTimer()
            got_headers = False
            try:
                async with self.client.stream(
                    "POST",
                    url,
                    json=body,
                    headers={
                        "Accept": "text/event-stream",
                        "Cache-Control": "no-store",
                        **headers,
                    },
                    extensions={"trace": timer.trace},
                ) as response:
                    got_headers = True
                    if response.status_code >= 400:
                        text = (await response.aread()).decode("utf-8", "replace")
                        raise self.http_error(
                            response.status_code, text, response.headers, model, images=images
                        )
                    if response.status_code != 200:
                        raise BadResponse(
                            f"{self.where} answered HTTP {response.status_code} instead of a "
                            "reply. Check the base URL."
                        )
                    yield timer.timing()
                    async for event in httpx_sse.EventSource(response).aiter_sse():
                        yield event
                return
            except httpx_sse.SSEError as exc:
                raise BadResponse(
                    f"{self.where} did not answer with an event stream "
                    f"({redact(str(exc))[:200]}). Check that the base URL points at the API, "
                    "not a web page."
                ) from exc
            except httpx.HTTPError as exc:
                if attempt == 1 and not got_headers and timer.stale(exc):
                    continue  # the kept connection had been closed: once more, on a new one
                raise self.transport_error(exc, mid_reply=got_headers) from exc

    async def get_json(self, url: str, *, headers: dict[str, str]) -> Any:
        """GET a JSON document (model lists), with the same error translation as ``sse``."""
        try:
            response = await self.client.get(url, headers={"Accept": "application/json", **headers})
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, mid_reply=False, listing=True) from exc
        if response.status_code >= 400:
            raise self.http_error(response.status_code, response.text, response.headers, None)
        try:
            return response.json()
        except ValueError as exc:
            raise BadResponse(
                f"{self.where} sent a model list that is not JSON. Check that the base URL "
                "points at the API."
            ) from exc

    def decode(self, data: str) -> Any:
        """Parse one event's JSON payload; anything else is a ``BadResponse``."""
        try:
            return json.loads(data)
        except json.JSONDecodeError as exc:
            raise BadResponse(
                f"{self.where} sent data that is not valid JSON in the middle of the reply. "
                "Try again; if it keeps happening, the server or a proxy in between is faulty."
            ) from exc


def tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    """Verification is always on; a CA bundle (PEM file) replaces the default trust store.

    Contexts are cached: loading a trust store takes 20-40 ms, which would block the event
    loop (and the window) each time a provider is made. The file's mtime is part of the key so
    an edited bundle is read again.
    """
    if not ca_bundle:
        return _cached_context(None, 0.0)
    try:
        mtime = os.stat(ca_bundle).st_mtime
        return _cached_context(ca_bundle, mtime)
    except (OSError, ssl.SSLError) as exc:
        raise ValidationError(
            {"ca_bundle": f"The CA bundle “{ca_bundle}” cannot be used ({exc}). Choose a PEM file."}
        ) from exc


@functools.lru_cache(maxsize=8)
def _cached_context(ca_bundle: str | None, mtime: float) -> ssl.SSLContext:
    # The default trust store is certifi's, as httpx uses when given verify=True.
    return ssl.create_default_context(cafile=ca_bundle or certifi.where())


class ReplyReader(abc.ABC):
    """One streamed reply in one provider's wire format, read event by event.

    ``HttpProvider.stream`` hands ``read`` each event's JSON object; ``read`` yields what it
    means and sets ``done`` when the protocol says the reply is over. When the stream ends,
    ``finish`` yields the ``Usage`` and the one ``Finished``, or raises when the reply was cut
    short (``complete`` says which).
    """

    # A data line that ends the stream instead of a JSON object (OpenAI's "[DONE]").
    END_DATA: ClassVar[str | None] = None
    # What the endpoint "sent" when an event's data is JSON but not an object.
    NOT_UNDERSTOOD: ClassVar[str] = "an event this app does not understand."

    def __init__(self, http: HttpEndpoint, request: ChatRequest) -> None:
        self.http = http
        self.request = request
        self.done = False
        self.reason: FinishReason | None = None
        self.model_reported: str | None = None

    @abc.abstractmethod
    def read(self, event: str, data: dict[str, Any]) -> Iterator[StreamEvent]:
        """The stream events in one server-sent event (``event``: its SSE event name)."""

    @abc.abstractmethod
    def usage(self) -> Usage:
        """The reply's token counts, once the stream has ended."""

    def complete(self) -> bool:
        """Whether the whole reply arrived (by default: the server said why it finished)."""
        return self.reason is not None

    def finish(self) -> Iterator[StreamEvent]:
        if not self.complete():
            raise self.http.ended_early()
        yield self.usage()
        yield Finished(self.reason or "stop")

    def run_info(self, model: object) -> Iterator[RunInfo]:
        """``RunInfo`` for the first model name the server reports; nothing after that."""
        if model and self.model_reported is None:
            self.model_reported = str(model)
            yield RunInfo(model_reported=self.model_reported)


async def _drain(events: AsyncIterator[object], budget_s: float = DRAIN_S) -> None:
    """Read what is left of a finished reply's body, for at most ``budget_s``: a connection
    whose response was read to its end goes back to the pool; one closed early is dropped.
    Nothing read here counts (the reply is complete), not even an error."""
    with contextlib.suppress(TimeoutError, UserError):
        async with asyncio.timeout(budget_s):
            async for _ in events:
                pass


class HttpOptions(TypedDict, total=False):
    """What every HTTP provider takes besides its base URL, API key and label."""

    stall_timeout_s: float
    client: httpx.AsyncClient | None
    ca_bundle: str | None


class HttpProvider(abc.ABC):
    """What every HTTP provider shares: its endpoint (client, timeouts, error translation
    with the key scrubbed), its label, streaming a reply, reading a model list, and closing.

    A provider says where a request goes (``_url``), what it sends (``_headers``, ``_body``)
    and how its reply reads (``READER``).
    """

    READER: ClassVar[type[ReplyReader]]

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        label: str,
        stall_timeout_s: float = 60.0,
        client: httpx.AsyncClient | None = None,
        ca_bundle: str | None = None,
    ) -> None:
        self._api_key = api_key
        self._http = HttpEndpoint(
            base_url,
            label=label,
            secrets=(api_key,),
            stall_timeout_s=stall_timeout_s,
            ca_bundle=ca_bundle,
            client=client,
        )

    @property
    def label(self) -> str:
        return self._http.label

    def _headers(self) -> dict[str, str]:
        return {}

    @abc.abstractmethod
    def _url(self, request: ChatRequest) -> str: ...

    @abc.abstractmethod
    def _body(self, request: ChatRequest) -> dict[str, Any]: ...

    def _model(self, request: ChatRequest) -> str:
        """The model as a "does not know the model" error names it."""
        return request.model

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        http = self._http
        reader = self.READER(http, request)
        events = http.sse(
            self._url(request),
            body=self._body(request),
            headers=self._headers(),
            model=self._model(request),
            images=any(m.images for m in request.messages),
        )
        shown = False  # whether text (or reasoning) reached the caller: a stall's words
        try:
            async with contextlib.aclosing(events):
                async for item in events:
                    if isinstance(item, Timing):
                        yield item
                        continue
                    data = item.data.strip()
                    if not data:
                        continue
                    if data == reader.END_DATA:
                        reader.done = True
                    else:
                        payload = http.decode(data)
                        if not isinstance(payload, dict):
                            raise BadResponse(f"{http.where} sent {reader.NOT_UNDERSTOOD}")
                        for event in reader.read(item.event, payload):
                            shown = shown or isinstance(event, TextDelta | ReasoningDelta)
                            yield event
                    if reader.done:
                        for event in reader.finish():
                            yield event
                        # The reply is complete; read the rest of the body (the end of the
                        # chunked stream) so the connection can serve the next turn.
                        await _drain(events)
                        return
        except Stalled as error:
            if not shown:
                raise
            raise http.stalled(text_shown=True) from error.__cause__
        for event in reader.finish():
            yield event

    async def _model_items(
        self,
        url: str,
        key: str,
        *,
        cursor_param: str = "",
        cursor: Callable[[dict[str, Any]], object] = lambda page: None,
    ) -> list[Any]:
        """The items of a model list; ``key`` names a page's list of models. A paged list
        gives the next page's ``cursor`` (None on the last page), asked for with
        ``&{cursor_param}=...`` after ``url``."""
        items: list[Any] = []
        page_url = url
        for _ in range(MAX_MODEL_PAGES):
            page = await self._http.get_json(page_url, headers=self._headers())
            found = page.get(key) if isinstance(page, dict) else page
            if not isinstance(found, list):
                raise BadResponse(
                    f"{self._http.where} sent a model list this app does not understand."
                )
            items += found
            following = cursor(page) if isinstance(page, dict) else None
            if not following:
                break
            page_url = f"{url}&{cursor_param}={quote(str(following))}"
        return items

    async def aclose(self) -> None:
        await self._http.aclose()


class HostedOptions(HttpOptions, total=False):
    """What a hosted service's provider takes besides its API key: another base URL (a proxy
    or gateway) or label than the service's own, and every ``HttpOptions``."""

    base_url: str | None
    label: str | None


class HostedProvider(HttpProvider):
    """The provider of one hosted service (Anthropic, Gemini): the API key first; the base
    URL and label are the service's own unless given."""

    DEFAULT_BASE_URL: ClassVar[str]
    DEFAULT_LABEL: ClassVar[str]

    def __init__(
        self,
        api_key: str | None,
        *,
        base_url: str | None = None,
        label: str | None = None,
        **options: Unpack[HttpOptions],
    ) -> None:
        super().__init__(
            self.DEFAULT_BASE_URL if base_url is None else base_url,
            api_key,
            label=self.DEFAULT_LABEL if label is None else label,
            **options,
        )
