"""GGUF files of a repository as models a person chooses between (contract).

Split files (``name-00001-of-00003.gguf``) are one model; ``mmproj`` projector files are not
offered as chat models: each model carries the repository's projector that goes with it
(``GgufModel.projector``, ``desktop.local.vision.best_projector``: from its folder or above,
f16 before q8_0), downloaded with it, and with it the model sees images. ``fit_of`` marks
whether a model fits this machine from the memory estimate (``desktop.local.memory``) for the
context the person wants, against RAM and VRAM: exact when the GGUF header is known
(``header_info``: the first bytes of the file read with a Range request), else from the file
size with a stated margin.
"""

from __future__ import annotations

import collections
import io
import re
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Literal

from desktop.hub.client import HubClient, HubError, RepoFile
from desktop.local.catalog import ModelFileError, ModelInfo, info_from_header
from desktop.local.gguf import GGUFError, read_header_from
from desktop.local.memory import MemoryEstimate, estimate
from desktop.local.vision import best_projector, is_projector_name

RAM_MARGIN = 1.2  # "fits in memory" leaves 20 % of RAM for the system and other programs
VRAM_MARGIN = 0.9  # all layers on the GPU when the estimate is within 90 % of its memory
HEADER_FIRST_READ = 1 << 20
HEADER_MAX_READ = 32 << 20


@dataclass(frozen=True, slots=True)
class GgufModel:
    name: str  # the file name without ".gguf" (and without the split suffix)
    quantization: str | None  # "Q4_K_M", "IQ3_XS", "F16", ... from the file name
    files: tuple[RepoFile, ...]  # one, or every split part in order
    size: int  # bytes, all parts
    # the repository's vision projector for it ("mmproj-…-f16.gguf"), downloaded with it
    projector: RepoFile | None = None

    @property
    def first(self) -> RepoFile:
        return self.files[0]

    @property
    def sees_images(self) -> bool:
        return self.projector is not None

    @property
    def download_files(self) -> tuple[RepoFile, ...]:
        """What a download fetches: the model's files, then its projector."""
        return self.files + ((self.projector,) if self.projector is not None else ())

    @property
    def download_size(self) -> int:
        return self.size + (self.projector.size if self.projector is not None else 0)


FitVerdict = Literal["gpu", "ram", "tight", "too_big", "unknown"]


@dataclass(frozen=True, slots=True)
class Fit:
    verdict: FitVerdict
    label: str  # words for the person: "Fits on the GPU", "Fits in memory", "Tight", "Too large"
    detail: str  # "needs ~4.9 GB of 15.6 GB (context 8,192)"
    estimate: MemoryEstimate | None


_QUANT = re.compile(
    r"(?<![a-z0-9])(ud-)?(i?q[1-8](?:_[0-9a-z]{1,3}){0,3}|tq[12]_0|bf16|f16|f32|fp16|fp32|mxfp4)"
    r"(?![a-z0-9])",
    re.IGNORECASE,
)
_SPLIT = re.compile(r"^(?P<base>.+)-(?P<n>\d{5})-of-(?P<total>\d{5})\.gguf$", re.IGNORECASE)


def quantization_of(filename: str) -> str | None:
    """The quantization a GGUF file name states ("Q4_K_M", "IQ3_XS", "UD-Q4_K_XL", "F16"),
    upper-case; the last one in the name wins; None when the name says none."""
    stem = PurePosixPath(filename).name
    if stem.lower().endswith(".gguf"):
        stem = stem[: -len(".gguf")]
    split = _SPLIT.match(stem + ".gguf")
    if split:
        stem = split.group("base")
    found = list(_QUANT.finditer(stem))
    if not found:
        return None
    m = found[-1]
    return ((m.group(1) or "") + m.group(2)).upper()


def is_projector(path: str) -> bool:
    return is_projector_name(path)


def group_gguf(files: list[RepoFile]) -> list[GgufModel]:
    """GGUF models of a repository's files, smallest first, each with its projector."""
    models = _group_models(files)
    projectors = {
        f.path: f for f in files if f.path.lower().endswith(".gguf") and is_projector(f.path)
    }
    if not projectors:
        return models
    out = []
    for m in models:
        best = best_projector(m.first.path, projectors)
        out.append(replace(m, projector=projectors[best]) if best else m)
    return out


