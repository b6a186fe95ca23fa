"""Preferences in one JSON file, written atomically (temp file + fsync + rename)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger("simi.settings")

# Keys the Settings dialog writes (values: see each one's reader).
PREF_THEME = "ui.theme"  # "system" | "light" | "dark"
PREF_TEXT_SIZE = "ui.text_size"  # a TEXT_SIZES key
PREF_NEW_LOCAL_N_CTX = "local.new_agent_n_ctx"  # tokens; 0 or absent = automatic
PREF_NEW_LOCAL_MAX_TOKENS = "local.new_agent_max_tokens"  # tokens

THEMES = ("system", "light", "dark")
TEXT_SIZES = {"small": 0.9, "normal": 1.0, "large": 1.15, "larger": 1.3}  # scale of the text
DEFAULT_NEW_LOCAL_MAX_TOKENS = 512


class Preferences:
    """A small key/value store. Unknown or unreadable files are kept aside, never lost."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._data: dict[str, Any] = {}
        self._load()

    @property
    def path(self) -> Path:
        return self._path

    def _load(self) -> None:
        try:
            raw = self._path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning("cannot read settings %s: %s", self._path, exc)
            return
        try:
            data = json.loads(raw)
            if not isinstance(data, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            aside = self._path.with_suffix(".json.broken")
            log.warning("settings %s unreadable (%s); kept as %s", self._path, exc, aside)
            try:
                os.replace(self._path, aside)
            except OSError:
                pass
            return
        self._data = data

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self._data[key] = value
        self.save()

    def update(self, values: dict[str, Any]) -> None:
        self._data.update(values)
        self.save()

    def save(self) -> None:
        write_json_atomic(self._path, self._data)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON so a reader sees the old file or the new one, never half: a
    temporary file beside it, flushed to disk, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # here: the window's frame reads the preferences before it paints

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def theme_choice(prefs: Preferences) -> str:
    """ "system" (follow the OS), "light" or "dark"."""
    value = prefs.get(PREF_THEME, "system")
    return value if value in THEMES else "system"


def text_size_choice(prefs: Preferences) -> str:
    value = prefs.get(PREF_TEXT_SIZE, "normal")
    return value if value in TEXT_SIZES else "normal"


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def new_local_n_ctx(prefs: Preferences) -> int | None:
    """The context size chosen for new local agents; None: automatic (from the model)."""
    return _positive_int(prefs.get(PREF_NEW_LOCAL_N_CTX))


def new_local_max_tokens(prefs: Preferences) -> int:
    found = _positive_int(prefs.get(PREF_NEW_LOCAL_MAX_TOKENS))
    return found if found is not None else DEFAULT_NEW_LOCAL_MAX_TOKENS
