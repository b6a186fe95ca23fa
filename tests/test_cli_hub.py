"""`simi models search | files | download | rm | token`, run as a user runs them: a subprocess
on a real SIMI_HOME with HF_ENDPOINT pointed at the fake hub (``tests/helpers/fake_hub.py``,
standing in for huggingface.co), and the real keyring (Secret Service, tests/conftest.py)."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop.local.starter import STARTER_FILE
from tests.helpers import cli
from tests.helpers.fake_hub import GATED_REPO, GGUF_REPO, MMPROJ_FILE, FakeHub, fake_hub

MODEL = STARTER_FILE.removesuffix(".gguf")


@pytest.fixture
def hub_env(cli_env: dict[str, str]) -> Iterator[tuple[FakeHub, dict[str, str]]]:
    with fake_hub() as hub:
        env = dict(cli_env, HF_ENDPOINT=hub.endpoint)
        env.pop("HF_TOKEN", None)
        yield hub, env


def simi(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``simi models ARGS``."""
    return cli.simi(env, "models", *args, stdin=stdin)


def test_search_table_and_json(hub_env: tuple[FakeHub, dict[str, str]]) -> None:
    hub, env = hub_env
    out = simi(env, "search", "smollm2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["REPOSITORY", "DOWNLOADS", "LIKES", "LICENCE", "UPDATED"]
    assert lines[1].split() == [GGUF_REPO, "12,345", "67", "apache-2.0", "2025-01-15"]
    assert lines[2].startswith(f"{GATED_REPO} (gated)")
    data = json.loads(simi(env, "search", "smollm2", "--json").stdout)
    assert [r["id"] for r in data] == [GGUF_REPO, GATED_REPO]
    assert hub.requests[-1].query["filter"] == "gguf"
    none = simi(env, "search", "nothing-like-this")
    assert none.returncode == 0 and "No GGUF models match" in none.stderr


def test_files_groups_splits_and_marks_the_fit(hub_env: tuple[FakeHub, dict[str, str]]) -> None:
    _hub, env = hub_env
    out = simi(env, "files", GGUF_REPO, "--ctx", "2048", "--json")
    assert out.returncode == 0, out.stderr
    data = {m["name"]: m for m in json.loads(out.stdout)}
    assert set(data) == {MODEL, "Big-Model-Q8_0"}  # the mmproj file is not a chat model
    assert len(data["Big-Model-Q8_0"]["files"]) == 2
    assert data[MODEL]["quantization"] == "Q4_1"
    assert data[MODEL]["fit"]["verdict"] in ("gpu", "ram")  # 98 MB fits any test machine
    assert "context 2,048" in data[MODEL]["fit"]["detail"]
    text = simi(env, "files", GGUF_REPO)
    assert MMPROJ_FILE not in text.stdout and "Fit at context 4,096" in text.stderr
    assert simi(env, "files", "nobody/nothing").returncode == 1


def test_download_survives_a_cut_and_says_so_on_stderr(
    hub_env: tuple[FakeHub, dict[str, str]], simi_home: Path
) -> None:
    hub, env = hub_env
    hub.cut_after = 30_000_000
    out = simi(env, "download", GGUF_REPO, MODEL)
    assert out.returncode == 0, out.stderr
    path = Path(out.stdout.strip())
    assert path == simi_home / "models" / "simi-test" / GGUF_REPO.split("/")[1] / STARTER_FILE
    assert hashlib.sha256(path.read_bytes()).hexdigest() == hub.sha256(GGUF_REPO, STARTER_FILE)
    assert "verified (sha256)" in out.stderr
    percents = [line for line in out.stderr.splitlines() if "%" in line]
    assert len(percents) >= 2 and "\r" not in out.stderr  # a line per 10 % when not a tty
    ranges = [r.headers.get("range") for r in hub.file_requests(STARTER_FILE)]
    assert ranges[-1] == "bytes=30000000-"
    again = simi(env, "download", GGUF_REPO, STARTER_FILE)
    assert again.returncode == 0 and "Already downloaded" in again.stderr


def test_ctrl_c_pauses_and_the_same_command_resumes(
    hub_env: tuple[FakeHub, dict[str, str]],
) -> None:
    hub, env = hub_env
    hub.throttle_bps = 10e6
    proc = subprocess.Popen(
        [sys.executable, "-m", "desktop", "models", "download", GGUF_REPO, MODEL],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen = ""
    for line in proc.stderr:  # wait until some bytes are on disk (a line per 10 %)
        seen += line
        if "%" in line and not line.lstrip().startswith("0.0%"):
            break
    proc.send_signal(signal.SIGINT)
    _out, rest = proc.communicate(timeout=60)
    assert proc.returncode == 130, seen + rest
    assert "Run the same command again to resume" in rest
    hub.throttle_bps = None
    done = simi(env, "download", GGUF_REPO, MODEL)
    assert done.returncode == 0, done.stderr
    assert "Resuming" in done.stderr
    last = hub.file_requests(STARTER_FILE)[-1].headers.get("range", "")
    assert last.startswith("bytes=") and last != "bytes=0-"


def test_gated_repo_needs_a_token_kept_in_the_keyring(
    hub_env: tuple[FakeHub, dict[str, str]], secret_service_env: dict[str, str]
) -> None:
    hub, env = hub_env
    assert hub.token
    refused = simi(env, "download", GATED_REPO, MODEL)
    assert refused.returncode == 1
    assert "gated or private" in refused.stderr and "simi models token" in refused.stderr
    saved = simi(env, "token", stdin=hub.token + "\n")
    assert saved.returncode == 0 and "saved in the keyring" in saved.stderr
    assert hub.token not in saved.stdout + saved.stderr
    ok = simi(env, "download", GATED_REPO, MODEL)
    assert ok.returncode == 0, ok.stderr
    assert simi(env, "token", "--delete").returncode == 0
    Path(ok.stdout.strip()).unlink()
    assert simi(env, "download", GATED_REPO, MODEL).returncode == 1


def test_rm_only_downloaded_files_and_asks(
    hub_env: tuple[FakeHub, dict[str, str]], tmp_path: Path
) -> None:
    _hub, env = hub_env
    mine = tmp_path / "mine.gguf"
    mine.write_bytes(b"GGUF")
    refused = simi(env, "rm", str(mine), "--yes")
    assert refused.returncode == 1 and "not downloaded by this app" in refused.stderr
    assert mine.exists()
    path = Path(simi(env, "download", GGUF_REPO, MODEL).stdout.strip())
    kept = simi(env, "rm", str(path), stdin="n\n")
    assert kept.returncode == 1 and path.exists() and "Nothing deleted" in kept.stderr
    gone = simi(env, "rm", STARTER_FILE, stdin="y\n")  # a bare name finds the download
    assert gone.returncode == 0, gone.stderr
    assert not path.exists() and f"Deleted {path}" in gone.stdout


def test_progress_rewrites_one_line_on_a_terminal() -> None:
    """``Tty`` stands in for a terminal's stderr."""
    import io

    from desktop.cli_hub import _Progress
    from desktop.hub.downloads import DownloadProgress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    progress = _Progress(out)
    for done in (0, 25_000_000, 50_000_000):
        progress(DownloadProgress("o/r", "m", done, 100_000_000, "running", 5e6, 10.0))
    progress.end()
    text = out.getvalue()
    assert text.count("\r") == 3 and text.count("\n") == 1
    assert " 50.0%  50 MB of 100 MB  5 MB/s  10 s left" in text

    plain = io.StringIO()
    lines = _Progress(plain)
    for done in range(0, 100_000_001, 5_000_000):
        lines(DownloadProgress("o/r", "m", done, 100_000_000, "running"))
    assert len(plain.getvalue().splitlines()) == 11  # 0 %, 10 %, … 100 %
