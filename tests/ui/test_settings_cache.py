"""Settings → Local models, the prompt-state caches: the two budgets (defaults 1 GB in memory
and 2 GB on disk), the line with what the caches hold now (read from the local runtime when
the dialog opens), Clear caches (then the line shows 0), and Save storing the budgets and
handing them to the runtime. A screenshot of the group goes to ``$SIMI_SCREENSHOT_DIR``.

``FakeCaches`` stands in for the local runtime's cache calls (``LocalRuntime.cache_sizes`` /
``clear_caches`` / ``set_cache_budgets``) where exact sizes are needed to check the wording and
what Save hands over: it holds sizes as the workers would report them and records what it was
asked. The last test uses the app's real runtime after a real reply."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from desktop.chat.services import cache_budgets
from desktop.local.prompt_cache import PREF_PROMPT_CACHE_MB, PREF_SAVED_STATES_MB, CacheSizes
from desktop.settings.prefs import Preferences
from desktop.ui.settings.cache import sizes_text
from desktop.ui.settings.dialog import SettingsDialog
from tests.helpers.widget_checks import cut_labels, unnamed_controls

WAIT_MS = 10_000  # a guard against hanging, not a timing assertion
REPLY_MS = 120_000  # likewise, for a real reply on a shared CPU
LONG_SYSTEM = "You are a careful assistant who answers in plain words and checks each fact. " * 40
MB = 1024 * 1024


class FakeCaches:
    def __init__(self) -> None:
        self.sizes = CacheSizes(210 * MB, 3, 140 * MB, 2)
        self.cleared = 0
        self.budgets: list[tuple[int, int]] = []

    async def cache_sizes(self) -> CacheSizes:
        return self.sizes

    async def clear_caches(self) -> None:
        self.cleared += 1
        self.sizes = CacheSizes(0, 0, 0, 0)

    def set_cache_budgets(self, memory_mb: int, saved_mb: int) -> None:
        self.budgets.append((memory_mb, saved_mb))


def _dialog(qtbot: Any, prefs: Preferences, local: Any = None) -> SettingsDialog:
    dialog = SettingsDialog(prefs, local=local)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def test_the_sizes_are_shown_when_settings_opens_and_clear_empties_them(
    qtbot: Any, qloop: Any, tmp_path: Path
) -> None:
    local = FakeCaches()
    dialog = _dialog(qtbot, Preferences(tmp_path / "settings.json"), local)
    cache = dialog.cache
    expected = "In memory: 210 MB (3 states) · On disk: 140 MB (2 files)"
    qtbot.waitUntil(lambda: cache.sizes.text() == expected, timeout=WAIT_MS)
    assert cache.sizes.isVisible() and cache.clear_button.isVisible()
    qtbot.mouseClick(cache.clear_button, Qt.MouseButton.LeftButton)
    zero = "In memory: 0 MB (0 states) · On disk: 0 MB (0 files)"
    qtbot.waitUntil(lambda: cache.sizes.text() == zero, timeout=WAIT_MS)
    assert local.cleared == 1 and cache.clear_button.isEnabled()
    assert unnamed_controls(dialog) == []
    _shot(qtbot, dialog, local)


def test_the_budgets_start_at_1_gb_and_2_gb_and_save_reaches_the_runtime(
    qtbot: Any, qloop: Any, tmp_path: Path
) -> None:
    prefs = Preferences(tmp_path / "settings.json")
    local = FakeCaches()
    dialog = _dialog(qtbot, prefs, local)
    cache = dialog.cache
    assert (cache.memory.currentText(), cache.saved.currentText()) == ("1 GB", "2 GB")
    assert [cache.memory.itemText(i) for i in range(cache.memory.count())] == [
        "Off", "256 MB", "512 MB", "1 GB", "2 GB", "4 GB"
    ]  # fmt: skip
    assert [cache.saved.itemText(i) for i in range(cache.saved.count())] == [
        "Off", "512 MB", "1 GB", "2 GB", "5 GB"
    ]  # fmt: skip
    cache.memory.setCurrentIndex(cache.memory.findText("512 MB"))
    cache.saved.setCurrentIndex(cache.saved.findText("Off"))
    assert local.budgets == []  # only Save applies them
    dialog.save()
    assert local.budgets == [(512, 0)]
    again = Preferences(tmp_path / "settings.json")
    assert (again.get(PREF_PROMPT_CACHE_MB), again.get(PREF_SAVED_STATES_MB)) == (512, 0)
    assert cache_budgets(again) == (512, 0)
    reopened = _dialog(qtbot, again, FakeCaches())
    assert (reopened.cache.memory.currentText(), reopened.cache.saved.currentText()) == (
        "512 MB",
        "Off",
    )


def test_cancel_applies_nothing(qtbot: Any, qloop: Any, tmp_path: Path) -> None:
    prefs = Preferences(tmp_path / "settings.json")
    local = FakeCaches()
    dialog = _dialog(qtbot, prefs, local)
    dialog.cache.memory.setCurrentIndex(0)
    dialog.reject()
    assert local.budgets == [] and prefs.get(PREF_PROMPT_CACHE_MB) is None


def test_without_a_runtime_the_budgets_are_still_saved_and_no_sizes_are_claimed(
    qtbot: Any, tmp_path: Path
) -> None:
    prefs = Preferences(tmp_path / "settings.json")
    dialog = _dialog(qtbot, prefs)
    assert dialog.cache.sizes.isHidden() and dialog.cache.clear_button.isHidden()
    dialog.cache.memory.setCurrentIndex(dialog.cache.memory.findText("4 GB"))
    dialog.save()
    assert cache_budgets(Preferences(tmp_path / "settings.json")) == (4096, 2048)


def test_a_budget_set_elsewhere_is_shown_not_lost(qtbot: Any, tmp_path: Path) -> None:
    prefs = Preferences(tmp_path / "settings.json")
    prefs.update({PREF_PROMPT_CACHE_MB: 3072, PREF_SAVED_STATES_MB: "lots"})
    assert cache_budgets(prefs) == (3072, 2048)  # not a number: the default
    dialog = _dialog(qtbot, prefs)
    assert dialog.cache.memory.currentText() == "3 GB"
    assert dialog.cache.saved.currentText() == "2 GB"


def test_sizes_read_as_words() -> None:
    assert sizes_text(CacheSizes(0, 0, 0, 0)) == (
        "In memory: 0 MB (0 states) · On disk: 0 MB (0 files)"
    )
    one = CacheSizes(3 * MB // 2, 1, 5 * 1024 * MB // 2, 1)
    assert sizes_text(one) == "In memory: 1.5 MB (1 state) · On disk: 2.5 GB (1 file)"


def _shot(qtbot: Any, dialog: SettingsDialog, local: FakeCaches) -> None:
    """The Local models group, light, with sizes to show: for a person to look at."""
    folder = os.environ.get("SIMI_SCREENSHOT_DIR")
    if not folder:
        return
    local.sizes = CacheSizes(210 * MB, 3, 140 * MB, 2)
    dialog.cache.refresh()
    qtbot.waitUntil(lambda: "210 MB" in dialog.cache.sizes.text(), timeout=WAIT_MS)
    QApplication.processEvents()
    group = dialog.groups[2]
    assert group.title() == "Local models"
    assert cut_labels(group) == []
    dialog.scroll_area.ensureWidgetVisible(group)
    assert group.grab().save(str(Path(folder) / "settings_local_models_caches.png"))


@pytest.mark.slow
def test_with_the_real_runtime_settings_shows_a_saved_prompt_and_clear_deletes_it(
    qtbot: Any, qloop: Any, services: Any
) -> None:
    """No fake: one real reply of the starter model with a long system prompt saves its
    state on disk, the dialog opened with the app's runtime shows it, Clear caches removes it."""
    from desktop.local.starter import STARTER_AGENT_NAME

    starter = services.agents.by_name(STARTER_AGENT_NAME)
    agent = services.agents.update(
        starter.with_changes(system_prompt=LONG_SYSTEM, seed=1, temperature=0.0, max_tokens=4)
    )
    conv = services.conversations.create(agent.id)
    turn = services.chat.begin(conv.id, agent, "Hello?")
    reply = asyncio.ensure_future(services.chat.run(turn))
    qtbot.waitUntil(reply.done, timeout=REPLY_MS)
    assert reply.result().error is None
    dialog = _dialog(qtbot, services.prefs, services.local)
    sizes = dialog.cache.sizes
    qtbot.waitUntil(lambda: "(1 file)" in sizes.text(), timeout=WAIT_MS)
    assert "On disk: 0 MB" not in sizes.text()
    qtbot.mouseClick(dialog.cache.clear_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "On disk: 0 MB (0 files)" in sizes.text(), timeout=WAIT_MS)
    assert sizes.text().startswith("In memory: 0 MB (0 states)")
