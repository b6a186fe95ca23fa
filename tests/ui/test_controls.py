"""Controls look like what they are: a drop-down shows its arrow and opens on a click, in light
and dark; "Fetch models" opens the list it fills; the keyboard focus is always visible; every
button and field has a name a screen reader can say (read through ``QAccessible``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QCheckBox,
    QComboBox,
    QLineEdit,
    QStyle,
    QStyleOptionComboBox,
    QWidget,
)

from desktop.store.agents import Agent
from desktop.ui.agents.editor import AgentEditorDialog
from desktop.ui.kit import theme
from desktop.ui.settings.dialog import SettingsDialog
from desktop.ui.stats.timeline_panel import TimelinePanel
from tests.helpers.fault_server import FaultServer, Reply
from tests.helpers.timeline_rows import LOCAL_FIRST
from tests.helpers.widget_checks import accessible_label, accessible_name, unnamed_controls
from tests.ui.conftest import STARTER, collect_qt_garbage
from tests.ui.test_screenshots import _populate

WAIT_MS = 20_000  # a guard against hanging, not a timing assertion


@pytest.fixture(params=[False, True], ids=["light", "dark"])
def dark(request: pytest.FixtureRequest, qapp: QApplication, qloop: Any) -> Iterator[bool]:
    theme.install(qapp, dark=request.param)
    try:
        yield bool(request.param)
    finally:
        theme.install(qapp, dark=False)


def _editor(qtbot: Any, services: Any, agent: Agent | None = None) -> AgentEditorDialog:
    dialog = AgentEditorDialog(services.agents, services.secrets, agent)
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.keyring_checked, timeout=WAIT_MS):
        dialog.show()
    qtbot.waitExposed(dialog)
    return dialog


def _arrow_rect(combo: QComboBox) -> QRect:
    option = QStyleOptionComboBox()
    combo.initStyleOption(option)
    return combo.style().subControlRect(
        QStyle.ComplexControl.CC_ComboBox, option, QStyle.SubControl.SC_ComboBoxArrow, combo
    )


def _ink(image: QImage, rect: QRect, background: QColor) -> int:
    """Pixels in ``rect`` clearly unlike ``background`` (an arrow drawn there)."""
    ratio = image.devicePixelRatio()
    count = 0
    for y in range(int(rect.top() * ratio), int(rect.bottom() * ratio)):
        for x in range(int(rect.left() * ratio), int(rect.right() * ratio)):
            pixel = image.pixelColor(x, y)
            diff = (
                abs(pixel.red() - background.red())
                + abs(pixel.green() - background.green())
                + abs(pixel.blue() - background.blue())
            )
            count += diff > 120
    return count


def _combos(window: Any, editor: AgentEditorDialog) -> dict[str, QComboBox]:
    return {
        "provider": editor.kind,
        "service": editor.preset,
        "model": editor.model,
        "kv cache type": editor.kv_type,
        "agent filter": window.browser.findChild(QComboBox, "AgentFilter"),
    }


def test_every_drop_down_shows_its_arrow_and_opens_on_a_click(
    qtbot: Any, services: Any, make_window: Any, dark: bool
) -> None:
    window = make_window(services)
    editor = _editor(qtbot, services, services.agents.by_name(STARTER))
    combos = _combos(window, editor)
    editor.kind.setCurrentIndex(editor.kind.findData("openai-compatible"))  # service shown
    combos["kv cache type"] = editor.local_section.kv_type
    editor.model.addItems(["gpt-4o-mini", "gpt-4o"])  # (an empty list fetches: test below)
    for name, combo in combos.items():
        assert combo is not None, name
        if not combo.isVisible():  # the local section hides for a remote kind: show its combo
            editor.kind.setCurrentIndex(editor.kind.findData("local"))
        assert combo.isVisible(), name
        arrow = _arrow_rect(combo)
        assert arrow.width() >= 12 and arrow.height() >= 10, (name, arrow)
        # the middle of the arrow's box, away from the combo's border
        inner = arrow.adjusted(3, 3, -3, -3)
        image = combo.grab().toImage()
        background = image.pixelColor(inner.left(), inner.top())
        assert _ink(image, inner, background) >= 8, f"no arrow drawn on {name} (dark={dark})"

        target = arrow.center() if combo.isEditable() else combo.rect().center()
        qtbot.mouseClick(combo, Qt.MouseButton.LeftButton, pos=target)
        qtbot.waitUntil(lambda c=combo: c.view().isVisible(), timeout=WAIT_MS)
        combo.hidePopup()
        qtbot.waitUntil(lambda c=combo: not c.view().isVisible(), timeout=WAIT_MS)
        editor.kind.setCurrentIndex(editor.kind.findData("openai-compatible"))
    editor.close()


def test_fetch_models_opens_the_list_it_filled(qtbot: Any, services: Any, qloop: Any) -> None:
    body = json.dumps({"data": [{"id": "alpha-7b"}, {"id": "beta-13b"}]}).encode()
    with FaultServer(Reply(body=body, content_type="application/json", chunked=False)) as server:
        editor = _editor(qtbot, services)
        editor.kind.setCurrentIndex(editor.kind.findData("openai-compatible"))
        editor.name.setText("My server")
        editor.base_url.setText(f"{server.url}/v1")
        assert not editor.model.view().isVisible()
        with qtbot.waitSignal(editor.models_fetched, timeout=WAIT_MS) as fetched:
            qtbot.mouseClick(editor.fetch_button, Qt.MouseButton.LeftButton)
        assert fetched.args[0] == ("alpha-7b", "beta-13b")
        assert "pick one from the list" in editor.models_status_text
        qtbot.waitUntil(lambda: editor.model.view().isVisible(), timeout=WAIT_MS)
        shown = [editor.model.itemText(i) for i in range(editor.model.count())]
        assert shown == ["alpha-7b", "beta-13b"]
        editor.model.hidePopup()
        qtbot.waitUntil(lambda: not editor.model.view().isVisible(), timeout=WAIT_MS)
        editor.close()

        # the arrow of a model box still empty asks the server, then opens the list
        editor = _editor(qtbot, services)
        editor.kind.setCurrentIndex(editor.kind.findData("openai-compatible"))
        editor.base_url.setText(f"{server.url}/v1")
        assert editor.model.count() == 0
        with qtbot.waitSignal(editor.models_fetched, timeout=WAIT_MS):
            qtbot.mouseClick(
                editor.model, Qt.MouseButton.LeftButton, pos=_arrow_rect(editor.model).center()
            )
        qtbot.waitUntil(lambda: editor.model.view().isVisible(), timeout=WAIT_MS)
        assert editor.model.count() == 2
        editor.model.hidePopup()
        editor.close()


def _focus_changes_the_look(qtbot: Any, widget: QWidget, away: QWidget) -> bool:
    away.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(lambda: away.hasFocus(), timeout=WAIT_MS)
    before = widget.grab().toImage()
    widget.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(lambda: widget.hasFocus(), timeout=WAIT_MS)
    QApplication.processEvents()
    after = widget.grab().toImage()
    return before != after


def test_the_keyboard_focus_is_always_visible(
    qtbot: Any, services: Any, make_window: Any, dark: bool
) -> None:
    window = make_window(services)
    window.activateWindow()
    qtbot.waitActive(window)
    sidebar = window.agents
    candidates: dict[str, QWidget] = {
        "New chat": window.new_chat_button,
        "+ New agent": sidebar.agent_buttons["new"],
        "Edit agent": sidebar.agent_buttons["edit"],
        "agents list": sidebar.agent_list,
        "search box": window.browser.search_box,
        "agent filter": window.browser.findChild(QComboBox, "AgentFilter"),
        "Models page button": window.pages.buttons["models"],
        "Switch agent": window.pane.agent_button,
    }
    away = window.pane.composer
    for name, widget in candidates.items():
        assert widget is not None and widget.isVisible(), name
        assert _focus_changes_the_look(qtbot, widget, away), f"focus invisible on {name}"
    assert _focus_changes_the_look(qtbot, away, window.browser.search_box), "composer"

    editor = _editor(qtbot, services)
    editor.activateWindow()
    qtbot.waitActive(editor)
    for name, widget in {
        "Browse…": editor.browse,
        "Flash attention": editor.flash_attn,
        "Save": editor.save_button,
        "Cancel": editor.cancel_button,
        "KV cache type": editor.kv_type,
    }.items():
        assert _focus_changes_the_look(qtbot, widget, editor.name), f"focus invisible on {name}"
    assert isinstance(editor.flash_attn, QCheckBox)
    editor.close()


def _controls_have_names(root: QWidget) -> None:
    missing = unnamed_controls(root)
    assert missing == [], "\n".join(missing)


def test_every_button_and_field_has_an_accessible_name(
    qtbot: Any, services: Any, make_window: Any
) -> None:
    conv_id = _populate(services)
    services.stats.record({**LOCAL_FIRST, "agent_id": services.agents.by_name(STARTER).id})
    window = make_window(services)
    window.open_conversation(conv_id)
    window.pane.transcript.scroll_to_bottom()
    window.show_page("stats")
    qtbot.waitUntil(lambda: window.stats_page.findChildren(QAbstractButton) != [], timeout=WAIT_MS)
    window.show_page("chat")
    _controls_have_names(window)
    # spot checks: what a screen reader says for a few of them
    assert accessible_name(window.pane.composer) == "Message"
    assert accessible_name(window.browser.search_box) == "Search conversations"

    for agent in (services.agents.by_name(STARTER), services.agents.by_name("Groq Llama")):
        editor = _editor(qtbot, services, agent)
        _controls_have_names(editor)
        assert accessible_name(editor.name) == "Name"
        assert accessible_label(editor.kind) == "Provider"  # a combo's name is its text
        assert accessible_label(editor.temperature) == "Temperature"
        editor.close()

    settings = SettingsDialog(services.prefs, window, prices=services.chat.prices)
    qtbot.addWidget(settings)
    settings.show()
    _controls_have_names(settings)
    settings.close()

    panel = TimelinePanel(LOCAL_FIRST, window)
    qtbot.addWidget(panel)
    panel.show()
    _controls_have_names(panel)
    panel.close()
    collect_qt_garbage()


def test_a_line_edit_without_a_label_is_caught(qtbot: Any, qloop: Any) -> None:
    """The check itself: a bare field is reported, a named one is not."""
    host = QWidget()
    qtbot.addWidget(host)
    bare = QLineEdit(host)
    assert len(unnamed_controls(host)) == 1
    bare.setAccessibleName("Title")
    assert unnamed_controls(host) == []
