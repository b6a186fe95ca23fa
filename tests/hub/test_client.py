"""HubClient against the fake hub (``tests/helpers/fake_hub.py``, standing in for
huggingface.co): the API shapes it reads, and the errors a person sees."""

from __future__ import annotations

import logging

import pytest

from desktop.hub.client import (
    HubAuthError,
    HubClient,
    HubNotFound,
    HubUnavailable,
    hub_endpoint,
)
from desktop.local.starter import STARTER_FILE
from tests.helpers.fake_hub import GATED_REPO, GGUF_REPO, OTHER_REPO, SPLIT_PARTS, FakeHub
from tests.helpers.servers import closed_port


def test_endpoint_comes_from_hf_endpoint() -> None:
    assert hub_endpoint({"HF_ENDPOINT": "http://mirror.example/"}) == "http://mirror.example"
    assert hub_endpoint({}) == "https://huggingface.co"


def test_search_asks_for_gguf_by_downloads_and_reads_the_summary(hub: FakeHub) -> None:
    with HubClient() as client:
        found = client.search("gguf", limit=10)
    assert [r.id for r in found] == [OTHER_REPO, GGUF_REPO, GATED_REPO]  # most downloaded first
    query = hub.requests[-1].query
    assert query["filter"] == "gguf" and query["sort"] == "downloads"
    assert query["direction"] == "-1" and query["limit"] == "10" and query["search"] == "gguf"
    by_id = {r.id: r for r in found}
    smol = by_id[GGUF_REPO]
    assert (smol.author, smol.downloads, smol.likes) == ("simi-test", 12345, 67)
    assert smol.license == "apache-2.0"  # from the license:xxx tag
    assert smol.last_modified == "2025-01-15T10:20:30.000Z"
    assert smol.gated is False
    assert by_id[OTHER_REPO].license == "mit"  # from cardData when no tag says
    assert by_id[GATED_REPO].gated is True  # the hub says "manual"


def test_search_filters_by_words(hub: FakeHub) -> None:
    with HubClient() as client:
        assert [r.id for r in client.search("smollm2")] == [GGUF_REPO, GATED_REPO]
        assert client.search("no such thing") == []


def test_files_walk_the_tree_with_lfs_sha256(hub: FakeHub) -> None:
    hub.tree_page_size = 2  # the hub pages a long tree with a Link header
    with HubClient() as client:
        files = {f.path: f for f in client.files(GGUF_REPO)}
    assert set(files) >= {STARTER_FILE, *SPLIT_PARTS, "README.md"}
    assert "split" not in files  # directories are not files
    starter = files[STARTER_FILE]
    assert starter.size == len(hub.repos[GGUF_REPO].files[STARTER_FILE])
    assert starter.sha256 == hub.sha256(GGUF_REPO, STARTER_FILE)
    assert files["README.md"].sha256 is None  # not in LFS
    tree_calls = [r for r in hub.requests if "/tree/" in r.path]
    assert len(tree_calls) > 1 and tree_calls[0].query["recursive"] == "true"


def test_read_range_and_quoted_url(hub: FakeHub) -> None:
    with HubClient() as client:
        url = client.file_url("a/b", "dir/some file#1.gguf", "main")
        assert url == f"{hub.endpoint}/a/b/resolve/main/dir/some%20file%231.gguf"
        head = client.read_range(GGUF_REPO, STARTER_FILE, 0, 99)
    assert head == hub.repos[GGUF_REPO].files[STARTER_FILE][:100]
    assert head.startswith(b"GGUF")
    assert hub.file_requests(STARTER_FILE)[-1].headers["range"] == "bytes=0-99"


def test_read_range_when_the_server_ignores_range(hub: FakeHub) -> None:
    hub.ignore_range = True
    with HubClient() as client:
        assert (
            client.read_range(GGUF_REPO, STARTER_FILE, 4, 7)
            == hub.repos[GGUF_REPO].files[STARTER_FILE][4:8]
        )


def test_gated_repo_without_token_says_what_to_do(hub: FakeHub) -> None:
    with HubClient() as client:
        assert client.files(GATED_REPO)  # the listing is public, as on the hub
        with pytest.raises(HubAuthError) as err:
            client.read_range(GATED_REPO, STARTER_FILE, 0, 3)
    assert "gated or private" in str(err.value) and "access token" in str(err.value)


def test_gated_repo_with_the_right_token_and_a_wrong_one(
    hub: FakeHub, caplog: pytest.LogCaptureFixture
) -> None:
    assert hub.token
    with HubClient(token=hub.token) as client:
        assert client.read_range(GATED_REPO, STARTER_FILE, 0, 3) == b"GGUF"
    assert hub.file_requests()[0].headers["authorization"] == f"Bearer {hub.token}"
    cdn = [r for r in hub.requests if r.path.startswith("/cdn/")]
    assert cdn  # the file came through the redirect

    wrong = "hf_wrong_token_abcdefghijklmnop"
    caplog.set_level(logging.DEBUG)
    with HubClient(token=wrong) as client, pytest.raises(HubAuthError) as err:
        client.read_range(GATED_REPO, STARTER_FILE, 0, 3)
    assert "access token was refused" in str(err.value)
    assert wrong not in str(err.value) and wrong not in caplog.text


def test_not_found(hub: FakeHub) -> None:
    with HubClient() as client:
        with pytest.raises(HubNotFound):
            client.files("nobody/nothing")
        with pytest.raises(HubNotFound):
            client.read_range(GGUF_REPO, "missing.gguf", 0, 1)


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (503, b'{"error": "overloaded"}', "answered 503"),
        (200, b"<html>not json</html>", "not the expected answer"),
        (200, b'{"models": []}', "not the expected answer"),
    ],
)
def test_server_trouble_is_unavailable_naming_the_hub(
    hub: FakeHub, status: int, body: bytes, words: str
) -> None:
    hub.fail_next.append((status, body))
    with HubClient() as client, pytest.raises(HubUnavailable) as err:
        client.search("x")
    assert words in str(err.value) and "127.0.0.1" in str(err.value)


def test_nothing_listening_is_unavailable() -> None:
    client = HubClient(f"http://127.0.0.1:{closed_port()}", timeout=5)
    with client, pytest.raises(HubUnavailable) as err:
        client.search("x")
    assert "Cannot reach the hub at 127.0.0.1" in str(err.value)


def test_the_hubs_repo_not_found_401_is_not_found(hub: FakeHub) -> None:
    """The real hub answers 401 with X-Error-Code: RepoNotFound for a repository that does not
    exist (or is private) when no token is sent; the canned reply stands in for it."""
    hub.fail_next.append(
        (401, b'{"error": "Repository Not Found"}', {"X-Error-Code": "RepoNotFound"})
    )
    with HubClient() as client, pytest.raises(HubNotFound) as err:
        client.files("nobody/typo")
    assert "check the name" in str(err.value) and "private" in str(err.value)
