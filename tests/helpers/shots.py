"""Pictures of the app for people to look at: the two themes in turn, and a saved grab.

Where they go is the ``shot_dir`` fixture (tests/ui/conftest.py): ``$SIMI_SCREENSHOT_DIR``
when it is set, else the test's tmp dir.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication, QWidget

from desktop.ui.kit import theme
from tests.helpers.widget_checks import cut_labels, overlaps, unnamed_controls


def settle(qapp: QApplication) -> None:
    """Let layouts, repaints and deferred deletes run, as the event loop would."""
    for _ in range(5):
        qapp.processEvents()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    qapp.processEvents()


def light_and_dark(qapp: QApplication) -> Iterator[str]:
    """Install the light theme, then the dark one, yielding ``"light"`` and ``"dark"``; the
    light theme is back afterwards, also when the loop stops early (a failed assert)."""
    try:
        for shade, dark in (("light", False), ("dark", True)):
            theme.install(qapp, dark=dark)
            yield shade
    finally:
        theme.install(qapp, dark=False)


def save_grab(widget: QWidget, path: Path, min_bytes: int = 0) -> None:
    """Save ``widget`` as it is painted now to ``path``; a file of ``min_bytes`` or less is a
    blank picture, and fails."""
    assert widget.grab().save(str(path)), path
    assert path.stat().st_size > min_bytes, f"{path} looks empty"


def shoot(
    qapp: QApplication,
    widget: QWidget,
    path: Path,
    min_bytes: int,
    check: Callable[[str], None] | None = None,
) -> None:
    """``widget`` light then dark, as ``<path>-light.png`` and ``<path>-dark.png``; with
    ``check``, ``check(shade)`` runs on each theme before its picture is taken."""
    for shade in light_and_dark(qapp):
        settle(qapp)
        if check is not None:
            check(shade)
        save_grab(widget, path.with_name(f"{path.name}-{shade}.png"), min_bytes)
    settle(qapp)


def check_and_shoot(qapp: QApplication, widget: QWidget, path: Path) -> None:
    """:func:`shoot`, where on each theme nothing overlaps or is cut and every control has a
    name."""

    def holds(shade: str) -> None:
        assert overlaps(widget) == [], shade
        assert cut_labels(widget) == [], shade
        assert unnamed_controls(widget) == [], shade

    shoot(qapp, widget, path, 5_000, holds)
