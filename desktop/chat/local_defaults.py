"""What a new local agent gets for the fields nobody filled in: the context size and the reply
length set in Settings ("New local agents"), the context "Automatic" by default
(``desktop.local.context_size``: from the model's trained context and the memory estimate),
and every layer on the GPU when the whole model's GPU estimate fits the free memory of the
real GPUs, else none (``desktop.local.memory.gpu_layers_for``, the rule "New agent from this
model" follows too).

Blocking (reads the model file's header; the GPU probe may load llama.cpp): call it off the
GUI thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from desktop.local.catalog import ModelFileError, ModelInfo, read_model_info
from desktop.local.context_size import FALLBACK_N_CTX, automatic_n_ctx, available_ram
from desktop.local.memory import gpu_layers_for
from desktop.local.starter import resolve_model_path
from desktop.settings.prefs import Preferences, new_local_max_tokens, new_local_n_ctx
from desktop.store.agents import Agent

# () -> (whether the build offloads, the free bytes of its real GPUs or None)
GpuProbe = Callable[[], tuple[bool, int | None]]


def gpu_memory() -> tuple[bool, int | None]:
    """``desktop.local.pool.gpu_memory``, except that a build shipping no GPU backend library
    says "no offload" at once, without listing devices (the starter agent is made at the first
    start, before the window shows). Blocking."""
    from desktop.local.devices import backend_from_libs
    from desktop.local.gpu import _lib_dir

    folder = _lib_dir()  # the build's library folder
    if folder is None or backend_from_libs(folder) is None:
        return False, None
    from desktop.local.pool import gpu_memory as probe

    return probe()


def _model_info(model_path: str | None) -> ModelInfo | None:
    path = resolve_model_path(model_path)
    if path is None:
        return None
    try:
        return read_model_info(path)
    except ModelFileError:  # the editor or the CLI says what is wrong with the file
        return None


def default_n_ctx(
    prefs: Preferences,
    model_path: str | None,
    ram: Callable[[], int | None] | None = None,
    info: ModelInfo | None = None,
) -> int:
    """The context size Settings gives a new local agent of this model file. ``ram``: the
    bytes of memory available (``available_ram`` when not given); ``info``: the file's header
    when already read."""
    chosen = new_local_n_ctx(prefs)
    if chosen is not None:
        return chosen
    info = info or _model_info(model_path)
    if info is None:
        return FALLBACK_N_CTX
    return automatic_n_ctx(info, (ram or available_ram)())


def default_gpu_layers(
    agent: Agent, n_ctx: int, gpu: GpuProbe | None = None, info: ModelInfo | None = None
) -> int:
    """-1 (all) or 0 for a local agent of ``n_ctx`` whose GPU layers were left empty
    (``gpu_layers_for``); 0 for a file that cannot be read. ``gpu``: the probe
    (``gpu_memory`` when not given); ``info``: the file's header when already read."""
    info = info or _model_info(agent.model_path)
    if info is None:
        return 0
    offload, vram_free = (gpu or gpu_memory)()
    try:
        return gpu_layers_for(
            info,
            n_ctx,
            offload,
            vram_free,
            agent.kv_type,
            n_batch=agent.n_batch or 512,
            flash_attn=agent.flash_attn,
        )
    except ValueError:  # a context or KV type validation refuses anyway
        return 0


def new_local_fields(
    prefs: Preferences,
    agent: Agent,
    ram: Callable[[], int | None] | None = None,
    gpu: GpuProbe | None = None,
) -> dict[str, Any]:
    """The changes that give a new local agent Settings' defaults; a value that was chosen
    (not None) is never replaced. Empty for a remote agent. ``ram`` and ``gpu``: the memory
    probes (``available_ram``, ``gpu_memory`` when not given)."""
    if not agent.is_local:
        return {}
    changes: dict[str, Any] = {}
    info = _model_info(agent.model_path) if None in (agent.n_ctx, agent.n_gpu_layers) else None
    if agent.n_ctx is None:
        changes["n_ctx"] = default_n_ctx(prefs, agent.model_path, ram, info)
    if agent.max_tokens is None:
        changes["max_tokens"] = new_local_max_tokens(prefs)
    if agent.n_gpu_layers is None:
        n_ctx = changes.get("n_ctx", agent.n_ctx) or FALLBACK_N_CTX
        changes["n_gpu_layers"] = default_gpu_layers(agent, n_ctx, gpu, info) if info else 0
    return changes
