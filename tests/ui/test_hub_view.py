"""The "Find models" tab as a person uses it, against a fake Hugging Face Hub.

``tests/helpers/fake_hub.py`` stands in for huggingface.co (``HF_ENDPOINT`` points at it): a
loopback HTTP server speaking the hub's documented API, serving the starter model's real GGUF
file, with knobs to throttle, cut a connection, and gate a repository behind a token. The
download machinery, the keyring (gnome-keyring on a private D-Bus) and the models folder are
the real ones. The machine's free memory is fixed by ``view.machine`` (a stand-in for
/proc/meminfo and the GPU probe) so the fit marks do not depend on the test machine.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from PySide6.QtCore import Qt

from desktop.hub.client import TOKEN_REF
from desktop.hub.service import HubService
from desktop.ui.models.hub_view import HubView
from tests.helpers.fake_hub import (
    GATED_REPO,
    GGUF_REPO,
    OTHER_REPO,
    SPLIT_PARTS,
    FakeHub,
    FakeRepo,
    default_repos,
    fake_hub,
)

TIMEOUT_MS = 30_000
GB = 1_000_000_000
HUGE_REPO = "giants/Enormous-405B-GGUF"
HUGE_FILE = "Enormous-405B-Q8_0.gguf"
SPLIT_NAME = "Big-Model-Q8_0"


class HugeRepo(FakeRepo):
    """A repository whose one file the hub lists at 430 GB (its bytes are never fetched)."""

    def tree(self) -> list[dict[str, Any]]:
        entries = super().tree()
        for entry in entries:
            if entry["path"] == HUGE_FILE:
                entry["size"] = 430 * GB
                entry["lfs"]["size"] = 430 * GB
        return entries


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, qloop: Any) -> Iterator[FakeHub]:
    """The fake hub, set up after the loop so it is torn down first: a worker thread still
    reading a throttled body would otherwise hold the loop's shutdown until it ends."""
    repos = default_repos()
    repos[HUGE_REPO] = HugeRepo(HUGE_REPO, {HUGE_FILE: b"GGUF"}, downloads=7, likes=1)
    with fake_hub(repos) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server


def make_view(services: Any, qtbot: Any) -> HubView:
    view = HubView(services)
    view.machine = lambda: (16 * GB, None)  # 16 GB free, no GPU offload
    qtbot.addWidget(view)
    view.resize(1040, 740)
    view.show()
    qtbot.waitExposed(view)
    return view


@pytest.fixture
def view(services: Any, hub: FakeHub, qtbot: Any, qloop: Any) -> Iterator[HubView]:
    made = make_view(services, qtbot)
    yield made
    stop_downloads(made)
    # A cancelled response's remaining bytes fit in loopback socket buffers: unthrottled, the
    # fake hub's sender finishes at once instead of holding its shutdown for seconds.
    hub.throttle_bps = None


def stop_downloads(view: HubView) -> None:
    """Pause what still runs and wait until its thread has let go of the part (a paused
    download's thread waits for Resume; it writes nothing meanwhile)."""
    view.pause_all()
    deadline = time.monotonic() + 10
    for download in view.downloads.downloads.values():
        handle = download.handle
        while handle is not None and time.monotonic() < deadline:
            if handle.progress.state in ("paused", "complete", "failed", "cancelled"):
                break
            time.sleep(0.02)


def search(view: HubView, qtbot: Any, query: str = "gguf") -> None:
    view.search_box.setText(query)
    qtbot.keyClick(view.search_box, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: view.repos.rowCount() > 0, timeout=TIMEOUT_MS)


def open_repo(view: HubView, qtbot: Any, repo: str) -> None:
    row = [r.id for r in view.repos.repos].index(repo)
    view.repos.selectRow(row)
    qtbot.waitUntil(lambda: view.models.rowCount() > 0, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: "…" not in view.models.fit_text(view.models.models[0].name))


def browse(view: HubView, qtbot: Any, repo: str = GGUF_REPO) -> None:
    """Search the hub and open ``repo``'s models, as a person does before downloading."""
    search(view, qtbot)
    open_repo(view, qtbot, repo)


def starter_model(view: HubView) -> Any:
    """The open repository's one-file model (the starter GGUF), not the split one."""
    return next(m for m in view.models.models if m.name != SPLIT_NAME)


