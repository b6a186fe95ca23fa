"""Frames: how long the window's GUI thread is held while a person uses it.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/frames.py [--session-seconds 60]
        [--quick] [--only KEY[,KEY]] [--stacks MS] [--profile "STEP;STEP"]

Drives the real app offscreen: ``desktop.app.run_app`` itself (the QApplication, the qasync
loop from ``desktop.ui.kit.loop.new_loop``, ``Services.open``, the ``MainWindow`` and all the
app installs around it) on a SIMI home filled beforehand in a child process with what
``bench/scale.py`` builds (a 5,000-message conversation and 10,000 short ones in the real
SQLite file) and the 100,000 stats rows of ``bench/stats.py`` (``tests.helpers.stats_rows``).
The agents: the starter model (SmolLM2-135M, ensured by ``Services``; its reply length set to
64 tokens), one "remote" ``openai-compatible`` agent and four more for Compare, all pointing
at a loopback OpenAI-style server in a separate process (as in ``bench/remote_streams.py``;
here it also holds the four Compare replies' last chunk until all four have streamed, so they
end at the same moment). The bench moves the mouse and keyboard as the system does, with mouse and
key events sent to the window (clicks on the sidebar's rows, the Send buttons, the page
buttons; typed characters; PageUp), and waits as a person does, with ``asyncio.sleep`` on the
app's own loop.

How "held" is measured (``bench/frames_probe.py``, ``HoldProbe``): a 1 ms ``Qt.PreciseTimer``
on the GUI thread records how late each timeout comes (gap since the previous one minus 1 ms),
and Qt's own event timing, ``QAbstractEventDispatcher`` ``aboutToBlock`` (the loop is about to
wait; the signal ``awake`` marks no end of a wait on this Qt, see the probe), gives each turn
of the loop: the time between two waits. Each scenario is one or more named segments; a
segment's hold is the larger of its latest tick and its longest turn; a figure is the largest
hold over the scenario's segments (for PageUp: the p99 over the steps). The probe runs for the
whole session; its own cost is a Python call per millisecond.

Printed (one JSON object): the eight figures below, ``targets`` (the same keys: the target),
``met`` (key: figure <= target) and ``details`` (per scenario: n, p50/p99/max of the holds,
which segment held longest; for the session, the hold of each kind of step and the worst one).
All targets are one 60 Hz frame (16 ms) but ``first_paint_ratio`` (1.4):

* ``page_up_p99_ms``: PageUp (key events to the transcript) from the bottom of the
  5,000-message conversation to its top, a press due every ~33 ms (a held key's
  auto-repeat, which does not wait for the window); each press's hold (until the next
  press); the p99 over the presses (40 presses with --quick).
* ``compare_send_block_ms``: Compare with four columns (the four loopback agents): the click
  on Send until every column shows text (at least 200 ms).
* ``compare_end_block_ms``: from the moment all four have streamed their last token (the
  server then waits 400 ms and ends the four in the same turn of its loop) until all four
  turns are finished and 400 ms more.
* ``first_remote_send_block_ms``: the first call to a remote agent in this process: once the
  window has painted, a person reads (0.5 s), clicks the remote agent in the sidebar, clicks
  into the message box and types (~1 s), clicks Send; the longest hold from the click to the
  reply's end (+300 ms). The bench imports nothing of the HTTP stack itself (the server runs
  in its own process and the home is filled in another), so whatever loads httpx, httpcore
  or anyio in this process is the app; ``details`` names who imported them first and which
  packages the Send itself imported.
* ``agent_switch_block_ms``: a click on another agent in the sidebar (+400 ms), in turn the
  local, the remote and a Compare agent.
* ``open_5k_conversation_ms``: a click on the 5,000-message conversation in the conversation
  list, with no pane open for it, until its transcript has built what it builds at open
  (+300 ms).
* ``first_paint_ratio``: the median first paint of ``python -m desktop`` (a fresh SIMI_HOME,
  SIMI_EXIT_AFTER_FIRST_PAINT=1, timed by ``bench/startup.py``'s ``paints``) over the median
  of ``bench/bare_window.py``, alternating, after one warm-up run of each (5 runs each; 1 with
  --quick), run before the window opens. The app's first paint is its window's frame
  (title, menus, the sidebar's title), before the store opens; ``details.first_paint`` also
  gives ``app_open_median_s``, its first paint once open (the agents and the chat shown).
* ``worst_ms``: the longest hold over a scripted session of ``--session-seconds`` (default
  60): pick the local agent, type, send, wait for its reply; open that reply's timeline; pick
  the remote agent, type, send, wait; switch conversations in the list; open the long
  conversation and page through it; show the Stats page over the 100,000 rows; Compare four
  columns; repeat until the time is up (the first round always runs whole). ``details.session``
  lists each kind of step's hold and the step that held longest.

Bytecode: this machine sets PYTHONDONTWRITEBYTECODE=1, so every start would compile the app
from source, which an installed app (shipped with its bytecode) never does. The child
processes timed for ``first_paint_ratio`` therefore run without PYTHONDONTWRITEBYTECODE and
with PYTHONPYCACHEPREFIX set to ``<system temp dir>/simi-bench-pycache`` (the warm-up run
fills it), and this process reads and writes its bytecode there too (``sys.pycache_prefix``),
so a module the app imports lazily mid-session (the HTTP stack on the first remote call) is
loaded, not compiled; without --quick the app's sources, the virtual environment and the
standard library are compiled into that cache first (once; then only what changed).

``--stacks MS``: also sample the GUI thread's Python stack every 5 ms while a turn of the loop
has run longer than MS, and list the most sampled app frames per scenario (to find a cause).
``--profile "STEP;STEP"``: cProfile the GUI thread during those session steps (their names
in ``details.session.by_step``) or the agent switches (``agent switch``); each profile is
written to ``<temp dir>/frames-profile-STEP.txt``. ``--only`` takes figure names
(comma-separated); the others are null. Internal modes:
``--serve`` (the loopback server) and ``--fill`` (fill a SIMI home).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
PYCACHE = Path(tempfile.gettempdir()) / "simi-bench-pycache"
sys.path[:0] = [str(ROOT), str(BENCH)]  # the app, tests.helpers and the other benches

KEYS = (
    "page_up_p99_ms",
    "compare_send_block_ms",
    "compare_end_block_ms",
    "first_remote_send_block_ms",
    "agent_switch_block_ms",
    "open_5k_conversation_ms",
    "first_paint_ratio",
    "worst_ms",
)
TARGETS: dict[str, float] = {key: 16.0 for key in KEYS} | {"first_paint_ratio": 1.4}
HEAVY = ("httpx", "httpcore", "anyio", "h11", "httpx_sse", "certifi")

CHAT_TOKENS = 60  # a remote chat reply: 60 tokens at 100 tok/s
CHAT_RATE = 100.0
COMPARE_TOKENS = 80  # each Compare column: 80 tokens at 50 tok/s, then the common end
COMPARE_RATE = 50.0
END_PAUSE_S = 0.4
END_TOKEN = "(end)"
LOCAL_MAX_TOKENS = 64
PERSON_CHAR_S = 0.03  # typing: ~33 characters a second
PAGE_STEP_S = 1 / 30  # PageUp auto-repeat

REPLY = (
    "Here is a short answer about **lighthouses** and the people who kept them.\n\n"
    "A lighthouse marks a dangerous coast or a safe channel; its light turns so that each "
    "one has its own pattern, and a ship's officer can tell *which* light it is.\n\n"
    "- the lamp and its lens\n- the clockwork that turns it\n- the keeper's log\n\n"
    "```python\ndef beam(angle: float) -> float:\n    return angle % 360\n```\n\n"
    "Most are automatic now, watched from far away. "
)


def tokens(count: int, last: str | None = None) -> list[str]:
    """``count`` word-sized pieces of ``REPLY`` (repeated), the last one ``last`` if given."""
    pieces = re.findall(r"\S+\s*|\s+", REPLY)
    out = [pieces[i % len(pieces)] for i in range(count)]
    if last is not None and out:
        out[-1] = " " + last
    return out


# the loopback server (its own process: --serve) ---------------------------------------------


def serve(rate: float, count: int, compare_rate: float, compare_count: int) -> None:
    """An OpenAI-style endpoint on 127.0.0.1 (prints its port). Model ``cmp-*``: a Compare
    column, streamed at ``compare_rate``, its last chunk held until the four have streamed
    all their tokens, then ``END_PAUSE_S``, then ended together; any other model: ``count``
    tokens at ``rate``. A request that is not a chat completion gets an empty model list."""

    barrier: list[asyncio.Barrier] = []

    def together() -> asyncio.Barrier:
        if not barrier or barrier[0].broken:
            barrier[:] = [asyncio.Barrier(4)]
        return barrier[0]

    async def stream(writer: asyncio.StreamWriter, model: str) -> None:
        compare = model.startswith("cmp-")
        pace = compare_rate if compare else rate
        pieces = tokens(compare_count, END_TOKEN) if compare else tokens(count)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        start = time.perf_counter()
        for i, piece in enumerate(pieces):
            delay = start + i / pace - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}], "model": model}
            data = f"data: {json.dumps(chunk)}\n\n".encode()
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()
        if compare:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.BrokenBarrierError):
                await asyncio.wait_for(together().wait(), 20)
            await asyncio.sleep(END_PAUSE_S)
        usage = {"prompt_tokens": 12, "completion_tokens": len(pieces)}
        tail = json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        tail_bytes = f"data: {tail}\n\ndata: {json.dumps({'choices': [], 'usage': usage})}\n\n"
        body = tail_bytes.encode() + b"data: [DONE]\n\n"
        writer.write(f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
        await writer.drain()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            length = 0
            for line in head.split("\r\n"):
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            body = await reader.readexactly(length) if length else b""
            method, path = head.split(" ", 2)[:2]
            if method == "POST" and path.endswith("/chat/completions"):
                model = str(json.loads(body or b"{}").get("model", ""))
                await stream(writer, model)
            else:
                data = b'{"object": "list", "data": []}'
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    + f"Content-Length: {len(data)}\r\n\r\n".encode()
                    + data
                )
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        print(server.sockets[0].getsockname()[1], flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def start_server() -> tuple[subprocess.Popen[str], str]:
    args = [str(CHAT_RATE), str(CHAT_TOKENS), str(COMPARE_RATE), str(COMPARE_TOKENS)]
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve", *args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=bytecode_env(),
    )
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    if not port.isdigit():
        proc.kill()
        raise RuntimeError("the loopback server did not start")
    return proc, f"http://127.0.0.1:{port}/v1"


# filling a SIMI home (its own process: --fill) --------------------------------------------


def quick_conversations(services: Any, text: Callable[[int], str]) -> tuple[int, int]:
    """--quick (the test): a 600-message conversation (still read off the GUI thread) and a
    short one, instead of bench/scale.py's 5,000 messages and 10,000 conversations."""
    store = services.conversations
    ids = []
    for title, count in (("The long one", 600), ("The short one", 10)):
        conv = store.create(None, title)
        for i in range(count):
            store.add_message(conv.id, "user" if i % 2 == 0 else "assistant", text(i))
        ids.append(int(conv.id))
    return ids[0], ids[1]


