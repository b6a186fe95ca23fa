"""Names from the hub that become folders and files here, checked before anything is written.

A repository id is ``owner/name``: letters, digits, ``-``, ``_`` and ``.``, exactly one slash,
neither part starting with ``.`` nor holding ``..`` (the hub's own rule, and what keeps
``models_dir/<owner>/<name>/`` inside the models folder). A path inside a repository keeps its
folders under that folder, every part checked: no empty part (no leading, trailing or double
slash), no ``.`` or ``..``, no backslash, no drive letter (``C:``), no NUL or other control
character, and not deeper than the library's scan reaches (``MAX_REPO_FOLDERS``).
"""

from __future__ import annotations

import re

from desktop.errors import UserError
from desktop.local.catalog import MAX_SCAN_DEPTH

# models_dir/<owner>/<name>/ takes two of the library's scan levels; the rest are the
# repository's own folders (the library would not list a file deeper than that).
MAX_REPO_FOLDERS = MAX_SCAN_DEPTH - 2

_REPO_PART = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
_DRIVE = re.compile(r"[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class BadName(UserError):
    """A repository id or a file path that cannot be used safely here."""


def check_repo_id(repo: str) -> tuple[str, str]:
    """``(owner, name)`` of ``repo`` (surrounding spaces ignored); ``BadName`` otherwise."""
    text = repo.strip() if isinstance(repo, str) else ""
    owner, slash, name = text.partition("/")
    if slash and _REPO_PART.fullmatch(owner) and _REPO_PART.fullmatch(name) and ".." not in text:
        return owner, name
    raise BadName(
        f"{_shown(repo)} is not a repository name: it must be owner/name, with one slash, "
        "each part made of letters, digits, '-', '_' and '.', not starting with '.' and "
        "without '..' (for example bartowski/Llama-3.2-1B-Instruct-GGUF)."
    )


def repo_id(repo: str) -> str:
    """``repo`` checked and without surrounding spaces."""
    owner, name = check_repo_id(repo)
    return f"{owner}/{name}"


def check_repo_path(path: str, repo: str = "") -> tuple[str, ...]:
    """The parts of a file's path inside a repository; ``BadName`` when one of them could
    point outside the repository's folder (or be refused by the disk)."""
    where = f" in {repo}" if repo else ""
    problem = _path_problem(path)
    if problem is None:
        parts = tuple(path.split("/"))
        if len(parts) - 1 <= MAX_REPO_FOLDERS:
            return parts
        problem = (
            f"it is more than {MAX_REPO_FOLDERS} folders deep, where the model library "
            "would not find it"
        )
    raise BadName(
        f"The hub lists a file {_shown(path)}{where} that is not saved: {problem}. Nothing was "
        "written."
    )


def _path_problem(path: str) -> str | None:
    if not isinstance(path, str) or not path:
        return "it has no name"
    if _CONTROL.search(path):
        return "it holds a control character"
    if "\\" in path:
        return "it holds a backslash"
    if path.startswith("/"):
        return "it is an absolute path"
    parts = path.split("/")
    if _DRIVE.match(parts[0]):
        return "it starts with a drive letter"
    for part in parts:
        if part == "":
            return "it has an empty folder name (a double or trailing slash)"
        if part in (".", ".."):
            return f"it has a {part!r} folder"
    return None


def _shown(text: object) -> str:
    """``text`` quoted for a message, control characters escaped, long names cut."""
    shown = repr(text) if isinstance(text, str) else repr(str(text))
    return shown if len(shown) <= 120 else shown[:117] + "…'"
