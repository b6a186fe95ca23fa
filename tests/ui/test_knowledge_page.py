"""The Knowledge page and the watch, on real services and real folders: a collection made from
a folder and indexed (progress to the end, its counts, a binary file skipped with its reason),
pause then cancel, a search that finds a rare word, errors by their fields and in words, the
watch that indexes again after a file is added, and a picture of the page."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QScrollArea

from desktop.ui.kit.widgets import SUBTITLE_ROLE
from desktop.ui.knowledge import words
from desktop.ui.knowledge.page import (
    CHANGED_PATHS,
    CHOOSE_MODEL,
    EMBEDDER_CHANGED,
    EMBEDDER_NOTE,
    KEYWORDS_FROM_NOW,
    KEYWORDS_ONLY,
    NO_LIBRARY_EMBEDDER,
    KnowledgePage,
)
from desktop.ui.knowledge.watch import KnowledgeWatch
from tests.helpers import gguf_files
from tests.helpers.shots import light_and_dark, save_grab, settle
from tests.helpers.widget_checks import cut_labels, overlaps, unnamed_controls

RARE = "zanzibarite"


def _folder(root: Path, files: int = 3) -> Path:
    """A folder of notes (one with a rare word), a subfolder and a binary file."""
    folder = root / "Project notes"
    (folder / "deeper").mkdir(parents=True)
    (folder / "a.txt").write_text(
        "Meeting notes\n\nThe " + RARE + " sample arrived on Tuesday.\nIt is rare.\n",
        encoding="utf-8",
    )
    (folder / "deeper" / "b.md").write_text("# Plans\n\nShip the index.\n", encoding="utf-8")
    for n in range(files - 2):
        (folder / f"note-{n}.txt").write_text(f"Note {n}: nothing special.\n", encoding="utf-8")
    (folder / "photo.bin").write_bytes(bytes(range(256)) * 40)
    return folder


def _many(root: Path, count: int) -> Path:
    folder = root / "Many"
    folder.mkdir()
    for n in range(count):
        (folder / f"file-{n:04d}.txt").write_text(f"Line one of {n}.\nLine two.\n", "utf-8")
    return folder


@pytest.fixture
def window(services: Any, make_window: Any) -> Any:
    return make_window(services, size=(1180, 780))


def _page(window: Any) -> KnowledgePage:
    window.show_page("knowledge")
    page = window.knowledge_page
    assert isinstance(page, KnowledgePage)
    return page


def _click(qtbot: Any, button: Any) -> None:
    assert button.isEnabled(), button.text()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def _create(qtbot: Any, page: KnowledgePage, folder: Path, name: str = "Project notes") -> Any:
    """New collection, Add folder…, a name, Create and index: the run's report."""
    _click(qtbot, page.new_button)
    assert page.creating and page.create_button.isVisible()
    page.ask_folder = lambda: str(folder)  # type: ignore[method-assign]
    _click(qtbot, page.add_folder_button)
    assert page.paths.count() == 1 and page.paths.item(0).text() == str(folder)
    assert page.name.text() == folder.name  # suggested from the folder
    page.name.setText(name)
    reports: list[Any] = []
    page.runs.finished.connect(lambda _cid, report: reports.append(report))
    with qtbot.waitSignals([page.saved, page.runs.finished], timeout=60_000):
        _click(qtbot, page.create_button)
    qtbot.waitUntil(lambda: not page.creating and page.selected is not None, timeout=10_000)
    assert page.index_group.isVisible() and page.search_group.isVisible()
    qtbot.waitUntil(lambda: page.progress.isHidden(), timeout=10_000)
    return reports[0]


def await_task(qtbot: Any, task: Any) -> None:
    qtbot.waitUntil(task.done, timeout=20_000)


def _wait_loaded(qtbot: Any, page: KnowledgePage) -> None:
    with qtbot.waitSignal(page.loaded, timeout=20_000):
        page.reload()


