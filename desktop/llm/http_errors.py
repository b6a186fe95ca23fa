"""Every transport or HTTP failure of a remote provider, as a typed ``UserError``.

``EndpointErrors`` knows one endpoint's label, host, timeouts and API key, and turns httpx
exceptions, HTTP error statuses (with their bodies) and errors reported inside a 200 event
stream into errors that name the endpoint and say what to do. API keys are scrubbed from any
text that came from the server before it can reach a message (``redact``).

It knows only the common error shape ``{"error": {"message": ...}}`` that all three wire
protocols use for error bodies (and Gemini's ``RetryInfo``); provider JSON stays in the
provider modules.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import re
import socket
import ssl
import time
from collections.abc import Iterable
from typing import Any

import httpx

from desktop.errors import UserError, ValidationError
from desktop.llm.errors import (
    AuthError,
    BadResponse,
    ContextTooLong,
    ImagesNotSupported,
    ModelNotFound,
    ProviderUnavailable,
    RateLimited,
    Stalled,
)

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
# Phrases servers use when the model has no vision and the request carried images: llama.cpp's
# server without a projector (HTTP 500 "image input is not supported - hint: ... mmproj"),
# Ollama ("this model is missing data required for image input"), vLLM ("... is not a
# multimodal model", "At most 0 image(s) may be provided"), LM Studio and others ("does not
# support images"), OpenAI ("image_url is only supported by certain models"), OpenRouter (404
# "No endpoints found that support image input"), servers that take text content only.
# Read only when the request had images.
_NO_VISION_MARKERS = (
    "image input is not supported",
    "missing data required for image input",
    "not a multimodal model",
    "does not support multimodal",
    "does not support image",
    "doesn't support image",
    "does not support vision",
    "vision is not supported",
    "images are not supported",
    "image inputs are not supported",
    "at most 0 image",
    "image_url is only supported",
    "support image input",
    "unknown variant `image_url`",
    "content must be a string",
)
_NO_VISION_STATUSES = (400, 404, 415, 422, 500)
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


def unavailable(
    message: str, *, retryable: bool = True, auto_retry: bool = True
) -> ProviderUnavailable:
    """A ``ProviderUnavailable``; ``retryable=False`` for failures a retry cannot fix (DNS, TLS),
    ``auto_retry=False`` for ones only the person should retry (a gateway timeout)."""
    error = ProviderUnavailable(message)
    if not retryable:
        error.retryable = False
    if not auto_retry:
        error.auto_retry = False
    return error


def out_of_credit(said: str, retry_after: float | None = None) -> RateLimited:
    """A limit no retry lifts: the account's quota or credit is used up."""
    error = RateLimited(f"{said} Check the plan and billing of the account.", retry_after)
    error.retryable = False
    return error


