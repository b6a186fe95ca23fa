"""Resumable, verified downloads into the models folder (contract).

A file downloads to ``<dest>.part`` beside a ``<dest>.part.json`` sidecar (repo, path,
revision, size, sha256, url), so a paused, dropped or app-restarted download resumes with an
HTTP Range request from the bytes already on disk (a server that answers 200 to a Range starts
over). Before starting: the free disk space must hold what is left plus a margin
(``DiskFull`` otherwise). At the end the sha256 of the whole file is checked against the hub's
LFS oid; a mismatch deletes the part and raises ``ChecksumMismatch`` saying so; only then is
the file renamed into place and recorded in the manifest. ``ENOSPC`` while writing raises
``DiskFull`` and keeps the part for a resume. Files land in
``models_dir/<owner>/<name>/<path in the repository>``: the repository's folders are kept
(``Q4_K_M/model-00001-of-00002.gguf`` and ``Q8_0/model-00001-of-00002.gguf`` are two files),
every name checked first (``names.py``: nothing is written outside the models folder), and
the library scans that deep. A download is one repository + first file path + revision.

"Already downloaded" means the hub's sha256: the manifest records each verified file (its
sha256, size and modification time), and a file the manifest does not vouch for is read
through and compared before it is taken (``downloaded_path(deep=True)``, ``download_file``);
a same-size file with other bytes is downloaded again. Manifests and parts of earlier
versions, which saved a repository's files flat in its folder, are still read: such a file is
found through its manifest entry, such a part is moved to where it now belongs.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from desktop.errors import UserError
from desktop.hub.client import HubClient, HubError, RepoFile
from desktop.hub.files import GgufModel, is_projector
from desktop.hub.names import MAX_REPO_FOLDERS, check_repo_id, check_repo_path, repo_id
from desktop.hub.transfer import (
    ChecksumMismatch,
    DiskFull,
    check_free_space,
    download_file,
    file_matches,
    part_path,
    read_json,
    sidecar_path,
    write_json_atomic,
)

__all__ = [
    "MANIFEST_NAME",
    "ChecksumMismatch",
    "DiskFull",
    "DownloadHandle",
    "DownloadManifest",
    "DownloadProgress",
    "DownloadState",
    "Downloader",
    "PendingDownload",
    "download_file",
]

log = logging.getLogger(__name__)

DownloadState = Literal[
    "queued", "running", "paused", "verifying", "complete", "failed", "cancelled"
]
MANIFEST_NAME = ".simi-downloads.json"
PROGRESS_INTERVAL_S = 0.1
SPEED_WINDOW_S = 5.0

DownloadKey = tuple[str, str, str]  # repository, the first file's path in it, revision


def download_key(repo: str, model: GgufModel, revision: str) -> DownloadKey:
    return (repo, model.first.path, revision)


class DownloadBusy(HubError):
    """The same file is being downloaded from another revision."""


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

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


@dataclass(frozen=True, slots=True)
class PendingDownload:
    """An unfinished download found on disk (after a restart)."""

    repo: str
    model: GgufModel
    revision: str
    done: int


class DownloadManifest:
    """``models_dir/.simi-downloads.json``: the files the app downloaded (atomic writes)."""

    def __init__(self, models_dir: Path) -> None:
        self.models_dir = Path(models_dir)
        self.path = self.models_dir / MANIFEST_NAME
        self._lock = threading.Lock()

    def _key(self, path: str | Path) -> str | None:
        p = Path(path).expanduser()
        try:
            rel = p.resolve().relative_to(self.models_dir.resolve())
        except (ValueError, OSError):
            return None
        return rel.as_posix()

    def _load(self) -> dict[str, dict[str, Any]]:
        data = read_json(self.path)
        files = data.get("files") if isinstance(data, dict) else None
        return (
            {k: v for k, v in files.items() if isinstance(v, dict)}
            if isinstance(files, dict)
            else {}
        )

    def _save(self, files: dict[str, dict[str, Any]]) -> None:
        write_json_atomic(self.path, {"version": 1, "files": files})

    def record(
        self,
        path: Path,
        repo: str,
        file: RepoFile,
        revision: str,
        *,
        parts: list[Path] | None = None,
    ) -> None:
        key = self._key(path)
        if key is None:
            raise UserError(f"{path} is not inside the models folder {self.models_dir}.")
        entry: dict[str, Any] = {
            "repo": repo,
            "path": file.path,
            "revision": revision,
            "size": file.size,
            "sha256": file.sha256,
            "downloaded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        with contextlib.suppress(OSError):  # the file as verified: a later change shows
            entry["mtime_ns"] = Path(path).stat().st_mtime_ns
        if parts:
            entry["parts"] = [k for k in (self._key(p) for p in parts) if k]
        with self._lock:
            files = self._load()
            files[key] = entry
            self._save(files)

    def is_downloaded(self, path: str | Path) -> bool:
        return self.entry(path) is not None

    def entry(self, path: str | Path) -> dict[str, object] | None:
        key = self._key(path)
        if key is None:
            return None
        with self._lock:
            return self._load().get(key)

    def verified(self, path: str | Path, file: RepoFile, repo: str | None = None) -> bool:
        """``path`` is a recorded download of ``file`` (of ``repo``) with the hub's sha256,
        and the file is unchanged since (its size, and its modification time when the entry
        has one: entries of earlier versions do not). Reads no file's bytes."""
        entry = self.entry(path)
        if entry is None or entry.get("path") != file.path:
            return False
        if repo is not None and entry.get("repo") != repo:
            return False
        sha = entry.get("sha256")
        if file.sha256:
            if not isinstance(sha, str) or sha.lower() != file.sha256.lower():
                return False
        elif entry.get("size") != file.size:
            return False
        try:
            st = Path(path).stat()
        except OSError:
            return False
        mtime = entry.get("mtime_ns")
        return st.st_size == file.size and (not isinstance(mtime, int) or mtime == st.st_mtime_ns)

    def find(self, repo: str, path: str) -> list[Path]:
        """Where the manifest has a download of ``path`` of ``repo`` (an earlier version of the
        app saved a repository's files flat in its folder: such an entry's key is not
        ``<owner>/<name>/<path>``)."""
        return [
            p
            for p, entry in self.entries().items()
            if entry.get("repo") == repo and entry.get("path") == path
        ]

    def entries(self) -> dict[Path, dict[str, Any]]:
        with self._lock:
            files = self._load()
        return {self.models_dir / k: v for k, v in files.items()}

    def forget(self, path: str | Path) -> None:
        key = self._key(path)
        if key is None:
            return
        with self._lock:
            files = self._load()
            if files.pop(key, None) is not None:
                self._save(files)


