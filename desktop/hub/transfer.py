"""One file fetched to its ``.part`` with Range resume, and the atomic JSON both the sidecars
and the manifest are written with (``downloads.py`` builds on these)."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from desktop.hub.client import HubClient, HubError, HubUnavailable, RepoFile
from desktop.settings.prefs import write_json_atomic

log = logging.getLogger(__name__)

CHUNK = 1 << 20
DISK_MARGIN = 64 << 20  # bytes left free beyond the download itself
RETRIES = 3  # a dropped connection that made progress is picked up again this many times


class DiskFull(HubError):
    """Not enough free space (before starting, or ENOSPC while writing)."""


class ChecksumMismatch(HubError):
    """The downloaded bytes do not match the hub's sha256; the file was deleted."""


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def part_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part")


def sidecar_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".part.json")


def size_text(n: float) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.1f} GB"
    if n >= 1e6:
        return f"{n / 1e6:.0f} MB"
    return f"{max(n, 0) / 1e3:.0f} kB"


def check_free_space(folder: Path, needed: int) -> None:
    """``DiskFull`` unless ``folder``'s disk holds ``needed`` bytes more plus the margin."""
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if needed + DISK_MARGIN > free:
        raise DiskFull(
            f"Not enough disk space in {folder}: the download needs {size_text(needed)} more "
            f"(and {size_text(DISK_MARGIN)} to spare), {size_text(free)} is free. Free some "
            "space or choose another models folder in Settings."
        )


def _write(fh: Any, chunk: bytes) -> None:
    """The one place bytes reach the disk (tests inject ``OSError(ENOSPC)`` here)."""
    fh.write(chunk)


def _disk_full(dest: Path) -> DiskFull:
    return DiskFull(
        f"The disk filled up while downloading {dest.name} into {dest.parent}. The part "
        "downloaded so far is kept: free some space, then resume."
    )


def download_file(
    client: HubClient,
    repo: str,
    file: RepoFile,
    dest: Path,
    on_bytes: Callable[[int], None],
    stop: threading.Event,
    revision: str = "main",
    *,
    sidecar: dict[str, Any] | None = None,
) -> bool:
    """Blocking: fetch one file to ``dest`` (resuming its part). True when complete, False
    when ``stop`` was set (the part stays). ``on_bytes(n)`` is told of bytes on disk as they
    come (negative when a part starts over; ``Downloader.bytes_on_disk`` is where it starts).
    ``sidecar``: more to keep in the part's sidecar (the model it belongs to).

    A file already at ``dest`` is taken as the download only when its size and sha256 are
    the hub's (it is read through once); any other is replaced by a verified download (the
    new bytes go to the part first, so the old file stays until they are checked)."""
    counted: int | None = None  # dest's size when bytes_on_disk counted dest, not the part
    if dest.is_file():
        counted = dest.stat().st_size
        if counted == file.size:
            same = file_matches(dest, file, stop)
            if same is None:
                return False
            if same:
                return True
            log.warning(
                "%s is there with the size of %s but another sha256: downloading it again",
                dest,
                file.path,
            )
    part, side = part_path(dest), sidecar_path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    have = part.stat().st_size if part.exists() else 0
    if have > file.size:
        part.unlink()
        if counted is None:
            on_bytes(-file.size)  # bytes_on_disk counts a part up to the file's size
        have = 0
    if counted is not None:
        on_bytes(have - counted)
    check_free_space(dest.parent, file.size - have)
    meta = {
        "repo": repo,
        "path": file.path,
        "revision": revision,
        "size": file.size,
        "sha256": file.sha256,
        "url": client.file_url(repo, file.path, revision),
    }
    write_json_atomic(side, {**(sidecar or {}), **meta})
    hasher = _Digest()
    if have and not _hash_existing(part, have, hasher, stop):
        return False
    attempts = 0
    while have < file.size:
        if stop.is_set():
            return False
        try:
            result = _fetch(client, repo, file, dest, have, hasher, on_bytes, stop, revision)
        except HubUnavailable as exc:
            now = part.stat().st_size if part.exists() else 0
            attempts = 0 if now > have else attempts + 1
            if attempts >= RETRIES:
                raise
            log.info("hub download of %s cut at %d bytes (%s); resuming", file.path, now, exc)
            have = now
            continue
        if result is None:
            return False
        have = result
    if have != file.size:
        part.unlink(missing_ok=True)
        raise HubUnavailable(f"The hub sent more bytes than {file.path} has; start it again.")
    if file.sha256 and hasher.hexdigest() != file.sha256.lower():
        part.unlink(missing_ok=True)
        side.unlink(missing_ok=True)
        raise ChecksumMismatch(
            f"{dest.name} did not match the hub's checksum (sha256), so it was deleted: the "
            "bytes were damaged on the way or the file changed on the hub. Download it again."
        )
    os.replace(part, dest)
    side.unlink(missing_ok=True)
    return True