def download(view: HubView, qtbot: Any, name: str) -> Any:
    """Press ``name``'s Download button; returns the row that then shows its progress."""
    button = view.models.buttons[name]
    assert button.text() == "Download" and button.isEnabled()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: (view._repo.id, name) in view.downloads.rows, timeout=TIMEOUT_MS)
    return row(view, view._repo.id, name)


def download_part_way(
    view: HubView, hub: FakeHub, qtbot: Any, name: str, bytes_per_s: int, past: int
) -> Any:
    """Open the GGUF repository and download ``name`` throttled to ``bytes_per_s`` until its bar
    is past ``past`` (of 1000): a download under way, for Pause or Cancel to act on. Returns
    its row."""
    browse(view, qtbot)
    hub.throttle_bps = bytes_per_s
    shown = download(view, qtbot, name)
    qtbot.waitUntil(lambda: shown.bar.value() > past, timeout=TIMEOUT_MS)
    return shown


def wait_state(view: HubView, qtbot: Any, name: str, wanted: str, repo: str = GGUF_REPO) -> None:
    """Wait until the download of ``name`` is in state ``wanted``."""
    qtbot.waitUntil(lambda: state(view, repo, name) == wanted, timeout=TIMEOUT_MS)


def state(view: HubView, repo: str, name: str) -> str | None:
    return view.downloads.state_of(repo, name)


def row(view: HubView, repo: str, name: str) -> Any:
    return view.downloads.rows[(repo, name)]


def parts_of(services: Any, repo: str) -> list[Path]:
    folder = Path(services.paths.models_dir)
    return [p for p in folder.rglob("*") if ".part" in p.name and repo.split("/")[1] in str(p)]


def test_nothing_reaches_the_hub_before_search_and_the_empty_state_says_so(
    view: HubView, hub: FakeHub, qtbot: Any
) -> None:
    qtbot.wait(300)  # the tab has had time to do whatever it does on its own
    assert hub.requests == []
    host = hub.endpoint.removeprefix("http://")
    assert view.stack.currentWidget() is view.empty
    assert f"Nothing is sent to {host} until you search" in view.empty_hint.text()
    search(view, qtbot, "smollm2")
    assert [r.path for r in hub.requests] == ["/api/models"]
    assert hub.requests[0].query["search"] == "smollm2"
    assert hub.requests[0].query["filter"] == "gguf"


def test_search_lists_the_repositories_with_their_figures(view: HubView, qtbot: Any) -> None:
    search(view, qtbot)
    ids = [r.id for r in view.repos.repos]
    assert ids[:3] == [OTHER_REPO, GGUF_REPO, GATED_REPO]  # most downloaded first
    other = ids.index(OTHER_REPO)
    assert view.repos.item(other, 2).text() == "99,999"
    assert view.repos.item(other, 3).text() == "1,000"
    assert view.repos.item(other, 4).text() == "mit"
    assert view.repos.item(other, 5).text().endswith("ago")
    assert view.repos.item(ids.index(GGUF_REPO), 4).text() == "apache-2.0"
    gated = view.repos.item(ids.index(GATED_REPO), 0)
    assert gated.data(Qt.ItemDataRole.UserRole + 1) == "Gated"
    assert "access token" in gated.toolTip()
    assert view.repos.item(other, 0).data(Qt.ItemDataRole.UserRole + 1) is None
    assert "4 repositories" in view.status.text()


def test_a_search_with_no_results_says_so(view: HubView, qtbot: Any) -> None:
    view.search("no-such-model-anywhere")
    qtbot.waitUntil(lambda: "No GGUF repositories match" in view.status.text())
    assert view.repos.rowCount() == 0


def test_a_repository_lists_its_models_grouped_with_fit_marks(
    view: HubView, hub: FakeHub, qtbot: Any
) -> None:
    browse(view, qtbot)
    names = [m.name for m in view.models.models]
    assert SPLIT_NAME in names  # the two split parts are one model
    assert len(names) == 2  # the mmproj projector and the README are not offered
    split = view.models.row_of(SPLIT_NAME)
    assert "2 parts" in view.models.item(split, 0).text()
    assert view.models.item(split, 1).text() == "Q8_0"
    assert view.models.fit_text(SPLIT_NAME) == "Fits in memory"
    fit_item = view.models.item(split, 3)
    assert "16.0 GB" in fit_item.toolTip() and "context 4,096" in fit_item.toolTip()
    view.context.setCurrentIndex(view.context.findData(32768))
    assert "context 32,768" in view.models.item(split, 3).toolTip()

    view.repos.selectRow([r.id for r in view.repos.repos].index(HUGE_REPO))
    qtbot.waitUntil(lambda: view.models.fit_text("Enormous-405B-Q8_0") == "Too large")
    assert view.models.item(0, 2).text() == "430 GB"


