"""Vision models on the Models page: the hub's list marks a model whose repository has a
projector "Sees images" (the projector is not a row of its own), and a library model with its
projector beside it says so and becomes an agent that sees images. Real widgets offscreen;
the library is real files in tmp_path (the projector a header only: nothing is loaded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from desktop.hub.client import RepoFile
from desktop.hub.files import group_gguf
from desktop.ui.models.hub_tables import BADGE_ROLE, ModelTable
from desktop.ui.models.page import ModelsPage
from tests.helpers import gguf_files
from tests.local.vision_files import fake_projector

WAIT_MS = 20_000  # a guard against hanging, not a timing assertion
MB = 1_000_000


def test_the_hub_list_marks_models_that_see_images(qtbot: Any, qloop: Any) -> None:
    files = [
        RepoFile("SmolVLM-256M-Instruct-Q8_0.gguf", 175 * MB, "a" * 64),
        RepoFile("mmproj-SmolVLM-256M-Instruct-f16.gguf", 190 * MB, "b" * 64),
        RepoFile("mmproj-SmolVLM-256M-Instruct-Q8_0.gguf", 104 * MB, "c" * 64),
    ]
    table = ModelTable(lambda _model: None)
    qtbot.addWidget(table)
    text_only = group_gguf([RepoFile("Text-Q4_0.gguf", 80 * MB, "d" * 64)])
    table.show_models(group_gguf(files) + text_only)
    assert table.rowCount() == 2  # the projectors are not models
    seeing, plain = table.item(0, 0), table.item(1, 0)
    assert (seeing.text(), plain.text()) == ("SmolVLM-256M-Instruct-Q8_0", "Text-Q4_0")
    assert seeing.data(BADGE_ROLE) == "Sees images" and plain.data(BADGE_ROLE) is None
    assert "mmproj-SmolVLM-256M-Instruct-f16.gguf (190 MB) downloads with it" in seeing.toolTip()
    size = table.item(seeing.row(), 2)
    assert size.toolTip() == f"{175 * MB:,} bytes, and {190 * MB:,} bytes of vision projector"


@pytest.fixture
def page(services: Any, qtbot: Any, qloop: Any) -> Any:
    widget = ModelsPage(services)
    qtbot.addWidget(widget)
    yield widget
    widget.deleteLater()


def test_a_library_model_with_its_projector_becomes_an_agent_that_sees(
    page: Any, services: Any, qtbot: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "vlm"
    folder.mkdir()
    model = folder / "SmolVLM-256M-Instruct-Q8_0.gguf"
    model.symlink_to(gguf_files.starter())  # the starter under a vision model's name
    projector = fake_projector(folder / "mmproj-SmolVLM-256M-Instruct-f16.gguf")
    with qtbot.waitSignal(page.refreshed, timeout=WAIT_MS):
        assert page.add_folder(folder)
    assert page.row_of(model) >= 0 and page.row_of(projector) == -1  # no row of its own
    page.select(model)
    assert "Images: sees them, with the vision projector " + projector.name in (page.details.text())
    page.model_actions._ram = lambda: 8 * 1024**3
    page.model_actions._gpu = lambda: (False, None)
    page.model_actions.new_agent_button.click()
    qtbot.waitUntil(lambda: page.model_actions.editor is not None, timeout=WAIT_MS)
    dialog = page.model_actions.editor
    assert dialog.mmproj_path.text() == str(projector)
    qtbot.waitUntil(
        lambda: dialog.local_section.projector.status.text().startswith("Sees images"),
        timeout=WAIT_MS,
    )
    with qtbot.waitSignal(page.agent_created, timeout=WAIT_MS) as created:
        dialog.save()
    assert created.args[0].mmproj_path == str(projector)
