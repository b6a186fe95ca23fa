"""The window's start-up loads only what its first screen needs.

The heavy packages below load after the first paint, off the GUI thread (``desktop.preload``),
or at their first use. The test starts the real app (``simi`` with no arguments, offscreen, a
new SIMI_HOME) and reads ``sys.modules`` at the main window's first paint event, so it is
deterministic: no timing is involved. A failure names the chain of imports that pulled the
package in, which is the import to make lazy.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# package -> why it must wait
HEAVY = {
    "httpx": "the remote providers' HTTP stack",
    "httpcore": "the remote providers' HTTP stack",
    "anyio": "the remote providers' HTTP stack and the API server",
    "numpy": "pulled in by sqlite-utils and llama-cpp-python, never needed by the window",
    "pygments": "code highlighting lexers (pulled in by httpx's command line)",
    "genai_prices": "the price list",
    "mcp": "the MCP SDK (tools)",
    "starlette": "the API server",
    "uvicorn": "the API server",
    "pypdf": "PDF attachments",
    "PIL": "image attachments",
    "keyring": "the keyring's backend (chosen on a worker thread after the first paint)",
    "llama_cpp": "llama.cpp runs in its worker process, never in the window's",
}


# what the window's frame (title, menus, the sidebar's title) paints without: the store and
# the chat services load after it, while the person already sees the window
FRAME_WAITS_FOR = {
    "sqlite_utils": "the store's library",
    "desktop.store": "the store (the database opens after the frame has painted)",
    "desktop.chat.services": "the services the window's lists and panes use",
    "desktop.ui.conversation.pane": "the conversation pane",
    "asyncio": "the event loop's library (~30 ms)",
    "multiprocessing": "only a frozen bundle needs it at start",
}


def _paint_reports(tmp_path: Path) -> tuple[dict[str, dict], subprocess.CompletedProcess[str]]:
    env = dict(os.environ, SIMI_HOME=str(tmp_path / "home"), QT_QPA_PLATFORM="offscreen")
    out = subprocess.run(
        [sys.executable, "-m", "tests.helpers.first_paint_modules", *HEAVY, "sqlite_utils"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    reports = [json.loads(line) for line in out.stdout.splitlines() if line.startswith('{"paint"')]
    return {report["paint"]: report for report in reports}, out


def test_the_first_paint_waits_for_no_heavy_package(tmp_path: Path) -> None:
    reports, out = _paint_reports(tmp_path)
    assert "open" in reports, (
        f"the window never painted open (rc {out.returncode}):\n" + (out.stderr[-3000:])
    )
    report = reports["open"]
    loaded = {name.partition(".")[0] for name in report["modules"]}
    assert "desktop" in loaded and "PySide6" in loaded  # it really was the window
    assert "desktop.ui.conversation.pane" in report["modules"]  # ... open, with its chat
    early = {
        name: f"{why}; first imported by {report['first_importers'].get(name, '?')}"
        for name, why in HEAVY.items()
        if name in loaded
    }
    assert early == {}
    assert out.returncode == 0, out.stderr[-3000:]

    # The frame painted first, before the store opened and the window's data modules loaded.
    assert "frame" in reports, "the window painted only once it was open"
    frame = set(reports["frame"]["modules"])
    assert "desktop.ui.shell.main_window" in frame
    early = {name: why for name, why in FRAME_WAITS_FOR.items() if name in frame}
    assert early == {}, reports["frame"]["first_importers"]


WARM_PAGES = """
import json, sys, threading
from PySide6.QtWidgets import QApplication
app = QApplication([])
from desktop import preload
from desktop.ui.shell.main_window import PAGE_MODULES
before = set(sys.modules)
took = {}
plan = preload.imports(PAGE_MODULES)
worker = threading.Thread(target=lambda: took.update(preload.warm_up(plan)))
worker.start()
worker.join()
print(json.dumps({"took": took, "new": sorted(set(sys.modules) - before)}))
"""


def test_the_pages_modules_load_on_a_worker_after_the_first_paint() -> None:
    """A page's first show builds widgets only: its modules were imported off the GUI thread
    once the window had painted (the dashboard's import was 9 ms of a 34 ms first show)."""
    from desktop import app
    from desktop.ui.shell.main_window import PAGE_MODULES

    assert "PAGE_MODULES" in inspect.getsource(app.warm_up_after_first_paint)
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out = subprocess.run(
        [sys.executable, "-c", WARM_PAGES],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(report["took"]) == sorted(PAGE_MODULES)  # each imported, none failed there
    assert set(PAGE_MODULES) <= set(report["new"])  # and not already loaded before the warm-up


WARM_LEXERS = """
import json, threading
from pygments.lexer import RegexLexer
from pygments.lexers import find_lexer_class_by_name
from desktop.ui.markdown.render import WARM_LANGUAGES, warm_code_highlighting
def compiled():  # the rule-based lexers (JSON's is hand-written: nothing to compile)
    classes = {n: find_lexer_class_by_name(n) for n in WARM_LANGUAGES}
    return {n: "_tokens" in c.__dict__ for n, c in classes.items() if issubclass(c, RegexLexer)}
before = compiled()
worker = threading.Thread(target=warm_code_highlighting)
worker.start()
worker.join()
print(json.dumps({"before": before, "after": compiled()}))
"""


def test_code_highlightings_lexers_are_made_on_a_worker_after_the_first_paint() -> None:
    """A lexer's first use compiles its rules (the Python lexer's: 17 ms on the GUI thread as
    four Compare replies ended): the warm-up after the first paint makes the common ones."""
    from desktop import app

    assert "warm_code_highlighting" in inspect.getsource(app.warm_up_after_first_paint)
    out = subprocess.run(
        [sys.executable, "-c", WARM_LEXERS],
        cwd=ROOT,
        env=dict(os.environ, QT_QPA_PLATFORM="offscreen"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert not any(report["before"].values())  # a fresh process has compiled none
    assert all(report["after"].values()), report["after"]