def test_fit_marks_come_from_a_gguf_header_read_with_range_requests(
    view: HubView, hub: FakeHub, qtbot: Any
) -> None:
    browse(view, qtbot)
    starter = starter_model(view)
    at = view.models.row_of(starter.name)
    qtbot.waitUntil(  # one header read for the repository, scaled for the other models
        lambda: all(
            "estimate from file size" not in view.models.item(r, 3).toolTip()
            for r in range(view.models.rowCount())
        ),
        timeout=TIMEOUT_MS,
    )
    ranged = [r.path for r in hub.requests if "range" in r.headers]
    assert any(p.endswith(starter.first.path) for p in ranged)
    assert view.models.fit_text(starter.name) == "Fits in memory"
    assert "context 4,096" in view.models.item(at, 3).toolTip()
    view.models.selectRow(view.models.row_of(SPLIT_NAME))  # its own header, when readable
    qtbot.waitUntil(
        lambda: any(r.path.endswith(SPLIT_PARTS[0]) for r in hub.requests if "range" in r.headers),
        timeout=TIMEOUT_MS,
    )


def test_a_download_shows_its_progress_then_lands_in_the_models_folder(
    view: HubView, hub: FakeHub, services: Any, qtbot: Any
) -> None:
    browse(view, qtbot)
    starter = starter_model(view)
    hub.throttle_bps = starter.size / 3  # about three seconds
    seen: list[str] = []
    view.downloaded.connect(seen.append)
    shown = download(view, qtbot, starter.name)
    qtbot.waitUntil(lambda: 0 < shown.bar.value() < 1000, timeout=TIMEOUT_MS)
    text = shown.status.text()
    assert " of 98." in text or " of " in text
    assert view.models.buttons[starter.name].text() == "Downloading"
    assert not view.models.buttons[starter.name].isEnabled()
    qtbot.waitUntil(lambda: bool(seen), timeout=TIMEOUT_MS)
    path = Path(seen[0])
    assert path.is_file() and path.stat().st_size == starter.size
    assert Path(services.paths.models_dir) in path.parents
    assert state(view, GGUF_REPO, starter.name) == "complete"
    assert shown.status.text().startswith("Downloaded")
    assert view.models.buttons[starter.name].text() == "Downloaded"
    assert parts_of(services, GGUF_REPO) == []
    later = make_view(services, qtbot)  # another session sees it in the models folder
    browse(later, qtbot)
    assert later.models.buttons[starter.name].text() == "Downloaded"
    assert not later.models.buttons[starter.name].isEnabled()
    assert later.models.buttons[SPLIT_NAME].text() == "Download"


def test_pause_keeps_the_part_and_resume_finishes_it(
    view: HubView, hub: FakeHub, services: Any, qtbot: Any
) -> None:
    shown = download_part_way(view, hub, qtbot, SPLIT_NAME, 300_000, past=50)
    assert shown.pause.text() == "Pause"
    qtbot.mouseClick(shown.pause, Qt.MouseButton.LeftButton)
    wait_state(view, qtbot, SPLIT_NAME, "paused")
    assert shown.status.text().startswith("Paused")
    assert shown.pause.text() == "Resume"
    assert parts_of(services, GGUF_REPO)  # the bytes so far stay on disk
    qtbot.wait(300)
    assert state(view, GGUF_REPO, SPLIT_NAME) == "paused"
    hub.throttle_bps = None
    qtbot.mouseClick(shown.pause, Qt.MouseButton.LeftButton)
    wait_state(view, qtbot, SPLIT_NAME, "complete")
    assert view.models.buttons[SPLIT_NAME].text() == "Downloaded"


