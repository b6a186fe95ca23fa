"""`simi knowledge` and `simi agents edit --knowledge` on a real SIMI_HOME with real files:
one run as a subprocess, as a user runs it; the rest in-process through `desktop.cli.main`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop.cli import main
from tests.helpers import cli


def simi(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "boat.md").write_text("# Boat\n\nThe keel was painted ultramarine.\n", "utf-8")
    (root / "garden.txt").write_text("Tomatoes need\x1b[31m sun.\n", "utf-8")
    (root / "photo.bin").write_bytes(bytes(range(256)) * 8)
    return root


def test_add_index_search_attach_to_an_agent_and_remove(
    cli_env: dict, simi_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = notes(tmp_path)
    added = cli.simi(cli_env, "knowledge", "add", "Notes", str(root))
    assert added.returncode == 0, added.stderr
    assert "Added collection “Notes” (1 path)." in added.stdout

    code, out, err = simi(capsys, "knowledge", "index", "Notes")
    assert code == 0, err
    assert "Indexed “Notes”: 2 files" in out and "(2 new, 0 changed, 0 removed" in out
    assert f"skipped {root / 'photo.bin'}: Not a text document" in out
    code, out, _ = simi(capsys, "knowledge", "index", "Notes")  # nothing changed
    assert "0 new, 0 changed, 0 removed, 2 unchanged" in out

    code, out, _ = simi(capsys, "knowledge", "search", "Notes", "what colour is the keel?")
    assert code == 0
    first = out.splitlines()[0]
    assert first.startswith(f"[1] {root / 'boat.md'} (lines 1–3)")
    code, out, _ = simi(capsys, "knowledge", "search", "Notes", "tomatoes", "--json")
    hit = json.loads(out)["hits"][0]
    assert Path(hit["path"]).name == "garden.txt" and "\x1b" in hit["text"]  # JSON: as stored
    code, out, _ = simi(capsys, "knowledge", "search", "Notes", "tomatoes")
    assert "\x1b" not in out  # a terminal never gets a file's escape sequences

    code, out, _ = simi(capsys, "knowledge", "list", "--json")
    (row,) = json.loads(out)
    assert (row["name"], row["files"], row["skipped"]) == ("Notes", 2, 1)

    code, out, err = simi(capsys, "agents", "edit", "SmolLM2 (local)", "--knowledge", "Nope")
    assert code == 2 and "no collection named “Nope” (collections: Notes)" in err
    code, out, _ = simi(capsys, "agents", "edit", "SmolLM2 (local)", "--knowledge", "notes")
    assert code == 0 and "knowledge: Notes" in out
    code, out, _ = simi(capsys, "agents", "show", "SmolLM2 (local)", "--json")
    assert json.loads(out)["knowledge"] == ["Notes"]

    code, out, _ = simi(capsys, "knowledge", "rm", "Notes")
    assert code == 0 and "its files are untouched" in out
    assert (root / "boat.md").exists()
    code, out, _ = simi(capsys, "agents", "show", "SmolLM2 (local)", "--json")
    assert json.loads(out)["knowledge"] == []
    code, _, err = simi(capsys, "knowledge", "search", "Notes", "keel")
    assert code == 1 and "no collection named “Notes” (collections: none yet)" in err


def test_a_missing_folder_is_refused_in_words(
    cli_env: dict, simi_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = simi(capsys, "knowledge", "add", "X", str(tmp_path / "nowhere"))
    assert code == 1
    assert f"paths: “{tmp_path / 'nowhere'}” was not found" in err


def test_ask_lists_the_sources_after_the_reply(
    cli_env: dict, simi_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`simi ask` with an agent that searches a collection: the reply, then the sources its
    [n] point at (the provider is FaultServer, a loopback stand-in for an OpenAI-compatible
    server)."""
    from tests.helpers.fault_server import FaultServer, Reply, ticking_tokens

    root = notes(tmp_path)
    assert simi(capsys, "knowledge", "add", "Notes", str(root))[0] == 0
    assert simi(capsys, "knowledge", "index", "Notes")[0] == 0
    with FaultServer(lambda _r: Reply(body=ticking_tokens(2))) as server:
        add = ("agents", "add", "--name", "R", "--kind", "openai-compatible", "--model", "m")
        assert simi(capsys, *add, "--base-url", server.url + "/v1")[0] == 0
        assert simi(capsys, "agents", "edit", "R", "--knowledge", "Notes")[0] == 0
        code, out, err = simi(capsys, "ask", "--agent", "R", "What colour is the keel?")
        assert code == 0, err
        code, line, err = simi(capsys, "ask", "--agent", "R", "the keel?", "--json")
    assert out.endswith(f"\nSources:\n[1] {root / 'boat.md'} (lines 1–3)\n")
    record = json.loads(line.strip().splitlines()[-1])
    assert record["retrieval_chunks"] == len(record["sources"]) >= 1
    assert record["sources"][0]["path"] == str(root / "boat.md")


def test_list_says_which_index_is_damaged_and_index_makes_it_anew(
    cli_env: dict, simi_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = notes(tmp_path)
    assert simi(capsys, "knowledge", "add", "Notes", str(root))[0] == 0
    assert simi(capsys, "knowledge", "index", "Notes")[0] == 0
    (index_file,) = (simi_home / "knowledge").glob("collection-*.sqlite")
    index_file.write_bytes(b"garbage" * 1000)
    code, out, _ = simi(capsys, "knowledge", "list")
    assert code == 0 and "Notes\t0 files\t0 passages\tThe collection's index is damaged" in out
    code, out, _ = simi(capsys, "knowledge", "index", "Notes")
    assert code == 0 and "Indexed “Notes”: 2 files" in out
