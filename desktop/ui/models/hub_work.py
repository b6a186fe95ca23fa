"""Blocking work the "Find models" tab runs on worker threads (``run_blocking``): the
machine's memory for the fit marks, and a repository's models with those already in the
models folder."""

from __future__ import annotations

from typing import Any

from desktop.errors import UserError
from desktop.hub.client import HubClient
from desktop.hub.files import GgufModel, group_gguf


def machine_memory() -> tuple[int | None, int | None]:
    """(this machine's RAM, its largest GPU's memory when the build can offload): the same
    figures as ``simi models files``, so the window and the CLI mark a file alike. Whether a
    model fits *this machine* does not change when a browser tab closes; whether it can be
    loaded now is asked again when it is loaded (the agent editor's estimate, the warm start)."""
    from desktop.hub.files import machine_memory as figures

    return figures()


def list_models(hub: Any, client: HubClient, repo: str) -> tuple[list[GgufModel], set[str]]:
    """A repository's GGUF models and the names of those already in the models folder: the
    downloads the manifest recorded with the hub's sha256, unchanged since (no file is read;
    a same-size file it does not vouch for is checked when Download is pressed)."""
    models = group_gguf(client.files(repo))
    downloads = hub.downloads
    have: set[str] = set()
    for m in models:
        try:
            if downloads.downloaded_path(repo, m) is not None:
                have.add(m.name)
        except UserError:  # a path that cannot be saved here: Download says why
            continue
    return models, have
