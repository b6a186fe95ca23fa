"""Settings as a newcomer meets it: grouped (Appearance, Conversations, Local models, Prices,
Data, Privacy); theme and text size applied as they are picked, undone by Cancel, kept for the
next start; the defaults for new local agents used when one is made; the data folder shown and
opened in the file manager; every control named for a screen reader; laid out without
overlaps or cut text over a 720×480 window (it scrolls), and larger ones, light and dark.

Screenshots (the dialog over the window) go to ``$SIMI_SCREENSHOT_DIR`` when it is set."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QObject, QPoint, QRect, Qt, QUrl, Slot
from PySide6.QtGui import QColor, QDesktopServices, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QComboBox, QGroupBox

from desktop.local.starter import STARTER_REF
from desktop.settings.prefs import (
    PREF_TEXT_SIZE,
    PREF_THEME,
    Preferences,
    text_size_choice,
    theme_choice,
)
from desktop.store.agents import Agent
from desktop.ui.kit import theme
from desktop.ui.settings import appearance
from desktop.ui.settings.dialog import PRIVACY_TEXT, SettingsDialog
from tests.helpers.widget_checks import cut_labels, overlaps, unnamed_controls

SIZES = ((720, 480), (1280, 800), (2560, 1440))


@pytest.fixture(autouse=True)
def plain_look(qapp: QApplication) -> Iterator[None]:
    """Each test starts and ends light at the normal text size (the theme is process-wide)."""
    appearance.apply(qapp, "light", "normal")
    yield
    appearance.apply(qapp, "light", "normal")


def _dialog(qtbot: Any, prefs: Preferences, parent: Any = None) -> SettingsDialog:
    dialog = SettingsDialog(prefs, parent)
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def _pick(box: QComboBox, value: Any) -> None:
    index = box.findData(value)
    assert index >= 0, value
    box.setCurrentIndex(index)


def _window_is_dark(app: QApplication) -> bool:
    return app.palette().color(QPalette.ColorRole.Window).lightness() < 128


def test_settings_come_in_the_groups_people_look_for(qtbot: Any, tmp_path: Path) -> None:
    dialog = _dialog(qtbot, Preferences(tmp_path / "settings.json"))
    titles = [g.title() for g in dialog.findChildren(QGroupBox)]
    assert titles == ["Appearance", "Conversations", "Local models", "Prices", "Data", "Privacy"]
    assert dialog.theme.currentText() == "Same as the system"
    assert dialog.text_size.currentText() == "Normal"
    assert dialog.new_n_ctx.currentText() == "Automatic (from the model)"
    assert dialog.new_max_tokens.currentText() == "512 tokens"
    assert dialog.privacy.text() == PRIVACY_TEXT and "no telemetry" in PRIVACY_TEXT
    assert unnamed_controls(dialog) == []


def test_theme_applies_at_once_cancel_undoes_it_save_keeps_it_for_next_start(
    qtbot: Any, qapp: QApplication, tmp_path: Path
) -> None:
    prefs = Preferences(tmp_path / "settings.json")
    appearance.apply_saved(qapp, prefs)  # "system": the offscreen platform is light
    light_window = not _window_is_dark(qapp)
    dialog = _dialog(qtbot, prefs)
    _pick(dialog.theme, "dark")
    assert theme.current_colors().dark and _window_is_dark(qapp)  # at once, before Save
    dialog.reject()
    assert not theme.current_colors().dark and (not _window_is_dark(qapp)) == light_window
    assert theme_choice(prefs) == "system"

    dialog = _dialog(qtbot, prefs)
    _pick(dialog.theme, "dark")
    dialog.save()
    assert theme_choice(Preferences(tmp_path / "settings.json")) == "dark"
    appearance.apply(qapp, "light", "normal")  # as a new start would be before reading it
    appearance.apply_saved(qapp, Preferences(tmp_path / "settings.json"))
    assert theme.current_colors().dark

    dialog = _dialog(qtbot, Preferences(tmp_path / "settings.json"))
    assert dialog.theme.currentData() == "dark"
    _pick(dialog.theme, "system")
    dialog.save()
    assert qapp._simi_theme.forced is None  # follows the system again (and its changes)


def test_text_size_applies_at_once_and_is_kept(
    qtbot: Any, qapp: QApplication, tmp_path: Path
) -> None:
    prefs = Preferences(tmp_path / "settings.json")
    normal = qapp.font().pointSizeF()
    dialog = _dialog(qtbot, prefs)
    label_before = dialog.privacy.fontMetrics().height()
    _pick(dialog.text_size, "larger")
    assert qapp.font().pointSizeF() == pytest.approx(normal * 1.3, rel=0.02)
    assert theme.current_text_scale() == pytest.approx(1.3)
    qtbot.waitUntil(lambda: dialog.privacy.fontMetrics().height() > label_before, timeout=5000)
    dialog.reject()
    assert qapp.font().pointSizeF() == pytest.approx(normal, rel=0.02)

    dialog = _dialog(qtbot, prefs)
    _pick(dialog.text_size, "large")
    dialog.save()
    assert prefs.get(PREF_TEXT_SIZE) == "large" and text_size_choice(prefs) == "large"
    assert qapp.font().pointSizeF() == pytest.approx(normal * 1.15, rel=0.02)


def test_new_local_agents_get_the_context_and_max_tokens_chosen_here(
    qtbot: Any, services: Any
) -> None:
    dialog = _dialog(qtbot, services.prefs)
    _pick(dialog.new_n_ctx, 4096)
    _pick(dialog.new_max_tokens, 1024)
    dialog.save()
    made = services.agents.create(Agent(name="Mine", kind="local", model_path=STARTER_REF))
    assert (made.n_ctx, made.max_tokens) == (4096, 1024)
    again = _dialog(qtbot, services.prefs)
    assert again.new_n_ctx.currentText() == "4,096 tokens"
    assert again.new_max_tokens.currentText() == "1,024 tokens"
    _pick(again.new_n_ctx, 0)
    again.save()
    auto = services.agents.create(Agent(name="Auto", kind="local", model_path=STARTER_REF))
    assert auto.n_ctx in (2048, 4096, 8192)  # from the model and this machine's memory


class _FileManager(QObject):
    """Stands in for the desktop's file manager: what QDesktopServices asked it to open."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[QUrl] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.opened.append(url)


