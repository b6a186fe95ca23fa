"""Blocking work the "Find models" tab runs on worker threads (``run_blocking``): the
machine's free memory for the fit marks, and a repository's models with those already in the
models folder."""

from __future__ import annotations

from typing import Any

from desktop.hub.client import HubClient
from desktop.hub.files import GgufModel, group_gguf


def machine_memory() -> tuple[int | None, int | None]:
    """(available RAM, free memory of the largest-free GPU the build can offload to)."""
    from desktop.local.context_size import available_ram
    from desktop.local.gpu import detect

    ram = available_ram()
    gpu = detect()
    vram = None
    if gpu.gpu_offload:
        free = [d.memory_free for d in gpu.devices if d.kind != "CPU" and d.memory_free]
        vram = max(free) if free else None
    return ram, vram


def list_models(hub: Any, client: HubClient, repo: str) -> tuple[list[GgufModel], set[str]]:
    """A repository's GGUF models and the names of those already in the models folder."""
    models = group_gguf(client.files(repo))
    downloads = hub.downloads
    have = {m.name for m in models if downloads.target_path(repo, m.first).exists()}
    return models, have
