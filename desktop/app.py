"""Composition root: QApplication + qasync loop, services, the main window, ordered shutdown.

The only module that knows every layer. ``simi`` with no subcommand calls ``run_app()``.
PySide6 is imported inside the functions so that importing this module stays cheap for the CLI.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

os.environ["QT_API"] = "pyside6"  # before qasync is imported: it prefers PyQt otherwise

from desktop.process_clock import started_at
from desktop.settings.paths import AppPaths

if TYPE_CHECKING:  # imported at run time inside the functions: PySide6 (see above), and what
    # the window's frame does not need before it paints
    import asyncio

    from PySide6.QtWidgets import QApplication, QWidget

    from desktop.chat.services import Services
    from desktop.store.errors import StoreUnavailable
    from desktop.ui.kit.loop import GuiThreadGarbageCollector
    from desktop.ui.shell.main_window import MainWindow

log = logging.getLogger("simi.app")
GUI_SWITCH_INTERVAL_S = 0.001  # sys.setswitchinterval in the window process (see run_app)

StoreChoice = Literal["move_aside", "retry", "quit"]


def open_services(
    paths: AppPaths, ask: Callable[[StoreUnavailable], StoreChoice]
) -> Services | None:
    """``Services.open`` that asks the person what to do when the store is unusable.

    ``ask`` gets the ``StoreUnavailable`` and answers "move_aside" (damaged file: rename it and
    start fresh), "retry" or "quit". A damaged database is never recreated without asking.
    """
    from desktop.chat.services import Services
    from desktop.store.db import move_aside
    from desktop.store.errors import StoreUnavailable

    while True:
        try:
            return Services.open(paths)
        except StoreUnavailable as exc:
            log.warning("store unavailable: %s", exc.user_message)
            choice = ask(exc)
            if choice == "quit":
                return None
            if choice == "move_aside" and exc.corrupt and exc.path:
                moved = move_aside(Path(exc.path))
                log.warning("moved damaged database aside to %s", moved)


def ask_store_problem(exc: StoreUnavailable) -> StoreChoice:
    """A message box naming the file; offers "Move aside and start fresh" for a damaged one."""
    from PySide6.QtWidgets import QMessageBox

    box = QMessageBox()
    box.setIcon(QMessageBox.Icon.Critical)
    box.setWindowTitle("SIMI Multi cannot open its data")
    box.setText(exc.user_message)
    if exc.path:
        box.setInformativeText(f"File: {exc.path}")
    move = None
    if exc.corrupt:
        move = box.addButton("Move aside and start fresh", QMessageBox.ButtonRole.AcceptRole)
    retry = box.addButton("Try again", QMessageBox.ButtonRole.ActionRole)
    quit_button = box.addButton("Quit", QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(quit_button)
    box.exec()
    clicked = box.clickedButton()
    if move is not None and clicked is move:
        return "move_aside"
    if clicked is retry:
        return "retry"
    return "quit"


def install_quit_signals(app: QApplication, window: QWidget) -> None:
    """Ctrl+C in the terminal or SIGTERM closes the window the normal way: a streaming reply
    is stopped and kept as cancelled, settings are saved, the worker exits."""
    import signal

    from PySide6.QtCore import QTimer

    def request_close(signum: int, _frame: object) -> None:
        log.info("signal %s: closing the window", signum)
        QTimer.singleShot(0, window.close)

    signal.signal(signal.SIGINT, request_close)
    signal.signal(signal.SIGTERM, request_close)
    # Python runs signal handlers only when the interpreter gets control; Qt's loop sleeps in
    # C++, so wake it a few times a second.
    wake = QTimer(app)
    wake.setInterval(200)
    wake.timeout.connect(lambda: None)
    wake.start()


def exit_after_first_paint(app: QApplication, window: MainWindow) -> None:
    """SIMI_EXIT_AFTER_FIRST_PAINT=1 (bench/startup.py): at the window's first paint (its
    frame) print {"first_paint_s": …} on stdout, from the process start (or from
    SIMI_BENCH_T0, epoch seconds, when the caller sets it); at its first paint once open (the
    agents and the chat shown) print {"open_paint_s": …}; then close the window the normal
    way. Call before the window is shown."""
    import json

    from PySide6.QtCore import QEvent, QObject, QTimer
    from PySide6.QtWidgets import QWidget

    started = started_at()

    class Paints(QObject):
        """The frame's paint from the window's own events (an application-wide filter would
        cost the frame ~10 ms: see ``after_own_first_paint``), then the open window's from
        the application's (its children may repaint without the window itself)."""

        def __init__(self, parent: QObject) -> None:
            super().__init__(parent)
            self.seen: set[str] = set()

        def eventFilter(self, obj: QObject, event: QEvent) -> bool:
            if event.type() != QEvent.Type.Paint:
                return False
            key = "open_paint_s" if window.opened else "first_paint_s"
            if key in self.seen or not (isinstance(obj, QWidget) and obj.window() is window):
                return False
            self.seen.add(key)
            elapsed = round(time.time() - started, 4)
            cpu = round(time.process_time(), 4)  # this process's CPU time (both threads)
            print(json.dumps({key: elapsed, "cpu_s": cpu}), flush=True)
            if key == "first_paint_s":
                window.removeEventFilter(self)
                app.installEventFilter(self)
            else:
                app.removeEventFilter(self)
                QTimer.singleShot(0, window.close)
            return False

    window.installEventFilter(Paints(window))