def file_matches(path: Path, file: RepoFile, stop: threading.Event | None = None) -> bool | None:
    """Whether ``path`` holds ``file``: its size, and its sha256 when the hub gives one (the
    whole file is read); None when ``stop`` was set while reading."""
    try:
        if path.stat().st_size != file.size:
            return False
        if not file.sha256:
            return True
        hasher = _Digest()
        if not _hash_existing(path, file.size, hasher, stop or threading.Event()):
            return None
    except OSError:
        return False
    return hasher.hexdigest() == file.sha256.lower()


class _Digest:
    """sha256 streamed over the bytes as they reach the part, restartable."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def reset(self) -> None:
        self._h = hashlib.sha256()

    def update(self, data: bytes) -> None:
        self._h.update(data)

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def _hash_existing(part: Path, have: int, hasher: _Digest, stop: threading.Event) -> bool:
    with part.open("rb") as fh:
        left = have
        while left > 0:
            if stop.is_set():
                return False
            chunk = fh.read(min(CHUNK * 4, left))
            if not chunk:
                break
            hasher.update(chunk)
            left -= len(chunk)
    return True


def _fetch(
    client: HubClient,
    repo: str,
    file: RepoFile,
    dest: Path,
    have: int,
    hasher: _Digest,
    on_bytes: Callable[[int], None],
    stop: threading.Event,
    revision: str,
) -> int | None:
    """One GET from ``have``; the bytes on disk after it, or None when stopped."""
    part = part_path(dest)
    with client.open_stream(repo, file.path, start=have, revision=revision) as response:
        mode = "ab"
        if have and response.status_code == 200:  # the server ignored the Range: start over
            log.info("hub ignored Range for %s; starting over", file.path)
            mode = "wb"
            on_bytes(-have)
            have = 0
            hasher.reset()
        elif have and response.status_code == 206:
            start = _range_start(response.headers.get("content-range"))
            if start != have:
                raise HubUnavailable(
                    f"The hub answered a resume of {file.path} from byte {have:,} with bytes "
                    f"from {start}; start the download again."
                )
        elif response.status_code not in (200, 206):
            raise HubUnavailable(f"The hub answered {response.status_code} for {file.path}.")
        try:
            with part.open(mode) as fh:
                for chunk in response.iter_bytes():
                    if stop.is_set():
                        return None
                    _write(fh, chunk)
                    hasher.update(chunk)
                    have += len(chunk)
                    on_bytes(len(chunk))
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise _disk_full(dest) from None
            raise HubError(f"{dest} cannot be written: {exc.strerror or exc}.") from None
    return have


def _range_start(content_range: str | None) -> int | None:
    # "bytes 100-199/1000"
    if not content_range or not content_range.startswith("bytes "):
        return None
    try:
        return int(content_range[6:].split("-", 1)[0])
    except ValueError:
        return None
