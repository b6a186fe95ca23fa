"""The agent editor's vision projector: the "Vision projector" field fills itself with the
projector beside a chosen model, the line under the model says "Sees images" or "Text only",
a file that is not a projector (or one for another model) is said in red under the field and
cannot be saved, and an agent's stored choice is kept. Real widgets offscreen, real GGUF
headers in tmp_path (the projectors are headers only: nothing is loaded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from desktop.store.agents import Agent
from desktop.ui.agents.editor import AgentEditorDialog
from tests.helpers import gguf_files
from tests.helpers.widget_checks import cut_labels, overlaps, unnamed_controls
from tests.local.vision_files import fake_projector

WAIT_MS = 10_000


@pytest.fixture(autouse=True)
def quick_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Typing rests 10 ms instead of 150 before the projector is checked."""
    monkeypatch.setattr("desktop.ui.agents.vision.CHECK_DELAY_MS", 10)


def _starter_as(path: Path) -> Path:
    """The starter model under another name (a link: its 93 MB are not copied)."""
    path.symlink_to(gguf_files.starter())
    return path


@pytest.fixture
def vlm(tmp_path: Path) -> tuple[Path, Path]:
    """A model with its projector beside it (the starter under a vision model's name;
    the projector 576 wide, as the starter is)."""
    folder = tmp_path / "SmolVLM-256M-Instruct-GGUF"
    folder.mkdir()
    model = _starter_as(folder / "SmolVLM-256M-Instruct-Q8_0.gguf")
    return model, fake_projector(folder / "mmproj-SmolVLM-256M-Instruct-f16.gguf")


def _editor(qtbot: Any, services: Any, agent: Agent | None = None) -> AgentEditorDialog:
    dialog = AgentEditorDialog(services.agents, services.secrets, agent)
    qtbot.addWidget(dialog)
    dialog.resize(620, 780)
    dialog.show()
    return dialog


def _settle(qtbot: Any, dialog: AgentEditorDialog, action: Any) -> None:
    """Do ``action`` and wait for the projector's check that follows it (off the GUI
    thread)."""
    with qtbot.waitSignal(dialog.local_section.projector.checked, timeout=WAIT_MS):
        action()


def _vision_line(dialog: AgentEditorDialog) -> str:
    return dialog.local_section.projector.status.text()


def test_choosing_a_model_fills_its_projector_and_saving_keeps_it(
    qtbot: Any, services: Any, qloop: Any, vlm: tuple[Path, Path]
) -> None:
    model, projector = vlm
    dialog = _editor(qtbot, services)
    dialog.name.setText("Eyes")
    assert _vision_line(dialog).startswith("Text only")
    _settle(qtbot, dialog, lambda: dialog.model_path.setText(str(model)))
    assert dialog.mmproj_path.text() == str(projector)
    assert _vision_line(dialog) == "Sees images, with the vision projector below"
    assert dialog.error_text("mmproj_path") == ""
    # laid out as what they are: no control over another, nothing cut, every field named
    assert overlaps(dialog.local_group) == []
    assert cut_labels(dialog.local_group) == []
    assert unnamed_controls(dialog.local_group) == []
    with qtbot.waitSignal(dialog.save_finished, timeout=WAIT_MS) as saved:
        qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert saved.args == [True]
    assert services.agents.by_name("Eyes").mmproj_path == str(projector)


def test_a_file_that_is_not_a_projector_is_said_under_the_field_and_not_saved(
    qtbot: Any, services: Any, qloop: Any, vlm: tuple[Path, Path], tmp_path: Path
) -> None:
    model, _projector = vlm
    dialog = _editor(qtbot, services)
    dialog.name.setText("Wrong file")
    _settle(qtbot, dialog, lambda: dialog.model_path.setText(str(model)))
    _settle(qtbot, dialog, lambda: qtbot.keyClicks(dialog.mmproj_path, "x"))  # typed: kept
    said = dialog.error_text("mmproj_path")
    assert "does not exist" in said and _vision_line(dialog).startswith("Text only")
    starter = str(gguf_files.starter())  # a chat model, not a projector

    def choose_starter() -> None:
        dialog.mmproj_path.setText(starter)

    _settle(qtbot, dialog, choose_starter)
    assert dialog.error_text("mmproj_path") == (
        "SmolLM2-135M-Instruct.Q4_1.gguf is a model (architecture “llama”), not a vision "
        "projector: choose the “mmproj” file that belongs to the model."
    )
    wide = fake_projector(tmp_path / "mmproj-gemma-3-4b-f16.gguf", projection_dim=2560)
    _settle(qtbot, dialog, lambda: dialog.mmproj_path.setText(str(wide)))
    assert "a projector for another model" in dialog.error_text("mmproj_path")
    with qtbot.waitSignal(dialog.save_finished, timeout=WAIT_MS) as saved:
        qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert saved.args == [False] and dialog.isVisible()
    assert "a projector for another model" in dialog.error_text("mmproj_path")
    assert services.agents.by_name("Wrong file") is None


def test_an_agents_choice_is_kept_until_another_model_is_chosen(
    qtbot: Any, services: Any, qloop: Any, vlm: tuple[Path, Path], tmp_path: Path
) -> None:
    model, projector = vlm
    # stored without a projector although one lies beside its model: the editor keeps that
    text_only = services.agents.create(Agent(name="Plain", kind="local", model_path=str(model)))
    dialog = _editor(qtbot, services, text_only)
    qtbot.waitUntil(lambda: _vision_line(dialog).startswith("Text only"), timeout=WAIT_MS)
    qtbot.wait(60)  # past the check's delay: nothing fills it
    assert dialog.mmproj_path.text() == ""
    # another model (without a projector beside it), then back: the field follows the model
    other = _starter_as(tmp_path / "TextOnly-Q4_1.gguf")
    _settle(qtbot, dialog, lambda: dialog.model_path.setText(str(other)))
    assert dialog.mmproj_path.text() == ""
    _settle(qtbot, dialog, lambda: dialog.model_path.setText(str(model)))
    assert dialog.mmproj_path.text() == str(projector)
    _settle(qtbot, dialog, lambda: dialog.model_path.setText(str(other)))
    assert dialog.mmproj_path.text() == ""  # it was filled for the model: it goes with it
    # a projector the person chose stays whatever model is chosen
    _settle(qtbot, dialog, lambda: qtbot.keyClicks(dialog.mmproj_path, str(projector)))
    _settle(qtbot, dialog, lambda: dialog.model_path.setText(str(model)))
    assert dialog.mmproj_path.text() == str(projector)
    assert _vision_line(dialog).startswith("Sees images")
