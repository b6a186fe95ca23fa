"""Where files go: exports and imports start in the person's Documents folder (platformdirs),
or in the folder they used last (remembered in the preferences); an exported conversation is
named after its title, cleaned for every file system ("Name three primary colors.md"). Qt-free.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import platformdirs

from desktop.settings.prefs import Preferences

log = logging.getLogger("simi.settings")

LAST_FOLDER_PREF = "files.last_folder"
FILE_NAME_CHARS = 80  # before the suffix
# Not allowed in a file name on Windows, macOS or Linux (or a nuisance in a shell: control
# characters); each becomes a space, and runs of spaces one.
_NOT_ALLOWED = re.compile(r'[<>:"/\\|?*\x00-\x1f\x7f]')
_RESERVED = re.compile(r"^(CON|PRN|AUX|NUL|COM[0-9]|LPT[0-9])(\..*)?$", re.IGNORECASE)


def clean_file_name(title: str, suffix: str, fallback: str = "Conversation") -> str:
    """A file name from a title: characters no file system allows are dropped, whitespace
    collapsed, dots and spaces trimmed from the ends, at most ``FILE_NAME_CHARS`` (cut at a
    word where one is near), then ``suffix``; ``fallback`` when nothing is left."""
    name = " ".join(_NOT_ALLOWED.sub(" ", title).split()).strip(" .")
    if len(name) > FILE_NAME_CHARS:
        cut = name[:FILE_NAME_CHARS]
        space = cut.rfind(" ")
        name = (cut[:space] if space >= FILE_NAME_CHARS // 2 else cut).strip(" .")
    if _RESERVED.match(name):
        name = f"{name} {fallback.lower()}"
    return (name or fallback) + suffix


def documents_dir() -> Path:
    """The person's Documents folder (their home when it does not exist)."""
    try:
        documents = Path(platformdirs.user_documents_dir())
    except Exception:  # platformdirs reading a broken user-dirs file: the home is fine
        documents = Path.home()
    return documents if documents.is_dir() else Path.home()


def start_folder(prefs: Preferences) -> Path:
    """Where an export or import dialog opens: the folder used last if it is still there,
    else Documents."""
    last = prefs.get(LAST_FOLDER_PREF)
    if isinstance(last, str) and last and Path(last).is_dir():
        return Path(last)
    return documents_dir()


def in_start_folder(prefs: Preferences, suggested: str) -> str:
    """``suggested`` as a path: a bare file name goes into ``start_folder``."""
    path = Path(suggested)
    if path.is_absolute() or path.parent != Path("."):
        return suggested
    return str(start_folder(prefs) / path)


def remember_folder(prefs: Preferences, chosen: str) -> None:
    """Remember the folder of a file the person chose (exported to or imported from)."""
    folder = str(Path(chosen).expanduser().parent)
    if prefs.get(LAST_FOLDER_PREF) == folder:
        return
    try:
        prefs.set(LAST_FOLDER_PREF, folder)
    except OSError as exc:  # an unwritable settings file: the choice is only not remembered
        log.warning("could not remember the folder %s: %s", folder, exc)