def _group_models(files: list[RepoFile]) -> list[GgufModel]:
    singles: list[GgufModel] = []
    splits: dict[tuple[str, str, int], dict[int, RepoFile]] = {}
    for f in files:
        name = PurePosixPath(f.path).name
        if not name.lower().endswith(".gguf") or is_projector(f.path):
            continue
        m = _SPLIT.match(name)
        if m:
            key = (str(PurePosixPath(f.path).parent), m.group("base"), int(m.group("total")))
            splits.setdefault(key, {})[int(m.group("n"))] = f
            continue
        stem = name[: -len(".gguf")]
        singles.append(GgufModel(stem, _quant_of_path(f.path), (f,), f.size))
    models = singles
    for (_folder, base, total), parts in splits.items():
        if sorted(parts) != list(range(1, total + 1)):
            continue  # an incomplete split model cannot be loaded
        ordered = tuple(parts[n] for n in range(1, total + 1))
        models.append(
            GgufModel(base, _quant_of_path(ordered[0].path), ordered, sum(p.size for p in ordered))
        )
    return sorted(_unique_names(models), key=lambda m: (m.size, m.name.lower(), m.first.path))


def _unique_names(models: list[GgufModel]) -> list[GgufModel]:
    """Models that share a name ("Q4_K_M/model-00001-of-00002.gguf" and
    "Q8_0/model-00001-of-00002.gguf" are both "model") are named with their folder
    ("Q4_K_M/model"), else with their first file's whole path: a name is one model of the
    repository (the window and the CLI pick by it)."""

    def clashing(ms: list[GgufModel]) -> set[str]:
        seen = collections.Counter(m.name for m in ms)
        return {name for name, n in seen.items() if n > 1}

    clash = clashing(models)
    if not clash:
        return models
    folder_named = []
    for m in models:
        folder = str(PurePosixPath(m.first.path).parent)
        if m.name in clash and folder != ".":
            m = replace(m, name=f"{folder}/{m.name}")
        folder_named.append(m)
    clash = clashing(folder_named)
    return [
        replace(m, name=m.first.path.removesuffix(".gguf")) if m.name in clash else m
        for m in folder_named
    ]


def _quant_of_path(path: str) -> str | None:
    """From the file name, else from its folder ("Q4_K_M/model-00001-of-00002.gguf")."""
    found = quantization_of(path)
    if found is None:
        parent = PurePosixPath(path).parent.name
        found = quantization_of(parent) if parent else None
    return found


def fit_of(
    model: GgufModel,
    n_ctx: int,
    ram: int | None,
    vram: int | None,
    header_info: ModelInfo | None = None,
) -> Fit:
    """Whether ``model`` fits this machine at context ``n_ctx``: all layers on the GPU
    ("gpu"), in RAM with a 20 % margin ("ram"), within the margin ("tight"), or not."""
    ctx = f"context {n_ctx:,}"
    if ram is None:
        return Fit("unknown", "Unknown", f"this machine's memory is unknown ({ctx})", None)
    if header_info is None:
        return _fit_from_size(model, n_ctx, ram, vram)
    info = _whole_model(header_info, model)
    if vram:
        on_gpu = estimate(info, n_ctx, n_gpu_layers=-1, gpu_offload=True)
        if on_gpu.vram <= vram * VRAM_MARGIN and on_gpu.ram * RAM_MARGIN <= ram:
            return Fit(
                "gpu",
                "Fits on the GPU",
                f"needs ~{gb(on_gpu.vram)} of {gb(vram)} GPU memory ({ctx})",
                on_gpu,
            )
    in_ram = estimate(info, n_ctx, n_gpu_layers=0, gpu_offload=False)
    return _ram_verdict(in_ram.total, ram, ctx, in_ram, "")


def _ram_verdict(need: int, ram: int, ctx: str, est: MemoryEstimate | None, note: str) -> Fit:
    detail = f"needs ~{gb(need)} of {gb(ram)} ({ctx}{note})"
    if need * RAM_MARGIN <= ram:
        return Fit("ram", "Fits in memory", detail, est)
    if need <= ram:
        return Fit("tight", "Tight", detail + "; little left for other programs", est)
    return Fit("too_big", "Too large", detail, est)


