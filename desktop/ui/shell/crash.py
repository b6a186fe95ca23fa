"""Unexpected exceptions (bugs) become a dialog with "Copy debug info", not a dead window.

Errors a person can act on are ``UserError``s and are shown where they happened (on the
message, under a field); whatever reaches this hook is a bug. Secrets are redacted.
"""

from __future__ import annotations

import asyncio
import logging
import platform
import sys
import traceback
from types import TracebackType
from typing import Any

from PySide6 import __version__ as pyside_version
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMessageBox

import desktop
from desktop.settings.secrets import redact

log = logging.getLogger("simi.crash")


def debug_info(details: str) -> str:
    return redact(
        f"SIMI Multi {getattr(desktop, '__version__', '?')}\n"
        f"Python {platform.python_version()} · PySide6 {pyside_version} · "
        f"{platform.platform()}\n\n{details}"
    )


class CrashReporter:
    """Installs itself as ``sys.excepthook`` and as the asyncio loop's exception handler."""

    def __init__(self) -> None:
        self._showing = False

    def install(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        sys.excepthook = self.excepthook
        if loop is not None:
            loop.set_exception_handler(self._loop_handler)

    def _loop_handler(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, BaseException):
            self.excepthook(type(exc), exc, exc.__traceback__)
        else:
            log.error("asyncio: %s", context.get("message"))

    def excepthook(
        self,
        exc_type: type[BaseException],
        exc: BaseException,
        tb: TracebackType | None,
    ) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc, tb)
            return
        details = "".join(traceback.format_exception(exc_type, exc, tb))
        log.error("unexpected error\n%s", redact(details))
        if self._showing or QGuiApplication.instance() is None:
            return
        self._showing = True
        try:
            box = QMessageBox()
            box.setIcon(QMessageBox.Icon.Critical)
            box.setWindowTitle("SIMI Multi hit a bug")
            box.setText(
                "Something went wrong inside SIMI Multi. Your conversations are saved; you "
                "can keep working. Please report this with the debug info."
            )
            box.setDetailedText(redact(details))
            copy = box.addButton("Copy debug info", QMessageBox.ButtonRole.ActionRole)
            box.addButton(QMessageBox.StandardButton.Close)
            box.exec()
            if box.clickedButton() is copy:
                QGuiApplication.clipboard().setText(debug_info(details))
        finally:
            self._showing = False
