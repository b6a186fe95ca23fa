"""The llama.cpp worker process: one per loaded model, so a native crash (bad file, out of
memory) ends this process and never the window.

Protocol (pickled tuples over a multiprocessing Pipe; the app side is ``desktop.local.client``):

    app -> worker   ("load", params) | ("generate", req_id, params, request) | ("unload",)
                    | ("configure", folder, memory_mb, saved_mb) | ("cache_clear",)
                    | ("ping",) | ("shutdown",)
    worker -> app   ("accepted", req_id) | ("state", name, detail) | ("event", req_id, StreamEvent)
                    | ("done", req_id) | ("error", req_id, kind, message, extra)
                    | ("pong", info) | ("unloaded",) | ("log", level, logger, text)
                    | ("cache_info", memory_bytes, states) | ("placement", LoadReport)

The app's reader thread tags each message with the worker's generation (the client's count of
processes started) before handing it on, and adds the death notice ``("died", req_id,
exitcode)`` when the pipe closes; answers are matched by generation and request id.

"placement" follows every load, before the "state" message that says the model is ready
(or busy): a ``desktop.local.placement.LoadReport`` (a frozen dataclass of plain values) with
where llama.cpp put the layers and buffers, the GPU layers it was given, and the note of an
out-of-memory retry. The client keeps the last one (``WorkerClient.load_report``).

The worker's own log records (and the tracebacks of its unexpected failures) travel as "log"
messages and are written to the app's log; nothing of the worker is printed to stderr.

A "load" evaluates a little ahead of the first request (``LocalEngine.warm_up``) before it says
"ready"; that warm-up stops early once the shared flag is set (a request waits for this model:
``LocalRuntime.stream``) or another message arrives.

Cancellation does not travel through the pipe (the worker is busy generating): the app sets a
shared flag that the decode loop checks between tokens and llama.cpp's abort callback checks
during prefill (installed by the engine for the prefill only; see ``LocalEngine._set_abort``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

from desktop.errors import UserError

log = logging.getLogger("simi.local.worker")

# These are the error kinds the app knows how to rebuild (desktop.local.client).
REBUILDABLE = ("context_too_long", "local_model")


@contextlib.contextmanager
def bare_main_module() -> Iterator[None]:
    """Start a worker (the chat one, the embedding one) without re-running the parent's
    ``__main__`` in it.

    The worker needs nothing from it, and spawn's default of importing it breaks hosts whose
    main cannot be re-run: scripts without a main guard, stdin, notebooks.
    """
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


class SharedFlag:
    """``threading.Event``-like view of a shared byte, cheap enough to poll per token."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def is_set(self) -> bool:
        return bool(self._raw.value)

    def set(self) -> None:
        self._raw.value = 1

    def clear(self) -> None:
        self._raw.value = 0


class PipeLogHandler(logging.Handler):
    """Sends each record, formatted with its traceback, to the app as a "log" message."""

    def __init__(self, send: Any) -> None:
        super().__init__()
        self._send = send
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._send("log", record.levelno, record.name, self.format(record))
        except Exception:  # the pipe is gone: the app cannot hear it anyway
            pass


def worker_main(conn: Any, raw_flag: Any, raw_threads: Any = None) -> None:
    """Entry point of the worker process."""
    run_child(conn, "llama.cpp worker", lambda send: _serve(conn, raw_flag, send, raw_threads))


def run_child(conn: Any, what: str, serve: Callable[[Callable[..., None]], None]) -> None:
    """A spawned child's frame around ``serve(send)``: Ctrl+C left to the app, messages sent
    whole (one lock), its log records over the pipe and never printed, a bug logged and
    ended (the app sees the death). Shared by the chat worker and the embedding worker."""
    # Ctrl+C in a terminal reaches every process of its group: the app (``simi serve``,
    # ``simi ask``) decides what stops, and stops this worker itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    send_lock = threading.Lock()

    def send(*message: Any) -> None:
        with send_lock:
            conn.send(message)

    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(PipeLogHandler(send))
    root.setLevel(logging.INFO)
    logging.lastResort = None  # a record with no handler is dropped, never printed
    try:
        serve(send)
    except Exception:  # a bug here: the app hears of it in the log and as a death notice
        log.exception("%s failed", what)


def received(conn: Any) -> Iterator[Any]:
    """The messages from the other end of the pipe, until it closes (both sides read so)."""
    while True:
        try:
            yield conn.recv()
        except (EOFError, OSError):
            return


