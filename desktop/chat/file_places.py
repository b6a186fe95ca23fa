"""Where File → Export and Import (and the Stats page's CSV export) start, and what they
remember, Qt-free: a conversation's title as a clean file name, in the folder used last
(remembered in the preferences) while it is still there, else the person's Documents
(``settings.places``). Proposing reads a preference and checks a folder; ``remember`` writes
the preferences (an unwritable settings file only forgets the choice)."""

from __future__ import annotations

from desktop.settings.places import clean_file_name, in_start_folder, remember_folder, start_folder
from desktop.settings.prefs import Preferences

IMPORT_FILTERS = "SIMI Multi JSON (*.json)"


def export_suggestion(prefs: Preferences, title: str, fmt: str) -> tuple[str, str]:
    """Where a save dialog for exporting ``title`` as ``fmt`` ("md", else JSON) opens, and its
    file filters."""
    suffix, filters = (".md", "Markdown (*.md)") if fmt == "md" else (".json", "JSON (*.json)")
    return str(start_folder(prefs) / clean_file_name(title, suffix)), filters


def suggested_file(prefs: Preferences, title: str, suffix: str, fallback: str) -> str:
    """``title`` as a clean file name with ``suffix`` (``fallback`` when nothing of it is
    left), in the folder a save dialog opens."""
    return str(start_folder(prefs) / clean_file_name(title, suffix, fallback=fallback))


def import_folder(prefs: Preferences) -> str:
    """Where an open dialog for an import starts."""
    return str(start_folder(prefs))


def proposed_path(prefs: Preferences, suggested: str) -> str:
    """``suggested`` as a path: a bare file name goes into the folder used last, else
    Documents."""
    return in_start_folder(prefs, suggested)


def remember(prefs: Preferences, chosen: str) -> None:
    """Remember the folder of a file the person chose (exported to or imported from)."""
    remember_folder(prefs, chosen)
