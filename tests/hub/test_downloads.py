"""Resumable, verified downloads from the fake hub (``tests/helpers/fake_hub.py``, standing
in for huggingface.co and its CDN) into a temporary models folder."""

from __future__ import annotations

import errno
import hashlib
import itertools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from desktop.errors import UserError
from desktop.hub import transfer
from desktop.hub.client import HubAuthError, HubClient
from desktop.hub.downloads import (
    MANIFEST_NAME,
    ChecksumMismatch,
    DiskFull,
    Downloader,
    DownloadHandle,
    DownloadProgress,
    download_file,
)
from desktop.hub.files import GgufModel, group_gguf
from desktop.local.starter import STARTER_FILE
from tests.helpers.fake_hub import GATED_REPO, GGUF_REPO, MMPROJ_FILE, SPLIT_PARTS, FakeHub

WAIT_S = 120


def model_of(repo: str, first_path: str, token: str | None = None) -> GgufModel:
    with HubClient(token=token) as client:
        return next(m for m in group_gguf(client.files(repo)) if m.first.path == first_path)


def downloader(folder: Path, token: str | None = None) -> Downloader:
    return Downloader(folder, lambda: HubClient(token=token))


class Events:
    """Collects progress reports (they come from the download's thread)."""

    def __init__(self) -> None:
        self.seen: list[DownloadProgress] = []
        self.cond = threading.Condition()

    def __call__(self, p: DownloadProgress) -> None:
        with self.cond:
            self.seen.append(p)
            self.cond.notify_all()

    def wait_for(self, test: Callable[[DownloadProgress], bool]) -> DownloadProgress:
        with self.cond:
            assert self.cond.wait_for(lambda: any(test(p) for p in self.seen), WAIT_S)
            return next(p for p in self.seen if test(p))

    def states(self) -> list[str]:
        out: list[str] = []
        for p in self.seen:
            if not out or out[-1] != p.state:
                out.append(p.state)
        return out


def test_download_complete_verified_and_recorded(hub: FakeHub, tmp_path: Path) -> None:
    model = model_of(GGUF_REPO, STARTER_FILE)
    events = Events()
    dl = downloader(tmp_path)
    final = dl.start(GGUF_REPO, model, events).wait(WAIT_S)
    assert final.state == "complete", final.error
    path = Path(final.path or "")
    assert path == tmp_path / "simi-test" / "SmolLM2-135M-Instruct-GGUF" / STARTER_FILE
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == hub.sha256(GGUF_REPO, STARTER_FILE)
    assert not list(tmp_path.rglob("*.part*"))
    assert dl.manifest.is_downloaded(path)
    assert (tmp_path / MANIFEST_NAME).is_file()
    assert events.states() == ["running", "verifying", "complete"]
    # the repository's vision projector came with it (fake_hub's MMPROJ_FILE), verified too
    assert model.projector is not None and model.projector.path == MMPROJ_FILE
    projector = path.with_name(MMPROJ_FILE)
    assert projector.read_bytes() == hub.repos[GGUF_REPO].files[MMPROJ_FILE]
    assert dl.manifest.is_downloaded(projector)
    assert final.done == final.total == len(data) + projector.stat().st_size
    running = [p for p in events.seen if p.state == "running"]
    assert all(a.done <= b.done for a, b in itertools.pairwise(running))


def test_split_model_downloads_every_part_and_delete_removes_them(
    hub: FakeHub, tmp_path: Path
) -> None:
    model = model_of(GGUF_REPO, SPLIT_PARTS[0])
    dl = downloader(tmp_path)
    final = dl.start(GGUF_REPO, model).wait(WAIT_S)
    assert final.state == "complete", final.error
    folder = tmp_path / "simi-test" / "SmolLM2-135M-Instruct-GGUF"
    parts = [folder / p for p in SPLIT_PARTS]  # the repository's "split/" folder is kept
    projector = folder / MMPROJ_FILE  # the repository's projector, from the folder above
    assert all(p.is_file() for p in parts) and projector.is_file()
    assert final.total == sum(p.stat().st_size for p in [*parts, projector])
    removed = dl.delete(parts[0])
    # the last model of the repository goes: its projector (shared by them) goes with it
    assert sorted(removed) == sorted([*parts, projector])
    assert not any(p.exists() for p in [*parts, projector])
    assert not dl.manifest.is_downloaded(parts[1])
    assert not (folder / "split").exists()  # emptied folders go too


