"""The model library the Models page and the agent editor show, Qt-free.

``ModelLibrary`` is the GGUF files of the models folder and the linked folders
(``local.catalog.ModelCatalog`` over the app folder, the preferences and the runtime's header
cache), which of them the app downloaded (the hub's manifest: only those may be deleted from
the app) and deleting one. Beside it, the rules the Models page follows: which agents use a
file (an agent's ``starter:`` reference is the starter's path), the bytes each library folder
takes (split models: every part), the agent "New agent from this model" proposes (a unique
name from the file, the automatic context for the memory available now, every layer on the GPU
when the estimate fits the free GPU memory, else none: ``memory.gpu_layers_for``, the rule
every new local agent follows) and what Load loads (the first using agent's parameters, or
those defaults); and the probes they need (the llama.cpp build and its devices, the free RAM
and GPU memory).

Blocking: scans read GGUF headers (from the cache), the probes may load llama.cpp, the manifest
is a file; the window calls them off the GUI thread (``run_blocking``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from desktop.local import vision
from desktop.local.catalog import (
    InfoCache,
    ModelCatalog,
    ModelEntry,
    ModelInfo,
    PathsLike,
    PreferencesLike,
)
from desktop.local.context_size import FALLBACK_N_CTX, automatic_n_ctx
from desktop.local.context_size import available_ram as _available_ram
from desktop.local.gpu import GpuSupport, detect
from desktop.local.loading import LoadParams, default_threads
from desktop.local.memory import format_bytes, gpu_layers_for
from desktop.local.starter import resolve_model_path
from desktop.store.agents import Agent

if TYPE_CHECKING:
    from desktop.chat.services import Services

log = logging.getLogger("simi.chat.models")


# probes ----------------------------------------------------------------------------------------
def gpu_support(with_devices: bool = True) -> GpuSupport:
    """The installed llama.cpp build and (``with_devices``) its devices with their free
    memory, asked again each time (it changes). Imports llama_cpp (the library, never a
    model): blocking."""
    return detect(with_devices)


def gpu_memory() -> tuple[bool, int | None]:
    """Whether the build offloads, and the free memory of its real GPUs (None when a device
    does not say). Blocking."""
    from desktop.local.pool import gpu_memory as probe

    return probe()


def available_ram() -> int | None:
    """Bytes of memory available to a new process now (None when the system does not say)."""
    return _available_ram()


# the library -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LibraryScan:
    """One scan of the library: its entries, the llama.cpp build, the disk they take, and the
    paths of those the app downloaded."""

    entries: list[ModelEntry]
    gpu: GpuSupport
    disk: DiskUse
    downloaded: set[str]


class ModelLibrary:
    """The library's files and folders; ``downloads`` (the hub's ``Downloader``) says which the
    app downloaded and deletes those (None: nothing may be deleted)."""

    def __init__(
        self,
        paths: PathsLike,
        prefs: PreferencesLike,
        cache: InfoCache | None = None,
        downloads: Any = None,
    ) -> None:
        self.catalog = ModelCatalog(paths, prefs, cache=cache)
        self._downloads = downloads

    @classmethod
    def of(cls, services: Services) -> ModelLibrary:
        """The library of the app folder, with the runtime's header cache and the hub's
        downloads."""
        hub = getattr(services, "hub", None)
        return cls(
            services.paths,
            services.prefs,
            services.local.model_info,
            getattr(hub, "downloads", None),
        )

    @property
    def models_dir(self) -> Path:
        return self.catalog.models_dir

    def folders(self) -> list[Path]:
        """The models folder first, then the linked ones (a preference: no scan)."""
        return self.catalog.folders()

    def add_folder(self, folder: str | os.PathLike[str]) -> Path:
        """Link a folder (``LocalModelError``, a ``UserError``, when it cannot be)."""
        return self.catalog.add_folder(folder)

    def remove_folder(self, folder: str | os.PathLike[str]) -> Path:
        """Unlink a folder; its files are not touched."""
        return self.catalog.remove_folder(folder)

    def entries(self) -> list[ModelEntry]:
        """Blocking: every file with its header facts or its error (the starter first)."""
        return self.catalog.entries()

    def is_downloaded(self, path: str) -> bool:
        """Whether the app downloaded ``path`` (only those may be deleted from the app)."""
        manifest = getattr(self._downloads, "manifest", None)
        if manifest is None:
            return False
        try:
            return bool(manifest.is_downloaded(path))
        except Exception:  # a manifest that cannot be read offers nothing to delete
            log.warning("cannot read the downloads manifest", exc_info=True)
            return False

    def delete(self, path: str) -> list[Path]:
        """Blocking: delete a downloaded model (every split part) and forget it; a file the app
        did not download raises ``UserError``. Returns the files removed."""
        if self._downloads is None:
            return []
        removed: list[Path] = self._downloads.delete(path)
        return removed

    def scan(self, gpu_probe: Callable[[], GpuSupport] = gpu_support) -> LibraryScan:
        """Blocking: the entries, the llama.cpp build, the disk use, the downloaded files."""
        entries = self.entries()
        gpu = gpu_probe()
        disk = disk_use(entries, self.folders(), self.models_dir)
        mine = {e.path for e in entries if not e.starter and self.is_downloaded(e.path)}
        return LibraryScan(entries, gpu, disk, mine)


# which agents use a file ----------------------------------------------------------------------
def same_file(a: str | Path, b: str | Path) -> bool:
    if str(a) == str(b):
        return True
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def agent_file(agent: Agent) -> str | None:
    """The model file a local agent uses (None for a remote one or an agent without one)."""
    if not agent.is_local:
        return None
    path = resolve_model_path(agent.model_path)
    return str(path) if path is not None else None


def agents_using(path: str, agents: Iterable[Agent]) -> list[Agent]:
    """The local agents whose model file is ``path``, in the order given."""
    return [a for a in agents if (f := agent_file(a)) is not None and same_file(f, path)]


def used_by(entries: Iterable[ModelEntry], agents: Sequence[Agent]) -> dict[str, list[str]]:
    """File path -> the names of the agents using it."""
    return {e.path: [a.name for a in agents_using(e.path, agents)] for e in entries}


# disk use --------------------------------------------------------------------------------------
def model_files(path: str | Path) -> list[Path]:
    """The files of one model: itself, and for a split model ("-00001-of-00003") every part
    found beside it."""
    p = Path(path)
    stem = p.name[: -len(".gguf")] if p.name.lower().endswith(".gguf") else p.name
    parts = stem.rsplit("-", 3)
    if len(parts) == 4 and parts[2] == "of" and parts[1].isdigit() and parts[3].isdigit():
        width, count = len(parts[1]), int(parts[3])
        names = [f"{parts[0]}-{i:0{width}d}-of-{parts[3]}.gguf" for i in range(1, count + 1)]
        return [p.with_name(n) for n in names if p.with_name(n).exists()]
    return [p]


def size_on_disk(path: str | Path) -> int:
    total = 0
    for part in model_files(path):
        try:
            total += part.stat().st_size
        except OSError:
            continue
    return total


@dataclass(frozen=True, slots=True)
class DiskUse:
    folders: tuple[tuple[str, int], ...]  # (folder, bytes) in the library's order
    total: int

    @property
    def line(self) -> str:
        parts = [f"{_short_folder(f)} {format_bytes(n)}" for f, n in self.folders]
        return " · ".join([*parts, f"Total {format_bytes(self.total)}"])


def disk_use(entries: Iterable[ModelEntry], folders: Sequence[Path], models_dir: Path) -> DiskUse:
    """Bytes of the library's models per folder (the starter, installed with the app, is not
    in a folder and not counted)."""
    sizes: dict[str, int] = {str(f): 0 for f in folders}
    for entry in entries:
        if entry.folder is None:
            continue
        sizes[entry.folder] = sizes.get(entry.folder, 0) + size_on_disk(entry.path)
    named = tuple(
        ("Models folder" if folder == str(models_dir) else folder, n) for folder, n in sizes.items()
    )
    return DiskUse(named, sum(sizes.values()))


def _short_folder(folder: str) -> str:
    home = str(Path.home())
    if folder == home or folder.startswith(home + os.sep):
        return "~" + folder[len(home) :]
    return folder


# new agents and loading ------------------------------------------------------------------------
def agent_name_for(info: ModelInfo | None, path: str, taken: Iterable[str]) -> str:
    """The file's name (it says the model, size and quantization, as the hub names files)
    with the quantization when it does not, made unique among ``taken`` (case-blind)."""
    base = Path(path).stem.strip() or (info.name if info is not None else "Local model")
    if info is not None and info.quantization and info.quantization not in base:
        base = f"{base} {info.quantization}"
    base = base[:70]
    used = {t.strip().casefold() for t in taken}
    name, n = base, 2
    while name.casefold() in used:
        name, n = f"{base} ({n})", n + 1
    return name


def new_agent_for(
    entry: ModelEntry,
    taken: Iterable[str],
    ram: int | None,
    gpu_offload: bool,
    vram_free: int | None,
) -> Agent:
    """The agent the editor opens with for "New agent from this model" (not stored)."""
    info = entry.info
    n_ctx = automatic_n_ctx(info, ram) if info is not None else FALLBACK_N_CTX
    layers = gpu_layers_for(info, n_ctx, gpu_offload, vram_free) if info is not None else 0
    return Agent(
        name=agent_name_for(info, entry.path, taken),
        kind="local",
        model_path=entry.path,
        n_ctx=n_ctx,
        n_gpu_layers=layers,
        mmproj_path=entry.mmproj,
    )


def load_params_for_file(
    path: str,
    agents: Sequence[Agent],
    default: Agent,
) -> tuple[LoadParams, str | None]:
    """What Load loads ``path`` with, and the agent whose parameters those are (None: the
    new-agent defaults in ``default``)."""
    from desktop.chat.kinds import load_params_for

    users = agents_using(path, agents)
    if users:
        params = load_params_for(users[0])
        return LoadParams(**{**params.as_dict(), "model_path": path}), users[0].name
    return (
        LoadParams(
            model_path=path,
            n_ctx=default.n_ctx or FALLBACK_N_CTX,
            n_gpu_layers=default.n_gpu_layers or 0,
            n_threads=default_threads(),
        ),
        None,
    )


WARM_MARGIN = 0.1  # a model warmed ahead of need must fit with a tenth to spare


def fits_now(info: ModelInfo, params: LoadParams) -> bool:
    """Whether the model of ``params`` fits the RAM (and, when it offloads and the free GPU
    memory is known, the GPU memory) available now. Blocking (reads /proc, asks llama.cpp)."""
    from desktop.local import pool

    est = pool.estimate_for(info, params, gpu_offload=bool(params.n_gpu_layers))
    ram = pool.available_ram()
    if ram is None or est.ram > ram * (1 - WARM_MARGIN):
        return False
    if est.vram > 0:
        offload, vram_free = pool.gpu_memory()
        if offload and vram_free is not None and est.vram > vram_free * (1 - WARM_MARGIN):
            return False
    return True


# vision projectors -----------------------------------------------------------------------------
def projector_beside(model_path: str | None) -> str | None:
    """Blocking (lists the model's folder): the vision projector ("mmproj" GGUF) beside a
    model file, None when there is none. The library's entries already name theirs
    (``ModelEntry.mmproj``, found the same way, in a download's repository folders too)."""
    found = vision.projector_beside(model_path)
    return str(found) if found is not None else None


def projector_problem(mmproj_path: str | None, model_path: str | None = None) -> str | None:
    """Blocking (reads two GGUF headers): why the agent editor's projector cannot be one for
    the model, in finished words; None when it can, or none is chosen."""
    return vision.projector_problem(mmproj_path, model_path)


def vision_line(mmproj_path: str | None, problem: str | None = None) -> str:
    """The agent editor's line under the model: "Sees images" with a projector that checks,
    else "Text only" (and why, when one is chosen but cannot be used)."""
    if mmproj_path and problem is None:
        return "Sees images, with the vision projector below"
    if mmproj_path:
        return "Text only: the vision projector below cannot be used"
    return "Text only: no vision projector"