def fill(base: str, quick: bool = False) -> dict[str, Any]:
    """The data of bench/scale.py and bench/stats.py, and the bench's agents, in SIMI_HOME
    (with --quick, a small part of it)."""
    home = os.environ["SIMI_HOME"]
    import scale  # sets its own SIMI_HOME on import: ours is put back

    stray = os.environ["SIMI_HOME"]
    os.environ["SIMI_HOME"] = home
    if stray != home:
        shutil.rmtree(stray, ignore_errors=True)
    from datetime import UTC, datetime

    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths
    from desktop.store.agents import Agent
    from tests.helpers.stats_rows import fill_stats

    began = time.perf_counter()
    services = Services.open(AppPaths.from_env())
    try:
        if quick:
            long_id, short_id = quick_conversations(services, scale.text)
        else:
            long_id, short_id = scale.fill(services)
        rows = 2_000 if quick else 100_000
        fill_stats(services.db, rows, 50, seed=11, end=datetime.now(UTC).isoformat())
        starter = next(a for a in services.agents.list() if a.is_local)
        services.agents.update(starter.with_changes(max_tokens=LOCAL_MAX_TOKENS))
        remote = services.agents.create(
            Agent(name="Loopback", kind="openai-compatible", base_url=base, model="chat")
        )
        from remote_streams import loopback_agents

        compare = loopback_agents(services, base, "Compare", "cmp", 4)
        return {
            "long_id": long_id,
            "short_id": short_id,
            "local_id": starter.id,
            "remote_id": remote.id,
            "compare_ids": [a.id for a in compare],
            "fill_s": round(time.perf_counter() - began, 1),
        }
    finally:
        services.close()


