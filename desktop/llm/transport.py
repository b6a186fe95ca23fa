"""HTTP plumbing the remote providers share (OpenAI-compatible, Anthropic, Gemini).

One ``HttpEndpoint`` per provider instance owns (or borrows) an ``httpx.AsyncClient`` with TLS
verification always on (optionally against a custom CA bundle), a *stall* timeout between
received chunks (not a whole-response timeout), client-side connect/headers timing from the
httpx ``trace`` extension, and the translation of every transport or HTTP failure into a typed
``UserError`` that names the provider and says what to do. API keys are scrubbed from any text
that came from the server before it can reach a message.

Provider JSON stays in the provider modules; this module only knows HTTP, SSE and the common
shape ``{"error": {"message": ...}}`` that all three wire protocols use for error bodies.
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import json
import os
import re
import socket
import ssl
import time
from collections.abc import AsyncGenerator, Iterable
from typing import Any
from urllib.parse import urlsplit

import certifi
import httpx
import httpx_sse

from desktop.llm.errors import (
    AuthError,
    BadResponse,
    ContextTooLong,
    ModelNotFound,
    ProviderUnavailable,
    RateLimited,
    UserError,
    ValidationError,
)
from desktop.llm.events import Timing

ServerSentEvent = httpx_sse.ServerSentEvent

# Phrases servers use when a prompt does not fit (OpenAI/llama.cpp "maximum context length",
# vLLM/Groq "context length", Anthropic "prompt is too long", Gemini "input token count ...
# exceeds the maximum number of tokens").
_CONTEXT_MARKERS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "exceeds the maximum number of tokens",
    "input is too long",
    "reduce the length",
)
_KEY_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[^\s\"',;]+"),
    re.compile(r"sk-[A-Za-z0-9_\-]{6,}"),
    re.compile(r"AIza[0-9A-Za-z_\-]{20,}"),
    re.compile(r"(?i)((?:x-api-key|x-goog-api-key|api[_-]?key)[\"']?\s*[:=]\s*[\"']?)[^\s\"',;}]+"),
)
REDACTED = "[redacted]"


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Remove API keys from text that came from elsewhere (server bodies, exception text)."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    for pattern in _KEY_PATTERNS:
        text = pattern.sub(
            lambda m: (m.group(1) if m.groups() else "") + REDACTED,
            text,
        )
    return text


def unavailable(message: str, *, retryable: bool = True) -> ProviderUnavailable:
    """A ``ProviderUnavailable``; ``retryable=False`` for failures a retry cannot fix (DNS, TLS)."""
    error = ProviderUnavailable(message)
    if not retryable:
        error.retryable = False
    return error


class CallTimer:
    """Client-side timing of one HTTP call from httpx ``trace`` events.

    ``connect_ms``: TCP connect (including the DNS lookup anyio does first) plus the TLS
    handshake; ``None`` when a pooled connection was reused (no connect happened).
    ``headers_ms``: from the start of the call until the response headers were read, connect
    included.
    """

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self._connect_started: float | None = None
        self.connect_ms: float | None = None
        self.headers_ms: float | None = None

    async def trace(self, name: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if name == "connection.connect_tcp.started":
            self._connect_started = now
        elif (
            name in ("connection.connect_tcp.complete", "connection.start_tls.complete")
            and self._connect_started is not None
        ):
            self.connect_ms = round((now - self._connect_started) * 1000, 3)
        elif name.endswith(".receive_response_headers.complete"):
            self.headers_ms = round((now - self.started) * 1000, 3)

    def timing(self) -> Timing:
        return Timing(connect_ms=self.connect_ms, headers_ms=self.headers_ms)


class HttpEndpoint:
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
        self.host = parts.hostname
        self.label = label
        self.where = f"{label} ({self.host})"
        self.secrets = tuple(s for s in secrets if s)
        self.stall_timeout_s = stall_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=connect_timeout_s, read=stall_timeout_s, write=30.0, pool=connect_timeout_s
            ),
            verify=tls_context(ca_bundle),
            follow_redirects=False,
        )
        self.owns_client = client is None

    async def aclose(self) -> None:
        if self.owns_client:
            await self.client.aclose()

    # requests ----------------------------------------------------------------------------------
    async def sse(
        self,
        url: str,
        *,
        body: dict[str, Any],
        headers: dict[str, str],
        model: str | None = None,
    ) -> AsyncGenerator[Timing | ServerSentEvent, None]:
        """POST ``body`` and yield one ``Timing`` (connect/headers), then the server-sent events.

        Raises typed errors for HTTP statuses and transport failures. Close it with
        ``contextlib.aclosing`` so cancelling the consumer closes the HTTP stream at once.
        """
        timer = CallTimer()
        got_headers = False
        try:
            async with self.client.stream(
                "POST",
                url,
                json=body,
                headers={"Accept": "text/event-stream", "Cache-Control": "no-store", **headers},
                extensions={"trace": timer.trace},
            ) as response:
                got_headers = True
                if response.status_code >= 400:
                    text = (await response.aread()).decode("utf-8", "replace")
                    raise self.http_error(response.status_code, text, response.headers, model)
                if response.status_code != 200:
                    raise BadResponse(
                        f"{self.where} answered HTTP {response.status_code} instead of a reply. "
                        "Check the base URL."
                    )
                yield timer.timing()
                async for event in httpx_sse.EventSource(response).aiter_sse():
                    yield event
        except httpx_sse.SSEError as exc:
            raise BadResponse(
                f"{self.where} did not answer with an event stream ({redact(str(exc))[:200]}). "
                "Check that the base URL points at the API, not a web page."
            ) from exc
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, mid_reply=got_headers) from exc

    async def get_json(self, url: str, *, headers: dict[str, str]) -> Any:
        """GET a JSON document (model lists), with the same error translation as ``sse``."""
        try:
            response = await self.client.get(url, headers={"Accept": "application/json", **headers})
        except httpx.HTTPError as exc:
            raise self.transport_error(exc, mid_reply=False) from exc
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

    def ended_early(self) -> ProviderUnavailable:
        return unavailable(
            f"{self.where} ended the reply before it was complete. The text so far is kept; "
            "press Retry to ask again."
        )

    # translation ---------------------------------------------------------------------------------
    def transport_error(self, exc: httpx.HTTPError, *, mid_reply: bool) -> UserError:
        where = self.where
        if isinstance(exc, httpx.ConnectTimeout):
            return unavailable(
                f"{where} did not accept a connection within {self.connect_timeout_s:g} s. "
                "Check the base URL and your network."
            )
        if isinstance(exc, httpx.ConnectError):
            return self._connect_error(exc)
        if isinstance(exc, httpx.ReadTimeout):
            return unavailable(
                f"{where} sent nothing for {self.stall_timeout_s:g} s, so SIMI Multi gave up "
                "waiting. The text so far is kept; press Retry, or raise the stall timeout in "
                "the endpoint settings for slow servers."
            )
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
            if mid_reply:
                return unavailable(
                    f"The connection to {where} dropped in the middle of the reply. The text "
                    "so far is kept; press Retry to ask again."
                )
            return unavailable(
                f"{where} closed the connection without answering. Check that the base URL "
                "and port belong to an HTTP API, then try again."
            )
        if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
            return ValidationError({"base_url": f"The base URL of {where} is not valid."})
        return unavailable(
            f"Talking to {where} failed ({type(exc).__name__}: "
            f"{redact(str(exc), self.secrets)[:200]}). Try again."
        )

    def _connect_error(self, exc: httpx.ConnectError) -> UserError:
        where = self.where
        causes = list(_causes(exc))
        text = " ".join(str(c) for c in causes).lower()
        if any(isinstance(c, ssl.SSLCertVerificationError) for c in causes) or (
            "certificate_verify_failed" in text or "certificate verify failed" in text
        ):
            reason = next(
                (
                    c.verify_message
                    for c in causes
                    if isinstance(c, ssl.SSLCertVerificationError) and c.verify_message
                ),
                "certificate verify failed",
            )
            return unavailable(
                f"The TLS certificate of {where} could not be verified ({reason}). If this "
                "server uses a private certificate authority, set its CA bundle in the endpoint "
                "settings; otherwise something is intercepting the connection.",
                retryable=False,
            )
        if any(isinstance(c, ssl.SSLError) for c in causes) or "ssl" in text:
            return unavailable(
                f"The secure (TLS) connection to {where} failed. Check that the base URL uses "
                "https:// only for servers that speak TLS (local servers usually use http://).",
                retryable=False,
            )
        if any(isinstance(c, socket.gaierror) for c in causes) or any(
            phrase in text
            for phrase in (
                "name or service not known",
                "nodename nor servname",
                "getaddrinfo failed",
                "temporary failure in name resolution",
                "no address associated",
            )
        ):
            return unavailable(
                f"Cannot find the host name “{self.host}” for {self.label}. Check the base URL "
                "for typos and that this computer is online.",
                retryable=False,
            )
        if any(isinstance(c, ConnectionRefusedError) for c in causes) or "refused" in text:
            # Not retried automatically: a refused connection almost always means the server
            # is not running, and three silent retries would only delay saying so.
            return unavailable(
                f"Cannot reach {where}: the connection was refused. Check that the server is "
                "running and that the base URL (host and port) is right.",
                retryable=False,
            )
        return unavailable(
            f"Cannot reach {where} ({redact(str(exc), self.secrets)[:200] or 'connect failed'}). "
            "Check the base URL and your network."
        )

    def http_error(
        self, status: int, text: str, headers: httpx.Headers, model: str | None
    ) -> UserError:
        """Map an HTTP error status (and its body) to a typed error with advice."""
        where = self.where
        body = _json_or_none(text)
        message = redact(_error_message(body, text), self.secrets)
        detail = f": {message}" if message else ""
        lowered = text.lower()
        bad_key = "api key" in lowered and ("invalid" in lowered or "not valid" in lowered)
        if status in (401, 403) or (status == 400 and bad_key):
            # The body is not quoted: some servers echo the request, key included.
            return AuthError(
                f"{where} rejected the API key (HTTP {status}). Check the key in the endpoint "
                "settings, and that it is allowed to use this model."
            )
        if status == 404:
            what = f"the model “{model}”" if model else "this address"
            return ModelNotFound(
                f"{where} does not know {what} (HTTP 404{detail}). Check the model name, or "
                "pick one from the endpoint's model list; also check the base URL."
            )
        if status in (400, 413, 422) and any(m in lowered for m in _CONTEXT_MARKERS):
            return ContextTooLong(
                f"{where} says the conversation is too long for the model{detail}. Start a new "
                "conversation, shorten the message, or pick a model with a larger context."
            )
        if status == 429:
            retry_after = _retry_after(headers.get("retry-after")) or _retry_delay(body)
            if "quota" in lowered and ("insufficient" in lowered or "exceeded your" in lowered):
                error = RateLimited(
                    f"{where} says this key is out of quota or credit (HTTP 429{detail}). Check "
                    "the plan and billing of the account.",
                    retry_after,
                )
                error.retryable = False
                return error
            wait = f" Try again in {retry_after:.0f} s." if retry_after else " Try again shortly."
            return RateLimited(f"{where} is limiting requests (HTTP 429).{wait}", retry_after)
        if status in (500, 502, 503, 504, 529):
            what = "is overloaded" if status == 529 else "had a server error"
            return unavailable(f"{where} {what} (HTTP {status}{detail}). Try again in a moment.")
        if status >= 500:
            return unavailable(f"{where} had a server error (HTTP {status}{detail}). Try again.")
        return BadResponse(
            f"{where} refused the request (HTTP {status}{detail}). Check the model name and the "
            "agent's settings."
        )

    def stream_error(self, error_type: str | None, message: str | None) -> UserError:
        """An error reported inside a 200 event stream (``error`` event or ``{"error": ...}``)."""
        where = self.where
        kind = (error_type or "").lower()
        text = redact(message or "no details", self.secrets)[:300]
        lowered = text.lower()
        if any(m in lowered or m in kind for m in _CONTEXT_MARKERS) or kind == "request_too_large":
            return ContextTooLong(
                f"{where} says the conversation is too long for the model: {text}. Start a new "
                "conversation or shorten the message."
            )
        if kind in ("rate_limit_error", "rate_limit_exceeded", "resource_exhausted", "429"):
            return RateLimited(f"{where} is limiting requests: {text}. Try again shortly.")
        if kind in ("authentication_error", "permission_error", "unauthenticated", "401", "403"):
            return AuthError(
                f"{where} rejected the API key. Check the key in the endpoint settings."
            )
        if (
            kind
            in (
                "overloaded_error",
                "api_error",
                "server_error",
                "internal",
                "unavailable",
                "500",
                "502",
                "503",
                "529",
            )
            or "overloaded" in lowered
        ):
            return unavailable(
                f"{where} reported a problem in the middle of the reply ({text}). The text so "
                "far is kept; press Retry in a moment."
            )
        return BadResponse(f"{where} reported an error in the middle of the reply: {text}.")


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


def _causes(exc: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _json_or_none(text: str) -> Any:
    with contextlib.suppress(ValueError):
        return json.loads(text)
    return None


def _error_message(body: Any, text: str) -> str:
    """The server's own explanation, short: ``{"error": {"message"}}`` or short plain text."""
    if isinstance(body, list) and body:  # Gemini sometimes wraps errors in a list
        body = body[0]
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = (err.get("message") or err.get("detail")) if isinstance(err, dict) else err
        if msg:
            return " ".join(str(msg).split())[:300]
        return ""
    plain = " ".join(text.split())
    if plain and len(plain) <= 300 and "<" not in plain:
        return plain
    return ""


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds (RFC 9110: delay-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    with contextlib.suppress(TypeError, ValueError):
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    return None


def _retry_delay(body: Any) -> float | None:
    """Gemini's ``google.rpc.RetryInfo`` (``"retryDelay": "20s"``) in a 429 body."""
    if isinstance(body, list) and body:
        body = body[0]
    err = body.get("error") if isinstance(body, dict) else None
    details = err.get("details") if isinstance(err, dict) else None
    for item in details or []:
        delay = item.get("retryDelay") if isinstance(item, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            with contextlib.suppress(ValueError):
                return float(delay[:-1])
    return None


class HttpProvider:
    """What every HTTP provider shares: its endpoint (client, timeouts, error translation
    with the key scrubbed), its label, reading a model list, and closing."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        label: str,
        stall_timeout_s: float,
        client: httpx.AsyncClient | None,
        ca_bundle: str | None,
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

    async def _model_page(self, url: str, key: str) -> tuple[Any, list[Any]]:
        """GET one page of a model list; ``key`` names its list of models."""
        page = await self._http.get_json(url, headers=self._headers())
        items = page.get(key) if isinstance(page, dict) else page
        if not isinstance(items, list):
            raise BadResponse(f"{self._http.where} sent a model list this app does not understand.")
        return page, items

    async def aclose(self) -> None:
        await self._http.aclose()
