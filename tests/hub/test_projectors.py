"""Vision projectors on the hub: each model of a repository is offered with the projector that
goes with it (never as a model of its own), marked "sees images", and downloaded with it; two
models of a repository share one projector file. The repository below stands in for
``ggml-org/SmolVLM-256M-Instruct-GGUF`` on the fake hub (``tests/helpers/fake_hub.py``, for
huggingface.co), with made-up bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

from desktop.chat.hub_browse import sees_images, vision_note
from desktop.hub.client import HubClient, RepoFile
from desktop.hub.downloads import Downloader
from desktop.hub.files import GgufModel, group_gguf
from tests.helpers.fake_hub import FakeHub, FakeRepo

VLM_REPO = "ggml-org/SmolVLM-256M-Instruct-GGUF"
WAIT_S = 60


MB = 1_000_000


def f(path: str, size_mb: int) -> RepoFile:
    return RepoFile(path, size_mb * MB, "0" * 64)


def test_each_model_gets_its_repositorys_projector_f16_first() -> None:
    models = group_gguf(
        [
            f("SmolVLM-256M-Instruct-Q8_0.gguf", 175),
            f("SmolVLM-256M-Instruct-f16.gguf", 328),
            f("mmproj-SmolVLM-256M-Instruct-Q8_0.gguf", 104),
            f("mmproj-SmolVLM-256M-Instruct-f16.gguf", 190),
            f("README.md", 1),
        ]
    )
    assert [m.name for m in models] == ["SmolVLM-256M-Instruct-Q8_0", "SmolVLM-256M-Instruct-f16"]
    for m in models:
        assert m.projector is not None
        assert m.projector.path == "mmproj-SmolVLM-256M-Instruct-f16.gguf"
        assert m.download_files == (*m.files, m.projector)
        assert m.download_size == m.size + 190 * MB and sees_images(m)
    assert vision_note(models[0]) == (
        "Sees images: its vision projector mmproj-SmolVLM-256M-Instruct-f16.gguf (190 MB) "
        "downloads with it"
    )
    # split models in folders take the projector from the repository's root
    split = group_gguf(
        [
            f("Q4_K_M/Big-00001-of-00002.gguf", 10),
            f("Q4_K_M/Big-00002-of-00002.gguf", 10),
            f("mmproj-BF16.gguf", 5),
            f("mmproj-F16.gguf", 5),
        ]
    )
    assert [(m.name, m.projector and m.projector.path) for m in split] == [
        ("Big", "mmproj-F16.gguf")
    ]
    text_only = group_gguf([f("Model-Q4_K_M.gguf", 400)])
    assert text_only[0].projector is None and not sees_images(text_only[0])
    assert vision_note(text_only[0]) == "" and text_only[0].download_size == 400 * MB


def _vlm_repo() -> FakeRepo:
    return FakeRepo(
        VLM_REPO,
        {
            "SmolVLM-256M-Instruct-Q8_0.gguf": b"GGUF" + bytes(range(256)) * 64,
            "SmolVLM-256M-Instruct-f16.gguf": b"GGUF" + bytes(range(255, -1, -1)) * 96,
            "mmproj-SmolVLM-256M-Instruct-Q8_0.gguf": b"GGUF" + b"\x01" * 3000,
            "mmproj-SmolVLM-256M-Instruct-f16.gguf": b"GGUF" + b"\x02" * 5000,
        },
    )


def _models() -> list[GgufModel]:
    with HubClient() as client:
        return group_gguf(client.files(VLM_REPO))


def test_two_models_share_one_projector_download_and_the_last_delete_takes_it(
    hub: FakeHub, tmp_path: Path
) -> None:
    hub.repos[VLM_REPO] = _vlm_repo()
    q8, f16 = _models()
    dl = Downloader(tmp_path, HubClient)
    first, second = dl.start(VLM_REPO, q8), dl.start(VLM_REPO, f16)  # at the same time
    assert first.wait(WAIT_S).state == "complete" and second.wait(WAIT_S).state == "complete"
    folder = tmp_path / "ggml-org" / "SmolVLM-256M-Instruct-GGUF"
    projector = folder / "mmproj-SmolVLM-256M-Instruct-f16.gguf"
    data = hub.repos[VLM_REPO].files[projector.name]
    assert hashlib.sha256(projector.read_bytes()).digest() == hashlib.sha256(data).digest()
    assert len(hub.file_requests(projector.name)) <= 2  # once (a redirect and the CDN's answer)
    assert not (folder / "mmproj-SmolVLM-256M-Instruct-Q8_0.gguf").exists()  # only the best
    assert first.progress.done == first.progress.total == q8.size + len(data)
    assert dl.downloaded_path(VLM_REPO, q8) == folder / q8.first.path
    # a model whose projector is gone is not all there: Download fetches the projector alone
    removed_projector = projector.read_bytes()
    projector.unlink()
    assert dl.downloaded_path(VLM_REPO, q8) is None
    again = dl.start(VLM_REPO, q8).wait(WAIT_S)
    assert again.state == "complete" and projector.read_bytes() == removed_projector
    assert len(hub.file_requests(q8.first.path)) <= 2  # the model itself was not fetched again
    # deleting one model keeps the projector the other still uses; the last takes it along
    assert dl.delete(folder / q8.first.path) == [folder / q8.first.path]
    assert projector.is_file()
    last = folder / f16.first.path
    assert sorted(dl.delete(last)) == sorted([last, projector])
    assert not folder.exists()
