"""The agent editor: field-level messages from AgentService.validate; saves only valid agents."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog

from desktop.chat.services import Services
from desktop.local.starter import starter_model_path
from desktop.store.agents import Agent
from desktop.ui.agents.editor import AgentEditorDialog
from tests.ui.conftest import STARTER


@pytest.fixture
def editor(qtbot: Any, services: Any, qloop: Any) -> AgentEditorDialog:
    dialog = AgentEditorDialog(services.agents, services.secrets)
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def _save(qtbot: Any, dialog: AgentEditorDialog) -> None:
    """Click Save and wait until the attempt ended (the store is written off the GUI thread)."""
    with qtbot.waitSignal(dialog.save_finished, timeout=20_000):
        qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)


def _fill_local(dialog: AgentEditorDialog, name: str) -> None:
    dialog.kind.setCurrentIndex(dialog.kind.findData("local"))
    dialog.name.setText(name)
    dialog.model_path.setText(str(starter_model_path()))


def test_empty_name_shows_a_message_under_the_name_and_does_not_save(
    qtbot: Any, editor: AgentEditorDialog, services: Any
) -> None:
    count = len(services.agents.list())
    _fill_local(editor, "   ")
    _save(qtbot, editor)
    assert "name" in editor.error_text("name").lower()
    assert editor.isVisible() and editor.result() != QDialog.DialogCode.Accepted
    assert len(services.agents.list()) == count


def test_duplicate_name_is_refused(qtbot: Any, editor: AgentEditorDialog, services: Any) -> None:
    _fill_local(editor, STARTER.upper())
    _save(qtbot, editor)
    assert "already exists" in editor.error_text("name")
    assert editor.saved_agent is None


def test_bad_url_and_out_of_range_temperature_show_field_messages(
    qtbot: Any, editor: AgentEditorDialog, services: Any
) -> None:
    count = len(services.agents.list())
    editor.kind.setCurrentIndex(editor.kind.findData("openai-compatible"))
    assert not editor.local_group.isVisible() and editor.base_url.isVisible()
    editor.name.setText("My server")
    editor.base_url.setText("localhost:8080")
    editor.model.setEditText("some-model")
    editor.temperature.setText("3.0")
    editor.max_tokens.setText("many")
    _save(qtbot, editor)
    assert "http://" in editor.error_text("base_url")
    assert "between 0 and 2" in editor.error_text("temperature")
    assert "whole number" in editor.error_text("max_tokens")
    assert editor.error_text("name") == ""
    assert editor.isVisible()
    assert len(services.agents.list()) == count

    editor.temperature.setText("0.5")
    editor.max_tokens.setText("")
    editor.base_url.setText("http://192.168.1.20:8080/v1")
    assert editor.http_warning_shown  # a warning, not a block
    _save(qtbot, editor)
    assert editor.result() == QDialog.DialogCode.Accepted
    saved = services.agents.by_name("My server")
    assert saved is not None and saved.temperature == 0.5 and saved.max_tokens is None


def test_a_valid_local_agent_saves_with_its_load_parameters(
    qtbot: Any, editor: AgentEditorDialog, services: Any
) -> None:
    assert not editor.local_group.isHidden()
    assert not editor.base_url.isVisible() and not editor.api_key.isVisible()
    _fill_local(editor, "Tiny local")
    editor.n_ctx.setText("4096")
    editor.n_gpu_layers.setText("-1")
    editor.seed.setText("")
    editor.stop.setPlainText("###\nUser:")
    editor.flash_attn.setChecked(True)
    editor.kv_type.setCurrentIndex(editor.kv_type.findData("q8_0"))
    editor.n_batch.setText("256")
    editor.main_gpu.setText("1")
    _save(qtbot, editor)
    assert editor.result() == QDialog.DialogCode.Accepted
    agent = services.agents.by_name("Tiny local")
    assert agent is not None
    assert agent.kind == "local" and agent.model == "SmolLM2-135M-Instruct.Q4_1"
    assert (agent.n_ctx, agent.n_gpu_layers, agent.seed) == (4096, -1, None)
    assert agent.stop == ("###", "User:")
    assert agent.flash_attn and agent.kv_type == "q8_0"
    assert (agent.n_batch, agent.main_gpu) == (256, 1)
    assert editor.saved_agent == agent


@pytest.mark.parametrize(("gpu", "layers"), [((True, 100 * 1024**3), -1), ((False, None), 0)])
def test_a_blank_new_local_agent_gets_every_layer_on_a_gpu_with_room(
    qtbot: Any,
    editor: AgentEditorDialog,
    services: Any,
    monkeypatch: pytest.MonkeyPatch,
    gpu: tuple[bool, int | None],
    layers: int,
) -> None:
    """The GPU layers field left empty ("automatic") is filled on save by the same rule as
    "New agent from this model" (the GPU probe stands in for a GPU with room / a CPU build)."""
    from desktop.chat import local_defaults

    monkeypatch.setattr(local_defaults, "gpu_memory", lambda: gpu)
    _fill_local(editor, "Blank local")
    assert editor.n_gpu_layers.text() == "" and "automatic" in editor.n_gpu_layers.placeholderText()
    _save(qtbot, editor)
    assert editor.result() == QDialog.DialogCode.Accepted
    assert services.agents.by_name("Blank local").n_gpu_layers == layers


def test_editing_keeps_values_and_updates(qtbot: Any, services: Any, qloop: Any) -> None:
    starter = services.agents.by_name(STARTER)
    dialog = AgentEditorDialog(services.agents, services.secrets, starter)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.name.text() == STARTER and dialog.model_path.text() == starter.model_path
    dialog.temperature.setText("0.2")
    _save(qtbot, dialog)
    assert dialog.result() == QDialog.DialogCode.Accepted
    assert services.agents.get(starter.id).temperature == 0.2


def test_without_a_keyring_the_window_says_so_and_the_editor_offers_memory_only_keys(
    qtbot: Any, no_keyring_services: Services, make_window: Any
) -> None:
    services = no_keyring_services
    window = make_window(services)
    assert window.info_bar is not None and window.info_bar.isVisible()
    assert "No system keyring" in window.info_bar.label.text()
    qtbot.mouseClick(window.info_bar.close_button, Qt.MouseButton.LeftButton)
    assert window.info_bar.isHidden()

    dialog = AgentEditorDialog(services.agents, services.secrets, parent=window)
    with qtbot.waitSignal(dialog.keyring_checked, timeout=10_000) as probe:
        dialog.show()
    assert probe.args == [False]
    dialog.kind.setCurrentIndex(dialog.kind.findData("openai"))
    dialog.name.setText("OpenAI")
    dialog.model.setEditText("gpt-4o-mini")
    dialog.api_key.setText("sk-test-123456")
    assert dialog.memory_key.isVisible()
    _save(qtbot, dialog)
    assert "keyring" in dialog.error_text("api_key")
    assert services.agents.by_name("OpenAI") is None

    dialog.memory_key.setChecked(True)
    _save(qtbot, dialog)
    assert dialog.result() == QDialog.DialogCode.Accepted
    saved = services.agents.by_name("OpenAI")
    assert saved is not None and saved.base_url == "https://api.openai.com/v1"
    assert services.agents.api_key(saved) == "sk-test-123456"
    assert services.secrets.memory_only
    dialog.deleteLater()


def test_remote_agent_key_goes_to_the_real_keyring(
    qtbot: Any, editor: AgentEditorDialog, services: Any
) -> None:
    if not services.secrets.available:
        pytest.skip("no Secret Service in this environment")
    editor.kind.setCurrentIndex(editor.kind.findData("openai"))
    editor.name.setText("OpenAI keyed")
    editor.model.setEditText("gpt-4o-mini")
    editor.api_key.setText("sk-real-keyring-42")
    _save(qtbot, editor)
    assert editor.result() == QDialog.DialogCode.Accepted
    saved = services.agents.by_name("OpenAI keyed")
    assert isinstance(saved, Agent)
    assert services.agents.api_key(saved) == "sk-real-keyring-42"
    assert "sk-real" not in str(services.db.execute("SELECT * FROM agents").fetchall())


def test_a_registered_kind_is_offered_by_the_editor_and_gets_its_badge_colour(
    qtbot: Any, services: Any, qloop: Any, throwaway_kind: Any
) -> None:
    from PySide6.QtGui import QColor

    from desktop.chat.kinds import badge_color
    from desktop.ui.kit.resources import agent_badge
    from tests.conftest import THROWAWAY_KIND

    dialog = AgentEditorDialog(services.agents, services.secrets)
    qtbot.addWidget(dialog)
    dialog.show()
    kinds = [dialog.kind.itemData(i) for i in range(dialog.kind.count())]
    assert kinds == ["local", "openai", "openai-compatible", "anthropic", "gemini", THROWAWAY_KIND]
    index = dialog.kind.findData(THROWAWAY_KIND)
    assert dialog.kind.itemText(index) == "Throwaway service"

    dialog.kind.setCurrentIndex(index)
    assert dialog.local_group.isHidden() and dialog.base_url.isVisible()
    assert dialog.preset.count() == 0 and dialog.current_preset is None  # no presets declared
    assert dialog.base_url.placeholderText() == "https://throwaway.example/v1  (default)"
    assert dialog.model.lineEdit().placeholderText() == "e.g. throwaway-1"
    assert dialog.api_key.placeholderText().startswith("Paste the key")  # it needs one
    dialog.name.setText("Throwaway agent")
    dialog.model.setEditText("throwaway-1")
    _save(qtbot, dialog)
    assert dialog.result() == QDialog.DialogCode.Accepted
    saved = services.agents.by_name("Throwaway agent")
    assert saved is not None and saved.kind == THROWAWAY_KIND
    assert saved.base_url == "https://throwaway.example/v1"

    badge = agent_badge("Throwaway agent", badge_color(THROWAWAY_KIND), size=28).toImage()
    assert badge.pixelColor(14, 2) == QColor("#123456")  # the top edge, clear of the initials
    local = agent_badge("Local", badge_color("local"), size=28).toImage()
    assert local.pixelColor(14, 2) == QColor("#12a37f")