class DownloadHandle:
    """A download running on its own thread. Thread-safe controls."""

    progress: DownloadProgress

    def __init__(
        self,
        owner: Downloader,
        repo: str,
        model: GgufModel,
        revision: str,
        on_progress: Callable[[DownloadProgress], None] | None,
    ) -> None:
        self._owner = owner
        self.repo = repo
        self.model = model
        self.revision = revision
        self._on_progress = on_progress
        self.exception: HubError | None = None  # what ended a failed download
        self._stop = threading.Event()
        self._resume = threading.Event()
        self._cancelled = False
        self._lock = threading.Lock()
        self._done = owner.bytes_on_disk(repo, model)
        self._samples: collections.deque[tuple[float, int]] = collections.deque()
        self._last_emit = 0.0
        self.progress = DownloadProgress(
            repo, model.name, self._done, model.download_size, "queued"
        )
        self._thread = threading.Thread(
            target=self._run, name=f"hub-download {model.name}", daemon=True
        )

    # -- controls -----------------------------------------------------------------------
    def pause(self) -> None:
        with self._lock:
            if self.progress.state in ("queued", "running"):
                self._resume.clear()
                self._stop.set()

    def resume(self) -> None:
        with self._lock:
            if self.progress.state in ("paused", "queued", "running"):
                self._stop.clear()
                self._resume.set()

    def cancel(self) -> None:
        """Stops and deletes the parts."""
        with self._lock:
            self._cancelled = True
            self._stop.set()
            self._resume.set()

    def wait(self, timeout: float | None = None) -> DownloadProgress:
        self._thread.join(timeout)
        return self.progress

    @property
    def key(self) -> DownloadKey:
        return download_key(self.repo, self.model, self.revision)

    @property
    def finished(self) -> bool:
        return self.progress.state in ("complete", "failed", "cancelled")

    # -- the thread ------------------------------------------------------------------------
    def _start(self) -> None:
        self._thread.start()

    def _emit(self, state: DownloadState, *, force: bool = False, **extra: Any) -> None:
        now = time.monotonic()
        changed = state != self.progress.state
        speed = eta = None
        if state == "running":
            self._samples.append((now, self._done))
            while self._samples and now - self._samples[0][0] > SPEED_WINDOW_S:
                self._samples.popleft()
            t0, d0 = self._samples[0]
            if now - t0 >= 0.5 and self._done > d0:
                speed = (self._done - d0) / (now - t0)
                eta = max(self.progress.total - self._done, 0) / speed
            else:
                speed, eta = self.progress.speed_bps, self.progress.eta_s
        else:
            self._samples.clear()
        self.progress = replace(
            self.progress,
            done=self._done,
            state=state,
            speed_bps=speed,
            eta_s=eta,
            **extra,
        )
        if not (changed or force or now - self._last_emit >= PROGRESS_INTERVAL_S):
            return
        self._last_emit = now
        if self._on_progress is not None:
            try:
                self._on_progress(self.progress)
            except Exception:
                log.exception("download progress listener failed")

    def _on_bytes(self, n: int) -> None:
        self._done += n
        self._emit("running")

    def _run(self) -> None:
        try:
            self._emit("running", force=True)
            while True:
                if self._cancelled:
                    break
                if self._attempt():
                    return
                if self._cancelled:
                    break
                self._emit("paused", force=True)
                self._resume.wait()
                self._resume.clear()
                if self._cancelled:
                    break
                self._emit("running", force=True)
            self._owner.remove_parts(self.repo, self.model)
            self._done = 0
            self._emit("cancelled", force=True)
        except HubError as exc:
            self.exception = exc
            self._emit("failed", force=True, error=str(exc))
        except Exception as exc:  # a bug must still end the download visibly
            log.exception("download of %s failed", self.model.name)
            self._emit("failed", force=True, error=f"The download failed: {exc}")
        finally:
            self._owner.forget_handle(self)

    def _attempt(self) -> bool:
        """Every part in order, then the projector; True when the model is complete (and
        recorded)."""
        owner = self._owner
        model = self.model
        folder = owner.target_path(self.repo, model.first).parent
        check_free_space(folder, max(model.download_size - self._done, 0))
        sidecar = {"model": _model_to_json(model)}
        with contextlib.closing(owner.client_factory()) as client:
            for part in model.download_files:
                dest = owner.target_path(self.repo, part)
                # a projector is shared by the repository's quantizations: one download of
                # it at a time, the others find it verified once it is in
                with owner.file_lock(dest, self._stop) as held:
                    if not held:
                        return False  # paused while another download had the file
                    if owner.manifest.verified(dest, part, self.repo):
                        continue  # verified before and unchanged since (bytes_on_disk counted)
                    ok = download_file(
                        client,
                        self.repo,
                        part,
                        dest,
                        self._on_bytes,
                        self._stop,
                        self.revision,
                        sidecar=sidecar,
                    )
                    if ok and part is model.projector:
                        owner.manifest.record(dest, self.repo, part, self.revision, parts=[dest])
                if not ok:
                    return False
        self._emit("verifying", force=True)
        paths = [owner.target_path(self.repo, p) for p in model.files]
        for part, path in zip(model.files, paths, strict=True):
            owner.manifest.record(path, self.repo, part, self.revision, parts=paths)
        self._done = model.download_size
        self._emit("complete", force=True, path=str(paths[0]))
        return True