def test_a_cut_connection_resumes_with_a_range_for_the_rest(hub: FakeHub, tmp_path: Path) -> None:
    model = model_of(GGUF_REPO, STARTER_FILE)
    half = model.size // 2
    hub.cut_after = half
    final = downloader(tmp_path).start(GGUF_REPO, model).wait(WAIT_S)
    assert final.state == "complete", final.error
    cdn = [r for r in hub.file_requests(STARTER_FILE) if r.path.startswith("/cdn/")]
    assert "range" not in cdn[0].headers  # the first request asked for everything
    assert cdn[1].headers["range"] == f"bytes={half}-"  # only the rest was asked for again
    assert len(cdn) == 2
    data = Path(final.path or "").read_bytes()
    assert hashlib.sha256(data).hexdigest() == hub.sha256(GGUF_REPO, STARTER_FILE)


def test_a_server_ignoring_range_starts_over_and_still_verifies(
    hub: FakeHub, tmp_path: Path
) -> None:
    model = model_of(GGUF_REPO, STARTER_FILE)
    hub.cut_after = model.size // 3
    hub.ignore_range = True
    final = downloader(tmp_path).start(GGUF_REPO, model).wait(WAIT_S)
    assert final.state == "complete", final.error
    assert Path(final.path or "").stat().st_size == model.size


def slow_starter_download(hub: FakeHub, folder: Path) -> tuple[GgufModel, Events, DownloadHandle]:
    """The starter's download into ``folder``, begun at 20 MB/s (slow enough to act on):
    the model, its progress reports, and the handle to pause or cancel it."""
    model = model_of(GGUF_REPO, STARTER_FILE)
    hub.throttle_bps = 20e6
    events = Events()
    return model, events, downloader(folder).start(GGUF_REPO, model, events)


def test_pause_then_resume(hub: FakeHub, tmp_path: Path) -> None:
    model, events, handle = slow_starter_download(hub, tmp_path)
    moving = events.wait_for(lambda p: p.state == "running" and p.speed_bps is not None)
    assert moving.speed_bps and moving.eta_s is not None and 0 < moving.done < model.size
    handle.pause()
    paused = events.wait_for(lambda p: p.state == "paused")
    assert 0 < paused.done < model.size
    hub.throttle_bps = None
    handle.resume()
    final = handle.wait(WAIT_S)
    assert final.state == "complete", final.error
    ranges = [r.headers.get("range") for r in hub.file_requests(STARTER_FILE)]
    assert ranges[-1] is not None and ranges[-1].startswith("bytes=")  # resumed, not restarted
    assert events.states()[:3] == ["running", "paused", "running"]


def test_resume_after_a_restart(hub: FakeHub, tmp_path: Path) -> None:
    model, events, handle = slow_starter_download(hub, tmp_path)
    events.wait_for(lambda p: p.done > 0)
    handle.pause()
    events.wait_for(lambda p: p.state == "paused")
    hub.throttle_bps = None
    # "the app restarts": a new Downloader on the same folder knows nothing but the disk
    fresh = downloader(tmp_path)
    pending = fresh.pending()
    assert [(p.repo, p.model.name) for p in pending] == [(GGUF_REPO, model.name)]
    on_disk = pending[0].done
    assert 0 < on_disk < model.size and pending[0].model == model
    final = fresh.start(GGUF_REPO, pending[0].model, revision=pending[0].revision).wait(WAIT_S)
    assert final.state == "complete", final.error
    assert hub.file_requests(STARTER_FILE)[-1].headers["range"] == f"bytes={on_disk}-"
    assert fresh.pending() == []
    handle.cancel()  # the old one, still paused, deletes only parts (none are left)
    assert handle.wait(WAIT_S).state == "cancelled"
    assert Path(final.path or "").is_file()


def test_cancel_deletes_the_parts(hub: FakeHub, tmp_path: Path) -> None:
    _, events, handle = slow_starter_download(hub, tmp_path)
    events.wait_for(lambda p: p.done > 0)
    handle.cancel()
    assert handle.wait(WAIT_S).state == "cancelled"
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and p.name != MANIFEST_NAME]


