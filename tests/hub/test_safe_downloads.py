"""Downloads cannot collide or escape: a repository's folders are kept under
``models_dir/<owner>/<name>/``, every name is checked before anything is written, "already
there" means the hub's sha256, and the access token goes to the hub's own host only. The fake
hub (``tests/helpers/fake_hub.py``) stands in for huggingface.co; a second fake hub on another
port stands in for another host (its CDN, or wherever a link points)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from desktop.chat.hub_browse import list_models
from desktop.errors import UserError
from desktop.hub.client import HubClient, RepoFile
from desktop.hub.downloads import MANIFEST_NAME, Downloader, download_file
from desktop.hub.files import GgufModel, group_gguf
from desktop.hub.names import MAX_REPO_FOLDERS, check_repo_id, check_repo_path
from desktop.local.catalog import _gguf_files
from desktop.local.starter import STARTER_FILE
from tests.helpers.fake_hub import (
    GATED_REPO,
    GGUF_REPO,
    OTHER_REPO,
    FakeHub,
    FakeRepo,
    fake_hub,
    sha256_of,
)
from tests.helpers.servers import closed_port

WAIT_S = 60
TWO_FOLDERS = "simi-test/Two-Folders-GGUF"
SAME_NAMED = {
    # the same file names in two folders, the first parts even of the same size
    "Q4_K_M/model-00001-of-00002.gguf": b"GGUF" + b"\x04" * 5000,
    "Q4_K_M/model-00002-of-00002.gguf": b"\x44" * 3000,
    "Q8_0/model-00001-of-00002.gguf": b"GGUF" + b"\x08" * 5000,
    "Q8_0/model-00002-of-00002.gguf": b"\x88" * 6000,
}
BAD_REPOS = ["o/../../x", "../x", "/abs", "a/b/c", "a", ".a/b", "a/.b", "a/b..c", "a/", "a b/c"]
BAD_PATHS = [
    "../x.gguf",
    "../../evil.gguf",
    "a/../../b.gguf",
    "/abs.gguf",
    "./x.gguf",
    "a//b.gguf",
    "a/",
    "a\\..\\b.gguf",
    "C:/x.gguf",
    "c:x.gguf",
    "x\x00.gguf",
    "a\nb.gguf",
    "/".join(["d"] * (MAX_REPO_FOLDERS + 1)) + "/x.gguf",  # deeper than the library scans
]


def files_of(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def tiny_model(path: str, data: bytes = b"GGUF1234") -> GgufModel:
    return GgufModel("x", None, (RepoFile(path, len(data), sha256_of(data)),), len(data))


# -- the repository's folders are kept -----------------------------------------------------------
def test_same_named_split_files_in_two_folders_download_to_two_paths(
    hub: FakeHub, tmp_path: Path
) -> None:
    hub.repos[TWO_FOLDERS] = FakeRepo(TWO_FOLDERS, dict(SAME_NAMED))
    models_dir = tmp_path / "models"
    dl = Downloader(models_dir, HubClient)
    with HubClient() as client:
        models = group_gguf(client.files(TWO_FOLDERS))
    assert sorted(m.name for m in models) == ["Q4_K_M/model", "Q8_0/model"]  # one name each
    handles = [dl.start(TWO_FOLDERS, m) for m in models]  # both at once
    assert len({id(h) for h in handles}) == 2
    finals = [h.wait(WAIT_S) for h in handles]
    assert [f.state for f in finals] == ["complete", "complete"], [f.error for f in finals]
    folder = models_dir / "simi-test" / "Two-Folders-GGUF"
    for path, data in SAME_NAMED.items():
        assert (folder / path).read_bytes() == data
    assert sorted(Path(f.path or "") for f in finals) == [
        folder / "Q4_K_M" / "model-00001-of-00002.gguf",
        folder / "Q8_0" / "model-00001-of-00002.gguf",
    ]
    assert all(dl.manifest.is_downloaded(folder / p) for p in SAME_NAMED)
    assert all(dl.downloaded_path(TWO_FOLDERS, m) is not None for m in models)
    with HubClient() as client:  # the window's "Downloaded" marks
        _, have = list_models(SimpleNamespace(downloads=dl), client, TWO_FOLDERS)
    assert have == {"Q4_K_M/model", "Q8_0/model"}
    assert sorted(_gguf_files(models_dir)) == sorted(Path(f.path or "") for f in finals)


def test_the_deepest_folder_allowed_is_one_the_library_finds(tmp_path: Path) -> None:
    deepest = "/".join(f"d{i}" for i in range(MAX_REPO_FOLDERS)) + "/deep-Q4_0.gguf"
    dl = Downloader(tmp_path, HubClient)
    target = dl.target_path(OTHER_REPO, RepoFile(deepest, 8, None))
    assert target == tmp_path / OTHER_REPO / deepest
    target.parent.mkdir(parents=True)
    target.write_bytes(b"GGUF1234")
    assert _gguf_files(tmp_path) == [target]


def test_a_download_is_one_repository_path_and_revision(hub: FakeHub, tmp_path: Path) -> None:
    with HubClient() as client:
        model = next(m for m in group_gguf(client.files(GGUF_REPO)) if m.first.path == STARTER_FILE)
    hub.throttle_bps = 20e6  # a few seconds: it is still running below
    dl = Downloader(tmp_path, HubClient)
    first = dl.start(GGUF_REPO, model)
    assert first.key == (GGUF_REPO, STARTER_FILE, "main")
    assert dl.start(GGUF_REPO, model) is first  # the same download
    with pytest.raises(UserError) as err:  # another revision, the same place on disk
        dl.start(GGUF_REPO, model, revision="v2")
    assert "from revision main" in str(err.value)
    first.cancel()
    assert first.wait(WAIT_S).state == "cancelled"


# -- names that could lead outside the models folder ----------------------------------------------
@pytest.mark.parametrize("repo", BAD_REPOS)
def test_a_bad_repository_id_is_refused_and_nothing_is_written(tmp_path: Path, repo: str) -> None:
    """Nothing listens at the client's endpoint: a request would fail as "Cannot reach"."""
    nowhere = f"http://127.0.0.1:{closed_port()}"
    dl = Downloader(tmp_path / "models", lambda: HubClient(nowhere))
    with pytest.raises(UserError) as err:
        dl.start(repo, tiny_model("x.gguf"))
    assert "is not a repository name" in str(err.value) and "owner/name" in str(err.value)
    with HubClient(nowhere) as client:
        for ask in (client.files, lambda r: client.read_range(r, "x.gguf", 0, 3)):
            with pytest.raises(UserError) as listed:
                ask(repo)
            assert "is not a repository name" in str(listed.value)  # refused before asking
    assert list(tmp_path.rglob("*")) == []  # not even a folder


