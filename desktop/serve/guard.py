"""Who may talk to the server, decided from a request's headers before anything runs.

- **Host** (DNS rebinding): a web page on evil.example whose name is made to resolve to
  127.0.0.1 reaches a loopback server with ``Host: evil.example``. Only the names this server
  answers to pass: ``localhost`` and IP literals (a literal cannot be rebound) when bound to
  loopback or to every address; the bound name itself; the machine's own names when bound to
  every address. Anything else gets 421.
- **Origin** (browsers): CORS is off unless the person lists origins, each exactly. A request
  that carries an ``Origin`` not listed is refused (403) before it runs, so a page elsewhere
  cannot make the server spend tokens even without reading the reply; a listed origin gets
  its own name back (never ``*``) and never ``Allow-Credentials``: keys go in the
  ``Authorization`` header, not in cookies.
- **Key**: ``Authorization: Bearer <key>``. Where none is required (loopback, by default) a
  client may send any other text (OpenAI's SDK always sends one), but a ``simi-`` key must
  be right (401): a revoked key is noticed, needed or not.
"""

from __future__ import annotations

import ipaddress
import socket
from functools import cache

from desktop.serve.config import ServeConfig
from desktop.serve.wire import ApiError

WILDCARDS = ("0.0.0.0", "::", "")


def host_name(header: str) -> str:
    """The name in a Host header, without its port ("[::1]:7464" -> "::1")."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@cache
def machine_names() -> frozenset[str]:
    """This machine's own names (its host name, fully qualified, and ``.local``)."""
    names = {socket.gethostname().lower()}
    try:
        names.add(socket.getfqdn().lower())
    except OSError:
        pass
    names |= {f"{n.split('.')[0]}.local" for n in list(names) if n}
    return frozenset(n for n in names if n)


def host_allowed(config: ServeConfig, header: str | None) -> bool:
    if not header:
        return False  # HTTP/1.1 requires it; a client without one is not a browser we trust
    name = host_name(header)
    bound = config.host.strip("[]").lower()
    if name == bound:
        return True
    # a literal address cannot be rebound to this machine by someone else's DNS
    if (config.loopback or bound in WILDCARDS) and (name == "localhost" or _is_ip(name)):
        return True
    if bound in WILDCARDS:
        return name in machine_names()
    return False


def check_host(config: ServeConfig, header: str | None) -> None:
    if not host_allowed(config, header):
        raise ApiError(
            421,
            "This server does not answer to that host name. Use the address SIMI Multi's "
            "Server page shows.",
            code="host_not_allowed",
        )


def origin_allowed(config: ServeConfig, origin: str | None) -> bool:
    """No Origin (not a browser, or a same-origin GET): allowed; else only a listed one."""
    return origin is None or origin.rstrip("/") in config.cors_origins


def cors_headers(config: ServeConfig, origin: str | None) -> dict[str, str]:
    if origin is None or not origin_allowed(config, origin):
        return {}
    return {"Access-Control-Allow-Origin": origin.rstrip("/"), "Vary": "Origin"}


def preflight_headers(config: ServeConfig, origin: str | None) -> dict[str, str]:
    headers = cors_headers(config, origin)
    if headers:
        headers |= {
            "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
            "Access-Control-Allow-Headers": "Authorization, Content-Type",
            "Access-Control-Max-Age": "600",
        }
    return headers


def bearer(authorization: str | None) -> str | None:
    """The key in ``Authorization: Bearer <key>`` (None: no such header)."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise ApiError(
            401,
            "The Authorization header must be 'Bearer <key>'.",
            type="invalid_request_error",
            code="invalid_api_key",
        )
    return value.strip()


def unauthorized() -> ApiError:
    return ApiError(
        401,
        "Incorrect or missing API key. Make one on SIMI Multi's Server page or with "
        "`simi serve keys add NAME`, and send it as 'Authorization: Bearer <key>'.",
        code="invalid_api_key",
    )