def test_cancel_asks_then_deletes_the_part(
    view: HubView, hub: FakeHub, services: Any, qtbot: Any
) -> None:
    shown = download_part_way(view, hub, qtbot, SPLIT_NAME, 200_000, past=20)
    asked: list[str] = []
    view.downloads.confirm_cancel = lambda name: asked.append(name) or False  # "No"
    qtbot.mouseClick(shown.cancel, Qt.MouseButton.LeftButton)
    assert asked == [SPLIT_NAME]
    assert state(view, GGUF_REPO, SPLIT_NAME) in ("running", "queued")
    view.downloads.confirm_cancel = lambda name: True  # "Yes"
    qtbot.mouseClick(shown.cancel, Qt.MouseButton.LeftButton)
    wait_state(view, qtbot, SPLIT_NAME, "cancelled")
    qtbot.waitUntil(lambda: parts_of(services, GGUF_REPO) == [], timeout=TIMEOUT_MS)
    assert view.models.buttons[SPLIT_NAME].text() == "Download"


def test_a_cut_connection_resumes_from_the_bytes_on_disk(
    view: HubView, hub: FakeHub, qtbot: Any
) -> None:
    browse(view, qtbot)
    starter = starter_model(view)
    hub.cut_after = starter.size // 2
    shown = download(view, qtbot, starter.name)
    qtbot.waitUntil(
        lambda: state(view, GGUF_REPO, starter.name) in ("failed", "complete"),
        timeout=TIMEOUT_MS,
    )
    if state(view, GGUF_REPO, starter.name) == "failed":  # the downloader left it to us
        assert shown.retry.isVisible()
        assert "cut" in shown.error.text() or "connection" in shown.error.text()
        qtbot.mouseClick(shown.retry, Qt.MouseButton.LeftButton)
    wait_state(view, qtbot, starter.name, "complete")
    resumed = [
        r.headers.get("range", "")
        for r in hub.file_requests(starter.first.path)
        if r.headers.get("range", "").startswith("bytes=") and r.headers["range"] != "bytes=0-"
    ]
    assert any(int(h.removeprefix("bytes=").split("-")[0]) > 0 for h in resumed)


def test_a_gated_repository_asks_for_a_token_and_downloads_once_it_is_saved(
    view: HubView, hub: FakeHub, services: Any, qtbot: Any
) -> None:
    browse(view, qtbot, GATED_REPO)
    name = view.models.models[0].name
    download(view, qtbot, name)
    qtbot.waitUntil(lambda: view.token.isVisible(), timeout=TIMEOUT_MS)
    assert "gated or private" in view.token.reason.text()
    assert "huggingface.co/settings/tokens" in view.token.where.text()
    assert view.token.field.echoMode() == view.token.field.EchoMode.Password
    assert state(view, GATED_REPO, name) == "failed"
    view.token.field.setText(hub.token or "")
    qtbot.mouseClick(view.token.save, Qt.MouseButton.LeftButton)
    wait_state(view, qtbot, name, "complete", GATED_REPO)
    assert view.token.saved_label.isVisible() and view.token.remove.isVisible()
    assert hub.token not in view.token.saved_label.text()
    assert not view.token.field.isVisible()
    assert services.secrets.get(TOKEN_REF) == hub.token
    sent = [r.headers.get("authorization") for r in hub.file_requests()]
    assert f"Bearer {hub.token}" in sent
    qtbot.mouseClick(view.token.remove, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not view.token.isVisible(), timeout=TIMEOUT_MS)
    assert services.secrets.get(TOKEN_REF) is None


def test_hub_errors_are_shown_in_the_tab_with_retry(
    view: HubView, hub: FakeHub, qtbot: Any
) -> None:
    hub.fail_next = [(503, b'{"error": "Service Unavailable"}')]
    view.search("smollm2")
    qtbot.waitUntil(lambda: view.notice.isVisible(), timeout=TIMEOUT_MS)
    assert "503" in view.notice_text.text()
    qtbot.mouseClick(view.notice_retry, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.repos.rowCount() > 0, timeout=TIMEOUT_MS)
    assert not view.notice.isVisible()