def paint_now(window: QWidget, timeout_ms: int = 300) -> None:
    """Show ``window`` and run Qt's events until it has painted once (at most ``timeout_ms``:
    a window that is not exposed, e.g. started minimised, does not hold the start up)."""
    from PySide6.QtCore import QEventLoop, QTimer

    from desktop.ui.kit.first_paint import after_own_first_paint

    waiting = QEventLoop()
    after_own_first_paint(window, waiting.quit)
    QTimer.singleShot(timeout_ms, waiting.quit)
    window.show()
    waiting.exec()


def warm_up_after_first_paint(
    services: Services, window: MainWindow, collector: GuiThreadGarbageCollector
) -> None:
    """What the first screen did not need: the heavy modules, the trust store and the
    keyring's backend on a worker thread (``desktop.preload``); then, on the GUI thread, the
    keyring notice if one is due and the other pages, one per idle moment."""
    from desktop import preload
    from desktop.ui.kit.async_door import run_blocking, start
    from desktop.ui.markdown.render import warm_code_highlighting
    from desktop.ui.shell.main_window import PAGE_MODULES

    plan = preload.steps(
        services.secrets, PAGE_MODULES, [("code highlighting", warm_code_highlighting)]
    )

    async def warm_up() -> None:
        await run_blocking(preload.warm_up, plan)
        collector.freeze_long_lived()  # the modules just loaded stay loaded
        _ = window.info_bar
        window.build_pages_when_idle()

    start(warm_up(), name="warm up after the first paint")


def run_app(argv: list[str] | None = None) -> int:
    """Show the window and run until it is closed. Returns the process exit code.

    The window's frame paints first, from the saved preferences alone (theme, size, split);
    then the store opens (or the person is asked about a damaged one, over the frame), the
    modules of the data load and ``window.open(services)`` fills the frame."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from desktop.settings.prefs import Preferences
    from desktop.ui.kit.first_paint import after_first_paint
    from desktop.ui.kit.resources import app_icon
    from desktop.ui.settings import appearance
    from desktop.ui.shell.main_window import MainWindow

    app = QApplication.instance() or QApplication(list(argv) if argv is not None else sys.argv)
    assert isinstance(app, QApplication)
    app.setApplicationName("SIMI Multi")
    app.setApplicationDisplayName("SIMI Multi")
    app.setDesktopFileName("simi-multi")
    app.setWindowIcon(app_icon())
    # Quit when our window's close has been handled, not when Qt sees no window left:
    # ending on aboutToQuit would stop the loop before awaited futures finish.
    app.setQuitOnLastWindowClosed(False)
    paths = AppPaths.from_env()
    prefs = Preferences(paths.settings_path)
    appearance.apply_saved(app, prefs)  # theme and text size
    window = MainWindow(prefs=prefs)
    if os.environ.get("SIMI_EXIT_AFTER_FIRST_PAINT") == "1":
        exit_after_first_paint(app, window)
    paint_now(window)

    from desktop.local.libraries import choose_at_start

    choose_at_start()  # which llama.cpp build, before anything loads one (the worker inherits it)
    import asyncio

    from desktop.ui.conversation.warm_local import LocalWarmer
    from desktop.ui.kit.loop import GuiThreadGarbageCollector, drain, new_loop
    from desktop.ui.kit.tooltips import install_plain_tooltips
    from desktop.ui.markdown import text_access
    from desktop.ui.shell.crash import CrashReporter

    text_access.install()  # screen readers read the custom-painted reply text
    install_plain_tooltips(app)  # a tooltip is never read as HTML (a name could hold <img>)
    services = open_services(paths, ask_store_problem)
    if services is None:
        window.close()
        return 1

    # A Python thread at work (the warm-up's imports, a model header read, the stats query)
    # keeps the GIL up to the switch interval each time the GUI thread calls into Python (a
    # paint, a slot): 5 ms by default, several times in one turn of the loop. 1 ms bounds it.
    sys.setswitchinterval(GUI_SWITCH_INTERVAL_S)
    loop = new_loop(app)
    collector = GuiThreadGarbageCollector(app)
    CrashReporter().install(loop)
    window.open(services)
    LocalWarmer(services, window).install(app)  # the worker at first paint, the model on focus
    closed: asyncio.Future[None] = loop.create_future()

    def on_closed() -> None:
        if not closed.done():
            closed.set_result(None)

    window.closed.connect(on_closed)
    if window.isHidden():  # closed while the store was asked about
        on_closed()
    collector.freeze_long_lived()  # start-up's modules and the open window
    after_first_paint(window, lambda: warm_up_after_first_paint(services, window, collector))
    install_quit_signals(app, window)
    log.info("window shown")

    screenshot = os.environ.get("SIMI_SCREENSHOT")
    if screenshot:

        def shoot() -> None:
            window.grab().save(screenshot)
            window.close()

        QTimer.singleShot(500, shoot)

    async def main() -> None:
        await closed
        # The window cancelled every streaming reply in closeEvent; wait until ChatService has
        # stored its partial text as "cancelled" before closing the database.
        await window.wait_idle()
        await services.aclose()  # the HTTP clients kept across turns, the MCP servers
        # Half-read HTTP streams are finalised through the loop (asyncgen hooks): collect
        # them now, while it still runs, not during shutdown where they would fail noisily.
        import gc

        gc.collect()
        await asyncio.sleep(0.05)

    try:
        loop.run_until_complete(main())
    finally:
        try:
            services.close()
        finally:
            window.deleteLater()
            drain(loop, app)
            collector.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(run_app())