def test_corrupted_bytes_are_caught_by_the_checksum(hub: FakeHub, tmp_path: Path) -> None:
    model = model_of(GGUF_REPO, STARTER_FILE)
    hub.corrupt.add(STARTER_FILE)
    dl = downloader(tmp_path)
    final = dl.start(GGUF_REPO, model).wait(WAIT_S)
    assert final.state == "failed"
    assert final.error and "checksum" in final.error and "deleted" in final.error
    assert not [p for p in tmp_path.rglob("*.gguf*")]  # neither the file nor its part
    assert dl.pending() == []
    with HubClient() as client, pytest.raises(ChecksumMismatch):
        download_file(
            client, GGUF_REPO, model.first, tmp_path / "x.gguf", lambda n: None, threading.Event()
        )


def test_enospc_while_writing_keeps_the_part(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The patched ``transfer._write`` stands in for a disk that fills up mid-download."""
    model = model_of(GGUF_REPO, STARTER_FILE)
    written = {"n": 0}
    real_write = transfer._write

    def filling_disk(fh: Any, chunk: bytes) -> None:
        if written["n"] > 10_000_000:
            raise OSError(errno.ENOSPC, "No space left on device")
        written["n"] += len(chunk)
        real_write(fh, chunk)

    monkeypatch.setattr(transfer, "_write", filling_disk)
    dl = downloader(tmp_path)
    final = dl.start(GGUF_REPO, model).wait(WAIT_S)
    assert final.state == "failed"
    assert final.error and "disk filled up" in final.error and "resume" in final.error
    assert [p.done for p in dl.pending()] == [written["n"]]
    monkeypatch.setattr(transfer, "_write", real_write)
    again = dl.start(GGUF_REPO, model).wait(WAIT_S)
    assert again.state == "complete", again.error
    assert hub.file_requests(STARTER_FILE)[-1].headers["range"] == f"bytes={written['n']}-"


def test_not_enough_free_space_refuses_before_starting(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The patched ``shutil.disk_usage`` stands in for a disk with 100 MB free."""
    model = model_of(GGUF_REPO, STARTER_FILE)
    real = transfer.shutil.disk_usage

    def small_disk(path: Any) -> Any:
        u = real(path)
        return type(u)(u.total, u.total - 100_000_000, 100_000_000)

    monkeypatch.setattr(transfer.shutil, "disk_usage", small_disk)
    before = len(hub.requests)
    final = downloader(tmp_path).start(GGUF_REPO, model).wait(WAIT_S)
    assert final.state == "failed"
    assert (
        final.error and "Not enough disk space" in final.error and "100 MB is free" in final.error
    )
    assert hub.file_requests(STARTER_FILE) == [] and len(hub.requests) == before
    with pytest.raises(DiskFull):
        transfer.check_free_space(tmp_path, model.size)


def test_gated_repo_needs_the_token(hub: FakeHub, tmp_path: Path) -> None:
    model = model_of(GATED_REPO, STARTER_FILE)
    without = downloader(tmp_path).start(GATED_REPO, model).wait(WAIT_S)
    assert without.state == "failed"
    assert without.error and "gated or private" in without.error
    with HubClient() as client, pytest.raises(HubAuthError):
        client.read_range(GATED_REPO, STARTER_FILE, 0, 1)
    with_token = downloader(tmp_path, token=hub.token).start(GATED_REPO, model).wait(WAIT_S)
    assert with_token.state == "complete", with_token.error


def test_delete_refuses_a_file_the_app_did_not_download(tmp_path: Path) -> None:
    linked = tmp_path / "linked" / "mine.gguf"
    linked.parent.mkdir()
    linked.write_bytes(b"GGUF....")
    inside = tmp_path / "models" / "someone" / "repo" / "hand-copied.gguf"
    inside.parent.mkdir(parents=True)
    inside.write_bytes(b"GGUF....")
    dl = downloader(tmp_path / "models")
    for path in (linked, inside):
        with pytest.raises(UserError) as err:
            dl.delete(path)
        assert "not downloaded by this app" in str(err.value)
        assert path.is_file()