def test_a_folder_becomes_a_collection_indexed_with_its_counts_and_skipped_files(
    qtbot: Any, window: Any, services: Any, tmp_path: Path
) -> None:
    page = _page(window)
    qtbot.waitUntil(lambda: page.empty.isVisible(), timeout=10_000)  # no collections yet
    assert not page.index_group.isVisible()
    seen: list[Any] = []
    page.runs.progressed.connect(lambda _cid, p: seen.append(p))
    report = _create(qtbot, page, _folder(tmp_path, files=4))

    assert not report.cancelled and report.files == 4 and report.added == 4
    assert seen and seen[-1].files_done == seen[-1].files_total == 5  # the binary one too
    collection = services.knowledge.by_name("Project notes")
    assert collection is not None and page.selected_id == collection.id
    _wait_loaded(qtbot, page)
    item = page.list.item(0)
    subtitle = item.data(SUBTITLE_ROLE)
    assert item.text() == "Project notes" and subtitle.startswith("4 files · 4 passages · ")
    assert "indexed " in subtitle and subtitle.endswith(" · Project notes")  # its folder
    assert item.toolTip() == str(tmp_path / "Project notes")
    assert page.summary.text().startswith("Indexed in ")
    assert "4 added" in page.summary.text() and "1 file skipped" in page.summary.text()
    assert page.skipped.count() == 1
    skipped = page.skipped.item(0)
    assert skipped.text().startswith("Project notes/photo.bin — Not a text document")
    assert skipped.toolTip().startswith(str(tmp_path / "Project notes" / "photo.bin") + " — ")
    assert "Indexed “Project notes”: 4 files" in window.status_label.text()
    assert page.index_button.isEnabled() and not page.pause_button.isEnabled()


def test_the_try_search_box_finds_the_file_with_a_rare_word(
    qtbot: Any, window: Any, tmp_path: Path
) -> None:
    page = _page(window)
    _create(qtbot, page, _folder(tmp_path))
    page.query.setText(RARE)
    with qtbot.waitSignal(page.searched, timeout=20_000):
        _click(qtbot, page.search_button)
    assert page.results.isVisible() and page.results.count() >= 1, page.search_note.text()
    first = page.results.item(0).text()
    assert first.startswith("1. a.txt · lines 1–") and "score " in first
    assert RARE in first.splitlines()[1]
    assert page.search_note.text().startswith("1 passage in ")

    page.query.setText("xylophonequartz")
    with qtbot.waitSignal(page.searched, timeout=20_000):
        _click(qtbot, page.search_button)
    assert page.results.isHidden()
    assert page.search_note.text() == "Nothing in the collection matches."


def test_pause_then_cancel_keeps_the_page_steady_and_index_now_finishes(
    qtbot: Any, qapp: Any, window: Any, services: Any, tmp_path: Path, shot_dir: Path
) -> None:
    page = _page(window)
    made = services.knowledge.create("Many", [_many(tmp_path, 60)])
    _wait_loaded(qtbot, page)
    page.select(made.id)
    assert page.selected_id == made.id and page.summary.text().startswith("Not indexed yet")

    _click(qtbot, page.index_button)
    _click(qtbot, page.pause_button)  # before the first file: the run waits there
    assert page.pause_button.text() == "Resume" and page.runs.paused(made.id)
    assert not page.index_button.isEnabled() and page.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: made.id in page.runs.latest, timeout=20_000)
    qtbot.wait(300)
    assert page.runs.latest[made.id].files_done == 0  # paused: nothing read
    assert page.progress.isVisible() and page.progress_text.text().startswith("Paused. ")
    assert page.progress.maximum() == 60
    assert page.summary.isHidden()  # "not indexed yet" would contradict the run
    settle(qapp)
    assert overlaps(page) == [] and cut_labels(page) == []
    save_grab(window, shot_dir / "knowledge-page-paused.png", 10_000)

    with qtbot.waitSignal(page.runs.finished, timeout=20_000) as ended:
        _click(qtbot, page.cancel_button)
    report = ended.args[1]
    assert report.cancelled and report.files == 0
    qtbot.waitUntil(lambda: page.summary.text().startswith("Cancelled after"), timeout=10_000)
    assert "Index now goes on from there" in page.summary.text()
    assert page.progress.isHidden() and page.pause_button.text() == "Pause"
    assert "cancelled" in window.status_label.text()

    with qtbot.waitSignal(page.runs.finished, timeout=60_000) as ended:
        _click(qtbot, page.index_button)
    assert not ended.args[1].cancelled and ended.args[1].files == 60


