"""Resumable, verified downloads into the models folder (contract).

A file downloads to ``<dest>.part`` beside a ``<dest>.part.json`` sidecar (repo, path,
revision, size, sha256, url), so a paused, dropped or app-restarted download resumes with an
HTTP Range request from the bytes already on disk (a server that answers 200 to a Range starts
over). Before starting: the free disk space must hold what is left plus a margin
(``DiskFull`` otherwise). At the end the sha256 of the whole file is checked against the hub's
LFS oid; a mismatch deletes the part and raises ``ChecksumMismatch`` saying so; only then is
the file renamed into place and recorded in the manifest. ``ENOSPC`` while writing raises
``DiskFull`` and keeps the part for a resume. Files land in
``models_dir/<owner>/<name>/<file>`` (the library scans that depth).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from desktop.hub.client import HubClient, HubError, RepoFile
from desktop.hub.files import GgufModel

DownloadState = Literal[
    "queued", "running", "paused", "verifying", "complete", "failed", "cancelled"
]
MANIFEST_NAME = ".simi-downloads.json"


class DiskFull(HubError):
    """Not enough free space (before starting, or ENOSPC while writing)."""


class ChecksumMismatch(HubError):
    """The downloaded bytes do not match the hub's sha256; the file was deleted."""


@dataclass(frozen=True, slots=True)
class DownloadProgress:
    repo: str
    name: str  # the model's name (GgufModel.name)
    done: int  # bytes on disk, all parts
    total: int
    state: DownloadState
    speed_bps: float | None = None  # bytes/s over the last few seconds
    eta_s: float | None = None
    error: str | None = None  # the HubError's text when failed
    path: str | None = None  # the first part's final path once complete


@dataclass(frozen=True, slots=True)
class PendingDownload:
    """An unfinished download found on disk (after a restart)."""

    repo: str
    model: GgufModel
    revision: str
    done: int


class DownloadHandle:
    """A download running on its own thread. Thread-safe controls."""

    progress: DownloadProgress

    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def cancel(self) -> None:
        """Stops and deletes the parts."""

    def wait(self, timeout: float | None = None) -> DownloadProgress: ...


class DownloadManifest:
    """``models_dir/.simi-downloads.json``: the files the app downloaded (atomic writes)."""

    def __init__(self, models_dir: Path) -> None:
        raise NotImplementedError

    def record(self, path: Path, repo: str, file: RepoFile, revision: str) -> None: ...
    def is_downloaded(self, path: str | Path) -> bool: ...
    def entry(self, path: str | Path) -> dict[str, object] | None: ...
    def forget(self, path: str | Path) -> None: ...


class Downloader:
    """Starts downloads; lists unfinished ones; deletes downloaded models."""

    def __init__(self, models_dir: Path, client_factory: Callable[[], HubClient]) -> None:
        raise NotImplementedError

    manifest: DownloadManifest

    def target_path(self, repo: str, file: RepoFile) -> Path: ...

    def start(
        self,
        repo: str,
        model: GgufModel,
        on_progress: Callable[[DownloadProgress], None] | None = None,
        revision: str = "main",
    ) -> DownloadHandle:
        """Begin (or resume) on a new thread; ``on_progress`` is called from that thread at
        most ~10 times a second and on every state change."""
        raise NotImplementedError

    def pending(self) -> list[PendingDownload]: ...

    def delete(self, path: str | Path) -> list[Path]:
        """Delete a downloaded model (every split part) and forget it; a file the app did not
        download raises ``UserError`` and is left alone. Returns the files removed."""
        raise NotImplementedError


def download_file(
    client: HubClient,
    repo: str,
    file: RepoFile,
    dest: Path,
    on_bytes: Callable[[int], None],
    stop: threading.Event,
    revision: str = "main",
) -> bool:
    """Blocking: fetch one file to ``dest`` (resuming its part). True when complete, False
    when ``stop`` was set (the part stays)."""
    raise NotImplementedError
