"""One HTTP client per endpoint, kept across turns, so a turn does not pay TCP and TLS again.

``ClientPool`` keeps one ``httpx.AsyncClient`` per ``ClientKey`` (everything that makes two
clients differ: base URL, API key, CA bundle and its mtime, stall and connect timeouts) and per
event loop (a client's connections belong to the loop that opened them; a loop that has been
closed takes its clients with it). A turn *leases* the client (``lease``) and hands it to its
provider (``HttpEndpoint`` borrows it and does not close it); ending the lease
(``ClientLease.aclose``) keeps the client and its idle connection for the next turn.

``retire(owner)`` (an agent was edited or deleted) and ``aclose()`` (exit) take clients out
of the pool: an idle one is closed at once, one a turn is still streaming on when its last
lease ends, so closing never cuts a reply short. The next turn opens a new client.

Idle connections are kept ``KEEPALIVE_S`` (httpx's default is 5 s, shorter than the time a
person takes to read a reply and type the next message); a server that closed one meanwhile
is noticed before the connection is used, and a new one is opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from desktop.llm.events import StreamEvent
from desktop.llm.provider import ChatRequest, Provider

if TYPE_CHECKING:  # httpx loads with the first client (desktop.preload: after first paint)
    import httpx

log = logging.getLogger(__name__)

KEEPALIVE_S = 60.0


@dataclass(frozen=True, slots=True)
class ClientKey:
    """What makes a client different. The API key only as a digest: the pool never holds it
    (it goes in each request's headers, not in the client)."""

    base_url: str
    key_digest: str
    ca_bundle: str | None
    ca_mtime: float
    stall_timeout_s: float
    connect_timeout_s: float

    @classmethod
    def of(
        cls,
        base_url: str,
        api_key: str | None,
        *,
        ca_bundle: str | None = None,
        stall_timeout_s: float = 60.0,
        connect_timeout_s: float = 15.0,
    ) -> ClientKey:
        digest = hashlib.sha256(api_key.encode()).hexdigest()[:16] if api_key else ""
        mtime = 0.0
        if ca_bundle:
            with contextlib.suppress(OSError):  # a missing bundle fails where it is loaded
                mtime = os.stat(ca_bundle).st_mtime
        return cls(
            base_url.rstrip("/"),
            digest,
            ca_bundle or None,
            mtime,
            float(stall_timeout_s),
            float(connect_timeout_s),
        )


@dataclass(eq=False)
class _Entry:
    key: ClientKey
    loop: asyncio.AbstractEventLoop
    client: httpx.AsyncClient
    leases: int = 0
    retired: bool = False
    owners: set[Hashable] = field(default_factory=set)


class ClientLease:
    """One turn's use of a pooled client; ``aclose`` (or ``release``) ends it once."""

    def __init__(self, pool: ClientPool, entry: _Entry) -> None:
        self._pool = pool
        self._entry: _Entry | None = entry
        self.client = entry.client

    async def aclose(self) -> None:
        entry, self._entry = self._entry, None
        if entry is not None:
            await self._pool._release(entry)

    def release(self) -> None:
        """End the lease without awaiting (a provider that could not be built)."""
        entry, self._entry = self._entry, None
        if entry is not None:
            self._pool._release_soon(entry)


class ClientPool:
    def __init__(self, *, keepalive_s: float = KEEPALIVE_S) -> None:
        self._keepalive_s = keepalive_s
        self._entries: dict[tuple[int, ClientKey], _Entry] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self.created = 0  # clients made so far (tests and benchmarks read it)

    def __len__(self) -> int:
        return len(self._entries)

    def lease(self, key: ClientKey, owner: Hashable | None = None) -> ClientLease | None:
        """The pooled client for ``key`` on the running loop (made on first use); None
        outside a running loop (nothing to keep a connection on: the caller makes its own).
        ``owner`` (an agent id) is what ``retire`` closes by. A CA bundle that cannot be used
        raises ``ValidationError`` here."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        self._forget_closed_loops()
        entry = self._entries.get((id(loop), key))
        if entry is None or entry.loop is not loop:
            from desktop.llm.transport import new_client

            client = new_client(
                stall_timeout_s=key.stall_timeout_s,
                connect_timeout_s=key.connect_timeout_s,
                ca_bundle=key.ca_bundle,
                keepalive_s=self._keepalive_s,
            )
            entry = _Entry(key, loop, client)
            self._entries[(id(loop), key)] = entry
            self.created += 1
        entry.leases += 1
        if owner is not None:
            entry.owners.add(owner)
        return ClientLease(self, entry)

    def retire(self, owner: Hashable) -> int:
        """Take the clients ``owner`` used out of the pool (closed now if idle, else when the
        turn on them ends); returns how many."""
        found = [e for e in self._entries.values() if owner in e.owners]
        for entry in found:
            self._retire(entry)
        return len(found)

    async def aclose(self) -> None:
        """Close every client (idle ones now; ones in use as their turns end) and wait for the
        closes already under way."""
        for entry in list(self._entries.values()):
            self._retire(entry)
        while self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)

    # inside ------------------------------------------------------------------------------------
    def _retire(self, entry: _Entry) -> None:
        self._entries.pop((id(entry.loop), entry.key), None)
        entry.retired = True
        if entry.leases == 0:
            self._close_soon(entry)

    async def _release(self, entry: _Entry) -> None:
        entry.leases -= 1
        if entry.retired and entry.leases == 0:
            await self._close(entry)

    def _release_soon(self, entry: _Entry) -> None:
        entry.leases -= 1
        if entry.retired and entry.leases == 0:
            self._close_soon(entry)

    def _close_soon(self, entry: _Entry) -> None:
        """Close on the client's own loop: now as a task when that loop is the running one; a
        closed loop has already taken its connections' sockets with it."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is entry.loop:
            task = running.create_task(self._close(entry))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        elif not entry.loop.is_closed() and entry.loop.is_running():
            entry.loop.call_soon_threadsafe(self._close_soon, entry)

    async def _close(self, entry: _Entry) -> None:
        try:
            await entry.client.aclose()
        except Exception:  # closing a connection the server already dropped
            log.debug("closing a pooled HTTP client failed", exc_info=True)

    def _forget_closed_loops(self) -> None:
        for slot, entry in list(self._entries.items()):
            if entry.loop.is_closed():
                del self._entries[slot]


class PooledProvider:
    """A provider on a leased client: everything delegates; ``aclose`` closes the provider
    (which leaves the borrowed client open) and ends the lease, so the connection stays for
    the next turn."""

    def __init__(self, inner: Provider, lease: ClientLease) -> None:
        self.inner = inner
        self.lease = lease

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        return self.inner.stream(request)

    async def list_models(self) -> list[str]:
        return await self.inner.list_models()

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            await self.lease.aclose()
