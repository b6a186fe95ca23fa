"""What the Models page's "Find models" tab asks of the Hugging Face Hub and of this machine,
Qt-free and blocking (the tab runs each on a worker thread, ``run_blocking``): the machine's
memory for the fit marks, a repository's GGUF models with those already in the models folder,
and GGUF headers read with Range requests (one per repository, scaled for its other
quantizations; the selected model's own). The client is ``HubService.client()``'s (the saved
token); the marks themselves are ``hub.files.fit_of``'s, a pure function the tab calls, and a
model with a vision projector in its repository "sees images" (``sees_images``)."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from desktop.errors import UserError
from desktop.hub import files
from desktop.hub.client import HubClient
from desktop.hub.files import GgufModel, group_gguf
from desktop.local.catalog import ModelInfo


def machine_memory() -> tuple[int | None, int | None]:
    """(this machine's RAM, its largest GPU's memory when the build can offload): the same
    figures as ``simi models files``, so the window and the CLI mark a file alike. Whether a
    model fits *this machine* does not change when a browser tab closes; whether it can be
    loaded now is asked again when it is loaded (the agent editor's estimate, the warm start)."""
    return files.machine_memory()


def list_models(hub: Any, client: HubClient, repo: str) -> tuple[list[GgufModel], set[str]]:
    """A repository's GGUF models and the names of those already in the models folder: the
    downloads the manifest recorded with the hub's sha256, unchanged since (no file is read;
    a same-size file it does not vouch for is checked when Download is pressed). ``hub``:
    ``services.hub`` (its ``downloads``)."""
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


def sees_images(model: GgufModel) -> bool:
    """The repository has a vision projector for the model (downloaded with it): a local
    agent on it can be sent images."""
    return model.projector is not None


def vision_note(model: GgufModel) -> str:
    """What the model's "Sees images" mark says when pointed at ("" without a projector)."""
    proj = model.projector
    if proj is None:
        return ""
    name = PurePosixPath(proj.path).name
    return f"Sees images: its vision projector {name} ({files.gb(proj.size)}) downloads with it"


def reference_header(
    client: HubClient, repo: str, models: list[GgufModel]
) -> tuple[GgufModel, ModelInfo] | None:
    """One model's header of the repository (a few Range reads), to scale for the others'
    fit marks (``hub.files.info_for``); None when none can be read."""
    return files.reference_header(client, repo, models)


def header_info(client: HubClient, repo: str, model: GgufModel) -> ModelInfo | None:
    """The model's own GGUF header (Range reads); None when it cannot be read."""
    return files.fetch_header_info(client, repo, model)
