"""Indexing a folder and searching it, as a person would notice: the file that mentions a rare
word comes first with the right lines; a touched file is not read again, an edited one is, a
deleted one is gone, a disconnected drive keeps its files; a crash or a cancel loses nothing
already done; pause holds the indexing until resume."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from desktop.attach import documents
from desktop.knowledge import IndexControl, IndexProgress, KnowledgeIndex
from desktop.knowledge import read as read_module
from tests.attach import samples


def many(tmp_path: Path, count: int, says: str = " says word{n}") -> Path:
    """A folder "many" of ``count`` small files f00.txt, f01.txt, …"""
    folder = tmp_path / "many"
    for n in range(count):
        write(folder / f"f{n:02d}.txt", f"file number {n}{says.format(n=n)}\n")
    return folder


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def corpus(root: Path) -> Path:
    write(root / "notes.txt", "Shopping list\nmilk\nbread\neggs\n")
    write(
        root / "guide" / "setup.md",
        "# Setup\n\nInstall the tool.\n\n## Proxy\n\nThe quokka proxy listens on port 8080.\n",
    )
    write(root / "guide" / "faq.md", "# FAQ\n\nWhy is the sky blue?\nBecause of scattering.\n")
    write(root / "src" / "main.py", "def main():\n    print('hello world')\n")
    return root


class Crash(BaseException):
    """Stands in for the app being killed mid-run (not an Exception: nothing may catch it)."""


class Reads:
    """Counts documents read, by wrapping ``extract_text`` where the index calls it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_after: int | None = None) -> None:
        self.paths: list[str] = []
        real = documents.extract_text

        def counting(path: Path, *args: object, **kwargs: object) -> object:
            if fail_after is not None and len(self.paths) >= fail_after:
                raise Crash
            self.paths.append(str(path))
            return real(path, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(read_module, "extract_text", counting)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    return corpus(tmp_path / "docs")


@pytest.fixture
def index(tmp_path: Path):  # type: ignore[no-untyped-def]
    ix = KnowledgeIndex(tmp_path / "index" / "k.sqlite3")
    yield ix
    ix.close()


def test_the_file_with_the_rare_word_ranks_first_with_its_lines(
    docs: Path, index: KnowledgeIndex
) -> None:
    report = index.sync([docs])
    assert (report.files, report.added, report.cancelled) == (4, 4, False)
    assert report.chunks == index.counts()[1] >= 4
    assert index.counts()[0] == 4
    hits = index.search("Which port does the quokka proxy use?")
    assert hits[0].chunk.path == str(docs / "guide" / "setup.md")
    assert hits[0].bm25_rank == 1 and hits[0].vector_rank is None
    lines = (docs / "guide" / "setup.md").read_text().split("\n")
    chunk = hits[0].chunk
    assert "quokka" in "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
    assert chunk.page is None
    assert index.search("scattering")[0].chunk.path.endswith("faq.md")
    assert index.search("zzzz nothing matches xyzzy") == []
    assert index.last_indexed_at() is not None and index.last_indexed_at().endswith("+00:00")


def test_stemming_and_accents(tmp_path: Path, index: KnowledgeIndex) -> None:
    write(tmp_path / "d" / "a.txt", "We were indexing the café menus.\n")
    index.sync([tmp_path / "d"])
    assert index.search("indexed") and index.search("cafe")


def test_pdf_hits_name_their_page(tmp_path: Path, index: KnowledgeIndex) -> None:
    folder = tmp_path / "pdfs"
    folder.mkdir()
    samples.text_pdf(
        folder / "report.pdf",
        [["Introduction", "Nothing special."], ["Results", "The albatross count rose.", "End."]],
    )
    index.sync([folder])
    hit = index.search("albatross")[0]
    assert hit.chunk.page == 2 and hit.chunk.path.endswith("report.pdf")
    assert hit.chunk.start_line <= 2 <= hit.chunk.end_line  # line 2 of page 2


def test_incremental_touch_edit_delete(
    docs: Path, index: KnowledgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    index.sync([docs])
    reads = Reads(monkeypatch)
    faq = docs / "guide" / "faq.md"
    # touched, not changed: the row updates, nothing is read again
    os.utime(faq, ns=(time.time_ns(), time.time_ns() + 5_000_000_000))
    report = index.sync([docs])
    assert reads.paths == [] and report.unchanged == 4 and report.chunks_indexed == 0
    # no change at all: not even hashed (size and mtime match)
    assert index.sync([docs]).unchanged == 4
    # edited: only it is read, and its old words are gone
    write(faq, "# FAQ\n\nWhy is grass green?\nChlorophyll.\n")
    report = index.sync([docs])
    assert reads.paths == [str(faq)]
    assert (report.changed, report.added, report.unchanged) == (1, 0, 3)
    assert index.search("scattering") == []
    assert index.search("chlorophyll")[0].chunk.path == str(faq)
    # deleted: its chunks go
    faq.unlink()
    report = index.sync([docs])
    assert report.removed == 1 and index.counts()[0] == 3
    assert index.search("chlorophyll") == []


def test_a_missing_root_keeps_its_files(tmp_path: Path, docs: Path) -> None:
    other = corpus(tmp_path / "usb")
    ix = KnowledgeIndex(tmp_path / "k.sqlite3")
    ix.sync([docs, other])
    assert ix.counts()[0] == 8
    moved = tmp_path / "unplugged"
    other.rename(moved)  # the drive is disconnected
    report = ix.sync([docs, other])
    assert report.removed == 0 and ix.counts()[0] == 8
    assert [(s.path, s.reason) for s in report.skipped] == [
        (
            str(other),
            "Folder not found: the drive may be disconnected. Its files stay in the index.",
        )
    ]
    assert ix.skipped() == list(report.skipped)
    ix.close()
    reopened = KnowledgeIndex(tmp_path / "k.sqlite3")
    assert reopened.skipped() == list(report.skipped)  # stored with the index
    # a root taken out of the collection: its files go
    assert reopened.sync([docs]).removed == 4
    reopened.close()


def test_a_crash_mid_run_resumes_where_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = many(tmp_path, 10)
    db = tmp_path / "k.sqlite3"
    ix = KnowledgeIndex(db)
    Reads(monkeypatch, fail_after=4)
    with pytest.raises(Crash):
        ix.sync([folder])
    ix.close()
    reopened = KnowledgeIndex(db)
    assert reopened.counts() == (4, 4)  # the four read before the crash are there, whole
    reads = Reads(monkeypatch)
    report = reopened.sync([folder])
    assert reads.paths == [str(folder / f"f{n:02d}.txt") for n in range(4, 10)]
    assert (report.added, report.unchanged, report.files) == (6, 4, 10)
    reopened.close()


def test_cancel_keeps_what_was_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = many(tmp_path, 10, says="")
    control = IndexControl()
    real = read_module.extract_text
    count = 0

    def cancelling(path: Path, *args: object, **kwargs: object) -> object:
        nonlocal count
        count += 1
        if count == 3:
            control.cancel()  # the person pressed Stop while the third file was being read
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(read_module, "extract_text", cancelling)
    ix = KnowledgeIndex(tmp_path / "k.sqlite3")
    report = ix.sync([folder], control=control)
    # the two files read before are kept; the third, stopped half-read, is not recorded
    assert report.cancelled and report.files == 2 and report.added == 2
    assert ix.last_indexed_at() is None  # no finished sync yet
    assert ix.sync([folder]).added == 8
    ix.close()


def test_pause_blocks_until_resume_from_another_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = many(tmp_path, 6, says="")
    control = IndexControl()
    real = documents.extract_text
    read: list[str] = []
    paused_at = threading.Event()

    def pausing(path: Path, *args: object, **kwargs: object) -> object:
        read.append(str(path))
        if len(read) == 2:
            control.pause()  # the person pressed Pause while the second file was read
            paused_at.set()
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(read_module, "extract_text", pausing)
    progress: list[IndexProgress] = []
    outcome: list[object] = []

    def worker() -> None:
        ix = KnowledgeIndex(tmp_path / "k.sqlite3")
        outcome.append(ix.sync([folder], control=control, progress=progress.append))
        ix.close()

    thread = threading.Thread(target=worker)
    thread.start()
    assert paused_at.wait(5)
    time.sleep(0.3)
    assert control.paused and len(read) == 2 and thread.is_alive()
    control.resume()
    thread.join(5)
    assert not thread.is_alive()
    report = outcome[0]
    assert report.added == 6 and not report.cancelled  # type: ignore[attr-defined]
    last = progress[-1]
    assert (last.files_done, last.files_total, last.current) == (6, 6, None)
    assert last.chunks == 6 and last.eta_s == 0.0


def test_cancel_wakes_a_paused_sync(tmp_path: Path, docs: Path) -> None:
    control = IndexControl()
    control.pause()
    outcome: list[object] = []
    ix = KnowledgeIndex(tmp_path / "k.sqlite3")
    thread = threading.Thread(target=lambda: outcome.append(ix.sync([docs], control=control)))
    thread.start()
    time.sleep(0.2)
    assert thread.is_alive()
    control.cancel()
    thread.join(5)
    assert outcome[0].cancelled and outcome[0].files == 0  # type: ignore[attr-defined]
    ix.close()


def test_progress_is_throttled_and_ends_once(tmp_path: Path) -> None:
    folder = tmp_path / "many"
    for n in range(50):
        write(folder / f"f{n:02d}.txt", f"file number {n}\n" * 20)
    calls: list[IndexProgress] = []
    ix = KnowledgeIndex(tmp_path / "k.sqlite3")
    ix.sync([folder], progress=calls.append)
    assert 2 <= len(calls) < 20
    assert calls[0].files_total == 50 and calls[-1].files_done == 50
    ix.close()


def test_a_reader_and_the_indexer_share_the_file(docs: Path, tmp_path: Path) -> None:
    db = tmp_path / "k.sqlite3"
    writer = KnowledgeIndex(db)
    reader = KnowledgeIndex(db)
    writer.sync([docs])
    assert reader.search("quokka")[0].chunk.path.endswith("setup.md")
    writer.close()
    reader.close()
