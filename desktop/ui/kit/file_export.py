"""The "Export CSV…" / "Export JSON…" buttons, and writing their file off the GUI thread while
saying how it went (the Stats page, a prompt run)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QHBoxLayout, QPushButton

from desktop.ui.kit.async_door import run_blocking, start
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.widgets import hbox


def export_row(
    tip: str, export: Callable[[str], object]
) -> tuple[QHBoxLayout, QPushButton, QPushButton, ElidedLabel]:
    """A row: "Export CSV…" and "Export JSON…" (they call ``export("csv")`` /
    ``export("json")``), then a one-line message taking the rest (its whole text in its
    tooltip). The row and its three widgets."""
    row = hbox(spacing=6)
    csv_button, json_button = QPushButton("Export CSV…"), QPushButton("Export JSON…")
    for button, fmt in ((csv_button, "csv"), (json_button, "json")):
        button.setToolTip(tip)
        button.clicked.connect(lambda _=False, f=fmt: export(f))
        row.addWidget(button)
    message = ElidedLabel("")
    message.setObjectName("DashboardMessage")
    row.addWidget(message, 1)
    return row, csv_button, json_button, message


def export_in_background(
    path: str,
    write: Callable[[str], int],
    what: Callable[[int], str],
    say: Callable[[str], None],
    name: str,
) -> asyncio.Task[None]:
    """Run ``write(path)`` on a worker thread (it returns how many calls it wrote). ``say``
    "Exporting…" now, then "Exported ``what(count)`` to <file name>", or why the file could not
    be written."""

    async def run() -> None:
        try:
            count = await run_blocking(write, path)
        except OSError as exc:
            say(f"Could not write {path}: {exc.strerror or exc}. Choose another place.")
            return
        say(f"Exported {what(count)} to {Path(path).name}")

    say("Exporting…")
    return start(run(), name=name)
