"""The local model is ready before the first Send: the worker starts after the window's first
paint, the model loads when the person clicks into the message box; the setting turns it off,
and a model that would not fit is never loaded ahead."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QApplication

from desktop.ui.conversation.warm_local import PREF_KEEP_READY, LocalWarmer

pytestmark = pytest.mark.slow


def _warmer(services, window, qtbot):
    warmer = LocalWarmer(services, window)
    warmer.install(QApplication.instance())
    window.update()  # a paint: the first one this warmer sees
    qtbot.waitUntil(lambda: warmer._painted, timeout=5000)
    return warmer


def _focus_composer(window, qtbot) -> None:
    window.activateWindow()
    window.pane.composer.setFocus()
    qtbot.waitUntil(lambda: window.pane.composer.hasFocus(), timeout=5000)


def test_worker_at_first_paint_model_on_focus_then_the_reply_starts_loaded(
    services, make_window, qtbot, qloop
) -> None:
    window = make_window(services)
    window.pane.composer.clearFocus()
    warmer = _warmer(services, window, qtbot)
    local = services.local
    qtbot.waitUntil(lambda: local.worker.alive, timeout=20000)  # started, no model yet
    assert local.loaded_params is None
    _focus_composer(window, qtbot)
    qtbot.waitUntil(lambda: local.state == "ready", timeout=30000)
    assert local.loaded_params is not None
    loads = len(warmer.tasks)
    window.pane.composer.clearFocus()
    _focus_composer(window, qtbot)  # ready already: nothing more to do
    assert len(warmer.tasks) == loads


def test_the_setting_off_starts_nothing(services, make_window, qtbot, qloop) -> None:
    services.prefs.set(PREF_KEEP_READY, False)
    window = make_window(services)
    warmer = _warmer(services, window, qtbot)
    _focus_composer(window, qtbot)
    window.pane.composer.insertPlainText("Hello")
    qtbot.wait(200)
    assert warmer.tasks == [] and not services.local.worker.alive


def test_a_model_that_would_not_fit_is_not_loaded_ahead(
    services, make_window, qtbot, qloop, monkeypatch
) -> None:
    from desktop.local import pool

    monkeypatch.setattr(pool, "available_ram", lambda: 16 * 1024**2)  # a machine with 16 MiB free
    window = make_window(services)
    window.pane.composer.clearFocus()
    warmer = _warmer(services, window, qtbot)
    _focus_composer(window, qtbot)
    qtbot.waitUntil(lambda: len(warmer.tasks) == 2 and warmer.tasks[-1].done(), timeout=20000)
    assert warmer.tasks[-1].result() is False
    assert services.local.loaded_params is None


def test_keep_ready_is_on_by_default_and_settings_turns_it_off(qtbot, tmp_path) -> None:
    from desktop.settings.prefs import Preferences
    from desktop.ui.conversation.warm_local import keep_ready
    from desktop.ui.settings.dialog import SettingsDialog

    prefs = Preferences(tmp_path / "settings.json")
    dialog = SettingsDialog(prefs)
    qtbot.addWidget(dialog)
    assert dialog.keep_ready.isChecked() and keep_ready(prefs)
    dialog.keep_ready.setChecked(False)
    dialog.save()
    assert not keep_ready(Preferences(tmp_path / "settings.json"))
    again = SettingsDialog(Preferences(tmp_path / "settings.json"))
    qtbot.addWidget(again)
    assert not again.keep_ready.isChecked()