class Downloader:
    """Starts downloads; lists unfinished ones; deletes downloaded models."""

    manifest: DownloadManifest

    def __init__(self, models_dir: Path, client_factory: Callable[[], HubClient]) -> None:
        self.models_dir = Path(models_dir)
        self.client_factory = client_factory
        self.manifest = DownloadManifest(self.models_dir)
        self._handles: dict[DownloadKey, DownloadHandle] = {}
        self._lock = threading.Lock()
        self._file_locks: dict[Path, threading.Lock] = {}

    @contextlib.contextmanager
    def file_lock(self, dest: Path, stop: threading.Event) -> Iterator[bool]:
        """Hold ``dest`` for one download thread (True), or give up when ``stop`` is set while
        another holds it (False): two models of a repository share its projector."""
        with self._lock:
            lock = self._file_locks.setdefault(dest, threading.Lock())
        while not lock.acquire(timeout=0.2):
            if stop.is_set():
                yield False
                return
        try:
            yield True
        finally:
            lock.release()

    def target_path(self, repo: str, file: RepoFile) -> Path:
        """``models_dir/<owner>/<name>/<file's path in the repository>``; ``BadName`` (a
        ``UserError``) when the repository id or a part of the path could lead elsewhere."""
        owner, name = check_repo_id(repo)
        parts = check_repo_path(file.path, f"{owner}/{name}")
        return self.models_dir.joinpath(owner, name, *parts)

    def local_path(self, repo: str, file: RepoFile) -> Path:
        """Where ``file`` is: its target path, else where an earlier version of the app saved
        it (the manifest says), else the target path."""
        target = self.target_path(repo, file)
        if target.is_file():
            return target
        for path in self.manifest.find(repo_id(repo), file.path):
            if path.is_file():
                return path
        return target

    def downloaded_path(
        self,
        repo: str,
        model: GgufModel,
        *,
        deep: bool = False,
        stop: threading.Event | None = None,
    ) -> Path | None:
        """The first part's path when every part is in the models folder with the hub's
        sha256, else None. Without ``deep`` only the manifest's word counts (no file is read:
        the window asks this for every model of a repository); with it, a file the manifest
        does not vouch for is read and compared, and recorded when it matches."""
        repo = repo_id(repo)
        paths: list[Path] = []
        checked: list[RepoFile] = []
        for f in model.download_files:  # the projector too: a model without it is not all in
            path = self.local_path(repo, f)
            if not self.manifest.verified(path, f, repo):
                if not deep or not path.is_file() or not file_matches(path, f, stop):
                    return None
                checked.append(f)
            paths.append(path)
        parts = paths[: len(model.files)]
        for f, path in zip(model.download_files, paths, strict=True):
            if f in checked:
                kept = parts if f is not model.projector else [path]
                self.manifest.record(path, repo, f, self._revision_of(path), parts=kept)
        return paths[0]

    def _revision_of(self, path: Path) -> str:
        entry = self.manifest.entry(path)
        revision = entry.get("revision") if entry else None
        return revision if isinstance(revision, str) else "main"

    def bytes_on_disk(self, repo: str, model: GgufModel) -> int:
        done = 0
        for f in model.download_files:
            dest = self.target_path(repo, f)
            part = part_path(dest)
            if dest.is_file():
                done += dest.stat().st_size
            elif part.is_file():
                done += min(part.stat().st_size, f.size)
        return done

    def start(
        self,
        repo: str,
        model: GgufModel,
        on_progress: Callable[[DownloadProgress], None] | None = None,
        revision: str = "main",
    ) -> DownloadHandle:
        """Begin (or resume) on a new thread; ``on_progress`` is called from that thread at
        most ~10 times a second and on every state change. The repository id and every
        file's path are checked first (``BadName``: nothing is written)."""
        repo = repo_id(repo)
        paths = {self.target_path(repo, f) for f in model.files}
        key = download_key(repo, model, revision)
        with self._lock:
            running = self._handles.get(key)
            if running is not None and not running.finished:
                running.resume()
                return running
            for other in self._handles.values():
                if other.finished or not paths & {
                    self.target_path(other.repo, f) for f in other.model.files
                }:
                    continue
                raise DownloadBusy(
                    f"{model.name} of {repo} is being downloaded from revision "
                    f"{other.revision} into the same place: let it finish or cancel it first."
                )
            handle = DownloadHandle(self, repo, model, revision, on_progress)
            self._handles[key] = handle
        handle._start()
        return handle

    def active(self) -> list[DownloadHandle]:
        with self._lock:
            return list(self._handles.values())

    def forget_handle(self, handle: DownloadHandle) -> None:
        with self._lock:
            if self._handles.get(handle.key) is handle:
                del self._handles[handle.key]

    def remove_parts(self, repo: str, model: GgufModel) -> None:
        for f in model.download_files:
            dest = self.target_path(repo, f)
            part_path(dest).unlink(missing_ok=True)
            sidecar_path(dest).unlink(missing_ok=True)

    def pending(self) -> list[PendingDownload]:
        found: dict[DownloadKey, PendingDownload] = {}
        if not self.models_dir.is_dir():
            return []
        running = {h.key for h in self.active() if not h.finished}
        for side in self._sidecars():
            data = read_json(side)
            if not isinstance(data, dict) or not isinstance(data.get("repo"), str):
                continue
            model = _model_from_json(data.get("model")) or _single_model(data)
            if model is None:
                continue
            revision = data.get("revision") if isinstance(data.get("revision"), str) else "main"
            try:
                repo = repo_id(data["repo"])
                for f in model.files:
                    self.target_path(repo, f)
            except UserError as exc:
                log.warning("unfinished download %s left alone: %s", side, exc)
                continue
            self._adopt(side, repo, model, data.get("path"))
            key = download_key(repo, model, str(revision))
            if key in found or key in running:
                continue
            found[key] = PendingDownload(
                repo, model, str(revision), self.bytes_on_disk(repo, model)
            )
        return list(found.values())

    def _sidecars(self) -> list[Path]:
        """Every ``*.part.json`` under ``models_dir/<owner>/<name>/`` and the repository's
        folders (never following a symbolic link)."""
        out: list[Path] = []
        base = len(self.models_dir.parts)
        for root, dirs, names in os.walk(self.models_dir):
            if len(Path(root).parts) - base >= 2 + MAX_REPO_FOLDERS:
                dirs[:] = []
            dirs.sort()
            out.extend(Path(root) / n for n in sorted(names) if n.endswith(".part.json"))
        return out

    def _adopt(self, side: Path, repo: str, model: GgufModel, path: Any) -> None:
        """A part an earlier version saved flat in the repository's folder moves to where
        this version looks for it (when nothing is there yet)."""
        file = next((f for f in model.files if f.path == path), None)
        if file is None:
            return
        dest = self.target_path(repo, file)
        owner, name = check_repo_id(repo)
        if (
            sidecar_path(dest) == side
            or self.models_dir / owner / name not in side.parents
            or part_path(dest).exists()
            or dest.exists()
        ):
            return
        old_part = side.with_name(side.name.removesuffix(".json"))
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            if old_part.is_file():
                os.replace(old_part, part_path(dest))
            os.replace(side, sidecar_path(dest))
        except OSError as exc:
            log.warning("could not move the unfinished download %s: %s", side, exc)

    def delete(self, path: str | Path) -> list[Path]:
        """Delete a downloaded model (every split part) and forget it; a file the app did not
        download raises ``UserError`` and is left alone. Returns the files removed."""
        p = Path(path).expanduser()
        entry = self.manifest.entry(p)
        if entry is None:
            raise UserError(
                f"{p} was not downloaded by this app, so it is left alone (delete it yourself "
                "if you mean to)."
            )
        parts = entry.get("parts")
        paths = [self.models_dir / str(k) for k in parts] if isinstance(parts, list) else [p]
        removed: list[Path] = []
        for target in paths:
            try:
                target.unlink()
                removed.append(target)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise UserError(f"{target} cannot be deleted: {exc.strerror or exc}.") from None
            self.manifest.forget(target)
        removed += self._orphaned_projectors(entry.get("repo"))
        for target in {*paths, p, *removed}:  # their folders, up to the owner's, when empty
            self._remove_empty_folders(target.parent)
        return removed

    def _orphaned_projectors(self, repo: object) -> list[Path]:
        """The projectors downloaded from ``repo`` once no model of it is left: a projector
        is shared by the repository's models, so it goes with the last of them."""
        if not isinstance(repo, str):
            return []
        mine = {
            path: entry
            for path, entry in self.manifest.entries().items()
            if entry.get("repo") == repo
        }
        if any(not is_projector(str(e.get("path", ""))) for e in mine.values()):
            return []
        removed = []
        for path in mine:
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(path)
            self.manifest.forget(path)
        return removed

    def _remove_empty_folders(self, folder: Path) -> None:
        root = self.models_dir.absolute()
        folder = folder.absolute()
        while folder != root and root in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent


