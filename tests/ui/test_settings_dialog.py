from __future__ import annotations

from typing import Any

from desktop.chat.services import PREF_IDLE_UNLOAD_MIN, idle_unload_seconds
from desktop.settings.prefs import Preferences
from desktop.ui.settings.dialog import SettingsDialog


def test_idle_unload_choice_is_saved_and_shown_again(qtbot: Any, tmp_path) -> None:
    prefs = Preferences(tmp_path / "settings.json")
    dialog = SettingsDialog(prefs)
    qtbot.addWidget(dialog)
    assert dialog.idle_unload.currentData() == 0  # default: keep models loaded
    dialog.idle_unload.setCurrentIndex(dialog.idle_unload.findData(15))
    dialog.save()
    assert prefs.get(PREF_IDLE_UNLOAD_MIN) == 15 and idle_unload_seconds(prefs) == 900
    again = SettingsDialog(Preferences(tmp_path / "settings.json"))
    qtbot.addWidget(again)
    assert again.idle_unload.currentData() == 15
