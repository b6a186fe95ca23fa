"""No tooltip makes the app read a file: every one shows its text as typed (issue 25).

Qt shows a tooltip as rich text when the text looks like HTML, and lays it out as it shows it:
``Model: <img src="/some/fifo">`` (a model's name, a tool's error, a title) would read the FIFO
on the GUI thread and never return. ``desktop/ui/kit/tooltips.py`` filters every ``ToolTip`` event
of the application. Here a child process (this file run as a script, with a timeout) shows the
tooltips of a label, a tool button, list and table items, a header section, a tab, a text
edit's ``title`` and a widget without one of its own (its parent's), all naming a real FIFO;
the test watches the FIFO the whole time: a process that opens it for reading is let go at
once (the test opens it for writing, then closes it) and counted, so a broken filter fails the
test in a second instead of freezing it. Without the filter the same child does open the FIFO
(the control: the test would notice).
"""

from __future__ import annotations

import ast
import errno
import html
import inspect
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from PySide6.QtWidgets import QWidget

W = TypeVar("W", bound="QWidget")
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 30  # a pass takes ~1 s; a read of the FIFO never ends
CASES = (
    *("label", "tool_button", "list_item", "table_item", "header", "tab", "text_title"),
    *("from_parent", "rich_opt_in", "show_plain"),
)
BARE_CASES = ("label", "list_item")  # without the filter: each would freeze


def _tip(fifo: str) -> str:
    return f'Model: <img src="{fifo}">\n  indented &amp; two  spaces'


# the subprocess ---------------------------------------------------------------------------------
def _show_all(fifo: str, mode: str) -> dict[str, Any]:
    """Show each case's tooltip with a ToolTip help event, as Qt sends it after a hover: what
    QToolTip then holds, and whether it is visible."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEvent, QPoint
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import (
        QApplication,
        QLabel,
        QListWidget,
        QListWidgetItem,
        QTabBar,
        QTableWidget,
        QTableWidgetItem,
        QTextEdit,
        QToolButton,
        QToolTip,
        QWidget,
    )

    from desktop.ui.kit.tooltips import install_plain_tooltips, set_rich_tooltip, show_plain

    app = QApplication([])
    if mode == "plain":
        install_plain_tooltips(app)
    tip = _tip(fifo)
    keep: list[QWidget] = []

    def shown(widget: W) -> W:
        for old in keep:  # one window at a time under the pointer
            old.hide()
        widget.resize(240, 120)
        widget.show()
        keep.append(widget)
        app.processEvents()
        return widget

    def hover(name: str, target: QWidget, pos: QPoint) -> dict[str, Any]:
        QToolTip.showText(QPoint(0, 0), "-")  # so a case that shows nothing reads "-"
        print(f"CASE {name}", flush=True)  # the test names the case that opened the FIFO
        QTest.mouseMove(target, pos)  # the pointer comes to rest there, through the window
        app.processEvents()
        event = QHelpEvent(QEvent.Type.ToolTip, pos, target.mapToGlobal(pos))
        QApplication.sendEvent(target, event)
        app.processEvents()
        return {"text": QToolTip.text(), "visible": QToolTip.isVisible()}

    def label() -> dict[str, Any]:
        widget = shown(QLabel("model"))
        widget.setToolTip(tip)
        return hover("label", widget, QPoint(5, 5))

    def tool_button() -> dict[str, Any]:
        widget = shown(QToolButton())
        widget.setToolTip(tip)
        return hover("tool_button", widget, QPoint(5, 5))

    def list_item() -> dict[str, Any]:
        view = shown(QListWidget())
        item = QListWidgetItem("a file")
        item.setToolTip(tip)
        view.addItem(item)
        app.processEvents()
        return hover("list_item", view.viewport(), view.visualItemRect(item).center())

    def table_item() -> dict[str, Any]:
        view = shown(QTableWidget(2, 2))
        item = QTableWidgetItem("a file")
        item.setToolTip(tip)
        view.setItem(1, 1, item)
        app.processEvents()
        return hover("table_item", view.viewport(), view.visualItemRect(item).center())

    def header() -> dict[str, Any]:
        view = shown(QTableWidget(2, 2))
        item = QTableWidgetItem("Model")
        item.setToolTip(tip)
        view.setHorizontalHeaderItem(1, item)
        app.processEvents()
        head = view.horizontalHeader()
        at = QPoint(head.sectionViewportPosition(1) + 5, head.height() // 2)
        return hover("header", head.viewport(), at)

    def tab() -> dict[str, Any]:
        bar = shown(QTabBar())
        bar.addTab("one")
        bar.addTab("two")
        bar.setTabToolTip(1, tip)
        app.processEvents()
        return hover("tab", bar, bar.tabRect(1).center())

    def text_title() -> dict[str, Any]:
        edit = shown(QTextEdit())
        edit.setHtml(f'<span title="{html.escape(tip)}">a title from outside</span>')
        app.processEvents()
        return hover("text_title", edit.viewport(), QPoint(12, 12))

    def from_parent() -> dict[str, Any]:
        parent = shown(QWidget())
        parent.setToolTip(tip)
        child = QLabel("no tooltip of its own", parent)
        child.show()
        app.processEvents()
        return hover("from_parent", child, QPoint(5, 5))

    def rich_opt_in() -> dict[str, Any]:
        widget = shown(QLabel("agent"))
        set_rich_tooltip(widget, f"<b>Model</b>: {html.escape(tip)}")
        return hover("rich_opt_in", widget, QPoint(5, 5))

    def direct() -> dict[str, Any]:
        widget = shown(QWidget())
        QToolTip.showText(QPoint(0, 0), "-")
        print("CASE show_plain", flush=True)
        show_plain(widget.mapToGlobal(QPoint(5, 5)), tip, widget)
        app.processEvents()
        return {"text": QToolTip.text(), "visible": QToolTip.isVisible()}

    run = {
        "label": label,
        "tool_button": tool_button,
        "list_item": list_item,
        "table_item": table_item,
        "header": header,
        "tab": tab,
        "text_title": text_title,
        "from_parent": from_parent,
        "rich_opt_in": rich_opt_in,
        "show_plain": direct,
    }
    return {name: run[name]() for name in (CASES if mode == "plain" else BARE_CASES)}


# the test ---------------------------------------------------------------------------------------
def _let_go(fifo: Path) -> bool:
    """Whether a process waits to read the FIFO; if one does, it reads an empty file now."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ENXIO:  # no reader
            return False
        raise
    os.close(fd)
    return True