def test_an_unreachable_hub_is_said_in_words(
    services: Any, qtbot: Any, qloop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    view = make_view(services, qtbot)
    view.search("qwen")
    qtbot.waitUntil(lambda: view.notice.isVisible(), timeout=TIMEOUT_MS)
    assert "Cannot reach the hub" in view.notice_text.text()
    assert view.search_button.isEnabled()


def test_a_download_left_unfinished_last_time_is_listed_paused_and_resumes(
    services: Any, hub: FakeHub, qtbot: Any, qloop: Any
) -> None:
    first = make_view(services, qtbot)
    download_part_way(first, hub, qtbot, SPLIT_NAME, 300_000, past=50)
    first.pause_all()  # the window closes
    wait_state(first, qtbot, SPLIT_NAME, "paused")
    stop_downloads(first)
    first.close()

    hub.throttle_bps = None
    # The next start of the app: a fresh HubService (its downloader knows only the disk) on
    # the same folders and keyring; the view needs nothing else of Services.
    restarted = SimpleNamespace(hub=HubService(services.paths, services.secrets))
    again = make_view(restarted, qtbot)
    qtbot.waitUntil(lambda: (GGUF_REPO, SPLIT_NAME) in again.downloads.rows, timeout=TIMEOUT_MS)
    listed = row(again, GGUF_REPO, SPLIT_NAME)
    assert listed.status.text().startswith("Paused")
    assert listed.pause.text() == "Resume"
    assert listed.bar.value() > 0
    seen: list[str] = []
    again.downloaded.connect(seen.append)
    qtbot.mouseClick(listed.pause, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(seen), timeout=TIMEOUT_MS)
    assert Path(seen[0]).name == Path(SPLIT_PARTS[0]).name
    stop_downloads(again)


def test_a_corrupted_download_is_caught_by_the_checksum_and_retried(
    view: HubView, hub: FakeHub, services: Any, qtbot: Any
) -> None:
    browse(view, qtbot)
    hub.corrupt = {SPLIT_PARTS[1]}
    seen: list[str] = []
    view.downloaded.connect(seen.append)
    shown = download(view, qtbot, SPLIT_NAME)
    wait_state(view, qtbot, SPLIT_NAME, "failed")
    assert shown.status.text() == "Failed"
    assert "checksum" in shown.error.text() and shown.error.isVisible()
    assert shown.retry.isVisible() and not shown.pause.isVisible()
    assert view.models.buttons[SPLIT_NAME].text() == "Retry"
    assert seen == []
    assert not (Path(services.paths.models_dir) / GGUF_REPO / SPLIT_PARTS[1]).exists()
    hub.corrupt = set()
    qtbot.mouseClick(shown.retry, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(seen), timeout=TIMEOUT_MS)
    assert state(view, GGUF_REPO, SPLIT_NAME) == "complete"


def test_a_full_disk_is_said_before_anything_is_fetched(
    view: HubView, hub: FakeHub, services: Any, qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``shutil.disk_usage`` reporting 1 MB free stands in for a full disk."""
    import shutil

    import desktop.hub.transfer as transfer

    browse(view, qtbot)
    monkeypatch.setattr(
        transfer.shutil,
        "disk_usage",
        lambda _p: shutil._ntuple_diskusage(10**12, 10**12 - 10**6, 10**6),
    )
    shown = download(view, qtbot, SPLIT_NAME)
    wait_state(view, qtbot, SPLIT_NAME, "failed")
    assert "Not enough disk space" in shown.error.text() and shown.error.isVisible()
    assert shown.retry.isVisible()
    assert hub.file_requests(SPLIT_PARTS[1]) == []  # (header reads touch only first parts)


def test_figures_read_as_words() -> None:
    """Dates relative to now, sizes as the hub shows them, a download's line and its
    shorter forms for a narrow row."""
    from datetime import UTC, datetime

    from desktop.chat.format import count_text
    from desktop.hub.downloads import DownloadProgress
    from desktop.ui.models.hub_format import progress_texts, relative_time, size_text

    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert relative_time("2026-11-28T12:00:00.000Z", now) == "3 days ago"
    assert relative_time("2026-12-01T11:59:30Z", now) == "just now"
    assert relative_time("2024-06-01T08:00:00.000Z", now) == "2 years ago"
    assert relative_time(None, now) == relative_time("not a date", now) == "—"
    assert size_text(4.9e9) == "4.9 GB" and size_text(812e6) == "812 MB"
    assert count_text(99_999) == "99,999" and count_text(1_234_567) == "1.2M"
    running = DownloadProgress("o/r", "m", int(1.2e9), int(4.9e9), "running", 12.3e6, 300.0)
    assert progress_texts(running) == [
        "1.2 GB of 4.9 GB · 12.3 MB/s · 5 min left",
        "1.2 GB of 4.9 GB · 5 min left",
        "24% · 5 min left",
    ]
    paused = DownloadProgress("o/r", "m", int(1.2e9), int(4.9e9), "paused")
    assert progress_texts(paused) == ["Paused · 1.2 GB of 4.9 GB"]
