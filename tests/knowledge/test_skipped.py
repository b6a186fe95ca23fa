"""What the index leaves out, each with a sentence a person understands, while the rest of the
folder is indexed: a program, an archive, an image, a 1 GB log, a link loop, a folder or a
file the person may not read, a file that changed while it was read; hidden folders silently."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from desktop.attach import documents
from desktop.knowledge import MAX_FILE_BYTES, KnowledgeIndex
from desktop.knowledge import read as read_module
from desktop.knowledge import scan as scan_module
from tests.attach import samples


def reasons(ix: KnowledgeIndex) -> dict[str, str]:
    return {Path(s.path).name: s.reason for s in ix.skipped()}


def test_binary_image_huge_and_loop_are_skipped_and_the_rest_indexed(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "readme.txt").write_text("The walrus is here.\n")
    (folder / "tool").write_bytes(b"\x7fELF" + bytes(range(256)) * 10)
    (folder / "bundle.zip").write_bytes(b"PK\x03\x04" + b"\x00" * 200)
    (folder / "noise.bin").write_bytes(bytes(range(256)) * 8)
    samples.image_file(folder / "photo.png", (8, 8))
    with (folder / "huge.log").open("wb") as f:
        f.truncate(1 << 30)  # sparse: 1 GB by stat, nothing on disk
    (folder / "empty.txt").write_bytes(b"")
    (folder / "sub").mkdir()
    (folder / "sub" / "deep.md").write_text("# Deep\n\nwalrus again\n")
    os.symlink(folder, folder / "sub" / "back-up")  # a link to an ancestor: a loop
    for hidden in (".git", "node_modules", "__pycache__", ".venv"):
        (folder / hidden).mkdir()
        (folder / hidden / "x.txt").write_text("walrus hidden\n")
    ix = KnowledgeIndex(tmp_path / "k.sqlite3")
    report = ix.sync([folder])
    assert report.files == 2  # readme.txt, sub/deep.md
    assert {Path(h.chunk.path).name for h in ix.search("walrus", k=10)} == {"readme.txt", "deep.md"}
    got = reasons(ix)
    assert got == {
        "tool": "Not a text document (it is a program).",
        "bundle.zip": "Not a text document (it is a zip archive).",
        "noise.bin": "Not a text document (its contents are binary data).",
        "photo.png": "Not a text document (it is a PNG image).",
        "huge.log": "Larger than 50 MB.",
        "empty.txt": "Empty: there is nothing in it to search.",
        "back-up": "A link loop: this folder is already indexed through another path.",
    }
    assert MAX_FILE_BYTES == 50_000_000
    ix.close()


def test_a_huge_file_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    with (folder / "app.log").open("wb") as f:
        f.truncate(1 << 30)
    opened: list[str] = []
    monkeypatch.setattr(read_module, "_open", lambda p: opened.append(p) or open(p, "rb"))  # noqa: SIM115
    ix = KnowledgeIndex(tmp_path / "k.sqlite3")
    report = ix.sync([folder])
    assert opened == [] and report.seconds < 1
    ix.close()


def test_a_folder_that_cannot_be_listed_keeps_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tests run as root, for whom chmod 000 does not block reading: the listing is made
    # to fail as it does for a person without permission on the folder.
    folder = tmp_path / "share"
    (folder / "private").mkdir(parents=True)
    (folder / "private" / "secret.txt").write_text("the otter plan\n")
    (folder / "open.txt").write_text("the otter report\n")
    ix = KnowledgeIndex(tmp_path / "k.sqlite3")
    assert ix.sync([folder]).files == 2
    real = scan_module._list_dir

    def denied(path: str) -> list[os.DirEntry[str]]:
        if path.endswith("private"):
            raise PermissionError(13, "Permission denied", path)
        return real(path)

    monkeypatch.setattr(scan_module, "_list_dir", denied)
    report = ix.sync([folder])
    assert reasons(ix) == {"private": "Permission denied."}
    assert report.removed == 0 and report.files == 2  # what was indexed in it stays
    ix.close()


def test_a_file_that_cannot_be_opened_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stands in for a file whose permissions deny the person (root reads through chmod 000).
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "locked.txt").write_text("the badger memo\n")
    (folder / "fine.txt").write_text("the badger note\n")

    def deny(path: str) -> object:
        if path.endswith("locked.txt"):
            raise PermissionError(13, "Permission denied", path)
        return open(path, "rb")

    monkeypatch.setattr(read_module, "_open", deny)
    ix = KnowledgeIndex(tmp_path / "k.sqlite3")
    report = ix.sync([folder])
    assert report.files == 1 and reasons(ix) == {"locked.txt": "Permission denied."}
    monkeypatch.undo()
    assert ix.sync([folder]).added == 1  # readable again: indexed next time
    ix.close()


def test_a_file_changing_while_read_is_tried_again_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    live = folder / "live.log"
    live.write_text("first heron entry\n")
    (folder / "still.txt").write_text("a heron at rest\n")
    real = documents.extract_text

    def appending(path: Path, *args: object, **kwargs: object) -> object:
        result = real(path, *args, **kwargs)  # type: ignore[arg-type]
        if path.name == "live.log":
            with live.open("a") as f:  # another program writes to it while we read
                f.write("second heron entry\n")
        return result

    monkeypatch.setattr(read_module, "extract_text", appending)
    ix = KnowledgeIndex(tmp_path / "k.sqlite3")
    report = ix.sync([folder])
    assert report.files == 1
    assert reasons(ix) == {
        "live.log": "Changed while it was being read; it is tried again next time."
    }
    monkeypatch.undo()
    report = ix.sync([folder])
    assert report.added == 1 and ix.skipped() == []
    assert "second heron entry" in ix.search("heron entry")[0].chunk.text
    ix.close()


def test_a_single_file_root_and_a_docx(tmp_path: Path) -> None:
    doc = samples.docx(tmp_path / "memo.docx", samples.paragraph("The pelican budget."))
    ix = KnowledgeIndex(tmp_path / "k.sqlite3")
    assert ix.sync([doc]).files == 1
    assert ix.search("pelican")[0].chunk.path == str(doc)
    ix.close()