def test_indexing_goes_on_when_another_page_is_shown(
    qtbot: Any, window: Any, services: Any, tmp_path: Path
) -> None:
    page = _page(window)
    made = services.knowledge.create("Many", [_many(tmp_path, 40)])
    _wait_loaded(qtbot, page)
    page.select(made.id)
    _click(qtbot, page.index_button)
    page.runs.pause(made.id)
    window.show_page("chat")
    assert page.runs.running(made.id)
    with qtbot.waitSignal(page.runs.finished, timeout=60_000) as ended:
        page.runs.resume(made.id)
    assert ended.args[1].files == 40 and window.current_page == "chat"
    window.show_page("knowledge")
    qtbot.waitUntil(
        lambda: (
            page.list.count() == 1 and page.list.item(0).data(SUBTITLE_ROLE).startswith("40 files")
        ),
        timeout=10_000,
    )


def test_errors_are_shown_by_their_fields_and_in_words(
    qtbot: Any, window: Any, services: Any, tmp_path: Path
) -> None:
    page = _page(window)
    _click(qtbot, page.new_button)
    page.name.setText("   ")
    with qtbot.waitSignal(page.saved, timeout=10_000) as outcome:
        _click(qtbot, page.create_button)
    assert outcome.args == [False]
    assert page.error_text("name") == "Give the collection a name."
    assert page.error_text("paths") == "Add at least one folder or file to the collection."
    assert services.knowledge.collections() == []

    _create(qtbot, page, _folder(tmp_path))
    # the last path cannot go
    page.paths.item(0).setSelected(True)
    with qtbot.waitSignal(page.saved, timeout=10_000) as outcome:
        _click(qtbot, page.remove_path_button)
    assert outcome.args == [False] and "at least one folder" in page.error_text("paths")
    assert page.paths.count() == 1  # the stored paths again

    # a taken name, under the name
    other = tmp_path / "other"
    other.mkdir()
    services.knowledge.create("Other", [other])
    page.name.setText("other")
    with qtbot.waitSignal(page.saved, timeout=10_000) as outcome:
        page.name.editingFinished.emit()
    assert outcome.args == [False] and "already a collection named" in page.error_text("name")

    # an embedding model: the collection is indexed again at once to compute the vectors; a
    # file that is no GGUF fails that run in words
    fake = tmp_path / "not-a-model.gguf"
    fake.write_text("not a model", encoding="utf-8")
    page.ask_model = lambda: str(fake)  # type: ignore[method-assign]
    failed: list[object] = []
    page.runs.failed.connect(lambda *args: failed.append(args))
    with qtbot.waitSignal(page.saved, timeout=10_000) as outcome:
        page.embedder.activated.emit(page.embedder.count() - 1)  # "Choose a GGUF file…"
    assert outcome.args == [True]
    assert page.embedder.currentText() == "not-a-model.gguf"
    assert page.embedder_note.text() == EMBEDDER_CHANGED
    qtbot.waitUntil(lambda: bool(failed), timeout=30_000)  # the run began without a click
    qtbot.waitUntil(lambda: page.index_error.isVisible(), timeout=10_000)
    assert page.index_error.text() and "Traceback" not in page.index_error.text()
    assert page.index_button.isEnabled()
    with qtbot.waitSignal(page.saved, timeout=10_000):
        page.embedder.activated.emit(0)  # keyword search only again
    assert page.embedder.currentText() == KEYWORDS_ONLY
    assert page.embedder_note.text() == KEYWORDS_FROM_NOW
    assert services.knowledge.by_name("Project notes").embedder is None