def filled_home(base: str, home: str, quick: bool) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--fill", "--base", base]
        + (["--quick"] if quick else []),
        env={**bytecode_env(), "SIMI_HOME": home},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise RuntimeError(f"filling the home failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# bytecode, as an installed app has it -------------------------------------------------------


def bytecode_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def use_bytecode_cache() -> None:
    """This process: read and write bytecode in PYCACHE from now on."""
    PYCACHE.mkdir(parents=True, exist_ok=True)
    sys.pycache_prefix = str(PYCACHE)
    sys.dont_write_bytecode = False


def precompile() -> None:
    """The app's sources every time (only what changed is compiled); the virtual environment
    and the standard library once per state of site-packages."""
    site = Path(sysconfig.get_paths()["purelib"])
    stamp = (
        PYCACHE
        / f".compiled-{sys.version_info[0]}{sys.version_info[1]}-{int(site.stat().st_mtime)}"
    )
    dirs = [str(ROOT / "desktop")]
    if not stamp.exists():
        dirs += [str(site), sysconfig.get_paths()["stdlib"]]
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j0", *dirs],
        env=bytecode_env(),
        capture_output=True,
        timeout=600,
        cwd=ROOT,
    )
    stamp.touch()


# first paint against a bare window ---------------------------------------------------------