@pytest.mark.parametrize("path", BAD_PATHS)
def test_a_file_path_that_could_escape_is_refused_and_nothing_is_written(
    tmp_path: Path, path: str
) -> None:
    dl = Downloader(tmp_path / "models", HubClient)
    with pytest.raises(UserError) as err:
        dl.start(GGUF_REPO, tiny_model(path))
    assert "is not saved" in str(err.value) and GGUF_REPO in str(err.value)
    assert list(tmp_path.rglob("*")) == []


def test_a_hub_listing_an_escaping_path_gets_no_file_written_outside(
    hub: FakeHub, tmp_path: Path
) -> None:
    evil = "simi-test/Evil-GGUF"
    hub.repos[evil] = FakeRepo(evil, {"../../../evil-Q4_0.gguf": b"GGUF" + b"\x66" * 100})
    with HubClient() as client:
        (model,) = group_gguf(client.files(evil))
    with pytest.raises(UserError):
        Downloader(tmp_path / "models", HubClient).start(evil, model)
    assert list(tmp_path.rglob("*")) == [] and hub.file_requests() == []


def test_names_that_are_fine() -> None:
    assert check_repo_id(" bartowski/Llama-3.2-1B-Instruct-GGUF ") == (
        "bartowski",
        "Llama-3.2-1B-Instruct-GGUF",
    )
    assert check_repo_id("a_b/c.d-e") == ("a_b", "c.d-e")
    assert check_repo_path("Q4_K_M/model-00001-of-00002.gguf") == (
        "Q4_K_M",
        "model-00001-of-00002.gguf",
    )
    assert check_repo_path("file..name.gguf") == ("file..name.gguf",)  # ".." inside a name


# -- "already there" is the hub's sha256 ----------------------------------------------------------
def found_in_place(
    tmp_path: Path, content: Callable[[GgufModel], bytes]
) -> tuple[Downloader, GgufModel, Path]:
    """A downloader on ``tmp_path``, OTHER_REPO's one model, and that model's file put where
    the download would write it, holding ``content(model)``, before anything is downloaded."""
    with HubClient() as client:
        (model,) = group_gguf(client.files(OTHER_REPO))
    dl = Downloader(tmp_path, HubClient)
    dest = dl.target_path(OTHER_REPO, model.first)
    dest.parent.mkdir(parents=True)
    dest.write_bytes(content(model))
    return dl, model, dest


def test_a_same_size_file_with_other_bytes_is_not_already_there(
    hub: FakeHub, tmp_path: Path
) -> None:
    # the right size, other bytes
    dl, model, dest = found_in_place(tmp_path, lambda m: b"\x00" * m.size)
    assert dl.downloaded_path(OTHER_REPO, model) is None
    assert dl.downloaded_path(OTHER_REPO, model, deep=True) is None
    final = dl.start(OTHER_REPO, model).wait(WAIT_S)
    assert final.state == "complete", final.error
    assert hub.file_requests(model.first.path)  # downloaded again
    assert sha256_of(dest.read_bytes()) == hub.sha256(OTHER_REPO, model.first.path)
    assert final.done == final.total == model.size
    assert dl.downloaded_path(OTHER_REPO, model) == dest
    # changed on disk after it was recorded (same size): the manifest no longer vouches for it
    recorded = dest.stat().st_mtime_ns
    dest.write_bytes(b"\x01" * model.size)
    os.utime(dest, ns=(recorded + 2 * 10**9, recorded + 2 * 10**9))  # (a later write)
    assert dl.downloaded_path(OTHER_REPO, model) is None
    with HubClient() as client:  # the lower level too: it downloads, not "it is there"
        before = len(hub.file_requests())
        assert download_file(
            client, OTHER_REPO, model.first, dest, lambda n: None, threading.Event()
        )
    assert len(hub.file_requests()) > before
    assert sha256_of(dest.read_bytes()) == hub.sha256(OTHER_REPO, model.first.path)