def test_files_and_paths_are_added_and_removed_and_remove_says_the_files_stay(
    qtbot: Any, window: Any, services: Any, tmp_path: Path
) -> None:
    page = _page(window)
    folder = _folder(tmp_path)
    _create(qtbot, page, folder)
    single = tmp_path / "single.txt"
    single.write_text("One more file about " + RARE + ".\n", encoding="utf-8")
    page.ask_files = lambda: [str(single)]  # type: ignore[method-assign]
    with qtbot.waitSignal(page.saved, timeout=10_000):
        _click(qtbot, page.add_files_button)
    assert [page.paths.item(i).text() for i in range(page.paths.count())] == [
        str(folder),
        str(single),
    ]
    assert page.summary.text().endswith(CHANGED_PATHS)
    page.paths.item(0).setSelected(True)
    with qtbot.waitSignal(page.saved, timeout=10_000):
        _click(qtbot, page.remove_path_button)
    assert services.knowledge.by_name("Project notes").paths == (str(single),)

    asked: list[str] = []
    page.confirm = lambda title, text: asked.append(text) or True  # type: ignore[method-assign]
    with qtbot.waitSignal(page.removed, timeout=10_000):
        _click(qtbot, page.remove_button)
    assert "files in its folders stay where they are" in asked[0]
    assert services.knowledge.collections() == []
    assert single.exists() and (folder / "a.txt").exists()
    qtbot.waitUntil(lambda: page.list.count() == 0 and page.empty.isVisible(), timeout=10_000)


def test_the_watch_indexes_again_after_a_file_is_added(
    qtbot: Any, qloop: Any, services: Any, tmp_path: Path
) -> None:
    knowledge = services.knowledge
    watch = KnowledgeWatch(knowledge, debounce_ms=50)
    try:
        # nothing to watch: no watcher, no timer
        with qtbot.waitSignal(watch.watching, timeout=10_000):
            watch.start()
        assert watch.watched_paths() == [] and not watch.resync_timer.isActive()

        folder = _folder(tmp_path)
        made = knowledge.create("Notes", [folder])
        assert knowledge.index(made).files == 3
        with qtbot.waitSignal(watch.watching, timeout=10_000):
            watch.refresh()
        # the root, and the folders of its indexed files (the subfolder)
        assert watch.watched_paths() == [str(folder), str(folder / "deeper")]
        assert watch.resync_timer.isActive() and watch.resync_timer.interval() == 5 * 60 * 1000

        # a file added in the subfolder: indexed at once, not only at the 5-minute re-sync
        (folder / "deeper" / "c.md").write_text("# More plans\n\nShip the watch.\n", "utf-8")
        with qtbot.waitSignal(watch.runs.finished, timeout=20_000) as ended:
            qtbot.waitUntil(lambda: made.id in watch.dirty or watch.runs.running(made.id))
        assert ended.args[1].added == 1 and ended.args[1].files == 4

        (folder / "added.txt").write_text("A new file.\n", encoding="utf-8")
        with qtbot.waitSignal(watch.runs.finished, timeout=20_000) as ended:
            # the folder's change (inotify), or at worst its tick, then the debounce
            qtbot.waitUntil(lambda: made.id in watch.dirty or watch.runs.running(made.id))
        report = ended.args[1]
        assert report.added == 1 and report.files == 5 and not report.cancelled

        # never two runs of one collection: a change during a run waits for its end
        watch.runs.start(made)
        watch.runs.pause(made.id)
        watch.path_changed(str(folder))
        assert watch.tick() == [] and made.id in watch.dirty
        with qtbot.waitSignal(watch.runs.finished, timeout=20_000):
            watch.runs.resume(made.id)
        with qtbot.waitSignal(watch.runs.finished, timeout=20_000) as again:
            pass  # the debounce restarted when the first run ended
        assert again.args[1].unchanged == 5 and made.id not in watch.dirty

        # the quiet re-sync indexes every indexed collection
        with qtbot.waitSignal(watch.runs.finished, timeout=20_000):
            watch.resync()

        # removed: no longer watched, and a run asked for before makes no index file
        knowledge.delete(made)
        assert not knowledge.index_path(made).exists()
        late = watch.runs.start(made)
        assert late is not None
        await_task(qtbot, late)
        assert not knowledge.index_path(made).exists() and made.id not in watch.runs.reports
        with qtbot.waitSignal(watch.watching, timeout=10_000):
            watch.refresh()
        assert watch.watched_paths() == [] and not watch.resync_timer.isActive()
    finally:
        watch.stop()
        watch.deleteLater()