def first_paint(runs: int) -> tuple[float, dict[str, Any]]:
    import startup

    app = [sys.executable, "-m", "desktop"]
    bare = [sys.executable, str(BENCH / "bare_window.py")]
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(bytecode_env())
    try:
        startup.one_run(bare)  # warm-up: file cache, bytecode
        startup.one_run(app)
        times: dict[str, list[float]] = {"app": [], "bare": [], "app_open": []}
        for i in range(runs):
            order = (("bare", bare), ("app", app)) if i % 2 == 0 else (("app", app), ("bare", bare))
            for name, command in order:
                found = startup.paints(command)
                times[name].append(found["first_paint_s"])
                if "open_paint_s" in found:
                    times["app_open"].append(found["open_paint_s"])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    app_s, bare_s = statistics.median(times["app"]), statistics.median(times["bare"])
    open_s = statistics.median(times["app_open"])
    return app_s / bare_s, {
        "app_median_s": round(app_s, 3),
        # the first paint is the window's frame; this one is the window open (agents, chat)
        "app_open_median_s": round(open_s, 3),
        "app_open_ratio": round(open_s / bare_s, 2),
        "bare_median_s": round(bare_s, 3),
        "app_runs_s": [round(t, 3) for t in times["app"]],
        "bare_runs_s": [round(t, 3) for t in times["bare"]],
        "pycache_prefix": str(PYCACHE),
    }


# driving the window --------------------------------------------------------------------------


