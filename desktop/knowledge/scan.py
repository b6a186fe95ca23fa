"""The walk over a collection's roots: which files there are (path, size, mtime), and what was
left out, with a reason a person can read.

Links are followed; every folder is remembered by ``(st_dev, st_ino)``, so a link back up the
tree (a loop) or a second way into a folder already walked is noted once, never walked again.
Hidden folders and files (a leading dot: ``.git``, ``.venv``), ``node_modules`` and
``__pycache__`` are left out silently, and so are pipes, sockets and devices (opening a pipe
would block). A root that is gone or cannot be listed, and a folder inside that cannot be
listed, are *kept*: the files indexed under them stay (a disconnected drive must not empty
the index).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MB = 1_000_000  # as desktop.attach.kinds and file managers count
MAX_FILE_BYTES = 50 * MB

SKIPPED_DIRS = frozenset({"node_modules", "__pycache__"})

LOOP = "A link loop: this folder is already indexed through another path."
ROOT_MISSING = "Folder not found: the drive may be disconnected. Its files stay in the index."
DENIED = "Permission denied."
TOO_LARGE = f"Larger than {MAX_FILE_BYTES // MB} MB."
BROKEN_LINK = "A link to a file or folder that no longer exists."
CHANGED = "Changed while it was being read; it is tried again next time."
EMPTY = "Empty: there is nothing in it to search."


@dataclass(frozen=True, slots=True)
class Skipped:
    """A file or folder left out of the index: its absolute path and why, a finished sentence."""

    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class Found:
    """A file the walk found: absolute path, size and modification time as ``stat`` said."""

    path: str
    size: int
    mtime_ns: int


@dataclass(slots=True)
class Scan:
    files: list[Found] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    # paths (a root, a folder) whose indexed files stay although the walk did not see them
    kept: list[str] = field(default_factory=list)
    cancelled: bool = False

    def is_kept(self, path: str) -> bool:
        return under_any(path, self.kept)


def absolute(path: Path | str) -> str:
    """The path as the index stores it: absolute, ``~`` expanded, links not resolved (the
    path the person chose, not where a link leads)."""
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def _list_dir(path: str) -> list[os.DirEntry[str]]:
    """A folder's entries (a seam: the tests make it fail as an unreadable folder would)."""
    with os.scandir(path) as entries:
        return list(entries)


def scan(roots: Sequence[Path | str], cancelled: Callable[[], bool] | None = None) -> Scan:
    """Walk ``roots`` (folders or single files), in a stable order."""
    out = Scan()
    seen_dirs: set[tuple[int, int]] = set()
    seen_files: set[str] = set()
    for root in dict.fromkeys(absolute(r) for r in roots):
        try:
            info = os.stat(root)
        except FileNotFoundError:
            out.skipped.append(Skipped(root, ROOT_MISSING))
            out.kept.append(root)
            continue
        except OSError as exc:
            out.skipped.append(Skipped(root, _os_reason(exc)))
            out.kept.append(root)
            continue
        if stat.S_ISDIR(info.st_mode):
            if _walk(root, info, out, seen_dirs, seen_files, cancelled):
                out.cancelled = True
                break
        elif stat.S_ISREG(info.st_mode):
            _add_file(root, info, out, seen_files)
    return out


def _walk(
    top: str,
    info: os.stat_result,
    out: Scan,
    seen_dirs: set[tuple[int, int]],
    seen_files: set[str],
    cancelled: Callable[[], bool] | None,
) -> bool:
    """Walk one folder tree depth first; True when cancelled."""
    stack: list[tuple[str, os.stat_result]] = [(top, info)]
    while stack:
        if cancelled is not None and cancelled():
            return True
        folder, folder_info = stack.pop()
        key = (folder_info.st_dev, folder_info.st_ino)
        if key in seen_dirs:
            out.skipped.append(Skipped(folder, LOOP))
            continue
        seen_dirs.add(key)
        try:
            entries = _list_dir(folder)
        except OSError as exc:
            out.skipped.append(Skipped(folder, _os_reason(exc)))
            out.kept.append(folder)
            continue
        subfolders: list[tuple[str, os.stat_result]] = []
        for entry in sorted(entries, key=lambda e: e.name):
            name = entry.name
            if name.startswith(".") or name in SKIPPED_DIRS:
                continue
            path = os.path.join(folder, name)
            try:
                entry_info = os.stat(path)  # follows links
            except FileNotFoundError:
                if entry.is_symlink():
                    out.skipped.append(Skipped(path, BROKEN_LINK))
                continue  # gone since the listing
            except OSError as exc:
                out.skipped.append(Skipped(path, _os_reason(exc)))
                out.kept.append(path)
                continue
            if stat.S_ISDIR(entry_info.st_mode):
                subfolders.append((path, entry_info))
            elif stat.S_ISREG(entry_info.st_mode):
                _add_file(path, entry_info, out, seen_files)
        stack.extend(reversed(subfolders))  # popped in name order
    return False


def _add_file(path: str, info: os.stat_result, out: Scan, seen: set[str]) -> None:
    if path in seen:
        return
    seen.add(path)
    out.files.append(Found(path, info.st_size, info.st_mtime_ns))


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return DENIED
    if isinstance(exc, FileNotFoundError):
        return ROOT_MISSING
    return f"Could not be read ({exc.strerror or type(exc).__name__})."


def under_any(path: str, tops: Iterable[str]) -> bool:
    """Whether ``path`` is one of ``tops`` or inside one."""
    return any(path == top or path.startswith(top.rstrip(os.sep) + os.sep) for top in tops)