def test_the_window_starts_the_watch_after_its_first_paint_work(
    qtbot: Any, window: Any, services: Any, tmp_path: Path
) -> None:
    folder = _folder(tmp_path)
    made = services.knowledge.create("Notes", [folder])
    services.knowledge.index(made)
    assert not window.page_built("knowledge")
    assert window._knowledge_watch is None  # nothing at start-up
    idle = window.build_pages_when_idle(quiet_ms=60_000)
    idle.stop()
    qtbot.waitUntil(lambda: str(folder) in window.knowledge_watch.watched_paths())
    assert not window.page_built("knowledge")

    # the watch's runs change the page's figures, not the status line
    page = _page(window)
    window.status_label.setText("")
    (folder / "new.txt").write_text("Another note.\n", encoding="utf-8")
    with qtbot.waitSignal(window.knowledge_watch.runs.finished, timeout=20_000):
        window.knowledge_watch.resync()
    qtbot.waitUntil(
        lambda: (
            page.list.count() == 1 and page.list.item(0).data(SUBTITLE_ROLE).startswith("4 files")
        )
    )
    assert window.status_label.text() == ""


def test_a_file_name_is_shown_as_typed(qtbot: Any, window: Any, tmp_path: Path) -> None:
    page = _page(window)
    folder = tmp_path / "odd"
    folder.mkdir()
    (folder / "<img src=x><b>bold &amp;.bin").write_bytes(bytes(range(256)))
    (folder / "fine.txt").write_text("Fine.\n", encoding="utf-8")
    _create(qtbot, page, folder, name="<i>Odd</i>")
    assert page.skipped.item(0).text().startswith("odd/<img src=x><b>bold &amp;.bin — ")
    qtbot.waitUntil(lambda: page.list.count() == 1)
    assert page.list.item(0).text() == "<i>Odd</i>"
    assert page.name.text() == "<i>Odd</i>"


def test_progress_and_reports_in_words() -> None:
    from desktop.knowledge import IndexProgress

    p = IndexProgress(12, 40, 230, 5.0, 45.2, 10.4, "/x/a.txt")
    assert words.progress_text(p) == (
        "12 of 40 files · 230 passages · 45 passages/s · about 10 s left"
    )
    assert words.seconds(0.2) == "under a second" and words.seconds(125) == "2 min 05 s"
    assert words.count(1, "file") == "1 file" and words.count(1204, "file") == "1,204 files"
    assert words.when(None) == "never"


def test_a_picture_of_the_page(
    qtbot: Any, qapp: Any, window: Any, services: Any, tmp_path: Path, shot_dir: Path
) -> None:
    page = _page(window)
    _create(qtbot, page, _folder(tmp_path, files=6))
    other = tmp_path / "Papers"
    other.mkdir()
    (other / "paper.txt").write_text("On " + RARE + " and other minerals.\n", "utf-8")
    services.knowledge.create("Papers", [other])
    _wait_loaded(qtbot, page)
    page.select(services.knowledge.by_name("Project notes").id)
    page.query.setText(RARE + " sample")
    with qtbot.waitSignal(page.searched, timeout=20_000):
        _click(qtbot, page.search_button)
    scroll = page.findChild(QScrollArea, "KnowledgeScroll").verticalScrollBar()
    for shade in light_and_dark(qapp):
        for where, value in (("top", scroll.minimum()), ("bottom", scroll.maximum())):
            scroll.setValue(value)
            settle(qapp)
            assert overlaps(page) == [], (shade, where)
            assert cut_labels(page) == [], (shade, where)
            assert unnamed_controls(page) == [], (shade, where)
            if where == "top" or scroll.maximum() > 0:
                save_grab(window, shot_dir / f"knowledge-page-{shade}-{where}.png", 10_000)


