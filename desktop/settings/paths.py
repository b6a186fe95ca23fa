"""Where SIMI Multi keeps its state.

``SIMI_HOME=/some/dir`` puts everything (database, settings, logs) in that one folder; tests and
scripts rely on it. Otherwise the platform's user data/config/log folders are used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_DIR_NAME = "simi-multi"


@dataclass(frozen=True, slots=True)
class AppPaths:
    data_dir: Path
    config_dir: Path
    log_dir: Path
    cache_dir: Path | None = None  # what can be deleted at any time (None: data_dir/cache)

    @property
    def prompt_states_dir(self) -> Path:
        """Saved system-prompt states of local models (``desktop.local.prompt_cache``)."""
        return (self.cache_dir or self.data_dir / "cache") / "prompt-states"

    @property
    def db_path(self) -> Path:
        return self.data_dir / "simi.db"

    @property
    def settings_path(self) -> Path:
        return self.config_dir / "settings.json"

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    @property
    def attachments_dir(self) -> Path:
        """Files attached to messages, each once under its SHA-256 (``store/attachments.py``)."""
        return self.data_dir / "attachments"

    @property
    def knowledge_dir(self) -> Path:
        """The knowledge collections' indexes, a file each (the files they index stay put)."""
        return self.data_dir / "knowledge"

    @property
    def log_path(self) -> Path:
        return self.log_dir / "simi.log"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> AppPaths:
        env = os.environ if environ is None else environ
        home = env.get("SIMI_HOME")
        if home:
            root = Path(home).expanduser()
            return cls(
                data_dir=root, config_dir=root, log_dir=root / "logs", cache_dir=root / "cache"
            )
        return cls(
            data_dir=Path(platformdirs.user_data_dir(APP_DIR_NAME, appauthor=False)),
            config_dir=Path(platformdirs.user_config_dir(APP_DIR_NAME, appauthor=False)),
            log_dir=Path(platformdirs.user_log_dir(APP_DIR_NAME, appauthor=False)),
            cache_dir=Path(platformdirs.user_cache_dir(APP_DIR_NAME, appauthor=False)),
        )

    def ensure(self) -> None:
        """Create the folders and prove they are writable, or raise ``StoreUnavailable``."""
        # here, not at the top: importing desktop.store loads sqlite-utils (~60 ms), tempfile
        # ~5 ms, and the window's frame reads its paths before it paints
        import tempfile

        from desktop.store.errors import StoreUnavailable

        for folder in (self.data_dir, self.config_dir, self.log_dir):
            try:
                folder.mkdir(parents=True, exist_ok=True)
                # a file of this process's own, gone when closed: several processes start at
                # once (a window and `simi` commands), and a shared probe name let one remove
                # another's file between its write and its unlink
                with tempfile.TemporaryFile(dir=folder, prefix=".simi-write-test-"):
                    pass
            except OSError as exc:
                reason = exc.strerror or str(exc)
                raise StoreUnavailable(
                    f"SIMI Multi cannot write to its folder {folder} ({reason}). "
                    "Fix the folder's permissions or free some space, or point SIMI_HOME at "
                    "a folder you can write to, e.g. SIMI_HOME=~/simi-data.",
                    path=str(folder),
                ) from exc
