"""What the Models page says about each file, in words and numbers (no Qt).

- ``used_by``: which agents use each file (an agent's ``starter:`` reference is the starter's
  path);
- ``model_files`` / ``disk_use``: the bytes on disk per library folder (split models: every
  part) and in total, as one line;
- ``new_agent_for``: the agent "New agent from this model" proposes: a unique name from the
  model, its file, the automatic context for the memory available now, and every layer on the
  GPU when the estimate fits the free GPU memory, else none (``memory.gpu_layers_for``, the
  rule every new local agent follows);
- ``load_params_for_file``: what Load loads: the first agent using the file's parameters, or
  the new-agent defaults;
- ``detail_facts``: the details panel's facts, with where a loaded model runs and the
  buffers llama.cpp allocated per device (``load_facts``, from the worker's ``LoadReport``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from desktop.chat.format import where_text
from desktop.local.catalog import ModelEntry, ModelInfo
from desktop.local.context_size import FALLBACK_N_CTX, automatic_n_ctx
from desktop.local.loading import LoadParams, default_threads
from desktop.local.memory import format_bytes, gpu_layers_for
from desktop.local.placement import LoadReport, buffers_text
from desktop.local.starter import resolve_model_path
from desktop.store.agents import Agent

STATE_WORDS = {
    "unloaded": "Not loaded",
    "loading": "Loading",
    "ready": "Loaded",
    "busy": "Answering",
    "error": "Error",
}


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


# disk use --------------------------------------------------------------------------------
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


# new agents and loading ------------------------------------------------------------------
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


def load_facts(report: LoadReport | None) -> list[tuple[str, str]]:
    """Where a loaded model runs, as llama.cpp reported at its load: "Where it runs" ("31/31
    layers on Vulkan0 · llvmpipe (software)", "0/31 layers on GPU · CPU"), "Buffers" per
    device, and the note of an out-of-memory retry. None of them when it is not loaded."""
    if report is None:
        return []
    where = report.where
    facts = []
    text = where_text({"device": where.device, "offloaded_layers": where.offloaded_layers})
    if text:
        facts.append(("Where it runs", text))
    buffers = buffers_text(report.placement)
    if buffers:
        facts.append(("Buffers", buffers))
    if report.note:
        facts.append(("GPU note", report.note))
    return facts


def detail_facts(
    entry: ModelEntry, users: Sequence[str] = (), report: LoadReport | None = None
) -> list[tuple[str, str]]:
    """The header facts the table leaves to the details panel (and those it hides when
    narrow: size, context, the agents using the file); with ``report``
    (``LocalRuntime.placement_of``), where the loaded model runs (``load_facts``)."""
    folder = entry.folder or "installed with the app (the starter model)"
    info = entry.info
    if info is None:
        return [("File", entry.path), ("Folder", folder), ("Problem", entry.error or "")]
    heads = f"{info.head_count or '?'} ({info.head_count_kv or '?'})"
    return [
        ("Name", info.name),
        ("Size", format_bytes(size_on_disk(entry.path) or info.file_size)),
        ("Used by", ", ".join(users) or "no agent"),
        *load_facts(report),
        ("Architecture", info.architecture),
        ("Parameters", info.parameters_label),
        ("Layers", str(info.block_count or "?")),
        ("Heads (KV)", heads),
        ("Embedding", str(info.embedding_length or "?")),
        ("Trained context", f"{info.context_length:,}" if info.context_length else "?"),
        ("Chat template", "yes" if info.chat_template_present else "no: using ChatML"),
        ("Folder", folder),
        ("File", entry.path),
    ]