def test_the_page_and_the_watch_load_no_index_code_until_a_run() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import desktop.ui.knowledge.page, desktop.ui.knowledge.watch\n"
        "print(','.join(m for m in ('numpy', 'desktop.knowledge') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _tiny_gguf(path: Path, arch: str, **keys: Any) -> Path:
    """A GGUF file of a few hundred bytes the library lists: ``arch``'s header facts, one
    small tensor of non-zero data, and ``keys`` (``pooling_type=1``: ``{arch}.pooling_type``)."""
    meta: dict[str, Any] = {
        "general.architecture": arch,
        "general.name": path.stem,
        f"{arch}.block_count": 1,
        f"{arch}.context_length": 512,
        f"{arch}.embedding_length": 32,
        f"{arch}.attention.head_count": 1,
        **{f"{arch}.{key}": value for key, value in keys.items()},
    }
    kvs = b"".join(gguf_files._kv(key, value) for key, value in meta.items())
    tensor = gguf_files._string("token_embd.weight") + struct.pack("<IQQIQ", 2, 32, 4, 0, 0)
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, len(meta)) + kvs + tensor
    head += b"\x00" * (-len(head) % 32)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(head + struct.pack("<128f", *[0.5] * 128))
    return path


def _embedder_items(page: KnowledgePage) -> list[tuple[str, Any, Any]]:
    box = page.embedder
    return [
        (box.itemText(i), box.itemData(i), box.itemData(i, Qt.ItemDataRole.ToolTipRole))
        for i in range(box.count())
    ]


def _models_read(qtbot: Any, page: KnowledgePage) -> None:
    with qtbot.waitSignal(page.models_read, timeout=20_000):
        page.read_models()


def _grab_with_popup(window: Any, page: KnowledgePage, path: Path) -> None:
    """The window with the embedder's open list painted where it shows (a window of its own,
    which a grab of the main window leaves out)."""
    picture = window.grab()
    popup = page.embedder.view().window()
    assert popup.isVisible()
    # under the list's box: the offscreen screen is narrower than the window, and moves it in
    at = window.mapFromGlobal(popup.mapToGlobal(QPoint(0, 0)))
    at.setX(page.embedder.mapTo(window, QPoint(0, 0)).x())
    painter = QPainter(picture)
    painter.drawPixmap(at, popup.grab())
    painter.end()
    assert picture.save(str(path)), path
    assert path.stat().st_size > 10_000, f"{path} looks empty"


