"""The agent editor's Knowledge section: a tick per collection, saved with the agent and read
back; a hint when there are none; a clone opens with its original's collections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QScrollArea

from desktop.ui.agents.editor import AgentEditorDialog
from tests.helpers.shots import save_grab, settle
from tests.helpers.widget_checks import cut_labels, overlaps
from tests.ui.conftest import STARTER


def _editor(qtbot: Any, services: Any, agent: Any) -> AgentEditorDialog:
    dialog = AgentEditorDialog(
        services.agents, services.secrets, agent, knowledge=services.knowledge
    )
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def _save(qtbot: Any, dialog: AgentEditorDialog) -> None:
    with qtbot.waitSignal(dialog.save_finished, timeout=20_000) as outcome:
        qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert outcome.args == [True], dialog.general_error.text()


def _collections(services: Any, tmp_path: Path, *names: str) -> list[Any]:
    made = []
    for name in names:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "note.txt").write_text(f"About {name}.\n", encoding="utf-8")
        made.append(services.knowledge.create(name, [folder]))
    return made


def test_without_collections_the_section_says_where_to_add_them(
    qtbot: Any, services: Any, qloop: Any
) -> None:
    dialog = _editor(qtbot, services, services.agents.by_name(STARTER))
    section = dialog.knowledge_section
    assert section is not None and section.group.title() == "Knowledge"
    assert "Add folders on the Knowledge page" in section.note.text()
    assert section.boxes == {} and section.selection() == []
    _save(qtbot, dialog)  # saving changes nothing
    assert services.knowledge.agent_collections(dialog.saved_agent.id) == []


def test_the_ticked_collections_are_saved_with_the_agent_and_read_back(
    qtbot: Any, services: Any, qloop: Any, tmp_path: Path
) -> None:
    notes, papers = _collections(services, tmp_path, "Notes", "Papers")
    starter = services.agents.by_name(STARTER)
    dialog = _editor(qtbot, services, starter)
    section = dialog.knowledge_section
    assert section is not None
    assert [b.text() for b in section.boxes.values()] == ["Notes", "Papers"]
    assert not any(b.isChecked() for b in section.boxes.values())
    assert "searches before each answer" in section.note.text()
    assert section.boxes[papers.id].toolTip() == str(tmp_path / "Papers")
    section.boxes[papers.id].click()  # below the fold of the dialog's scroll area
    _save(qtbot, dialog)
    assert dialog.result() == QDialog.DialogCode.Accepted
    assert [c.name for c in services.knowledge.agent_collections(starter.id)] == ["Papers"]

    again = _editor(qtbot, services, services.agents.get(starter.id))
    assert again.knowledge_section is not None
    boxes = again.knowledge_section.boxes
    assert boxes[papers.id].isChecked() and not boxes[notes.id].isChecked()
    again.knowledge_section.set_checked("Notes")
    again.knowledge_section.set_checked("Papers", False)
    _save(qtbot, again)
    assert [c.name for c in services.knowledge.agent_collections(starter.id)] == ["Notes"]


def test_a_picture_of_the_section(
    qtbot: Any, qapp: Any, services: Any, qloop: Any, tmp_path: Path, shot_dir: Path
) -> None:
    notes, _papers = _collections(services, tmp_path, "Project notes", "Papers")
    starter = services.agents.by_name(STARTER)
    services.knowledge.set_agent_collections(starter.id, [notes])
    dialog = _editor(qtbot, services, starter)
    assert dialog.knowledge_section is not None
    group = dialog.knowledge_section.group
    scroll = dialog.findChild(QScrollArea)
    scroll.ensureWidgetVisible(group)
    settle(qapp)
    assert overlaps(group) == [] and cut_labels(group) == []
    save_grab(dialog, shot_dir / "agent-knowledge.png", 5_000)


def test_a_new_agent_saves_its_collections_too(
    qtbot: Any, services: Any, qloop: Any, tmp_path: Path
) -> None:
    from desktop.local.starter import starter_model_path

    (notes,) = _collections(services, tmp_path, "Notes")
    dialog = _editor(qtbot, services, None)
    dialog.kind.setCurrentIndex(dialog.kind.findData("local"))
    dialog.name.setText("Reader")
    dialog.model_path.setText(str(starter_model_path()))
    assert dialog.knowledge_section is not None
    dialog.knowledge_section.set_checked("Notes")
    _save(qtbot, dialog)
    saved = services.agents.by_name("Reader")
    assert [c.id for c in services.knowledge.agent_collections(saved.id)] == [notes.id]


def test_a_cloned_agent_opens_with_its_originals_collections(
    qtbot: Any, services: Any, qloop: Any, tmp_path: Path
) -> None:
    notes, papers = _collections(services, tmp_path, "Notes", "Papers")
    starter = services.agents.by_name(STARTER)
    services.knowledge.set_agent_collections(starter.id, [notes])
    copy = services.agents.clone(starter)
    dialog = _editor(qtbot, services, copy)
    assert dialog.knowledge_section is not None
    boxes = dialog.knowledge_section.boxes
    assert boxes[notes.id].isChecked() and not boxes[papers.id].isChecked()


def test_without_the_knowledge_service_there_is_no_section(
    qtbot: Any, services: Any, qloop: Any
) -> None:
    dialog = AgentEditorDialog(services.agents, services.secrets, services.agents.by_name(STARTER))
    qtbot.addWidget(dialog)
    assert dialog.knowledge_section is None


def test_the_chat_header_says_which_collections_the_agent_searches(
    qtbot: Any, services: Any, window: Any, tmp_path: Path
) -> None:
    """Read off the GUI thread when the agent is shown; taken off when it searches none."""
    (notes,) = _collections(services, tmp_path, "Notes")
    starter = services.agents.by_name(STARTER)
    subtitle = window.pane.header_subtitle
    assert "searches" not in subtitle.text()
    services.knowledge.set_agent_collections(starter.id, [notes])
    window.pane.set_agent(starter)  # as after the editor saved it
    qtbot.waitUntil(lambda: "· searches Notes" in subtitle.text(), timeout=10_000)
    assert "Searches its knowledge collections: Notes" in subtitle.toolTip()
    services.knowledge.set_agent_collections(starter.id, [])
    window.reload_agents()  # as after the editor saved it with only its collections changed
    qtbot.waitUntil(lambda: "searches" not in subtitle.text(), timeout=10_000)