def test_a_same_size_file_with_the_hubs_bytes_is_taken_without_downloading(
    hub: FakeHub, tmp_path: Path
) -> None:
    dl, model, dest = found_in_place(tmp_path, lambda m: hub.repos[OTHER_REPO].files[m.first.path])
    assert dl.downloaded_path(OTHER_REPO, model) is None  # the manifest does not know it
    assert dl.downloaded_path(OTHER_REPO, model, deep=True) == dest  # read and compared
    assert dl.manifest.is_downloaded(dest)
    final = dl.start(OTHER_REPO, model).wait(WAIT_S)
    assert final.state == "complete", final.error
    assert hub.file_requests() == []


# -- downloads of earlier versions (files saved flat in the repository's folder) ------------------
def test_a_download_saved_flat_by_an_earlier_version_is_still_found(tmp_path: Path) -> None:
    data = SAME_NAMED["Q8_0/model-00002-of-00002.gguf"]
    file = RepoFile("Q8_0/model.gguf", len(data), sha256_of(data))
    folder = tmp_path / "simi-test" / "Two-Folders-GGUF"
    old = folder / "model.gguf"
    old.parent.mkdir(parents=True)
    old.write_bytes(data)
    entry = {"repo": TWO_FOLDERS, "path": file.path, "revision": "main", "size": file.size}
    entry |= {"sha256": file.sha256, "downloaded_at": "2025-01-01T00:00:00Z"}
    manifest = {"version": 1, "files": {"simi-test/Two-Folders-GGUF/model.gguf": entry}}
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(manifest))
    dl = Downloader(tmp_path, HubClient)
    model = GgufModel("model", "Q8_0", (file,), file.size)
    assert dl.downloaded_path(TWO_FOLDERS, model) == old
    assert dl.delete(old) == [old] and not folder.exists()


def test_an_unfinished_download_of_an_earlier_version_resumes_where_it_now_belongs(
    tmp_path: Path,
) -> None:
    data = SAME_NAMED["Q8_0/model-00002-of-00002.gguf"]
    file = RepoFile("Q8_0/model.gguf", len(data), sha256_of(data))
    folder = tmp_path / "simi-test" / "Two-Folders-GGUF"
    folder.mkdir(parents=True)
    (folder / "model.gguf.part").write_bytes(data[:1000])
    sidecar = {"repo": TWO_FOLDERS, "path": file.path, "revision": "main", "size": file.size}
    sidecar |= {"sha256": file.sha256, "url": "http://127.0.0.1:9/x"}
    parts = [[file.path, file.size, file.sha256]]
    sidecar["model"] = {"name": "model", "quantization": "Q8_0", "files": parts}
    (folder / "model.gguf.part.json").write_text(json.dumps(sidecar))
    (pending,) = Downloader(tmp_path, HubClient).pending()
    assert (pending.repo, pending.model.first, pending.done) == (TWO_FOLDERS, file, 1000)
    assert (folder / "Q8_0" / "model.gguf.part").read_bytes() == data[:1000]
    assert not (folder / "model.gguf.part").exists()


# -- the token goes to the hub's host only ------------------------------------------------------
def test_a_next_page_link_to_another_host_gets_no_token(hub: FakeHub) -> None:
    assert hub.token
    with fake_hub(hub.repos) as elsewhere:
        hub.tree_page_size = elsewhere.tree_page_size = 2
        hub.link_base = elsewhere.endpoint  # rel="next" points to another host:port
        with HubClient(token=hub.token) as client:
            files = client.files(GGUF_REPO)
    assert {f.path for f in files} == set(hub.repos[GGUF_REPO].files)
    here = [r for r in hub.requests if "/tree/" in r.path]
    there = [r for r in elsewhere.requests if "/tree/" in r.path]
    assert len(here) == 1 and here[0].headers["authorization"] == f"Bearer {hub.token}"
    assert there and all("authorization" not in r.headers for r in there)


def test_the_redirect_to_the_cdn_host_goes_without_the_token(hub: FakeHub) -> None:
    assert hub.token
    with fake_hub(hub.repos) as cdn:
        hub.cdn_base = cdn.endpoint  # the hub redirects file bytes to its CDN, another host
        with HubClient(token=hub.token) as client:
            assert client.read_range(GATED_REPO, STARTER_FILE, 0, 3) == b"GGUF"
    asked = hub.file_requests(STARTER_FILE)
    assert asked and asked[0].headers["authorization"] == f"Bearer {hub.token}"
    served = cdn.file_requests(STARTER_FILE)
    assert served and all("authorization" not in r.headers for r in served)
