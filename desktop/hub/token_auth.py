"""The hub's access token on requests to the hub's own origin only (scheme, host, port).

A request to any other origin (a pagination link elsewhere) goes without it, and httpx drops
the header when a redirect leaves the origin (the hub's CDN links are signed URLs). Its own
module so that ``desktop.hub.client`` can be imported without loading httpx.
"""

from __future__ import annotations

from collections.abc import Generator

import httpx


def origin(url: httpx.URL) -> tuple[str, str, int | None]:
    scheme = url.scheme.lower()
    return scheme, url.host.lower(), url.port or {"http": 80, "https": 443}.get(scheme)


class HubToken(httpx.Auth):
    """``Authorization: Bearer <token>`` on requests to the hub's origin only."""

    def __init__(self, token: str, endpoint: str) -> None:
        self._header = f"Bearer {token}"
        self._origin = origin(httpx.URL(endpoint))

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if origin(request.url) == self._origin:
            request.headers["Authorization"] = self._header
        yield request
