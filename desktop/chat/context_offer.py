"""What "Raise context" offers, in numbers and words, before anything changes.

A conversation that no longer fits a local agent's context can get a bigger context; how big
is the person's choice, told with what it costs (the memory estimate from the model file's
header) and the context the model was trained on. The offer never goes past the trained context
unless the person picks that option on purpose. Blocking (reads the GGUF header): call it off
the GUI thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from desktop.chat.kinds import load_params_for
from desktop.local.catalog import InfoCache, ModelInfo
from desktop.local.memory import estimate, format_bytes
from desktop.store.agents import Agent


@dataclass(frozen=True, slots=True)
class ContextChoice:
    """One context size the person may pick, with what it costs."""

    n_ctx: int
    memory: str  # "about 1.2 GiB RAM" (or "" when it cannot be estimated)
    beyond_training: bool  # past what the model was trained on: replies may get worse
    drops_turns: bool  # the conversation still does not fit: the oldest turns are left out


@dataclass(frozen=True, slots=True)
class ContextOffer:
    agent_name: str
    current: int
    needed: int
    trained: int | None
    choices: tuple[ContextChoice, ...]  # the recommended one first

    @property
    def question(self) -> str:
        trained = (
            f" The model was trained on {self.trained:,} tokens."
            if self.trained is not None
            else " The model file does not say what context it was trained on."
        )
        return (
            f"This conversation needs about {self.needed:,} tokens; {self.agent_name} has "
            f"{self.current:,}.{trained} Raising the context changes the agent for every "
            "conversation and takes more memory."
        )


def _memory(info: ModelInfo, agent: Agent, n_ctx: int) -> str:
    try:
        need = estimate(
            info,
            n_ctx,
            agent.kv_type,
            agent.n_gpu_layers or 0,
            n_batch=agent.n_batch or 512,
            flash_attn=agent.flash_attn,
        )
    except (ValueError, TypeError):
        return ""
    gpu = f" + {format_bytes(need.vram)} GPU" if need.vram else ""
    return f"about {format_bytes(need.ram)} RAM{gpu}"


def offer_for(agent: Agent, needed: int, cache: InfoCache) -> ContextOffer:
    """The sizes to offer a local agent whose conversation needs ``needed`` tokens."""
    info = cache.get(load_params_for(agent).model_path)
    trained = info.context_length
    current = agent.n_ctx or 2048
    choices: list[ContextChoice] = []
    if trained is None or needed <= trained:
        choices.append(ContextChoice(needed, _memory(info, agent, needed), False, False))
    else:
        if trained > current:
            choices.append(ContextChoice(trained, _memory(info, agent, trained), False, True))
        choices.append(ContextChoice(needed, _memory(info, agent, needed), True, False))
    return ContextOffer(agent.name, current, needed, trained, tuple(choices))