class EndpointErrors:
    """Error translation for one endpoint: ``where`` ("Label (host)") starts every message."""

    def __init__(
        self,
        *,
        label: str,
        host: str,
        secrets: Iterable[str | None],
        connect_timeout_s: float,
        stall_timeout_s: float,
    ) -> None:
        self.label = label
        self.host = host
        self.where = f"{label} ({host})"
        self.secrets = tuple(s for s in secrets if s)
        self.connect_timeout_s = connect_timeout_s
        self.stall_timeout_s = stall_timeout_s

    def ended_early(self) -> ProviderUnavailable:
        return unavailable(
            f"{self.where} ended the reply before it was complete. The text so far is kept; "
            "press Retry to ask again."
        )

    def stalled(self, *, text_shown: bool, listing: bool = False) -> Stalled:
        """The stall timeout passed with nothing received. Not retried automatically (see
        ``Stalled``), so the words say what the person can do."""
        where, seconds = self.where, f"{self.stall_timeout_s:g} s"
        advice = "raise the stall timeout in the endpoint settings for slow servers"
        if listing:
            return Stalled(
                f"{where} sent nothing for {seconds} while listing its models, so SIMI Multi "
                f"stopped waiting. Try again, or {advice}."
            )
        if text_shown:
            return Stalled(
                f"{where} went silent for {seconds} in the middle of the reply, so SIMI Multi "
                f"stopped waiting. The text so far is kept; press Retry, or {advice}."
            )
        return Stalled(
            f"{where} sent nothing for {seconds}, so SIMI Multi stopped waiting (it did not "
            "ask again by itself: a busy server may still be reading a long prompt, and asking "
            f"again would start that over). Press Retry to ask again, or {advice}."
        )

    def transport_error(
        self, exc: httpx.HTTPError, *, mid_reply: bool, listing: bool = False
    ) -> UserError:
        """``mid_reply``: the response headers had arrived; ``listing``: a model list."""
        where = self.where
        if isinstance(exc, httpx.ConnectTimeout):
            return unavailable(
                f"{where} did not accept a connection within {self.connect_timeout_s:g} s. "
                "Check the base URL and your network."
            )
        if isinstance(exc, httpx.ConnectError):
            return self._connect_error(exc)
        if isinstance(exc, httpx.ReadTimeout):
            return self.stalled(text_shown=False, listing=listing)
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
        self,
        status: int,
        text: str,
        headers: httpx.Headers,
        model: str | None,
        *,
        images: bool = False,
    ) -> UserError:
        """Map an HTTP error status (and its body) to a typed error with advice. ``images``:
        the request carried images (a refusal of them then says so)."""
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
        if (
            images
            and status in _NO_VISION_STATUSES
            and any(m in lowered for m in _NO_VISION_MARKERS)
        ):
            named = f"“{model}”" if model else "The model"
            return ImagesNotSupported(
                f"{named} at {where} cannot read images: choose a vision model, or remove the "
                f"image. (The server answered HTTP {status}{detail}.)"
            )
        if status in (404, 410):
            what = f"the model “{model}”" if model else "this address"
            if status == 410:
                return ModelNotFound(
                    f"{where} no longer offers {what} (HTTP 410{detail}). Pick another model "
                    "from the endpoint's model list."
                )
            return ModelNotFound(
                f"{where} does not know {what} (HTTP 404{detail}). Check the model name, or "
                "pick one from the endpoint's model list; also check the base URL."
            )
        if status == 413:
            # The body limit of the server or of a proxy in front of it; shortening helps.
            return ContextTooLong(
                f"{where} says the request is too large (HTTP 413{detail}): the conversation "
                "or the message is too big for it. Start a new conversation, shorten the "
                "message, or leave out older messages."
            )
        if status in (400, 422) and any(m in lowered for m in _CONTEXT_MARKERS):
            return ContextTooLong(
                f"{where} says the conversation is too long for the model{detail}. Start a new "
                "conversation, shorten the message, or pick a model with a larger context."
            )
        if status == 402:  # OpenRouter and others: no credit left
            return out_of_credit(f"{where} says payment is required (HTTP 402{detail}).")
        if status == 429:
            retry_after = _retry_after(headers.get("retry-after")) or _retry_delay(body)
            if "quota" in lowered and ("insufficient" in lowered or "exceeded your" in lowered):
                return out_of_credit(
                    f"{where} says this key is out of quota or credit (HTTP 429{detail}).",
                    retry_after,
                )
            wait = f" Try again in {retry_after:.0f} s." if retry_after else " Try again shortly."
            return RateLimited(f"{where} is limiting requests (HTTP 429).{wait}", retry_after)
        if status == 405:
            return BadResponse(
                f"{where} does not take this request at this address (HTTP 405{detail}). Check "
                "the base URL: it should point at the API (often ending in /v1)."
            )
        if status == 408:
            return unavailable(
                f"{where} gave up waiting for the request to arrive (HTTP 408{detail}). Check "
                "your network, then try again."
            )
        if status == 409:
            return unavailable(
                f"{where} could not take the request because of a conflicting one (HTTP "
                f"409{detail}). Try again in a moment."
            )
        if status == 422:
            return BadResponse(
                f"{where} could not use the request (HTTP 422{detail}). Check the agent's "
                "settings: the model name, sampling values and stop sequences."
            )
        if status == 451:
            return BadResponse(
                f"{where} refuses this request for legal reasons (HTTP 451{detail}); the "
                "service or this model may not be offered where you are."
            )
        if status == 502:
            return unavailable(
                f"A gateway in front of {where} got no valid answer from the server (HTTP "
                f"502{detail}): it may be down or restarting. Try again in a moment."
            )
        if status == 503:
            return unavailable(
                f"{where} is unavailable or overloaded right now (HTTP 503{detail}). Try again "
                "in a moment."
            )
        if status == 504:
            # A proxy's own stall timeout: like a stall, not retried automatically (a long
            # prompt would be read again from the start and time out again).
            return unavailable(
                f"A gateway in front of {where} timed out waiting for the server (HTTP "
                f"504{detail}). A long prompt may take the server longer than the gateway "
                "allows; press Retry, or shorten the conversation.",
                auto_retry=False,
            )
        if status in (500, 529):
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
