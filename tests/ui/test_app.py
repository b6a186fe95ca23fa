"""The composition root: opening the store with a person's consent, and a whole app run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from desktop.app import open_services
from desktop.settings.paths import AppPaths
from desktop.store.errors import StoreUnavailable

GARBAGE = b"this is not a database" * 100


def _corrupt_db(simi_home: Path) -> Path:
    paths = AppPaths.from_env()
    paths.ensure()
    paths.db_path.write_bytes(GARBAGE)
    return paths.db_path


def test_damaged_database_is_left_alone_when_the_person_quits(simi_home: Path) -> None:
    db = _corrupt_db(simi_home)
    asked: list[StoreUnavailable] = []

    def ask(exc: StoreUnavailable) -> Any:
        asked.append(exc)
        return "quit"

    assert open_services(AppPaths.from_env(), ask) is None
    assert asked and asked[0].corrupt and asked[0].path == str(db)
    assert db.read_bytes() == GARBAGE


def test_damaged_database_is_moved_aside_and_a_fresh_one_opened_on_request(
    simi_home: Path,
) -> None:
    db = _corrupt_db(simi_home)
    services = open_services(AppPaths.from_env(), lambda exc: "move_aside")
    assert services is not None
    try:
        kept = [p for p in db.parent.iterdir() if p.name.startswith("simi.db.broken-")]
        assert len(kept) == 1 and kept[0].read_bytes() == GARBAGE
        assert services.agents.by_name("SmolLM2 (local)") is not None
    finally:
        services.close()


def test_run_app_shows_the_window_and_exits_cleanly(simi_home: Path, tmp_path: Path) -> None:
    shot = tmp_path / "window.png"
    env = dict(os.environ, SIMI_HOME=str(simi_home), SIMI_SCREENSHOT=str(shot))
    env["QT_QPA_PLATFORM"] = "offscreen"
    proc = subprocess.run(
        [sys.executable, "-c", "from desktop.app import run_app; raise SystemExit(run_app([]))"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    assert shot.is_file() and shot.stat().st_size > 1000
    noise = [
        line
        for line in proc.stderr.splitlines()
        if line.strip() and "propagateSizeHints" not in line
    ]
    assert noise == [], proc.stderr
    assert (simi_home / "settings.json").is_file()  # window state saved on close
