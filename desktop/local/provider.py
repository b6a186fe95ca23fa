"""The local provider: the Provider protocol over a small pool of llama.cpp worker processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol

from desktop.llm.events import Queued, StreamEvent
from desktop.llm.provider import ChatRequest
from desktop.local import pool
from desktop.local.catalog import InfoCache, ModelFileError, ModelInfo
from desktop.local.client import ModelState, WorkerClient
from desktop.local.loading import LoadParams, usable_cpus
from desktop.local.memory import MemoryEstimate
from desktop.local.placement import LoadReport
from desktop.local.prompt_cache import (
    DEFAULT_PROMPT_CACHE_MB,
    DEFAULT_SAVED_STATES_MB,
    CacheSizes,
    SavedStates,
)
from desktop.local.vision import refuse_images


class Cancellable(Protocol):
    def cancel(self) -> None: ...


# ``call_later(delay_s, callback)`` -> a handle with ``cancel()``: the idle timer's scheduler.
# The running loop's ``call_later`` unless a test injects its own clock.
Scheduler = Callable[[float, Callable[[], None]], Cancellable]

# Of several workers, the state that speaks for them (the first found in this order).
_PRECEDENCE: tuple[ModelState, ...] = ("loading", "busy", "error", "ready", "unloaded")


class LocalRuntime:
    """The llama.cpp workers shared by every local agent.

    A pool of at most ``pool.MAX_WORKERS`` worker processes, each holding one model. A request
    goes to an idle worker that has its load parameters, else to any idle worker (it reloads),
    else to a new worker when one fits in memory (``desktop.local.pool.fits``), else it waits
    for a worker to free up and says so (``Queued``). ``worker`` is the first worker, which the
    idle-unload setting governs; the others exit after ``pool.EXTRA_IDLE_S`` idle (or the
    setting, when shorter). ``on_state`` hears every model-state change (unloaded / loading /
    ready / busy / error) for the UI, as the state of the whole pool (see ``state``).

    ``available_ram`` and ``gpu_memory`` are the memory probes (``pool.available_ram``,
    ``pool.gpu_memory``); tests pass their own figures.
    """

    def __init__(
        self,
        on_state: Callable[[ModelState, str], None] | None = None,
        idle_unload_s: float | None = None,
        scheduler: Scheduler | None = None,
        *,
        available_ram: pool.RamProbe | None = None,
        gpu_memory: pool.GpuProbe | None = None,
        max_workers: int = pool.MAX_WORKERS,
    ) -> None:
        self._listeners: list[Callable[[ModelState, str], None]] = []
        if on_state is not None:
            self._listeners.append(on_state)
        self.worker = WorkerClient(on_state=self._worker_changed)
        self.workers: list[WorkerClient] = [self.worker]
        self.max_workers = max(1, max_workers)
        self.available_ram: pool.RamProbe = available_ram or pool.available_ram
        self.gpu_memory: pool.GpuProbe = gpu_memory or pool.gpu_memory
        self.model_info = InfoCache()  # GGUF headers, per path + mtime: cheap to ask again
        # Free the model's memory after this long without a request (None/0: keep it loaded).
        self.idle_unload_s = idle_unload_s
        self.scheduler = scheduler
        self.cpu_count = usable_cpus()  # answering workers share these (set_threads)
        self._held: set[WorkerClient] = set()  # answering a request, or unloading
        self._estimates: dict[WorkerClient, MemoryEstimate] = {}  # what each worker's model takes
        self._waiters: list[asyncio.Future[None]] = []
        self._start_lock: asyncio.Lock | None = None
        self._idle_timers: dict[WorkerClient, Cancellable] = {}
        self._unload_task: asyncio.Task[None] | None = None
        self._cache_folder: str | None = None
        self._cache_mb = (DEFAULT_PROMPT_CACHE_MB, DEFAULT_SAVED_STATES_MB)

    # idle unload -----------------------------------------------------------------------------
    def set_idle_unload(self, seconds: float | None) -> None:
        self.idle_unload_s = seconds if seconds and seconds > 0 else None
        self._cancel_idle_timer()

    def _cancel_idle_timer(self) -> None:
        for timer in self._idle_timers.values():
            timer.cancel()
        self._idle_timers.clear()

    def _idle_limit(self, worker: WorkerClient) -> float | None:
        if worker is self.worker:
            return self.idle_unload_s
        return min(self.idle_unload_s or pool.EXTRA_IDLE_S, pool.EXTRA_IDLE_S)

    def _request_finished(self, used: WorkerClient | None) -> None:
        """Arm each idle worker's timer on the running loop (the one just used waits its whole
        time, the others what is left of theirs); it unloads only if nothing ran since."""
        self._cancel_idle_timer()
        scheduler: Any = self.scheduler
        if scheduler is None:
            try:
                scheduler = asyncio.get_running_loop().call_later
            except RuntimeError:
                return
        now = time.monotonic()
        for worker in list(self.workers):
            limit = self._idle_limit(worker)
            if not limit or worker in self._held:
                continue
            if worker is not self.worker and not worker.alive:
                self._drop(worker)
                continue
            if not worker.alive:
                continue
            delay = limit if worker is used else max(0.0, limit - (now - worker.last_used))
            self._idle_timers[worker] = scheduler(delay, lambda w=worker: self._unload_if_idle(w))

    def _unload_if_idle(self, worker: WorkerClient) -> None:
        self._idle_timers.pop(worker, None)
        if worker in self._held:
            return
        if worker.alive and worker.state in ("ready", "error"):
            self._held.add(worker)
            self._unload_task = asyncio.ensure_future(self._unload_worker(worker))
        elif worker is not self.worker and not worker.alive:
            self._drop(worker)

    async def _unload_worker(self, worker: WorkerClient) -> None:
        try:
            await worker.unload()
        finally:
            self._release(worker)
            if worker is not self.worker:
                self._drop(worker)

    def _drop(self, worker: WorkerClient) -> None:
        """Forget an extra worker whose process has ended."""
        if worker is not self.worker and worker in self.workers and worker not in self._held:
            self.workers.remove(worker)
            self._estimates.pop(worker, None)
            self._emit_pool_state()

    # model files -----------------------------------------------------------------------------
    async def check_model_file(self, path: str) -> ModelInfo:
        """Read (or recall) the file's header off the event loop; ``ModelFileError`` names the
        file and what is wrong. A loaded model whose file is gone is unloaded."""
        try:
            return await asyncio.to_thread(self.model_info.get, path)
        except ModelFileError:
            for worker in list(self.workers):
                params = worker.params
                if params is not None and params.model_path == path and worker.alive:
                    await worker.unload()
            raise

    # state -----------------------------------------------------------------------------------
    def add_listener(self, listener: Callable[[ModelState, str], None]) -> None:
        """``listener(state, detail)`` on every change; it may be called from a worker thread
        (an unload runs off the loop), so a Qt listener should hop via a queued signal."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[ModelState, str], None]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def _emit(self, state: ModelState, detail: str) -> None:
        for listener in list(self._listeners):
            with contextlib.suppress(Exception):
                listener(state, detail)

    def _worker_changed(self, state: ModelState, detail: str) -> None:
        self._emit_pool_state()

    def _emit_pool_state(self) -> None:
        worker = self._speaking()
        self._emit(worker.state, worker.state_detail)

    def _speaking(self) -> WorkerClient:
        """The worker whose state stands for the pool: loading before busy before error before
        ready (the first worker when all are alike)."""
        workers = list(self.workers)
        for state in _PRECEDENCE:
            for worker in workers:
                if worker.state == state:
                    return worker
        return self.worker

    @property
    def state(self) -> ModelState:
        """The pool's state: "loading" while any worker loads, else "busy" while any answers,
        else "error", "ready" or "unloaded" (that order)."""
        return self._speaking().state

    @property
    def state_detail(self) -> str:
        """What the state is about (a file being loaded, why it failed)."""
        return self._speaking().state_detail

    @property
    def loaded_params(self) -> LoadParams | None:
        """The load parameters of a model in a worker (the one whose state speaks for the
        pool, else the first alive), None when none is loaded."""
        speaking = self._speaking()
        for worker in (speaking, *self.workers):
            if worker.alive and worker.params is not None:
                return worker.params
        return None

    def state_of(self, model_path: str) -> ModelState:
        """What an agent using ``model_path`` would meet: its model's state in the workers
        that hold that file (or failed loading it), "unloaded" when none does."""
        states = [_state_of(worker, model_path) for worker in list(self.workers)]
        return next(s for s in _PRECEDENCE if s in states or s == "unloaded")

    def placement_of(self, model_path: str) -> LoadReport | None:
        """Where the model of ``model_path`` runs, as llama.cpp reported at its load (layers,
        devices, buffers per device; the worker sends it after each load): from a worker that
        holds that file, ready or answering. None when none does."""
        for worker in list(self.workers):
            report = worker.load_report
            if (
                report is not None
                and report.model_path == model_path
                and _state_of(worker, model_path) in ("ready", "busy")
            ):
                return report
        return None

    # requests --------------------------------------------------------------------------------
    async def stream(self, params: LoadParams, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Generate with the model of ``params``. A bad file is told apart before a worker
        process starts for it. A request that finds every worker busy and no room for another
        says so (``Queued``) and waits for the first to free up. Images for a model without
        a vision projector are refused before any of that (``CannotSeeImages``)."""
        refuse_images(params, request)
        self._cancel_idle_timer()
        worker: WorkerClient | None = None
        try:
            info = await self.check_model_file(params.model_path)
            waited = False
            while worker is None:
                worker = self._take_idle(params)
                if worker is None and self._hurry_loading(params):
                    # the model is being loaded ahead for this (the composer got focus): wait
                    # for that worker, its warm-up cut short, rather than start another
                    await self._wait_for_a_free_worker()
                    continue
                worker = worker or await self._start_another(info, params)
                if worker is None:
                    if not waited:
                        waited = True
                        yield Queued(waiting=True, reason=pool.QUEUE_REASON)
                    await self._wait_for_a_free_worker()
            if waited:
                yield Queued(waiting=False)
            events = worker.stream(params, request)
            try:
                async for event in events:
                    yield event
            finally:
                await events.aclose()  # type: ignore[attr-defined]
        finally:
            if worker is not None:
                self._release(worker)
            self._request_finished(worker)

    def _hurry_loading(self, params: LoadParams) -> bool:
        """Whether a worker is loading ``params`` ahead of need; it is told to skip what is
        left of its warm-up, as this request waits for it."""
        loading = [w for w in self.workers if w.loading_ahead == params and w.alive]
        for worker in loading:
            worker.hurry()
        return bool(loading)

    def _take_idle(self, params: LoadParams) -> WorkerClient | None:
        """Hold an idle worker: one with these parameters loaded, else any (it reloads)."""
        idle = [w for w in self.workers if w not in self._held and not w.busy]
        if not idle:
            return None
        same = [w for w in idle if w.alive and w.params == params]
        empty = [w for w in idle if not w.alive]  # reloading it unloads nobody's model
        worker = (same or empty or idle)[0]
        self._hold(worker, params)
        return worker

    async def _start_another(self, info: ModelInfo, params: LoadParams) -> WorkerClient | None:
        """A new worker for ``params`` when the cap and the memory allow, else None."""
        if len(self.workers) >= self.max_workers:
            return None
        offload, vram_free = False, None
        if params.n_gpu_layers:
            if self._start_lock is None:
                self._start_lock = asyncio.Lock()
            async with self._start_lock:  # one GPU figure per decision
                offload, vram_free = await asyncio.to_thread(self.gpu_memory)
                return self._start_if_fits(info, params, offload, vram_free)
        return self._start_if_fits(info, params, offload, vram_free)

    def _start_if_fits(
        self, info: ModelInfo, params: LoadParams, offload: bool, vram_free: int | None
    ) -> WorkerClient | None:
        idle = self._take_idle(params)  # one may have freed up while the GPU was asked
        if idle is not None or len(self.workers) >= self.max_workers:
            return idle
        if len(self._held) >= self.cpu_count:  # not even one core each
            return None
        new = pool.estimate_for(info, params, offload)
        running = [e for w, e in self._estimates.items() if w.alive or w in self._held]
        if not pool.fits(new, running, self.available_ram(), vram_free):
            return None
        worker = WorkerClient(on_state=self._worker_changed)
        worker.cache_config = (self._cache_folder, *self._cache_mb)
        self.workers.append(worker)
        self._hold(worker, params, new)
        return worker

    def _hold(
        self, worker: WorkerClient, params: LoadParams, est: MemoryEstimate | None = None
    ) -> None:
        """Reserve ``worker`` for a request and note what its model will take."""
        self._held.add(worker)
        timer = self._idle_timers.pop(worker, None)
        if timer is not None:
            timer.cancel()
        if est is None and (worker.params != params or worker not in self._estimates):
            info = self.model_info.peek(params.model_path)
            if isinstance(info, ModelInfo):  # offload assumed as asked: the cautious sum
                est = pool.estimate_for(info, params, gpu_offload=bool(params.n_gpu_layers))
        if est is not None:
            self._estimates[worker] = est
        self._share_threads()

    def _share_threads(self) -> None:
        """Workers answering at once split the cores: with k of them each runs at most
        cores // k llama.cpp threads (at least one), re-read per token, so a reply that
        started alone slows down rather than fight the other for every core, and speeds up
        again when the other ends. A lone worker runs its model's own thread counts."""
        held = [w for w in self.workers if w in self._held]
        share = 0 if len(held) <= 1 else max(1, self.cpu_count // len(held))
        for worker in list(self.workers):
            worker.set_threads(share if worker in self._held else 0)

    def _release(self, worker: WorkerClient) -> None:
        self._held.discard(worker)
        self._share_threads()
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _wait_for_a_free_worker(self) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)

    async def prestart(self) -> bool:
        """Start the first worker ahead of need (process + llama.cpp import, no model), so a
        first reply skips that. Nothing when it runs or answers. True when it started one."""
        if self.worker in self._held:
            return False
        return await self.worker.prestart()

    async def load(self, params: LoadParams) -> bool:
        """Load ``params``'s model ahead of a request (the composer got focus; the Models
        page's Load) in an idle worker, the way a request would take one, or a new one when it
        fits. False when every worker is busy and none fits (nothing is loaded: a request would
        wait). Raises ``ModelFileError`` / ``LocalModelError`` like a request."""
        self._cancel_idle_timer()
        worker: WorkerClient | None = None
        try:
            info = await self.check_model_file(params.model_path)
            worker = self._take_idle(params) or await self._start_another(info, params)
            if worker is None:
                return False
            await worker.load(params)
            return True
        finally:
            if worker is not None:
                self._release(worker)
            self._request_finished(worker)

    # prompt-state caches (desktop.local.prompt_cache) ------------------------------------------
    def set_cache_folder(self, folder: str | os.PathLike[str]) -> None:
        """Where saved system-prompt states live (the user cache folder); before any request."""
        self._cache_folder = str(folder)
        self._push_cache_config()

    def set_cache_budgets(self, memory_mb: int, saved_mb: int) -> None:
        """Settings' budgets (MB; 0 turns a cache off), applied from the next request on."""
        self._cache_mb = (max(0, int(memory_mb)), max(0, int(saved_mb)))
        self._push_cache_config()

    def _push_cache_config(self) -> None:
        config = (self._cache_folder, *self._cache_mb)
        for worker in list(self.workers):
            worker.cache_config = config
            worker.send_control("configure", *config)

    def _saved(self) -> SavedStates | None:
        if self._cache_folder is None:
            return None
        return SavedStates(Path(self._cache_folder), self._cache_mb[1] * 1024 * 1024)

    async def cache_sizes(self) -> CacheSizes:
        """What the memory caches of the running workers (as each last said) and the saved
        states on disk take."""
        saved = self._saved()
        files = await asyncio.to_thread(saved.files) if saved is not None else []
        size = await asyncio.to_thread(lambda: saved.size) if saved is not None else 0
        alive = [w for w in self.workers if w.alive]
        return CacheSizes(
            sum(w.cache_bytes for w in alive), sum(w.cache_states for w in alive), size, len(files)
        )

    async def clear_caches(self) -> None:
        """Empty every worker's memory cache (between its requests) and delete the saved
        states."""
        for worker in list(self.workers):
            worker.send_control("cache_clear")
            worker.cache_bytes = worker.cache_states = 0
        saved = self._saved()
        if saved is not None:
            await asyncio.to_thread(saved.clear)

    def forget_saved_states(self, owner: str) -> int:
        """Delete the saved states of an agent (its id); the number of files removed."""
        saved = self._saved()
        return saved.forget(str(owner)) if saved is not None else 0

    def cancel_all(self) -> None:
        for worker in list(self.workers):
            worker.cancel()

    async def unload(self) -> None:
        await asyncio.gather(*(worker.unload() for worker in list(self.workers)))
        for worker in list(self.workers):
            self._drop(worker)

    async def aclose(self) -> None:
        await asyncio.gather(*(asyncio.to_thread(w.shutdown) for w in list(self.workers)))

    def close(self) -> None:
        for worker in list(self.workers):
            worker.shutdown()


def _state_of(worker: WorkerClient, model_path: str) -> ModelState:
    """One worker's answer to ``LocalRuntime.state_of``."""
    loaded = worker.params.model_path if worker.params is not None else None
    if loaded != model_path or not worker.alive:
        return "error" if worker.state == "error" and loaded == model_path else "unloaded"
    return worker.state


class LocalProvider:
    def __init__(self, runtime: LocalRuntime, params: LoadParams) -> None:
        self._runtime = runtime
        self._params = params

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        return self._runtime.stream(self._params, request)

    async def list_models(self) -> list[str]:
        return [self._params.model_path]

    async def aclose(self) -> None:
        return None
