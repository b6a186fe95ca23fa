"""The agent editor's model field picks from the library (and still takes a typed path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from desktop.local.catalog import ModelCatalog
from desktop.ui.agents.editor import AgentEditorDialog
from desktop.ui.agents.local import attach_model_picker
from tests.helpers import gguf_files
from tests.ui.conftest import STARTER

WAIT_MS = 20_000  # a guard against hanging, not a timing assertion


def _editor(qtbot: Any, services: Any, agent: Any = None) -> AgentEditorDialog:
    dialog = AgentEditorDialog(services.agents, services.secrets, agent)
    qtbot.addWidget(dialog)
    return dialog


def _labels(dialog: AgentEditorDialog) -> list[str]:
    picker = dialog.local_section.model_picker
    return [picker.itemText(i) for i in range(picker.count())]


def test_the_picker_lists_the_library_and_choosing_sets_the_path(
    services: Any, qtbot: Any, qloop: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "linked"
    folder.mkdir()
    mine = gguf_files.copy_starter(folder / "Mine-7B-Q4_1.gguf")
    gguf_files.truncated_tensor_data(folder / "broken.gguf")  # unusable: not offered
    catalog = ModelCatalog(services.paths, services.prefs, cache=services.local.model_info)
    catalog.add_folder(folder)
    dialog = _editor(qtbot, services)
    picker = dialog.local_section.model_picker
    with qtbot.waitSignal(picker.library_shown, timeout=WAIT_MS):
        attach_model_picker(dialog, catalog.entries)
    labels = _labels(dialog)
    assert labels[0].startswith(f"{gguf_files.starter().name} (starter) · Q4_1 · ")
    assert labels[1].startswith("Mine-7B-Q4_1.gguf · Q4_1 · ") and "MiB" in labels[1]
    assert len(labels) == 2 and dialog.model_path.text() == ""  # nothing chosen for them

    picker.choose(1)
    assert dialog.model_path.text() == str(mine)  # the path, not the label
    agent, errors = dialog.collect()
    assert errors == {} and agent.model_path == str(mine)

    # typing a path still works, and the list does not replace it
    dialog.model_path.setText("/models/elsewhere/other.gguf")
    assert dialog.collect()[0].model_path == "/models/elsewhere/other.gguf"
    picker.set_entries(catalog.entries())
    assert dialog.model_path.text() == "/models/elsewhere/other.gguf"


def test_the_sidebars_editor_lists_the_library_for_an_existing_agent(
    services: Any, make_window: Any, qtbot: Any
) -> None:
    window = make_window(services)
    starter = services.agents.by_name(STARTER)
    dialog = window.agents.editor(starter)
    picker = dialog.local_section.model_picker
    qtbot.waitUntil(lambda: picker.count() > 0, timeout=WAIT_MS)
    assert gguf_files.starter().name in picker.itemText(0)
    assert dialog.model_path.text() == starter.model_path  # the agent's own value is kept
    picker.choose(0)
    assert dialog.collect()[0].model_path == str(gguf_files.starter())
    dialog.deleteLater()
