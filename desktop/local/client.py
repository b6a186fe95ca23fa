"""The app side of the llama.cpp worker process (see ``desktop.local.worker``).

A ``WorkerClient`` owns one worker process. A reader thread receives the worker's messages and
hands them to whichever asyncio loop is waiting, and a sender thread writes the app's messages
(``_Sender``), so nothing here blocks the event loop: not even a long conversation sent to a
worker that is still starting, which fills the pipe (~200 KB) until the worker reads.

Every message handed on carries the worker *generation* (a counter bumped each time a worker
process starts) and a request id: ``(generation, tag, req_id, ...)``, the death notice too
(``(generation, "died", req_id the process was serving, exitcode)``). A request listens only
to its own generation and id, so a late word from a killed worker (its death notice, its last
"done") can never end the next request or make the client forget the process now running.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable
from multiprocessing.reduction import ForkingPickler
from typing import Any, Literal

from desktop.errors import UserError
from desktop.llm.errors import ContextTooLong, LocalModelError
from desktop.llm.events import Queued, StreamEvent, Timing
from desktop.llm.provider import ChatRequest
from desktop.local.loading import LoadParams
from desktop.local.placement import LoadReport
from desktop.local.worker import bare_main_module, received, worker_main

log = logging.getLogger("simi.local")
_worker_log = logging.getLogger("simi.local.worker")

ModelState = Literal["unloaded", "loading", "ready", "busy", "error"]
CANCEL_GRACE_S = 2.0  # a worker that does not stop within this is killed and reloaded later
_DONE = object()


def _rebuild_error(kind: str, message: str, extra: dict[str, Any]) -> UserError:
    if kind == "context_too_long":
        return ContextTooLong(
            message, needed_tokens=extra.get("needed_tokens"), n_ctx=extra.get("n_ctx")
        )
    return LocalModelError(message)


class _Sender:
    """Writes one worker's messages to its pipe from a thread of its own, in the order sent.

    ``Connection.send`` blocks once the pipe is full (~200 KB) until the worker reads, and a
    worker still starting (importing llama.cpp, or busy loading) reads nothing: on the event
    loop (the GUI thread under qasync) a long conversation would freeze the window that long.
    The caller pickles (cheap, and an unpicklable message fails where it is sent); this thread
    only writes the bytes. A write that fails means the worker is gone: the thread ends, and
    the reader thread's death notice tells whoever waits (``WorkerClient.stream`` resends a
    request the worker never took, once).
    """

    def __init__(self, conn: Any, generation: int) -> None:
        self._conn = conn
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pending = 0  # messages queued or being written
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._run, name=f"simi-worker-sender-{generation}", daemon=True
        )
        self._thread.start()

    @property
    def pending(self) -> int:
        """Messages not yet wholly written to the pipe (queued or being written)."""
        with self._lock:
            return self._pending

    def send(self, message: tuple[Any, ...]) -> None:
        data = ForkingPickler.dumps(message)  # what Connection.send writes, byte for byte
        with self._lock:
            self._pending += 1
        self._queue.put(data)

    def close(self) -> None:
        """End the thread once what is queued has been written (or has failed to be)."""
        self._queue.put(None)

    def _run(self) -> None:
        while True:
            data = self._queue.get()
            if data is None:
                return
            try:
                self._conn.send_bytes(data)
            except Exception as exc:  # BrokenPipe, or the handle closed by kill()/_forget()
                log.info("llama.cpp worker pipe closed while sending (%s)", exc)
                return
            finally:
                with self._lock:
                    self._pending -= 1


class WorkerClient:
    """One worker process. ``state`` is what the UI shows for the model."""

    def __init__(self, on_state: Callable[[ModelState, str], None] | None = None) -> None:
        self._ctx = multiprocessing.get_context("spawn")
        self._process: Any = None
        self._conn: Any = None
        self._sender: _Sender | None = None
        self._flag: Any = None
        self._threads: Any = None  # the worker's shared thread budget (see set_threads)
        self.thread_budget = 0
        # The prompt-state caches: (saved-states folder, memory MB, saved MB) sent to each
        # worker at start; what its memory cache holds, as it last said.
        self.cache_config: tuple[str | None, int | None, int | None] | None = None
        self.cache_bytes = 0
        self.cache_states = 0
        self._reader: threading.Thread | None = None
        self._sink: tuple[asyncio.AbstractEventLoop, asyncio.Queue[Any]] | None = None
        self._sink_lock = threading.Lock()
        self._busy = asyncio.Lock()
        self._ids = itertools.count(1)
        self._generation = 0  # bumped each time a worker process starts
        self._serving: int | None = None  # the request id the current worker is serving
        self._on_state = on_state
        self.state: ModelState = "unloaded"
        self.state_detail = ""
        self.params: LoadParams | None = None
        # the parameters ``load`` is loading ahead of any request, while it does
        self.loading_ahead: LoadParams | None = None
        self.last_used = time.monotonic()
        # llama.cpp's own figures for the last request, a stopped one too (its Timing arrives
        # while the client waits for the worker to stop, after the consumer has gone).
        self.last_timing: Timing | None = None
        # Where the worker's model runs, as the worker said after its last load (None: no
        # process). Set on the reader thread before the "ready" or "busy" that follows the
        # load is seen; while another load runs it is the previous model's (``state`` says).
        self.load_report: LoadReport | None = None

    # process lifecycle -----------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.is_alive()

    def _set_state(self, state: ModelState, detail: str = "") -> None:
        self.state, self.state_detail = state, detail
        if self._on_state is not None:
            with contextlib.suppress(Exception):
                self._on_state(state, detail)

    @property
    def generation(self) -> int:
        """How many worker processes this client has started (the current one's number)."""
        return self._generation

    async def _start_off_loop(self) -> None:
        """``_start`` on a worker thread: spawning the process (and, the first time, setting
        up multiprocessing) held the GUI thread 10-25 ms, felt as a click on a local agent
        that answered late. Callers hold ``_busy``, so no two starts overlap."""
        await asyncio.to_thread(self._start)

    def _start(self) -> None:
        parent, child = self._ctx.Pipe(duplex=True)
        flag = self._ctx.RawValue("b", 0)
        threads = self._ctx.RawValue("i", self.thread_budget)
        process = self._ctx.Process(
            target=worker_main,
            args=(child, flag, threads),
            name="simi-llama-worker",
            daemon=True,
        )
        with bare_main_module():
            process.start()
        child.close()
        self._generation += 1
        self._serving = None
        self._process, self._conn, self._flag = process, parent, flag
        self._sender = _Sender(parent, self._generation)
        self._threads = threads
        self.cache_bytes = self.cache_states = 0
        if self.cache_config is not None:
            self._sender.send(("configure", *self.cache_config))
        self._reader = threading.Thread(
            target=self._read_loop,
            args=(parent, process, self._generation),
            name="simi-worker-reader",
            daemon=True,
        )
        self._reader.start()
        log.info("started llama.cpp worker pid %s (generation %s)", process.pid, self._generation)

    def _read_loop(self, conn: Any, process: Any, generation: int) -> None:
        for message in received(conn):
            tag = message[0]
            if tag == "log":  # the worker's log record, into the app's log
                _, level, name, text = message
                # under "simi" whatever logged it, so it reaches the app's log and not stderr
                _worker_log.log(level, "[pid %s] %s: %s", process.pid, name, text)
            elif tag == "state":
                self._post((generation, "state", None, message[1], message[2]))
            elif tag == "cache_info" and generation == self._generation:
                self.cache_bytes, self.cache_states = message[1], message[2]
            elif tag == "placement" and generation == self._generation:
                self.load_report = message[1]
            elif tag in ("accepted", "event", "done", "error"):
                self._post((generation, *message))
        process.join(timeout=5)
        serving = self._serving if generation == self._generation else None
        self._post((generation, "died", serving, process.exitcode))

    def _post(self, item: Any) -> None:
        if item[0] != self._generation:
            return  # a worker that has been replaced: nobody listens to it any more
        with self._sink_lock:
            sink = self._sink
        if sink is None:
            if item[1] == "state":
                self._set_state_threadsafe(item[3], item[4])
            return
        loop, queue = sink
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def _set_state_threadsafe(self, state: str, detail: str) -> None:
        self.state, self.state_detail = state, detail  # type: ignore[assignment]

    def kill(self) -> None:
        """End the worker now (SIGKILL). The next request starts a fresh one."""
        process = self._process
        if process is not None and process.is_alive():
            process.kill()
            process.join(timeout=5)
        self._forget()

    def _forget(self) -> None:
        if self._sender is not None:
            self._sender.close()
        with contextlib.suppress(Exception):
            if self._conn is not None:
                self._conn.close()
        self._process = self._conn = self._flag = self._sender = None
        self.params = None
        self.load_report = None
        self.cache_bytes = self.cache_states = 0

    def shutdown(self, timeout: float = 3.0) -> None:
        process = self._process
        if process is None:
            return
        if self._flag is not None:
            self._flag.value = 1
        if self._sender is not None:
            self._sender.send(("shutdown",))
        if self.params is None:  # no model (started ahead, maybe still importing): no wait
            timeout = min(timeout, 0.5)
        process.join(timeout=timeout)
        if process.is_alive():
            process.kill()
            process.join(timeout=2)
        self._forget()
        self._set_state("unloaded")

    # requests --------------------------------------------------------------------------------
    def set_threads(self, budget: int) -> None:
        """At most ``budget`` llama.cpp threads from the next batch or token on (0: the
        model's own counts). The worker reads it while it answers; no message is sent."""
        self.thread_budget = max(0, budget)
        if self._threads is not None:
            self._threads.value = self.thread_budget

    def send_control(self, *message: Any) -> None:
        """A message the worker handles between requests (configure, cache_clear); nothing
        when it is not running."""
        if self._sender is not None and self.alive:
            self._sender.send(message)

    def cancel(self) -> None:
        if self._flag is not None:
            self._flag.value = 1

    async def unload(self) -> None:
        """Free the model's memory by ending its process."""
        async with self._busy:
            await asyncio.to_thread(self.shutdown)

    async def prestart(self) -> bool:
        """Start the worker process (it imports llama.cpp at low priority) without loading a
        model, unless it runs or a request holds it. True when this call started it."""
        if self.alive or self._busy.locked():
            return False
        async with self._busy:
            if self.alive:
                return False
            self._forget()
            await self._start_off_loop()
            return True

    async def load(self, params: LoadParams) -> None:
        """Load the model of ``params`` without a request, so the next one starts at once.
        Raises ``LocalModelError`` (or ``ModelFileError``) as a request would."""
        async with self._busy:
            if self.alive and self.params == params and self.state == "ready":
                return
            loop = asyncio.get_running_loop()
            queue: asyncio.Queue[Any] = asyncio.Queue()
            with self._sink_lock:
                self._sink = (loop, queue)
            try:
                if not self.alive:
                    self._forget()
                    await self._start_off_loop()
                generation = self._generation
                self._set_state("loading", params.model_path)
                assert self._sender is not None and self._flag is not None
                self._flag.value = 0  # set again by ``hurry``: a request waits for this model
                self.loading_ahead = params
                self._sender.send(("load", params))
                self.params = params
                while True:
                    item = await queue.get()
                    if item[0] != generation:
                        continue
                    if item[1] == "state":
                        self._set_state(item[3], item[4])
                        if item[3] == "ready":
                            return
                    elif item[1] == "error":
                        self.params = None
                        self._set_state("error", item[4])
                        raise _rebuild_error(item[3], item[4], item[5])
                    elif item[1] == "died":
                        self._forget()
                        self._set_state("error", "worker stopped")
                        raise LocalModelError(_death_message(item[3], False))
            finally:
                self.loading_ahead = None
                with self._sink_lock:
                    self._sink = None
                self.last_used = time.monotonic()

    def hurry(self) -> None:
        """A request waits for the model this worker loads ahead (``load``): the worker skips
        what is left of its warm-up and says it is ready (the next request clears the flag)."""
        if self.loading_ahead is not None and self._flag is not None:
            self._flag.value = 1

    @property
    def busy(self) -> bool:
        """A request holds the worker; the next one waits for it."""
        return self._busy.locked()

    async def stream(self, params: LoadParams, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Generate in the worker. Cancelling the consumer stops decode within one token and
        prefill within one batch; a worker that does not stop within 2 s is killed.

        One request at a time: one that finds the worker busy yields ``Queued(waiting=True)``,
        then ``Queued(waiting=False)`` once it holds the worker. (Taking a free lock does not
        suspend, so of two requests the first to get here runs and the other says it waits.)
        """
        queued = self._busy.locked()
        if queued:
            yield Queued(waiting=True, reason="the local model is answering another chat")
        async with self._busy:
            if queued:
                yield Queued(waiting=False)
            loop = asyncio.get_running_loop()
            queue: asyncio.Queue[Any] = asyncio.Queue()
            with self._sink_lock:
                self._sink = (loop, queue)
            started_worker: float | None = None  # this request had to start the worker
            if not self.alive:
                self._forget()
                started_worker = time.perf_counter()
                await self._start_off_loop()
            req_id = next(self._ids)
            self.last_timing = None
            if self.params != params:
                self._set_state("loading", params.model_path)
            self._send_request(req_id, params, request)
            generation = self._generation
            self.params = params
            settled = False  # the worker has answered "done" or "error" (or died)
            text_seen = False
            accepted = False  # the worker said it took this request
            resent = False
            try:
                while True:
                    item = await queue.get()
                    if item[0] != generation:
                        continue  # an earlier worker's last words
                    tag, item_id = item[1], item[2]
                    if tag == "state":
                        self._set_state(item[3], item[4])
                    elif tag == "died" and item_id in (req_id, None):
                        self._forget()
                        if not accepted and not resent:
                            # It died before it took the request (killed just before): the
                            # request had nothing to do with it. A fresh worker gets it.
                            log.info("worker died before request %s; resending it", req_id)
                            resent = True
                            started_worker = started_worker or time.perf_counter()
                            await self._start_off_loop()
                            self._send_request(req_id, params, request)
                            generation = self._generation
                            self.params = params
                            continue
                        settled = True
                        self._set_state("error", "worker stopped")
                        raise LocalModelError(_death_message(item[3], text_seen))
                    elif item_id != req_id:
                        continue  # another request's answer
                    elif tag == "accepted":
                        accepted = True
                        if started_worker is not None:  # spawn -> the worker took it
                            spent = (time.perf_counter() - started_worker) * 1000
                            yield Timing(worker_start_ms=round(spent, 2))
                    elif tag == "event":
                        event = item[3]
                        if isinstance(event, Timing) and event.reported_by is not None:
                            self.last_timing = event
                        text_seen = text_seen or type(event).__name__ == "TextDelta"
                        yield event
                    elif tag == "done":
                        settled = True
                        break
                    elif tag == "error":
                        settled = True
                        self._set_state("error", item[4])
                        self.params = None if item[3] == "local_model" else self.params
                        raise _rebuild_error(item[3], item[4], item[5])
            finally:
                if not settled and self.alive and self._generation == generation:
                    await self._stop_request(queue, generation, req_id)
                with self._sink_lock:
                    self._sink = None
                self._serving = None
                self.last_used = time.monotonic()
                if self.state == "busy":
                    self._set_state("ready")

    def _send_request(self, req_id: int, params: LoadParams, request: ChatRequest) -> None:
        """Hand the request to the worker, through the sender thread (never waiting on the
        pipe). A worker that dies before it took the request, during the write too, sends its
        death notice with this request's id, and ``stream`` resends it to a fresh one once."""
        assert self._flag is not None and self._sender is not None
        self._flag.value = 0
        self._serving = req_id
        self._sender.send(("generate", req_id, params, request))

    async def _stop_request(self, queue: asyncio.Queue[Any], generation: int, req_id: int) -> None:
        """Ask the worker to stop and wait for it, at most CANCEL_GRACE_S; else kill it."""
        self.cancel()
        deadline = time.monotonic() + CANCEL_GRACE_S
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                item = await asyncio.wait_for(queue.get(), timeout=remaining)
                if item[0] != generation:
                    continue
                if item[1] == "event" and item[2] == req_id and isinstance(item[3], Timing):
                    self.last_timing = item[3]
                if item[1] in ("done", "error") and item[2] == req_id:
                    return
                if item[1] == "died":
                    self._forget()
                    return
        except (TimeoutError, asyncio.CancelledError):
            log.warning("llama.cpp worker did not stop within %.1f s; killing it", CANCEL_GRACE_S)
            await asyncio.to_thread(self.kill)
            self._set_state("unloaded", "stopped and will reload")


def _death_message(exitcode: int | None, text_seen: bool) -> str:
    how = f"signal {-exitcode}" if exitcode is not None and exitcode < 0 else f"code {exitcode}"
    kept = " The text so far is kept." if text_seen else ""
    return (
        f"The local model process stopped unexpectedly ({how}); it may have run out of memory "
        f"or hit a damaged model file.{kept} Send again to reload the model."
    )
