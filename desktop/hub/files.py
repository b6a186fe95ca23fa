"""GGUF files of a repository as models a person chooses between (contract).

Split files (``name-00001-of-00003.gguf``) are one model; ``mmproj`` projector files are not
offered as chat models. ``fit_of`` marks whether a model fits this machine from the memory
estimate (``desktop.local.memory``) for the context the person wants, against RAM and VRAM:
exact when the GGUF header is known (``header_info``: the first bytes of the file read with a
Range request), else from the file size with a stated margin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from desktop.hub.client import HubClient, RepoFile
from desktop.local.catalog import ModelInfo
from desktop.local.memory import MemoryEstimate


@dataclass(frozen=True, slots=True)
class GgufModel:
    name: str  # the file name without ".gguf" (and without the split suffix)
    quantization: str | None  # "Q4_K_M", "IQ3_XS", "F16", ... from the file name
    files: tuple[RepoFile, ...]  # one, or every split part in order
    size: int  # bytes, all parts

    @property
    def first(self) -> RepoFile:
        return self.files[0]


FitVerdict = Literal["gpu", "ram", "tight", "too_big", "unknown"]


@dataclass(frozen=True, slots=True)
class Fit:
    verdict: FitVerdict
    label: str  # words for the person: "Fits on the GPU", "Fits in memory", "Tight", "Too large"
    detail: str  # "needs ~4.9 GB of 15.6 GB (context 8,192)"
    estimate: MemoryEstimate | None


def quantization_of(filename: str) -> str | None:
    raise NotImplementedError


def group_gguf(files: list[RepoFile]) -> list[GgufModel]:
    """GGUF models of a repository's files, smallest first."""
    raise NotImplementedError


def fit_of(
    model: GgufModel,
    n_ctx: int,
    ram: int | None,
    vram: int | None,
    header_info: ModelInfo | None = None,
) -> Fit:
    raise NotImplementedError


def fetch_header_info(client: HubClient, repo: str, model: GgufModel) -> ModelInfo | None:
    """The model's GGUF header read through Range requests (growing until it parses); None
    when it cannot be read (never raises for a bad header)."""
    raise NotImplementedError