def test_the_embedder_list_offers_the_library_embedding_models_only(
    qtbot: Any, qapp: Any, window: Any, services: Any, tmp_path: Path, shot_dir: Path
) -> None:
    models = services.paths.models_dir
    # a decoder that names its pooling (as Qwen3-Embedding does): the starter, so it runs
    (models / "tiny-embed").mkdir(parents=True)
    decoder = gguf_files.rewrite_starter(
        models / "tiny-embed" / "tiny-embed.gguf", set_kv={"llama.pooling_type": 1}
    )
    encoder = _tiny_gguf(models / "someone" / "bge-small" / "bge-small-en-Q8_0.gguf", "bert")
    _tiny_gguf(models / "chat-1b-Q4_K_M.gguf", "llama")  # a chat model: not listed
    _tiny_gguf(models / "rerank-base-Q8_0.gguf", "bert", pooling_type=4)  # scores, no vectors
    (models / "notes.gguf").write_text("not a model", encoding="utf-8")  # the library's error
    page = _page(window)
    qtbot.waitUntil(lambda: page.library_embedders is not None, timeout=20_000)
    found = page.library_embedders
    assert found == services.knowledge.embedding_models(_library(services).entries())
    listed = {name: path for path, name in found or []}
    assert listed == {
        "bge-small-en-Q8_0.gguf": str(encoder.resolve()),
        "tiny-embed.gguf": str(decoder.resolve()),
    }
    names = [text for text, _data, _tip in _embedder_items(page)]
    assert names[0] == KEYWORDS_ONLY and names[-1] == CHOOSE_MODEL
    assert sorted(names[1:-1]) == sorted(listed)  # the starter (a chat model) is not listed
    for text, data, tip in _embedder_items(page)[1:-1]:
        assert data == tip == listed[text]  # the full path: data and tooltip
    assert page.embedder_note.text() == EMBEDDER_NOTE

    _create(qtbot, page, _folder(tmp_path))
    collection = services.knowledge.by_name("Project notes")
    assert collection.embedder is None and page.embedder.currentText() == KEYWORDS_ONLY
    _wait_loaded(qtbot, page)
    page.embedder.showPopup()
    settle(qapp)
    _grab_with_popup(window, page, shot_dir / "knowledge-page-embedders.png")
    page.embedder.hidePopup()

    # chosen from the list: saved at once, and the collection is indexed again for its vectors
    row = names.index("tiny-embed.gguf")
    started: list[int] = []
    page.runs.started.connect(started.append)
    reports: list[Any] = []
    page.runs.finished.connect(lambda _cid, report: reports.append(report))
    with qtbot.waitSignal(page.saved, timeout=10_000) as outcome:
        page.embedder.activated.emit(row)
    assert outcome.args == [True]
    assert services.knowledge.by_name("Project notes").embedder == str(decoder.resolve())
    assert page.embedder.currentText() == "tiny-embed.gguf"
    assert page.embedder.currentIndex() == row  # the library's row, not a second one
    assert page.embedder.count() == len(names)
    assert page.embedder_note.text() == EMBEDDER_CHANGED
    assert started == [collection.id]  # without a click
    qtbot.waitUntil(lambda: bool(reports), timeout=120_000)
    assert not reports[0].cancelled and reports[0].files == 3
    qtbot.waitUntil(lambda: page.embedder_note.text() == EMBEDDER_NOTE, timeout=10_000)

    # a new collection can start with one of them too
    _click(qtbot, page.new_button)
    assert page.embedder.currentText() == KEYWORDS_ONLY
    page.embedder.activated.emit(names.index("bge-small-en-Q8_0.gguf"))
    assert page.embedder.currentText() == "bge-small-en-Q8_0.gguf"
    assert page._new_embedder == str(encoder.resolve())
    _click(qtbot, page.cancel_new_button)


def test_with_no_embedding_model_in_the_library_the_note_says_where_to_find_one(
    qtbot: Any, window: Any, services: Any, tmp_path: Path
) -> None:
    _tiny_gguf(services.paths.models_dir / "chat-1b-Q4_K_M.gguf", "llama")
    page = _page(window)
    _create(qtbot, page, _folder(tmp_path))
    _models_read(qtbot, page)
    assert page.library_embedders == []
    assert [t for t, _d, _tip in _embedder_items(page)] == [KEYWORDS_ONLY, CHOOSE_MODEL]
    assert page.embedder_note.text() == NO_LIBRARY_EMBEDDER
    assert page.embedder_note.isVisible()

    # a chat model still works through Choose a GGUF file… (mean-pooled): not listed, chosen
    chat = gguf_files.starter()
    page.ask_model = lambda: str(chat)  # type: ignore[method-assign]
    reports: list[Any] = []
    page.runs.finished.connect(lambda _cid, report: reports.append(report))
    with qtbot.waitSignal(page.saved, timeout=10_000):
        page.embedder.activated.emit(page.embedder.count() - 1)
    assert page.embedder.currentText() == chat.name
    assert page.embedder.itemData(1, Qt.ItemDataRole.ToolTipRole) == str(chat.resolve())
    assert page.embedder_note.text() == EMBEDDER_CHANGED
    qtbot.waitUntil(lambda: bool(reports), timeout=120_000)
    # a model is chosen: the note says what one is for, not where to find one
    qtbot.waitUntil(lambda: page.embedder_note.text() == EMBEDDER_NOTE, timeout=10_000)

    # keyword search only again
    with qtbot.waitSignal(page.saved, timeout=10_000):
        page.embedder.activated.emit(0)
    assert page.embedder_note.text() == KEYWORDS_FROM_NOW


def _library(services: Any) -> Any:
    from desktop.chat.model_library import ModelLibrary

    return ModelLibrary.of(services)