def _serve(conn: Any, raw_flag: Any, send: Any, raw_threads: Any = None) -> None:
    from desktop.local.engine import LocalEngine
    from desktop.local.libraries import preload_from_env
    from desktop.local.loading import capture_llama_logs
    from desktop.local.vision import refuse_images

    preload_from_env()  # the build the app chose, before anything loads llama.cpp
    _import_llama_quietly(capture_llama_logs)
    yield_to_the_window()
    flag = SharedFlag(raw_flag)
    engine = LocalEngine()
    engine.thread_budget = raw_threads
    reported: list[Any] = [None]  # the loaded model the app last heard about

    def report_load() -> None:
        """Tell the app where a model loaded since the last report runs."""
        model = engine.loaded
        if model is not None and model is not reported[0]:
            send("placement", model.report)
        reported[0] = model

    def cache_info() -> None:
        send("cache_info", engine.reuse.memory.size, len(engine.reuse.memory))

    for message in received(conn):
        op = message[0]
        if op == "shutdown":
            break
        if op == "ping":
            send("pong", {"pid": os.getpid(), "loaded": engine.loaded is not None})
        elif op == "configure":  # the prompt-state caches' folder and budgets
            engine.reuse.configure(message[1], message[2], message[3])
        elif op == "cache_clear":
            engine.clear_memory()
            cache_info()
        elif op == "unload":
            engine.unload()
            send("unloaded")
        elif op == "load":
            params = message[1]
            try:
                send("state", "loading", os.path.basename(params.model_path))
                # the warm-up gives way to a request waiting for it (the app sets the flag) and
                # to any message sent meanwhile (an unload, a shutdown)
                engine.preload(params, stop=lambda: flag.is_set() or conn.poll())
                report_load()
                send("state", "ready", "")
            except UserError as exc:
                send("error", None, exc.kind, exc.user_message, _extra(exc))
            except Exception as exc:  # unexpected: report, keep serving
                log.exception("loading %s failed", params.model_path)
                send("error", None, "local_model", f"Loading failed: {exc}", {})
        elif op == "generate":
            _, req_id, params, request = message
            send("accepted", req_id)  # a death from here on is this request's
            try:
                refuse_images(params, request)  # images, no projector: before any loading
                if engine.loaded is None or engine.loaded.params != params:
                    send("state", "loading", os.path.basename(params.model_path))
                    engine.ensure_loaded(params)
                    report_load()
                send("state", "busy", "")
                _stream(engine.generate(params, request, flag), req_id, send)
                send("done", req_id)
                cache_info()
            except UserError as exc:
                if exc.__cause__ is not None:
                    log.warning("request %s: %s", req_id, exc.user_message, exc_info=exc)
                send("error", req_id, exc.kind, exc.user_message, _extra(exc))
            except Exception as exc:
                log.exception("request %s failed in llama.cpp", req_id)
                send("error", req_id, "local_model", f"llama.cpp failed: {exc}", {})
            finally:
                flag.clear()
                report_load()  # a file changed on disk is reloaded within the request
                send("state", "ready" if engine.loaded is not None else "unloaded", "")
            # the app has its answer: keep the context for later, unless a message comes first
            if engine.remembering and not conn.poll(REMEMBER_AFTER_S):
                engine.remember()
                cache_info()
    engine.unload()


# After a reply the worker keeps its context in the memory cache (``LocalEngine.remember``: a
# copy of the KV cells, 8-65 ms for 600-1,700 tokens of the starter on a slow 2-core machine,
# 25-28 ms on an H200) once nothing has come for this long. A request sent sooner (an agent's
# next step after a tool, an API client's next call, a prompt set's next prompt) is not kept
# waiting for that copy: the engine makes it then only if the request replaces the context
# (``LocalEngine._remember_before_replacing``), and one that goes on with it needs none.
REMEMBER_AFTER_S = 0.1


# The nice value of llama.cpp's threads. On a machine with few cores its compute threads (as
# many as the cores) and the window's GUI thread compete for the CPU: a click that needs 8 ms
# of CPU then held the window 17-20 ms while a reply decoded (bench/frames.py), the GUI thread
# descheduled half of that time. At nice 5 the scheduler gives the GUI thread about three
# times their share while both want a core; alone (the window idle) they run at full speed.
WORKER_NICE = 5  # above the app's own


def yield_to_the_window() -> None:
    """Lower this thread's priority by WORKER_NICE; llama.cpp's compute threads, created later
    by this (main) thread, inherit it (on Linux a nice value is per thread). Where the
    system refuses, nothing changes."""
    with contextlib.suppress(OSError, AttributeError):
        me = threading.get_native_id()
        os.setpriority(
            os.PRIO_PROCESS, me, min(19, os.getpriority(os.PRIO_PROCESS, me) + WORKER_NICE)
        )


def _import_llama_quietly(capture_llama_logs: Any) -> None:
    """Import llama.cpp (~0.4 s of CPU) on a thread at a lower priority still, so a worker
    started ahead of need (``WorkerClient.prestart``) does not slow the window or a reply."""
    done: list[BaseException] = []

    def run() -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        try:
            capture_llama_logs()
        except BaseException as exc:  # re-raised on the main thread
            done.append(exc)

    thread = threading.Thread(target=run, name="simi-llama-import")
    thread.start()
    thread.join()
    if done:
        raise done[0]


# Text after the first token is sent in batches at most this often: the window paints at
# ~30 Hz anyway, and one pipe message + wake-up per token costs the app process CPU that
# llama.cpp's own threads then lack on a small machine (bench/local_decode.py).
TEXT_BATCH_S = 0.025


def _stream(events: Any, req_id: int, send: Any) -> None:
    """Forward events; the first text delta at once (TTFT), later ones coalesced."""
    import time

    from desktop.llm.events import TextDelta

    pending: list[str] = []
    first_sent = False
    last_flush = 0.0
    for event in events:
        if isinstance(event, TextDelta):
            now = time.perf_counter()
            if not first_sent:
                send("event", req_id, event)
                first_sent, last_flush = True, now
                continue
            pending.append(event.text)
            if now - last_flush >= TEXT_BATCH_S:
                send("event", req_id, TextDelta("".join(pending), tokens=len(pending)))
                pending.clear()
                last_flush = now
            continue
        if pending:
            send("event", req_id, TextDelta("".join(pending), tokens=len(pending)))
            pending.clear()
        send("event", req_id, event)
    if pending:
        send("event", req_id, TextDelta("".join(pending), tokens=len(pending)))


def _extra(exc: UserError) -> dict[str, Any]:
    return {
        key: getattr(exc, key)
        for key in ("needed_tokens", "n_ctx")
        if getattr(exc, key, None) is not None
    }