def _fit_from_size(model: GgufModel, n_ctx: int, ram: int, vram: int | None) -> Fit:
    """Without the header: the weights are the file; the KV cache is taken as ~128 KiB per
    token for a 4.5 GB (7-8B, grouped-query) model, scaled by size; compute ~5 % + 64 MiB."""
    per_token = min(max(128 * 1024 * model.size / 4.5e9, 16 * 1024), 512 * 1024)
    need = int(model.size + per_token * n_ctx + model.size * 0.05 + (64 << 20))
    ctx = f"context {n_ctx:,}"
    if vram and need <= vram * VRAM_MARGIN:
        return Fit(
            "gpu",
            "Fits on the GPU",
            f"needs ~{gb(need)} of {gb(vram)} GPU memory ({ctx}; estimate from file size)",
            None,
        )
    return _ram_verdict(need, ram, ctx, None, "; estimate from file size")


def _whole_model(info: ModelInfo, model: GgufModel) -> ModelInfo:
    """A split model's first part describes only its own tensors: spread the rest of the
    weights evenly over the layers."""
    if len(model.files) == 1 or info.file_size >= model.size:
        return info
    blocks = info.block_count or len(info.layer_bytes)
    layers_total = max(model.size - info.embedding_bytes - info.output_bytes, 0)
    layer_bytes = tuple([layers_total // blocks] * blocks) if blocks else ()
    return replace(info, file_size=model.size, layer_bytes=layer_bytes)


def gb(n: float) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.1f} GB"
    return f"{n / 1e6:.0f} MB"


def fetch_header_info(client: HubClient, repo: str, model: GgufModel) -> ModelInfo | None:
    """The model's GGUF header read through Range requests (growing until it parses); None
    when it cannot be read (never raises for a bad header)."""
    first = model.first
    total = first.size
    if total <= 0:
        return None
    want = min(HEADER_FIRST_READ, total)
    data = b""
    while True:
        try:
            if len(data) < want:
                data += client.read_range(repo, first.path, len(data), want - 1)
        except HubError:
            return None
        if not data.startswith(b"GGUF"):
            return None
        try:
            header = read_header_from(io.BytesIO(data), total)
            return info_from_header(Path(first.path), header)
        except ModelFileError:
            return None
        except GGUFError as exc:
            if "truncated" not in str(exc):
                return None  # a header that is wrong, not one cut short by our read
            if len(data) < want or want >= min(total, HEADER_MAX_READ):
                return None  # the whole allowance read (or the server sent less): not GGUF
            want = min(want * 2, total, HEADER_MAX_READ)


def scaled_info(info: ModelInfo, size: int) -> ModelInfo:
    """Another quantization of the same model from one header: the architecture (layers,
    heads, context, vocabulary) is the same, the weights scale with the file size. Lets a
    repository's fit marks come from one header read instead of one per file."""
    if info.file_size <= 0 or size == info.file_size:
        return info
    ratio = size / info.file_size
    return replace(
        info,
        file_size=size,
        layer_bytes=tuple(round(b * ratio) for b in info.layer_bytes),
        embedding_bytes=round(info.embedding_bytes * ratio),
        output_bytes=round(info.output_bytes * ratio),
        quantization=None,
    )


def reference_header(
    client: HubClient, repo: str, models: list[GgufModel]
) -> tuple[GgufModel, ModelInfo] | None:
    """The header of one model of the repository (the smallest single file first), to scale
    for the others with ``scaled_info``; None when none can be read."""
    ordered = sorted(models, key=lambda m: (len(m.files) > 1, m.size))
    for model in ordered[:3]:
        info = fetch_header_info(client, repo, model)
        if info is not None:
            return model, _whole_model(info, model)
    return None


def info_for(model: GgufModel, reference: tuple[GgufModel, ModelInfo] | None) -> ModelInfo | None:
    if reference is None:
        return None
    ref_model, ref_info = reference
    if ref_model is model or ref_model == model:
        return ref_info
    return scaled_info(ref_info, model.size)


def machine_memory() -> tuple[int | None, int | None]:
    """(RAM, VRAM) in bytes: the physical memory, and the largest GPU's memory when the
    installed llama.cpp can offload (None when there is none or it is unknown)."""
    import os

    ram: int | None
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = None
    vram: int | None = None
    try:
        from desktop.local.gpu import detect

        support = detect()
        if support.gpu_offload:
            sizes = [d.memory_total for d in support.devices if d.kind != "CPU" and d.memory_total]
            vram = max(sizes) if sizes else None
    except Exception:
        vram = None
    return ram, vram