def _model_to_json(model: GgufModel) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": model.name,
        "quantization": model.quantization,
        "files": [[f.path, f.size, f.sha256] for f in model.files],
    }
    if model.projector is not None:
        f = model.projector
        data["projector"] = [f.path, f.size, f.sha256]
    return data


def _model_from_json(data: Any) -> GgufModel | None:
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    files: list[RepoFile] = []
    for item in data.get("files") or ():
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)):
            return None
        if not isinstance(item[1], int):
            return None
        files.append(RepoFile(item[0], item[1], item[2] if isinstance(item[2], str) else None))
    if not files:
        return None
    quant = data.get("quantization")
    proj = data.get("projector")
    projector = None
    if (
        isinstance(proj, list)
        and len(proj) == 3
        and isinstance(proj[0], str)
        and isinstance(proj[1], int)
    ):
        projector = RepoFile(proj[0], proj[1], proj[2] if isinstance(proj[2], str) else None)
    return GgufModel(
        data["name"],
        quant if isinstance(quant, str) else None,
        tuple(files),
        sum(f.size for f in files),
        projector,
    )


def _single_model(data: dict[str, Any]) -> GgufModel | None:
    path, size = data.get("path"), data.get("size")
    if not isinstance(path, str) or not isinstance(size, int):
        return None
    from desktop.hub.files import quantization_of

    sha = data.get("sha256")
    f = RepoFile(path, size, sha if isinstance(sha, str) else None)
    name = PurePosixPath(path).name.removesuffix(".gguf")
    return GgufModel(name, quantization_of(path), (f,), size)
