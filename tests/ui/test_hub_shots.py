"""The "Find models" tab as a person sees it, light and dark, at the room it gets in the window
at its minimum size (720×480: the tab is 429×378) and on a laptop (1280×800): the empty
state, search results with fit marks and a download in progress, and the access-token panel.
Each state is checked for overlapping or cut widgets and unnamed controls; with
``SIMI_SCREENSHOT_DIR=/tmp/shots16`` the pictures are written there (else under the test's
tmp path) as hub-*.png.

``tests/helpers/fake_hub.py`` stands in for huggingface.co (a loopback server with the
starter's real GGUF file), throttled so the download is still running when it is shot; the
machine's memory is fixed by ``view.machine`` (a stand-in for /proc/meminfo and the GPU
probe) so the marks read the same everywhere.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication, QWidget

from desktop.ui.kit import theme
from desktop.ui.models.hub_view import HubView
from tests.helpers.fake_hub import GGUF_REPO, FakeHub
from tests.helpers.widget_checks import cut_labels, overlaps, unnamed_controls
from tests.ui import test_hub_view
from tests.ui.test_hub_view import (
    SPLIT_NAME,
    TIMEOUT_MS,
    open_repo,
    search,
    stop_downloads,
)

hub = test_hub_view.hub  # the fake hub fixture, shared
GB = 1_000_000_000
SIZES = {"smallest": (429, 378), "laptop": (1040, 740)}


def out_dir(tmp_path: Path) -> Path:
    out = Path(os.environ.get("SIMI_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def settle(qapp: QApplication) -> None:
    for _ in range(5):
        qapp.processEvents()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    qapp.processEvents()


def check_and_shoot(qapp: QApplication, widget: QWidget, path: Path) -> None:
    """Light then dark: nothing overlaps or is cut, every control has a name; saved as
    ``<path>-light.png`` and ``<path>-dark.png``."""
    try:
        for name, dark in (("light", False), ("dark", True)):
            theme.install(qapp, dark=dark)
            settle(qapp)
            assert overlaps(widget) == [], name
            assert cut_labels(widget) == [], name
            assert unnamed_controls(widget) == [], name
            target = path.with_name(f"{path.name}-{name}.png")
            assert widget.grab().save(str(target))
            assert target.stat().st_size > 5_000, f"{target} looks empty"
    finally:
        theme.install(qapp, dark=False)
        settle(qapp)


@pytest.mark.parametrize("size", list(SIZES))
def test_the_find_models_tab_holds_and_is_shot(
    size: str, services: Any, hub: FakeHub, qtbot: Any, qloop: Any, qapp: Any, tmp_path: Path
) -> None:
    out = out_dir(tmp_path)
    view = HubView(services)
    view.machine = lambda: (16 * GB, None)
    qtbot.addWidget(view)
    view.resize(*SIZES[size])
    view.show()
    qtbot.waitExposed(view)
    try:
        check_and_shoot(qapp, view, out / f"hub-empty-{size}")

        search(view, qtbot)
        open_repo(view, qtbot, GGUF_REPO)
        hub.throttle_bps = 150_000  # still running when shot
        view.models.buttons[SPLIT_NAME].click()
        qtbot.waitUntil(
            lambda: (
                view.downloads.state_of(GGUF_REPO, SPLIT_NAME) == "running"
                and view.downloads.rows[(GGUF_REPO, SPLIT_NAME)].bar.value() > 30
            ),
            timeout=TIMEOUT_MS,
        )
        assert view.models.fit_text(SPLIT_NAME) == "Fits in memory"
        check_and_shoot(qapp, view, out / f"hub-results-downloading-{size}")

        view.token.ask(
            "This repository is gated or private: the hub needs an access token to download it.",
            None,
        )
        check_and_shoot(qapp, view, out / f"hub-token-{size}")
    finally:
        stop_downloads(view)


def test_the_tab_in_the_smallest_window_keeps_the_window_at_its_minimum(
    services: Any, hub: FakeHub, make_window: Any, qtbot: Any, qapp: Any, tmp_path: Path
) -> None:
    """The real window at 720×480 with the Models page's "Find models" tab: results, a
    running download and then the token panel, and the window is still 720×480; closing it
    pauses the download."""
    window = make_window(services)
    window.resize(720, 480)
    window.show_page("models")
    view = window.models_page.hub_view
    window.models_page.setCurrentWidget(view)
    view.machine = lambda: (16 * GB, None)
    settle(qapp)
    try:
        search(view, qtbot)
        open_repo(view, qtbot, GGUF_REPO)
        hub.throttle_bps = 150_000
        view.models.buttons[SPLIT_NAME].click()
        qtbot.waitUntil(
            lambda: view.downloads.state_of(GGUF_REPO, SPLIT_NAME) == "running",
            timeout=TIMEOUT_MS,
        )
        check_and_shoot(qapp, window, out_dir(tmp_path) / "hub-window-720x480")
        assert (window.width(), window.height()) == (720, 480)
        view.token.ask("This repository is gated or private.", None)
        settle(qapp)
        assert overlaps(window) == [] and cut_labels(window) == []
        assert (window.width(), window.height()) == (720, 480)
        window.close()  # closing the window pauses the download; its part stays
        qtbot.waitUntil(
            lambda: view.downloads.state_of(GGUF_REPO, SPLIT_NAME) == "paused",
            timeout=TIMEOUT_MS,
        )
    finally:
        stop_downloads(view)