def _run(fifo: Path, mode: str, folder: Path) -> tuple[dict[str, Any], list[str]]:
    """The child's result, and the cases during which it opened the FIFO."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    out_path, err_path = folder / f"{mode}.out", folder / f"{mode}.err"
    opened: list[str] = []
    with out_path.open("w") as out, err_path.open("w") as err:
        child = subprocess.Popen(
            [sys.executable, __file__, str(fifo), mode], cwd=ROOT, env=env, stdout=out, stderr=err
        )
        deadline = time.monotonic() + TIMEOUT_S
        while child.poll() is None:
            if time.monotonic() > deadline:
                child.kill()
                child.wait()
                pytest.fail(f"showing tooltips froze ({mode}): {out_path.read_text()[-500:]}")
            if _let_go(fifo):
                cases = [x for x in out_path.read_text().splitlines() if x.startswith("CASE ")]
                opened.append(cases[-1].removeprefix("CASE ") if cases else "?")
            time.sleep(0.01)
    assert child.returncode == 0, err_path.read_text()[-3000:]
    return json.loads(out_path.read_text().strip().splitlines()[-1]), opened


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "picture.png"
    os.mkfifo(path)
    return path


def _as_shown(markup: str) -> str:
    """The text a rich-text tooltip shows for ``markup``."""
    from PySide6.QtGui import QTextDocument

    doc = QTextDocument()
    doc.setHtml(markup)
    return doc.toPlainText()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_every_tooltip_shows_outside_text_as_typed(fifo: Path, tmp_path: Path) -> None:
    from desktop.ui.kit.tooltips import plain_tip

    shown, opened = _run(fifo, "plain", tmp_path)
    assert opened == [], f"Qt opened the FIFO showing the tooltip of: {sorted(set(opened))}"
    tip = _tip(str(fifo))
    for name in CASES:
        if name == "rich_opt_in":
            continue
        assert shown[name]["visible"], name
        assert shown[name]["text"] == plain_tip(tip), (name, shown[name])
        assert "<img" not in shown[name]["text"], name
        assert _as_shown(shown[name]["text"]) == tip, name  # every character, line breaks kept
    # the app's own markup still shows as markup, the outside text in it escaped by the app
    assert shown["rich_opt_in"]["text"] == f"<b>Model</b>: {html.escape(tip)}"
    assert shown["rich_opt_in"]["visible"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_without_the_filter_qt_reads_the_fifo(fifo: Path, tmp_path: Path) -> None:
    """The control: the same tooltips, shown by Qt itself, open the FIFO (and would wait on it
    for ever), so the test above would notice a filter that let one through."""
    shown, opened = _run(fifo, "bare", tmp_path)
    assert set(opened) == set(BARE_CASES), opened
    assert shown["label"]["text"] == _tip(str(fifo))  # Qt got the text as it was


def test_the_ui_tests_see_plain_tooltips(qtbot: Any) -> None:
    """conftest installs the filter as desktop/app.py does, so every UI test sees what a
    person sees."""
    from PySide6.QtCore import QEvent, QPoint
    from PySide6.QtGui import QHelpEvent
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication, QLabel, QToolTip

    from desktop import app
    from desktop.ui.kit.tooltips import plain_tip

    assert "install_plain_tooltips(app)" in inspect.getsource(app.run_app)
    label = QLabel("agent")
    qtbot.addWidget(label)
    label.setToolTip("<b>not bold</b>")
    label.show()
    QTest.mouseMove(label, QPoint(2, 2))  # the pointer rests on it
    QApplication.sendEvent(label, QHelpEvent(QEvent.Type.ToolTip, QPoint(2, 2), QPoint(2, 2)))
    assert QToolTip.text() == plain_tip("<b>not bold</b>")
    QToolTip.hideText()


def test_no_module_shows_a_tooltip_around_the_filter() -> None:
    """A widget that shows its own tooltip (a chart's point) calls ``show_plain``: a direct
    ``QToolTip.showText`` would show a name as HTML again."""
    found = []
    for path in sorted((ROOT / "desktop").rglob("*.py")):
        if path.name == "tooltips.py":
            continue
        source = path.read_text(encoding="utf-8")
        if "showText" not in source:
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Attribute) and node.attr == "showText":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == [], found


if __name__ == "__main__":
    print(json.dumps(_show_all(sys.argv[1], sys.argv[2])), flush=True)
