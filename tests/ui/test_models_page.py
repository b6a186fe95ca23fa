"""The Models page on real services: real files, the real llama.cpp build and worker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
from desktop.local.loading import LoadParams
from desktop.local.provider import LocalProvider
from desktop.ui.models_page import COLUMNS, ModelsPage
from tests.helpers import gguf_files


@pytest.fixture
def page(services, qtbot, qloop):
    widget = ModelsPage(services)
    qtbot.addWidget(widget)
    with qtbot.waitSignal(widget.refreshed, timeout=20_000):
        widget.refresh()
    yield widget
    widget.deleteLater()


def test_library_rows_show_header_facts_and_errors(page, qtbot, tmp_path: Path) -> None:
    starter = page.row_of(gguf_files.starter())
    assert starter == 0
    assert page.cell_text(0, "Architecture") == "llama"
    assert page.cell_text(0, "Quantization") == "Q4_1"
    assert page.cell_text(0, "Layers") == "30" and page.cell_text(0, "Heads (KV)") == "9 (3)"
    assert page.cell_text(0, "Trained context") == "8,192"
    assert "CPU" in page.backend_label.text() or "GPU" in page.backend_label.text()

    folder = tmp_path / "linked"
    folder.mkdir()
    plain = gguf_files.rewrite_starter(folder / "plain.gguf", drop_kv=("tokenizer.chat_template",))
    broken = gguf_files.truncated_tensor_data(folder / "broken.gguf")
    with qtbot.waitSignal(page.refreshed, timeout=20_000):
        assert page.add_folder(folder)
    assert page.table.rowCount() == 3
    assert page.cell_text(page.row_of(plain), "Chat template") == "no: using ChatML"
    row = page.row_of(broken)
    assert "tensor data is truncated" in page.row_error(row)
    assert page.table.columnSpan(row, 1) == len(COLUMNS) - 1  # readable across the row
    assert str(broken) in page.table.item(row, 0).toolTip()
    assert page.cell_text(row, "Layers") == "" and page.row_error(0) == ""

    # Remove folder: select it in the list, press the button.
    items = [page.folder_list.item(i) for i in range(page.folder_list.count())]
    [linked] = [i for i in items if i.text() == str(folder.resolve())]
    page.folder_list.setCurrentItem(linked)
    assert page.remove_button.isEnabled()
    with qtbot.waitSignal(page.refreshed, timeout=20_000):
        page.remove_button.click()
    assert page.table.rowCount() == 1 and plain.exists()
    # The built-in folder cannot be removed.
    page.folder_list.setCurrentRow(0)
    assert not page.remove_button.isEnabled()


def test_bad_folder_is_refused_with_a_message(page, tmp_path: Path) -> None:
    assert not page.add_folder(tmp_path / "nowhere")
    assert "does not exist" in page.message.text()


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
    assert len(COLUMNS) == page.table.columnCount()
