"""The Models page on real services: real files, the real llama.cpp build and worker."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QApplication, QMessageBox

from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
from desktop.local.catalog import read_model_info
from desktop.local.context_size import automatic_n_ctx
from desktop.local.gpu import Device, GpuSupport
from desktop.local.loading import LoadParams
from desktop.local.memory import estimate, format_bytes
from desktop.local.provider import LocalProvider
from desktop.store.agents import Agent
from desktop.ui.kit import widgets
from desktop.ui.models.page import COLUMNS, ModelsPage
from tests.helpers import gguf_files
from tests.ui.conftest import STARTER

GiB = 1024**3
WAIT_MS = 20_000  # a guard against hanging, not a timing assertion


@pytest.fixture
def page(services, qtbot, qloop):
    widget = ModelsPage(services)
    qtbot.addWidget(widget)
    with qtbot.waitSignal(widget.refreshed, timeout=WAIT_MS):
        widget.refresh()
    yield widget
    widget.deleteLater()


def _rescan(page: ModelsPage, qtbot: Any) -> None:
    with qtbot.waitSignal(page.refreshed, timeout=WAIT_MS):
        page.refresh()


def _linked(page: ModelsPage, qtbot: Any, folder: Path) -> None:
    with qtbot.waitSignal(page.refreshed, timeout=WAIT_MS):
        assert page.add_folder(folder)


def test_library_rows_show_header_facts_and_errors(page, qtbot, tmp_path: Path) -> None:
    starter = page.row_of(gguf_files.starter())
    assert starter == 0
    assert page.cell_text(0, "Quantization") == "Q4_1"
    assert page.cell_text(0, "Context") == "8,192"
    assert page.cell_text(0, "State") == "Not loaded"
    # the other facts are in the details panel of the selected row
    page.select(gguf_files.starter())
    details = page.details.text()
    for fact in ("Architecture: llama", "Layers: 30", "Heads (KV): 9 (3)", "Trained context"):
        assert fact in details
    assert page.cell_text(0, "Architecture") == "llama"
    assert "CPU" in page.backend_label.text() or "GPU" in page.backend_label.text()

    folder = tmp_path / "linked"
    folder.mkdir()
    plain = gguf_files.rewrite_starter(folder / "plain.gguf", drop_kv=("tokenizer.chat_template",))
    broken = gguf_files.truncated_tensor_data(folder / "broken.gguf")
    _linked(page, qtbot, folder)
    assert page.table.rowCount() == 3
    assert page.cell_text(page.row_of(plain), "Chat template") == "no: using ChatML"
    row = page.row_of(broken)
    assert "tensor data is truncated" in page.row_error(row)
    assert page.table.columnSpan(row, 1) == len(COLUMNS) - 1  # readable across the row
    assert str(broken) in page.table.item(row, 0).toolTip()
    assert page.cell_text(row, "Size") == "" and page.row_error(0) == ""

    # Remove folder: select it in the list, press the button.
    items = [page.folder_list.item(i) for i in range(page.folder_list.count())]
    [linked] = [i for i in items if i.text() == str(folder.resolve())]
    page.folder_list.setCurrentItem(linked)
    assert page.remove_button.isEnabled()
    with qtbot.waitSignal(page.refreshed, timeout=WAIT_MS):
        page.remove_button.click()
    assert page.table.rowCount() == 1 and plain.exists()
    # The built-in folder cannot be removed.
    page.folder_list.setCurrentRow(0)
    assert not page.remove_button.isEnabled()


def test_the_backend_line_gives_each_gpu_its_memory(page, qtbot) -> None:
    """The build's devices as ``detect()`` lists them (figures stand in for a GPU machine):
    a real GPU with its memory, a software one named so, without memory."""
    h200 = Device("Vulkan0", "NVIDIA H200", "GPU", 139 * GiB, 138 * GiB)
    lavapipe = Device("Vulkan1", "llvmpipe (LLVM 15.0.6, 256 bits)", "GPU", 16 * GiB, 12 * GiB)
    cpu = Device("CPU", "AMD EPYC 9654 96-Core Processor", "CPU", 64 * GiB, 60 * GiB)
    page.gpu_probe = lambda: GpuSupport(True, True, "Vulkan", "0.3.36", (h200, lavapipe, cpu))
    _rescan(page, qtbot)
    text = page.backend_label.text()
    assert "GPU offload on Vulkan0 · NVIDIA H200 (139 GiB, 138 GiB free)" in text
    assert text.endswith("Vulkan1 · llvmpipe (software).")
    page.gpu_probe = lambda: GpuSupport(True, False, "CPU", "0.3.36", (cpu,))
    _rescan(page, qtbot)
    assert "CPU only" in page.backend_label.text()


def test_bad_folder_is_refused_with_a_message(page, tmp_path: Path) -> None:
    assert not page.add_folder(tmp_path / "nowhere")
    assert "does not exist" in page.message.text()


def test_used_by_names_the_agents_of_each_file(page, services, qtbot, tmp_path: Path) -> None:
    assert page.cell_text(0, "Used by") == STARTER
    folder = tmp_path / "linked"
    folder.mkdir()
    copy = gguf_files.copy_starter(folder / "copy.gguf")
    services.agents.create(Agent(name="Copy reader", kind="local", model_path=str(copy)))
    services.agents.create(Agent(name="Copy writer", kind="local", model_path=str(copy)))
    _linked(page, qtbot, folder)
    assert page.cell_text(page.row_of(copy), "Used by") == "Copy reader, Copy writer"
    assert page.cell_text(0, "Used by") == STARTER


def test_disk_use_per_folder_and_in_total_is_the_files_sizes(
    page, qtbot, tmp_path: Path, services
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
    a = gguf_files.copy_starter(first / "a.gguf")
    b = gguf_files.copy_starter(second / "b.gguf")
    c = gguf_files.rewrite_starter(second / "c.gguf", drop_kv=("tokenizer.chat_template",))
    _linked(page, qtbot, first)
    _linked(page, qtbot, second)
    sizes = dict(page.disk.folders)
    assert sizes["Models folder"] == 0
    assert sizes[str(first.resolve())] == a.stat().st_size
    assert sizes[str(second.resolve())] == b.stat().st_size + c.stat().st_size
    total = a.stat().st_size + b.stat().st_size + c.stat().st_size
    assert page.disk.total == total
    assert f"Total {format_bytes(total)}" in page.disk_label.text()
    assert "Models folder 0 B" in page.disk_label.text()


def test_a_split_model_is_one_row_whose_size_counts_every_part(page, qtbot, tmp_path: Path) -> None:
    folder = tmp_path / "split"
    folder.mkdir()
    first = gguf_files.copy_starter(folder / "big-Q4_1-00001-of-00002.gguf")
    second = folder / "big-Q4_1-00002-of-00002.gguf"
    second.write_bytes(b"\0" * 3 * 1024**2)
    _linked(page, qtbot, folder)
    assert page.row_of(second) == -1 and page.row_of(first) > 0
    both = first.stat().st_size + second.stat().st_size
    assert page.cell_text(page.row_of(first), "Size") == format_bytes(both)
    assert dict(page.disk.folders)[str(folder.resolve())] == both


def test_a_finished_download_shows_in_the_library_selected(page, services, qtbot) -> None:
    """The Find models tab's ``downloaded`` signal (what HubView emits once a file is
    verified) brings the person back to the library with the new file selected."""
    target = services.paths.models_dir / "someone" / "tiny-GGUF" / "tiny-Q4_1.gguf"
    target.parent.mkdir(parents=True)
    gguf_files.copy_starter(target)
    page.setCurrentIndex(1)
    assert page.tabText(1) == "Find models"
    with qtbot.waitSignal(page.refreshed, timeout=WAIT_MS):
        page.hub_view.downloaded.emit(str(target))
    assert page.currentIndex() == 0 and page.tabText(0) == "On this computer"
    assert page.selected_entry() is not None and page.selected_entry().path == str(target)
    assert "tiny-Q4_1.gguf" in page.details.text()


def test_the_context_menu_offers_the_same_actions(page) -> None:
    page.select(gguf_files.starter())
    menu = page.model_actions.menu(page)
    texts = [(a.text(), a.isEnabled()) for a in menu.actions()]
    assert texts == [
        ("New agent from this model", True),
        ("Load", True),
        ("Unload", False),
        ("Open folder", True),
        ("Delete…", False),
    ]
    menu.deleteLater()


def test_new_agent_from_the_starter_fills_the_editor_to_fit(page, services, qtbot) -> None:
    info = read_model_info(gguf_files.starter())
    page.select(gguf_files.starter())
    # what the machine has stands in for the probes: plenty of RAM, a GPU with room
    page.model_actions._ram = lambda: 16 * GiB
    page.model_actions._gpu = lambda: (True, 8 * GiB)
    page.model_actions.new_agent_button.click()
    qtbot.waitUntil(lambda: page.model_actions.editor is not None, timeout=WAIT_MS)
    dialog = page.model_actions.editor
    assert dialog.current_kind == "local"
    assert dialog.model_path.text() == str(gguf_files.starter())
    assert dialog.n_ctx.text() == str(automatic_n_ctx(info, 16 * GiB)) == "8192"
    assert dialog.n_gpu_layers.text() == "-1"  # everything fits the free GPU memory
    assert "SmolLM2" in dialog.name.text() and "Q4_1" in dialog.name.text()

    with qtbot.waitSignal(page.agent_created, timeout=WAIT_MS) as created:
        dialog.save()
    agent = created.args[0]
    assert agent.model_path == str(gguf_files.starter()) and agent.n_ctx == 8192
    assert services.agents.by_name(agent.name) is not None
    _rescan(page, qtbot)
    assert agent.name in page.cell_text(0, "Used by")
    assert "Created the agent" in page.message.text()

    # little RAM and a GPU without room: a smaller context, no layers offloaded, a new name
    page.model_actions.editor = None
    page.model_actions._ram = lambda: 200 * 1024**2
    page.model_actions._gpu = lambda: (True, 1024**2)
    page.model_actions.new_agent_button.click()
    qtbot.waitUntil(lambda: page.model_actions.editor is not None, timeout=WAIT_MS)
    second = page.model_actions.editor
    assert second.n_ctx.text() == str(automatic_n_ctx(info, 200 * 1024**2))
    assert int(second.n_ctx.text()) < 8192
    assert second.n_gpu_layers.text() == "0"
    assert second.name.text() != agent.name
    second.reject()


def test_an_agent_made_on_the_models_page_shows_in_the_sidebar(
    services, make_window, qtbot
) -> None:
    window = make_window(services)
    page = window.models_page
    with qtbot.waitSignal(page.refreshed, timeout=WAIT_MS):
        window.show_page("models")
    page.select(gguf_files.starter())
    page.model_actions.new_agent_button.click()
    qtbot.waitUntil(lambda: page.model_actions.editor is not None, timeout=WAIT_MS)
    dialog = page.model_actions.editor
    dialog.name.setText("Starter, from the library")
    with qtbot.waitSignal(page.agent_created, timeout=WAIT_MS):
        dialog.save()
    assert "Starter, from the library" in [a.name for a in window.agents.agents]
    qtbot.waitUntil(
        lambda: "Starter, from the library" in page.cell_text(0, "Used by"), timeout=WAIT_MS
    )


def test_open_folder_opens_the_files_folder(page, monkeypatch, tmp_path, qtbot) -> None:
    opened: list[QUrl] = []
    monkeypatch.setattr(QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    page.select(gguf_files.starter())
    page.model_actions.open_button.click()
    assert [u.toLocalFile() for u in opened] == [str(gguf_files.starter().parent)]


def test_delete_is_never_offered_for_the_starter_or_a_linked_file(
    page, qtbot, tmp_path: Path
) -> None:
    folder = tmp_path / "linked"
    folder.mkdir()
    linked = gguf_files.copy_starter(folder / "mine.gguf")
    _linked(page, qtbot, folder)
    for path in (gguf_files.starter(), linked):
        assert page.select(path)
        assert not page.model_actions.delete_button.isEnabled()
        assert "downloaded" in page.model_actions.delete_button.toolTip()
        assert page.model_actions.delete() is None  # nothing asked, nothing removed
    assert linked.exists() and gguf_files.starter().exists()


def test_a_downloaded_file_is_deleted_after_confirming(page, services, qtbot, monkeypatch) -> None:
    """The manifest is the real one the downloader keeps; ``widgets.ask`` (the plain-text
    question box) stands in for the person answering the confirmation."""
    from desktop.hub.client import RepoFile

    target = services.paths.models_dir / "someone" / "tiny-GGUF" / "tiny-Q4_1.gguf"
    target.parent.mkdir(parents=True)
    gguf_files.copy_starter(target)
    size = target.stat().st_size
    manifest = services.hub.downloads.manifest
    manifest.record(target, "someone/tiny-GGUF", RepoFile("tiny-Q4_1.gguf", size, None), "main")
    services.agents.create(Agent(name="Tiny talker", kind="local", model_path=str(target)))
    _rescan(page, qtbot)
    assert page.select(target)
    assert page.model_actions.delete_button.isEnabled()
    asked: list[str] = []
    answer = [QMessageBox.StandardButton.Cancel]

    def question(_parent, _title, text, *_args):
        asked.append(text)
        return answer[0]

    monkeypatch.setattr(widgets, "ask", question)
    page.model_actions.delete_button.click()  # Cancel: nothing happens
    assert target.exists() and page.row_of(target) >= 0
    assert "tiny-Q4_1.gguf" in asked[0] and format_bytes(size) in asked[0]
    assert "Tiny talker" in asked[0]

    answer[0] = QMessageBox.StandardButton.Yes
    with qtbot.waitSignal(page.refreshed, timeout=WAIT_MS):
        page.model_actions.delete_button.click()
    assert not target.exists() and not manifest.is_downloaded(target)
    assert page.row_of(target) == -1
    assert "Deleted tiny-Q4_1.gguf" in page.message.text()
    assert dict(page.disk.folders)["Models folder"] == 0


def test_columns_fit_at_1180_px_and_elide_beyond(services, make_window, qtbot, tmp_path) -> None:
    folder = tmp_path / "linked"
    folder.mkdir()
    long_name = "Qwen2.5-Coder-32B-Instruct-abliterated-uncensored-imatrix-Q4_K_M.gguf"
    long_file = gguf_files.copy_starter(folder / long_name)
    for i in range(3):
        services.agents.create(
            Agent(name=f"Coding helper {i + 1}", kind="local", model_path=str(long_file))
        )
    window = make_window(services)
    page = window.models_page
    with qtbot.waitSignal(page.refreshed, timeout=WAIT_MS):
        window.show_page("models")
    _linked(page, qtbot, folder)
    window.resize(1180, 800)
    _settle()
    assert window.width() == 1180
    page.select(long_file)
    _shoot(window, "models-page-1180x800")
    table = page.table
    header = table.horizontalHeader()
    row = page.row_of(long_file)
    assert sum(header.sectionSize(c) for c in range(len(COLUMNS))) <= table.viewport().width()
    for col, name in enumerate(COLUMNS):
        # the style's size for the whole title (its margins, a sort arrow's room)
        assert header.sectionSize(col) >= header.sectionSizeHint(col), f"{name!r} is cut"
        for r in range(table.rowCount()):
            item = table.item(r, col)
            if item is None or not item.text():
                continue
            text_width = table.fontMetrics().horizontalAdvance(item.text())
            fits = text_width + 6 <= header.sectionSize(col)  # 6: the cell's text margins
            if name == "Model":  # a long file name elides in the middle; the tooltip has it
                assert fits or str(long_file) in item.toolTip() or r != row
            elif name == "Used by":
                assert fits or item.toolTip() == item.text()
            else:
                assert fits, f"{name!r} of row {r} is cut: {item.text()!r}"
    # a larger text size restyles the header: the columns are fitted again
    from desktop.ui.kit import theme

    app = QApplication.instance()
    theme.install(app, text_scale=1.3)
    try:
        _settle()
        for col, name in enumerate(COLUMNS):
            assert header.sectionSize(col) >= header.sectionSizeHint(col), f"{name!r} is cut"
    finally:
        theme.install(app, text_scale=1.0)
        _settle()

    # narrower than that (the smallest window): the columns the details panel repeats give
    # way first, the file name elides in the middle, with the whole path in its tooltip
    window.resize(720, 480)
    _settle()
    shown = [c for i, c in enumerate(COLUMNS) if not table.isColumnHidden(i)]
    assert {"Model", "Quantization", "State"} <= set(shown)
    assert set(COLUMNS) - set(shown) <= {"Context", "Used by", "Size"}
    widths = [header.sectionSize(COLUMNS.index(c)) for c in shown]
    assert sum(widths) <= table.viewport().width()
    item = table.item(row, 0)
    assert table.fontMetrics().horizontalAdvance(item.text()) > header.sectionSize(0)
    assert str(long_file) in item.toolTip()
    page.select(long_file)
    _shoot(window, "models-page-720x480")
    for fact in ("Size: ", "Used by: Coding helper 1, Coding helper 2, Coding helper 3"):
        assert fact in page.details.text()


def test_header_titles_are_whole_when_the_page_is_first_shown(page, qtbot) -> None:
    """The columns were fitted before the page was styled (scanned while hidden): showing it
    fits them again to the styled header."""
    page.resize(900, 640)
    page.show()
    qtbot.waitExposed(page)
    _settle()
    header = page.table.horizontalHeader()
    for col, name in enumerate(COLUMNS):
        assert header.sectionSize(col) >= header.sectionSizeHint(col), f"{name!r} is cut"


def _shoot(widget: Any, name: str) -> None:
    """With SIMI_SCREENSHOT_DIR set, save ``widget`` light and dark (then light again)."""
    folder = os.environ.get("SIMI_SCREENSHOT_DIR")
    if not folder:
        return
    from desktop.ui.kit import theme

    app = QApplication.instance()
    Path(folder).mkdir(parents=True, exist_ok=True)
    for tone, dark in (("light", False), ("dark", True)):
        theme.install(app, dark=dark)
        _settle()
        assert widget.grab().save(str(Path(folder) / f"{name}-{tone}.png"))
    theme.install(app, dark=False)
    _settle()


def _settle() -> None:
    for _ in range(4):
        QApplication.processEvents()


@pytest.mark.slow
def test_loaded_model_state_follows_the_worker(page, services, qtbot, qloop) -> None:
    assert "No model loaded" in page.state_label.text()
    params = LoadParams(str(gguf_files.starter()), n_ctx=256)
    provider = LocalProvider(services.local, params)
    request = ChatRequest("m", (ChatMessage("user", "Hi"),), Sampling(max_tokens=2, seed=1))
    seen: list[str] = []
    page.model_state_changed.connect(lambda state, _d: seen.append(state))

    async def run() -> None:
        async for _event in provider.stream(request):
            pass

    task = asyncio.ensure_future(run())
    qtbot.waitUntil(task.done, timeout=60_000)
    task.result()
    qtbot.waitUntil(lambda: "Ready" in page.state_label.text(), timeout=10_000)
    assert "loading" in seen and "busy" in seen
    assert gguf_files.starter().name in page.state_label.text()
    assert page.cell_text(0, "State") == "Loaded"


@pytest.mark.slow
def test_load_then_unload_the_starter_from_the_page(page, services, qtbot) -> None:
    """Load uses the starter agent's own load parameters; Unload frees the worker."""
    starter = services.agents.by_name(STARTER)
    services.agents.update(starter.with_changes(n_ctx=512))
    page.select(gguf_files.starter())
    actions = page.model_actions
    assert actions.load_button.isEnabled() and not actions.unload_button.isEnabled()
    seen: list[str] = []
    page.model_state_changed.connect(lambda state, _d: seen.append(state))
    page.model_actions.load_button.click()
    qtbot.waitUntil(lambda: page.cell_text(0, "State") == "Loaded", timeout=60_000)
    qtbot.waitUntil(lambda: page.model_actions.unload_button.isEnabled(), timeout=WAIT_MS)
    assert "loading" in seen
    loaded = services.local.loaded_params
    assert loaded is not None and loaded.model_path == str(gguf_files.starter())
    assert loaded.n_ctx == 512  # the agent's context, not a default
    assert f"with {STARTER}'s settings" in page.message.text()
    assert not page.model_actions.load_button.isEnabled()
    # where it runs, as llama.cpp itself reported the load (the worker sends it to the app):
    # on this CPU build every layer is on the CPU, and the buffers are the CPU's
    qtbot.waitUntil(lambda: "Where it runs" in page.details.text(), timeout=WAIT_MS)
    details = page.details.text()
    assert "Where it runs: 0/31 layers on GPU · CPU" in details.splitlines()
    assert page.cell_text(0, "Where it runs") == "0/31 layers on GPU · CPU"
    buffers = page.cell_text(0, "Buffers")
    assert buffers.startswith("CPU: weights ") and f"Buffers: {buffers}" in details
    info = read_model_info(gguf_files.starter())
    assert f"KV cache {format_bytes(estimate(info, 512).kv_cache)}" in buffers  # 512 tokens
    assert "compute " in buffers and ";" not in buffers  # one device: the CPU
    report = services.local.placement_of(str(gguf_files.starter()))
    assert report is not None and report.placement.offloaded_text == "0/31"
    page.resize(900, 640)
    page.show()
    _shoot(page, "models-page-loaded")

    page.model_actions.unload_button.click()
    # the message comes when the unload returns, the state from the worker's thread
    qtbot.waitUntil(
        lambda: (
            "memory is free" in page.message.text() and page.cell_text(0, "State") == "Not loaded"
        ),
        timeout=WAIT_MS,
    )
    assert services.local.state == "unloaded" and services.local.loaded_params is None
    assert "No model loaded" in page.state_label.text()
    assert "Where it runs" not in page.details.text() and "Buffers" not in page.details.text()
    assert services.local.placement_of(str(gguf_files.starter())) is None
    assert "Architecture: llama" in page.details.text()  # the file's facts stay
    assert actions.load_button.isEnabled() and not actions.unload_button.isEnabled()