def test_data_shows_where_everything_is_and_open_folder_opens_it(qtbot: Any, services: Any) -> None:
    dialog = _dialog(qtbot, services.prefs)
    data_dir = services.paths.data_dir
    assert dialog.data_folder.text() == str(data_dir)
    assert dialog.data_folder.toolTip() == str(data_dir)
    assert dialog.settings_file.text() == str(services.paths.settings_path)
    assert dialog.log_folder.text() == str(services.paths.log_dir)
    manager = _FileManager()
    QDesktopServices.setUrlHandler("file", manager, "open")
    try:
        qtbot.mouseClick(dialog.open_folder_button, Qt.MouseButton.LeftButton)
    finally:
        QDesktopServices.unsetUrlHandler("file")
    assert [Path(u.toLocalFile()) for u in manager.opened] == [data_dir]


def _shot(window: Any, dialog: SettingsDialog, name: str) -> None:
    folder = os.environ.get("SIMI_SCREENSHOT_DIR")
    if not folder:
        return
    picture = window.grab()
    painter = QPainter(picture)
    front = dialog.grab()
    corner = QPoint(
        (picture.width() - front.width()) // 2, (picture.height() - front.height()) // 2
    )
    painter.drawPixmap(corner, front)
    painter.setPen(QColor(theme.current_colors().border))  # the edge a window manager draws
    painter.drawRect(QRect(corner, front.size()).adjusted(-1, -1, 0, 0))
    painter.end()
    picture.save(str(Path(folder) / name))
    dialog.grab().save(str(Path(folder) / name.replace(".png", "_alone.png")))


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_settings_fit_every_window_size_without_overlaps_or_cut_text(
    qtbot: Any, qapp: QApplication, services: Any, make_window: Any, dark: bool
) -> None:
    services.prefs.set(PREF_THEME, "dark" if dark else "light")
    appearance.apply_saved(qapp, services.prefs)
    window = make_window(services)
    for width, height in SIZES:
        window.resize(width, height)
        qtbot.waitUntil(lambda w=width: window.width() == w or window.isMaximized(), timeout=5000)
        dialog = _dialog(qtbot, services.prefs, window)
        qtbot.waitUntil(lambda d=dialog: "checking" not in d.prices_info.text(), timeout=20_000)
        QApplication.processEvents()
        room = window.size()
        assert dialog.width() <= room.width() and dialog.height() <= room.height()
        assert overlaps(dialog) == [], (width, height)
        # it scrolls up and down only: nothing is cut off at the right
        assert dialog.body.width() <= dialog.scroll_area.viewport().width()
        assert cut_labels(dialog) == [], (width, height)
        if (width, height) == (720, 480):
            assert dialog.scroll_area.verticalScrollBar().maximum() > 0  # it scrolls, nothing cut
        _shot(window, dialog, f"settings_{width}x{height}_{'dark' if dark else 'light'}.png")
        _pick(dialog.text_size, "larger")  # tried live: the dialog makes room or scrolls
        qtbot.waitUntil(lambda d=dialog: d.privacy.font().pointSizeF() > 12, timeout=5000)
        QApplication.processEvents()
        qtbot.waitUntil(lambda d=dialog: not d.refit_timer.isActive(), timeout=5000)
        QApplication.processEvents()  # the resize it made
        assert overlaps(dialog) == [] and cut_labels(dialog) == [], (width, height)
        assert dialog.body.width() <= dialog.scroll_area.viewport().width()
        room = window.size()  # (the window itself may have grown for the larger text)
        assert dialog.width() <= room.width() and dialog.height() <= room.height()
        dialog.reject()
        dialog.deleteLater()
    assert theme.current_colors().dark == dark  # Cancel kept the theme it started with


def test_saved_theme_value_that_makes_no_sense_follows_the_system(tmp_path: Path) -> None:
    prefs = Preferences(tmp_path / "settings.json")
    prefs.update({PREF_THEME: "purple", PREF_TEXT_SIZE: 3})
    assert (theme_choice(prefs), text_size_choice(prefs)) == ("system", "normal")
