"""The local provider: the Provider protocol over a llama.cpp worker process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from desktop.llm.events import StreamEvent
from desktop.llm.provider import ChatRequest
from desktop.local.catalog import InfoCache, ModelFileError, ModelInfo
from desktop.local.client import ModelState, WorkerClient
from desktop.local.loading import LoadParams


class Cancellable(Protocol):
    def cancel(self) -> None: ...


# ``call_later(delay_s, callback)`` -> a handle with ``cancel()``: the idle timer's scheduler.
# The running loop's ``call_later`` unless a test injects its own clock.
Scheduler = Callable[[float, Callable[[], None]], Cancellable]


class LocalRuntime:
    """The llama.cpp worker(s) shared by every local agent.

    Foundation policy: one worker, one loaded model at a time (switching agents to another
    model file reloads). ``on_state`` hears every model-state change (unloaded / loading /
    ready / busy / error) for the UI.
    """

    def __init__(
        self,
        on_state: Callable[[ModelState, str], None] | None = None,
        idle_unload_s: float | None = None,
        scheduler: Scheduler | None = None,
    ) -> None:
        self._listeners: list[Callable[[ModelState, str], None]] = []
        if on_state is not None:
            self._listeners.append(on_state)
        self.worker = WorkerClient(on_state=self._emit)
        self.model_info = InfoCache()  # GGUF headers, per path + mtime: cheap to ask again
        # Free the model's memory after this long without a request (None/0: keep it loaded).
        self.idle_unload_s = idle_unload_s
        self.scheduler = scheduler
        self._idle_timer: Cancellable | None = None
        self._unload_task: asyncio.Task[None] | None = None

    def set_idle_unload(self, seconds: float | None) -> None:
        self.idle_unload_s = seconds if seconds and seconds > 0 else None
        self._cancel_idle_timer()

    def _cancel_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _request_finished(self) -> None:
        """Arm the idle timer on the running loop; it unloads only if nothing ran since."""
        self._cancel_idle_timer()
        if not self.idle_unload_s:
            return
        scheduler: Any = self.scheduler
        if scheduler is None:
            try:
                scheduler = asyncio.get_running_loop().call_later
            except RuntimeError:
                return
        self._idle_timer = scheduler(self.idle_unload_s, self._unload_if_idle)

    def _unload_if_idle(self) -> None:
        self._idle_timer = None
        if self.worker.alive and self.worker.state in ("ready", "error"):
            self._unload_task = asyncio.ensure_future(self.unload())

    async def check_model_file(self, path: str) -> ModelInfo:
        """Read (or recall) the file's header off the event loop; ``ModelFileError`` names the
        file and what is wrong. A loaded model whose file is gone is unloaded."""
        try:
            return await asyncio.to_thread(self.model_info.get, path)
        except ModelFileError:
            params = self.worker.params
            if params is not None and params.model_path == path and self.worker.alive:
                await self.unload()
            raise

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

    @property
    def state(self) -> ModelState:
        return self.worker.state

    @property
    def state_detail(self) -> str:
        """What the state is about (a file being loaded, why it failed)."""
        return self.worker.state_detail

    @property
    def loaded_params(self) -> LoadParams | None:
        """The load parameters of the model in the worker, None when none is loaded."""
        return self.worker.params if self.worker.alive else None

    def state_of(self, model_path: str) -> ModelState:
        """What an agent using ``model_path`` would meet: its model's state when that file is
        the one loaded (or failed loading), "unloaded" otherwise."""
        loaded = self.worker.params.model_path if self.worker.params is not None else None
        if loaded != model_path or not self.worker.alive:
            return "error" if self.worker.state == "error" and loaded == model_path else "unloaded"
        return self.worker.state

    async def stream(self, params: LoadParams, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Generate with the model of ``params``. A bad file is told apart before a worker
        process starts for it. One request runs at a time; one that waits for the worker says
        so (``Queued``, see ``WorkerClient.stream``)."""
        self._cancel_idle_timer()
        try:
            await self.check_model_file(params.model_path)
            events = self.worker.stream(params, request)
            try:
                async for event in events:
                    yield event
            finally:
                await events.aclose()  # type: ignore[attr-defined]
        finally:
            self._request_finished()

    def cancel_all(self) -> None:
        self.worker.cancel()

    async def unload(self) -> None:
        await self.worker.unload()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.worker.shutdown)

    def close(self) -> None:
        self.worker.shutdown()


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