class Person:
    """What a person does to the window, and the probe that times it."""

    def __init__(self, window: Any, ids: dict[str, Any], probe: Any, quick: bool) -> None:
        from PySide6.QtCore import QPoint, Qt
        from PySide6.QtTest import QTest
        from PySide6.QtWidgets import QListWidget, QToolButton

        self.QTest, self.Qt, self.QPoint = QTest, Qt, QPoint
        self.window = window
        self.ids = ids
        self.probe = probe
        self.quick = quick
        self.services = window.services
        self.agent_list = window.findChild(QListWidget, "AgentList")
        self.page_buttons = {b.text(): b for b in window.findChildren(QToolButton, "PageButton")}
        self.details: dict[str, Any] = {}
        self.profilers: dict[str, cProfile.Profile] = {}  # --profile: session steps

    @contextlib.contextmanager
    def profiled(self, name: str) -> Iterator[None]:
        """cProfile what runs meanwhile, when --profile names ``name``."""
        profiler = self.profilers.get(name)
        if profiler is not None:
            profiler.enable()
        try:
            yield
        finally:
            if profiler is not None:
                profiler.disable()

    # small acts ------------------------------------------------------------------------------
    async def until(self, condition: Callable[[], bool], timeout: float, what: str) -> float:
        began = time.perf_counter()
        while not condition():
            if time.perf_counter() - began > timeout:
                raise TimeoutError(f"{what}: not within {timeout} s")
            await asyncio.sleep(0.01)
        return time.perf_counter() - began

    # Input goes to the window, as the system sends it: QTest on a widget hands it to the
    # widget directly, past what the app watches at its windows (kit/input_watch.py); QTest on
    # a window runs the event loop inside the call, under the bench's own coroutine.
    def _mouse(self, window: Any, kind: Any, at: Any, button: Any, buttons: Any) -> None:
        from PySide6.QtCore import QPointF
        from PySide6.QtGui import QMouseEvent
        from PySide6.QtWidgets import QApplication

        local = QPointF(at)
        event = QMouseEvent(
            kind,
            local,
            local,
            QPointF(window.mapToGlobal(at)),
            button,
            buttons,
            self.Qt.KeyboardModifier.NoModifier,
        )
        QApplication.sendEvent(window, event)

    def click(self, widget: Any, pos: Any = None) -> None:
        from PySide6.QtCore import QEvent
        from PySide6.QtGui import QCursor

        top = widget.window()
        at = top.mapFromGlobal(
            widget.mapToGlobal(pos if pos is not None else widget.rect().center())
        )
        window = top.windowHandle()
        QCursor.setPos(window.mapToGlobal(at))
        left, none = self.Qt.MouseButton.LeftButton, self.Qt.MouseButton.NoButton
        self._mouse(window, QEvent.Type.MouseMove, at, none, none)
        self._mouse(window, QEvent.Type.MouseButtonPress, at, left, left)
        self._mouse(window, QEvent.Type.MouseButtonRelease, at, left, none)

    def key(self, widget: Any, key: Any) -> None:
        """A key (a ``Qt.Key`` or a character) to ``widget``'s window; it has the focus."""
        from PySide6.QtCore import QEvent
        from PySide6.QtGui import QKeyEvent
        from PySide6.QtWidgets import QApplication

        text = key if isinstance(key, str) else ""
        code = self.Qt.Key(ord(key.upper())) if isinstance(key, str) else key
        window = widget.window().windowHandle()
        for kind in (QEvent.Type.KeyPress, QEvent.Type.KeyRelease):
            event = QKeyEvent(kind, code, self.Qt.KeyboardModifier.NoModifier, text)
            QApplication.sendEvent(window, event)

    def click_agent(self, agent_id: int) -> None:
        from desktop.ui.kit.widgets import ID_ROLE

        for row in range(self.agent_list.count()):
            item = self.agent_list.item(row)
            if item.data(ID_ROLE) == agent_id:
                self.agent_list.scrollToItem(item)
                rect = self.agent_list.visualItemRect(item)
                self.click(self.agent_list.viewport(), rect.center())
                return
        raise LookupError(f"agent {agent_id} is not in the sidebar")

    def click_conversation(self, conversation_id: int | None = None, row: int = 0) -> int:
        """Click a row of the conversation list (that conversation's, or row ``row``)."""
        view = self.window.browser.conversation_list
        model = view.model()
        if conversation_id is not None:
            row = model.row_of(conversation_id)
            if row < 0:
                raise LookupError(f"conversation {conversation_id} is not in the list")
        index = model.index(row, 0)
        view.scrollTo(index)
        self.click(view.viewport(), view.visualRect(index).center())
        return int(model.conversation(row).id)

    def show_page(self, label: str) -> None:
        self.click(self.page_buttons[label])

    async def type_text(self, widget: Any, text: str, per_char: float = PERSON_CHAR_S) -> None:
        self.click(widget.viewport() if hasattr(widget, "viewport") else widget)
        for char in text:
            self.key(widget, char)
            await asyncio.sleep(per_char)

    async def send_and_wait(self, pane: Any, timeout: float = 60.0) -> dict[str, Any]:
        """Click Send; until the reply has ended (Stop after ``timeout``)."""
        self.click(pane.send_button)
        await self.until(lambda: pane.busy, 5, "the reply did not start")
        try:
            await self.until(lambda: not pane.busy, timeout, "the reply did not end")
            stopped = False
        except TimeoutError:
            pane.stop()
            await self.until(lambda: not pane.busy, 10, "the reply did not stop")
            stopped = True
        last = self.services.conversations.messages(pane.conversation_id)[-1]
        return {"status": last.status, "chars": len(last.content), "stopped": stopped}

    async def settle(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    # scenarios -------------------------------------------------------------------------------
    async def first_remote_send(self) -> None:
        at_paint = sorted(name for name in HEAVY if name in sys.modules)
        await self.settle(0.5)  # reading the window
        self.click_agent(self.ids["remote_id"])
        await self.settle(0.2)
        pane = self.window.pane
        await self.type_text(pane.composer, "What is a lighthouse for?")
        modules = set(sys.modules)
        self.probe.mark("first_remote_send")
        reply = await self.send_and_wait(pane, 60)
        await self.settle(0.3)
        self.probe.mark(None)
        loaded: dict[str, int] = {}
        for module in sorted(set(sys.modules) - modules):
            top = module.partition(".")[0]
            loaded[top] = loaded.get(top, 0) + 1
        self.details["first_remote_send"] = {
            "http_stack_loaded_at_first_paint": at_paint,
            "http_stack_loaded_at_send": sorted(name for name in HEAVY if name in modules),
            "modules_imported_during_the_send": loaded,  # per top-level package
            "reply": reply,
        }

    async def agent_switch(self, count: int) -> None:
        order = [self.ids["local_id"], self.ids["remote_id"], self.ids["compare_ids"][0]]
        names = {a.id: a.name for a in self.services.agents.list()}
        self.show_page("Chat")
        await self.settle(0.3)
        for i in range(count):
            agent_id = order[i % len(order)]
            self.probe.mark("agent_switch", agent=names.get(agent_id))
            with self.profiled("agent switch"):
                self.click_agent(agent_id)
                await self.settle(0.4)
        self.probe.mark(None)

    async def open_long(self, count: int) -> None:
        long_id = self.ids["long_id"]
        window = self.window
        for _ in range(count):
            self.probe.mark(None)
            window.new_chat()  # the long one's pane, if open, goes: a fresh open each time
            pane = window.pane_stack.pane_for(long_id)
            if pane is not None:
                window.pane_stack.close_pane(pane)
            await self.settle(0.5)
            self.probe.mark("open_5k")
            self.click_conversation(long_id)
            await self.until(lambda: window.conversation_id == long_id, 10, "open (long)")
            await self.until(lambda: not window.pane.transcript.prefetching, 20, "first batches")
            await self.settle(0.3)
        self.probe.mark(None)

    async def page_up(self, limit: int) -> None:
        transcript = self.window.pane.transcript
        bar = transcript.verticalScrollBar()
        transcript.setFocus()
        await self.settle(0.3)
        key = self.Qt.Key.Key_PageUp
        steps = 0
        due = time.perf_counter()
        while (bar.value() > 0 or transcript.window_range[0] > 0) and steps < limit:
            self.probe.mark("page_up", step=steps, value=bar.value())
            self.key(transcript, key)
            steps += 1
            # a held key repeats on its own clock: the next press is due whether or not the
            # window kept up (one turn of the loop between presses at least)
            due = max(due + PAGE_STEP_S, time.perf_counter() - PAGE_STEP_S)
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
        self.probe.mark(None)
        self.details["page_up"] = {
            "presses": steps,
            "reached_the_top": bar.value() == 0 and transcript.window_range[0] == 0,
        }

    def compare_view(self) -> Any:
        view = self.window.compare_page.compare
        if len(view.columns) != 4:
            agents = [self.services.agents.get(i) for i in self.ids["compare_ids"]]
            view.set_agents(agents)
        return view

    async def compare(self, rounds: int) -> None:
        self.show_page("Compare")
        await self.settle(0.3)
        view = self.compare_view()
        await self.settle(0.3)
        panes = [column.pane for column in view.columns]
        spreads = []
        for r in range(rounds):
            await self.type_text(view.composer, f"Tell me about the sea, part {r + 1}.", 0.01)
            await self.settle(0.2)
            self.probe.mark("compare_send", round=r)
            clicked = time.perf_counter()
            self.click(view.send_button)
            await self.until(lambda: view.busy, 5, "compare did not start")
            await self.until(
                lambda: all(p.presenter.streamed_text for p in panes), 20, "compare first text"
            )
            await asyncio.sleep(max(0.0, 0.2 - (time.perf_counter() - clicked)))
            self.probe.mark("compare_stream", round=r)
            await self.until(
                lambda: all(END_TOKEN in p.presenter.streamed_text for p in panes),
                60,
                "compare last tokens",
            )
            self.probe.mark("compare_end", round=r)
            ends: list[float] = []

            def ended(_turn: object, into: list[float] = ends) -> None:
                into.append(time.perf_counter())

            for pane in panes:
                pane.presenter.turn_finished.connect(ended)
            await self.until(lambda: not view.busy, 20, "compare did not end")
            await self.settle(0.4)
            self.probe.mark(None)
            for pane in panes:
                pane.presenter.turn_finished.disconnect(ended)
            spreads.append(round((max(ends) - min(ends)) * 1000, 1) if len(ends) == 4 else None)
        self.details["compare_ends_spread_ms"] = spreads
        self.show_page("Chat")
        await self.settle(0.3)

    # the session -----------------------------------------------------------------------------
    async def session(self, seconds: float) -> None:
        ids = self.ids
        window = self.window
        state: dict[str, Any] = {"reply_pane": None, "row": 0}

        async def pick(agent_id: int) -> dict[str, Any]:
            self.click_agent(agent_id)
            await self.settle(0.3)
            return {}

        async def type_message() -> dict[str, Any]:
            await self.type_text(window.pane.composer, "Tell me one thing about the sea.")
            await self.settle(0.2)
            return {}

        async def send() -> dict[str, Any]:
            pane = window.pane
            reply = await self.send_and_wait(pane, 60)
            state["reply_pane"] = pane
            await self.settle(0.3)
            return reply

        async def timeline() -> dict[str, Any]:
            pane = state["reply_pane"] or window.pane
            last = pane.last_reply()
            bubble = pane.transcript.bubble(last.id) if last is not None else None
            if bubble is None or bubble.footer.timeline_button.isHidden():
                await self.settle(0.2)
                return {"skipped": "no reply with a timeline"}
            self.click(bubble.footer.timeline_button)
            await self.settle(0.6)
            if bubble.footer.panel is not None:
                bubble.footer.panel.close()
            await self.settle(0.2)
            return {}

        async def switch_conversations() -> dict[str, Any]:
            opened = [self.click_conversation(ids["short_id"])]
            await self.settle(0.4)
            state["row"] = (state["row"] + 1) % 12
            opened.append(self.click_conversation(row=3 + state["row"]))
            await self.settle(0.4)
            return {"opened": opened}

        async def scroll_long() -> dict[str, Any]:
            self.click_conversation(ids["long_id"])
            await self.until(lambda: window.conversation_id == ids["long_id"], 10, "long")
            await self.settle(0.3)
            transcript = window.pane.transcript
            transcript.setFocus()
            for key in [self.Qt.Key.Key_PageUp] * 10 + [self.Qt.Key.Key_PageDown] * 5:
                self.key(transcript, key)
                await asyncio.sleep(PAGE_STEP_S)
            await self.settle(0.3)
            return {}

        async def stats() -> dict[str, Any]:
            # the page is not asked for before the click: that would build it at once, in
            # the bench's turn (the click builds it over the next turns of the loop)
            before = window.stats_page.snapshot if window.page_built("stats") else None
            self.show_page("Stats")
            await self.until(lambda: window.page_built("stats"), 30, "the Stats page built")
            page = window.stats_page
            await self.until(
                lambda: page.snapshot is not None and page.snapshot is not before,
                30,
                "the Stats page answered",
            )
            await self.settle(0.5)
            return {}

        async def compare() -> dict[str, Any]:
            self.show_page("Compare")
            await self.settle(0.3)
            view = self.compare_view()
            await self.type_text(view.composer, "And the tides?", 0.02)
            self.click(view.send_button)
            await self.until(lambda: view.busy, 5, "compare did not start")
            await self.until(lambda: not view.busy, 60, "compare did not end")
            await self.settle(0.4)
            self.show_page("Chat")
            await self.settle(0.3)
            return {}

        steps: list[tuple[str, Callable[[], Awaitable[dict[str, Any]]]]] = [
            ("pick the local agent", lambda: pick(ids["local_id"])),
            ("type (local)", type_message),
            ("send to local, its reply", send),
            ("open the reply's timeline", timeline),
            ("pick the remote agent", lambda: pick(ids["remote_id"])),
            ("type (remote)", type_message),
            ("send to remote, its reply", send),
            ("switch conversations", switch_conversations),
            ("open and scroll the long conversation", scroll_long),
            ("show Stats (100k rows)", stats),
            ("Compare four columns", compare),
        ]
        deadline = time.monotonic() + seconds
        rounds = 0
        done = 0
        while rounds == 0 or time.monotonic() < deadline:
            for label, step in steps:
                if rounds > 0 and time.monotonic() >= deadline:
                    break
                segment = self.probe.mark(f"session:{label}", step=label, round=rounds)
                with self.profiled(label):
                    segment.note.update(await step())
                done += 1
            rounds += 1
        self.probe.mark(None)
        self.details["session"] = {"rounds_begun": rounds, "steps": done}

    async def idle_reference(self, seconds: float) -> None:
        self.probe.mark("idle")
        await self.settle(seconds)
        self.probe.mark(None)


# the run ------------------------------------------------------------------------------------

WINDOW_KEYS = {k for k in KEYS if k != "first_paint_ratio"}


def run_window(home: str, ids: dict[str, Any], todo: set[str], args: argparse.Namespace) -> Any:
    """``run_app`` as the app runs, with the person driving it from a task on its loop."""
    from frames_probe import HoldProbe
    from PySide6.QtCore import QEvent, QObject, QTimer
    from PySide6.QtWidgets import QApplication

    from tests.helpers.first_paint_modules import _FirstImport

    class FirstImport(_FirstImport):
        """tests/helpers' first-importer finder, naming the thread too."""

        def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
            top = name.partition(".")[0]
            fresh = top in self.heavy and top not in self.first
            super().find_spec(name, path, target)
            if fresh and top in self.first:
                thread = threading.current_thread()
                where = "GUI thread" if thread is threading.main_thread() else thread.name
                self.first[top] = f"[{where}] {self.first[top]}"

    importers = FirstImport(set(HEAVY))
    sys.meta_path.insert(0, importers)
    os.environ["SIMI_HOME"] = home
    app = QApplication.instance() or QApplication([sys.argv[0]])
    outcome: dict[str, Any] = {}

    class FirstPaint(QObject):
        at: float | None = None

        def eventFilter(self, obj: QObject, event: QEvent) -> bool:
            if self.at is None and event.type() == QEvent.Type.Paint:
                window = getattr(obj, "window", lambda: None)()
                if type(window).__name__ == "MainWindow" and window.opened:  # not the frame
                    self.at = time.perf_counter()
            return False

    painted = FirstPaint(app)
    app.installEventFilter(painted)

    async def drive(window: Any) -> None:
        probe = HoldProbe(stacks_over_ms=args.stacks)
        person = Person(window, ids, probe, args.quick)
        person.profilers = {step: cProfile.Profile() for step in args.profile.split(";") if step}
        outcome["probe"], outcome["person"] = probe, person
        try:
            await person.until(lambda: painted.at is not None, 60, "the window's first paint")
            app.removeEventFilter(painted)  # a Python filter on every event of the app is the
            # bench's cost, not the app's: each event would wrap its receiver for Python
            probe.start()
            if "first_remote_send_block_ms" in todo:
                await person.first_remote_send()
            if "agent_switch_block_ms" in todo:
                await person.agent_switch(3 if args.quick else 9)
            if todo & {"open_5k_conversation_ms", "page_up_p99_ms"}:
                await person.open_long(1 if args.quick else 3)
            if "page_up_p99_ms" in todo:
                await person.page_up(40 if args.quick else 5_000)
            if todo & {"compare_send_block_ms", "compare_end_block_ms"}:
                await person.compare(1 if args.quick else 3)
            if "worst_ms" in todo:
                await person.session(args.session_seconds)
            await person.idle_reference(1.0)
            probe.stop()
            for step, profiler in person.profilers.items():
                slug = re.sub(r"\W+", "-", step)
                where = Path(tempfile.gettempdir()) / f"frames-profile-{slug}.txt"
                with where.open("w") as out:
                    for order in ("cumulative", "tottime"):
                        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(45)
                print(f"profile of {step!r}: {where}", file=sys.stderr)
        except BaseException as exc:  # reported after the window has closed
            outcome["error"] = exc
        finally:
            window.close()

    def begin() -> None:
        windows = [
            w for w in app.topLevelWidgets() if type(w).__name__ == "MainWindow" and w.opened
        ]
        if not windows:  # the frame paints before the store opens and the loop runs
            QTimer.singleShot(20, begin)
            return
        outcome["task"] = asyncio.ensure_future(drive(windows[0]))

    QTimer.singleShot(0, begin)
    from desktop.app import run_app

    run_app([sys.argv[0]])
    if "error" in outcome:
        raise outcome["error"]
    outcome["importers"] = importers.first
    return outcome


def hold(summary: dict[str, Any], name: str, figure: str = "max_ms") -> float | None:
    entry = summary.get(name)
    return None if entry is None else entry[figure]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--session-seconds", type=float, default=60.0)
    parser.add_argument("--quick", action="store_true", help="fewer steps and runs (tests)")
    parser.add_argument("--only", default="", help="figures to measure, comma-separated")
    parser.add_argument("--stacks", type=float, default=None, metavar="MS")
    parser.add_argument(
        "--profile", default="", metavar="STEP[;STEP]"
    )  # session steps, "agent switch"
    parser.add_argument("--serve", nargs=4, type=float, help=argparse.SUPPRESS)
    parser.add_argument("--fill", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        rate, count, compare_rate, compare_count = args.serve
        serve(rate, int(count), compare_rate, int(compare_count))
        return 0
    if args.fill:
        print(json.dumps(fill(args.base, args.quick)))
        return 0
    todo = set(KEYS)
    if args.only:
        todo = {k.strip() for k in args.only.split(",") if k.strip()}
        unknown = todo - set(KEYS)
        if unknown:
            parser.error(
                f"unknown figures: {', '.join(sorted(unknown))} (known: {', '.join(KEYS)})"
            )

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ["QT_API"] = "pyside6"
    began = time.perf_counter()
    use_bytecode_cache()
    if not args.quick:
        precompile()
    figures: dict[str, float | None] = dict.fromkeys(KEYS)
    details: dict[str, Any] = {}
    if "first_paint_ratio" in todo:
        ratio, details["first_paint"] = first_paint(1 if args.quick else 5)
        figures["first_paint_ratio"] = round(ratio, 2)
    if todo & WINDOW_KEYS:
        server, base = start_server()
        home = tempfile.mkdtemp(prefix="simi-frames-")
        try:
            ids = filled_home(base, home, args.quick)
            details["home"] = {"fill_s": ids["fill_s"]}
            outcome = run_window(home, ids, todo, args)
        finally:
            server.terminate()
            server.wait(timeout=10)
            shutil.rmtree(home, ignore_errors=True)
        probe, person = outcome["probe"], outcome["person"]
        summary = probe.summary()
        details.update(person.details)
        if "first_remote_send_block_ms" in todo:
            figures["first_remote_send_block_ms"] = hold(summary, "first_remote_send")
            details["first_remote_send"].update(
                summary["first_remote_send"], first_importers=outcome["importers"]
            )
        if "agent_switch_block_ms" in todo:
            figures["agent_switch_block_ms"] = hold(summary, "agent_switch")
            details["agent_switch"] = summary["agent_switch"]
        if "open_5k" in summary:
            figures["open_5k_conversation_ms"] = hold(summary, "open_5k")
            details["open_5k_conversation"] = summary["open_5k"]
        if "page_up" in summary:
            figures["page_up_p99_ms"] = hold(summary, "page_up", "p99_ms")
            details["page_up"].update(summary["page_up"])
        if "compare_send" in summary:
            figures["compare_send_block_ms"] = hold(summary, "compare_send")
            figures["compare_end_block_ms"] = hold(summary, "compare_end")
            details["compare"] = {
                "send": summary["compare_send"],
                "streaming": summary.get("compare_stream"),
                "end": summary["compare_end"],
                "ends_spread_ms": details.pop("compare_ends_spread_ms", None),
            }
        steps = {k: v for k, v in summary.items() if k.startswith("session:")}
        if steps:
            worst_name = max(steps, key=lambda k: steps[k]["max_ms"])
            figures["worst_ms"] = steps[worst_name]["max_ms"]
            details["session"].update(
                {
                    "seconds": args.session_seconds,
                    "worst_step": {"step": worst_name.partition(":")[2], **steps[worst_name]},
                    "by_step": {
                        k.partition(":")[2]: {
                            f: v[f]
                            for f in ("n", "max_ms", "gc_max_ms", "holds_ms", "stacks")
                            if f in v
                        }
                        for k, v in steps.items()
                    },
                    "all_steps": {
                        "n": sum(v["n"] for v in steps.values()),
                        "p50_ms": round(statistics.median(v["p50_ms"] for v in steps.values()), 1),
                    },
                }
            )
        details["idle_reference"] = summary.get("idle")
    details["run"] = {
        "seconds": round(time.perf_counter() - began, 1),
        "quick": args.quick,
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "platform": os.environ.get("QT_QPA_PLATFORM"),
    }
    figures = {key: value if key in todo else None for key, value in figures.items()}
    result: dict[str, Any] = {
        key: (
            None
            if figures[key] is None
            else round(float(figures[key]), 2 if key == "first_paint_ratio" else 1)
        )
        for key in KEYS
    }
    result["targets"] = dict(TARGETS)
    result["met"] = {
        key: (None if figures[key] is None else figures[key] <= TARGETS[key]) for key in KEYS
    }
    result["details"] = details
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
