"""Which Provider serves an agent: its kind's factory (``desktop.chat.kinds``), one path for a
turn and for the agent editor's probes ("Fetch models", "Test connection").

Turns keep one HTTP client per endpoint (``desktop.llm.pool``): the second turn to an endpoint
reuses the first one's connection (no TCP or TLS handshake; its stats say ``connect_ms`` 0).
``ProviderFactory.close_endpoint`` (an agent edited or deleted) and ``aclose`` (exit) close
them. The editor's probes build their own client and close it: a probe's settings are not
saved yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from desktop.chat.agents import AgentService
from desktop.chat.kinds import DEFAULT_STALL_TIMEOUT_S, ProviderKind, ProviderSpec, get_kind
from desktop.errors import ValidationError
from desktop.llm.pool import ClientKey, ClientLease, ClientPool, PooledProvider
from desktop.llm.provider import Provider
from desktop.llm.retry import RetryingProvider
from desktop.local.provider import LocalRuntime
from desktop.store.agents import Agent

if TYPE_CHECKING:
    import httpx


def endpoint_label(agent: Agent) -> str:
    """How errors name the endpoint: the kind's label for a service with a known address
    ("OpenAI refused the key"), the agent's own name for a server the person pointed it at."""
    kind = get_kind(agent.kind)
    return kind.label if kind.default_base_url else agent.name


def base_url_of(agent: Agent, kind: ProviderKind) -> str:
    """The address a remote agent talks to: its own, or its kind's default ("" for local)."""
    return (agent.base_url or kind.default_base_url or "") if kind.remote else ""


def build_provider(
    agent: Agent,
    api_key: str | None,
    *,
    label: str | None = None,
    local: LocalRuntime | None = None,
    client: httpx.AsyncClient | None = None,
) -> Provider:
    """The agent's Provider, built by its kind's factory, without retries. ``agent`` may be
    unsaved (the editor's fields as typed); ``api_key`` is sent as given; ``client``: an HTTP
    client for the provider to borrow (None: it makes and closes its own)."""
    kind = get_kind(agent.kind)
    base_url = base_url_of(agent, kind)
    if kind.remote and not base_url:
        raise ValidationError({"base_url": "Enter the base URL of the server."})
    spec = ProviderSpec(
        agent=agent,
        api_key=api_key if kind.remote else None,
        label=label or endpoint_label(agent),
        base_url=base_url,
        local=local,
        client=client if kind.remote else None,
    )
    return kind.factory(spec)


class ProviderFactory:
    """Providers for turns: the agent's stored key, retries for remote endpoints, and one kept
    HTTP client per endpoint (``clients``)."""

    def __init__(
        self,
        agents: AgentService,
        local: LocalRuntime,
        retry_attempts: int = 3,
        *,
        clients: ClientPool | None = None,
    ) -> None:
        self._agents = agents
        self._local = local
        self.retry_attempts = retry_attempts
        self.clients = clients or ClientPool()

    @property
    def local(self) -> LocalRuntime:
        return self._local

    def for_agent(self, agent: Agent) -> Provider:
        kind = get_kind(agent.kind)
        if not kind.remote:
            return build_provider(agent, None, local=self._local)
        # The key is looked up by the endpoint's own key_ref: an agent moved to another host
        # has a new endpoint with no key, so an old key never travels to a new host.
        api_key = self._agents.api_key(agent)
        lease = self._lease(agent, kind, api_key)
        try:
            provider = build_provider(
                agent, api_key, local=self._local, client=lease.client if lease else None
            )
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        if lease is not None:
            provider = PooledProvider(provider, lease)
        # Retry with backoff only before the first token, only for retryable errors.
        return RetryingProvider(provider, attempts=self.retry_attempts)

    def close_endpoint(self, agent: Agent) -> None:
        """Close the HTTP clients ``agent`` used (call it when the agent's endpoint is edited
        or the agent is deleted): idle ones now, one a reply is streaming on when that reply
        ends. The agent's next turn opens a new connection with its new settings."""
        if agent.id is not None:
            self.clients.retire(("agent", agent.id))

    async def aclose(self) -> None:
        """Close every kept HTTP client (at exit, on the loop the turns ran on)."""
        await self.clients.aclose()

    def _lease(self, agent: Agent, kind: ProviderKind, api_key: str | None) -> ClientLease | None:
        base_url = base_url_of(agent, kind)
        if not base_url:
            return None  # build_provider says what is missing
        key = ClientKey.of(
            base_url,
            api_key,
            ca_bundle=agent.ca_bundle,
            stall_timeout_s=agent.stall_timeout_s or DEFAULT_STALL_TIMEOUT_S,
        )
        owner = ("agent", agent.id) if agent.id is not None else None
        return self.clients.lease(key, owner)
