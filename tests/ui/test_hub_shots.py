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

from pathlib import Path
from typing import Any

import pytest

from desktop.ui.models.hub_view import HubView
from tests.helpers.fake_hub import GGUF_REPO, FakeHub
from tests.helpers.shots import check_and_shoot, settle
from tests.helpers.widget_checks import cut_labels, overlaps
from tests.ui import test_hub_view
from tests.ui.test_hub_view import (
    SPLIT_NAME,
    TIMEOUT_MS,
    browse,
    download,
    stop_downloads,
)

hub = test_hub_view.hub  # the fake hub fixture, shared
GB = 1_000_000_000
SIZES = {"smallest": (429, 378), "laptop": (1040, 740)}


@pytest.mark.parametrize("size", list(SIZES))
def test_the_find_models_tab_holds_and_is_shot(
    size: str, services: Any, hub: FakeHub, qtbot: Any, qloop: Any, qapp: Any, shot_dir: Path
) -> None:
    view = HubView(services)
    view.machine = lambda: (16 * GB, None)
    qtbot.addWidget(view)
    view.resize(*SIZES[size])
    view.show()
    qtbot.waitExposed(view)
    try:
        check_and_shoot(qapp, view, shot_dir / f"hub-empty-{size}")

        browse(view, qtbot)
        hub.throttle_bps = 150_000  # still running when shot
        download(view, qtbot, SPLIT_NAME)
        qtbot.waitUntil(
            lambda: (
                view.downloads.state_of(GGUF_REPO, SPLIT_NAME) == "running"
                and view.downloads.rows[(GGUF_REPO, SPLIT_NAME)].bar.value() > 30
            ),
            timeout=TIMEOUT_MS,
        )
        assert view.models.fit_text(SPLIT_NAME) == "Fits in memory"
        check_and_shoot(qapp, view, shot_dir / f"hub-results-downloading-{size}")

        view.token.ask(
            "This repository is gated or private: the hub needs an access token to download it.",
            None,
        )
        check_and_shoot(qapp, view, shot_dir / f"hub-token-{size}")
    finally:
        stop_downloads(view)


def test_the_tab_in_the_smallest_window_keeps_the_window_at_its_minimum(
    services: Any, hub: FakeHub, make_window: Any, qtbot: Any, qapp: Any, shot_dir: Path
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
        browse(view, qtbot)
        hub.throttle_bps = 150_000
        download(view, qtbot, SPLIT_NAME)
        qtbot.waitUntil(
            lambda: view.downloads.state_of(GGUF_REPO, SPLIT_NAME) == "running",
            timeout=TIMEOUT_MS,
        )
        check_and_shoot(qapp, window, shot_dir / "hub-window-720x480")
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
