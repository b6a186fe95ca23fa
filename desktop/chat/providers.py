"""Which Provider serves an agent: its kind's factory (``desktop.chat.kinds``), one path for a
turn and for the agent editor's probes ("Fetch models", "Test connection")."""

from __future__ import annotations

from desktop.chat.agents import AgentService
from desktop.chat.kinds import ProviderSpec, get_kind
from desktop.errors import ValidationError
from desktop.llm.provider import Provider
from desktop.llm.retry import RetryingProvider
from desktop.local.provider import LocalRuntime
from desktop.store.agents import Agent


def endpoint_label(agent: Agent) -> str:
    """How errors name the endpoint: the kind's label for a service with a known address
    ("OpenAI refused the key"), the agent's own name for a server the person pointed it at."""
    kind = get_kind(agent.kind)
    return kind.label if kind.default_base_url else agent.name


def build_provider(
    agent: Agent,
    api_key: str | None,
    *,
    label: str | None = None,
    local: LocalRuntime | None = None,
) -> Provider:
    """The agent's Provider, built by its kind's factory, without retries. ``agent`` may be
    unsaved (the editor's fields as typed); ``api_key`` is sent as given."""
    kind = get_kind(agent.kind)
    base_url = (agent.base_url or kind.default_base_url or "") if kind.remote else ""
    if kind.remote and not base_url:
        raise ValidationError({"base_url": "Enter the base URL of the server."})
    spec = ProviderSpec(
        agent=agent,
        api_key=api_key if kind.remote else None,
        label=label or endpoint_label(agent),
        base_url=base_url,
        local=local,
    )
    return kind.factory(spec)


class ProviderFactory:
    """Providers for turns: the agent's stored key, and retries for remote endpoints."""

    def __init__(self, agents: AgentService, local: LocalRuntime, retry_attempts: int = 3) -> None:
        self._agents = agents
        self._local = local
        self.retry_attempts = retry_attempts

    @property
    def local(self) -> LocalRuntime:
        return self._local

    def for_agent(self, agent: Agent) -> Provider:
        if not get_kind(agent.kind).remote:
            return build_provider(agent, None, local=self._local)
        # The key is looked up by the endpoint's own key_ref: an agent moved to another host
        # has a new endpoint with no key, so an old key never travels to a new host.
        provider = build_provider(agent, self._agents.api_key(agent), local=self._local)
        # Retry with backoff only before the first token, only for retryable errors.
        return RetryingProvider(provider, attempts=self.retry_attempts)
