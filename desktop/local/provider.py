"""The local provider: the Provider protocol over a llama.cpp worker process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from desktop.llm.events import StreamEvent
from desktop.llm.provider import ChatRequest
from desktop.local.client import ModelState, WorkerClient
from desktop.local.engine import LoadParams


class LocalRuntime:
    """The llama.cpp worker(s) shared by every local agent.

    Foundation policy: one worker, one loaded model at a time (switching agents to another
    model file reloads). ``on_state`` hears every model-state change (unloaded / loading /
    ready / busy / error) for the UI.
    """

    def __init__(self, on_state: Callable[[ModelState, str], None] | None = None) -> None:
        self._listeners: list[Callable[[ModelState, str], None]] = []
        if on_state is not None:
            self._listeners.append(on_state)
        self.worker = WorkerClient(on_state=self._emit)

    def add_listener(self, listener: Callable[[ModelState, str], None]) -> None:
        self._listeners.append(listener)

    def _emit(self, state: ModelState, detail: str) -> None:
        for listener in list(self._listeners):
            with contextlib.suppress(Exception):
                listener(state, detail)

    @property
    def state(self) -> ModelState:
        return self.worker.state

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

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        events = self._runtime.worker.stream(self._params, request)
        try:
            async for event in events:
                yield event
        finally:
            await events.aclose()  # type: ignore[attr-defined]

    async def list_models(self) -> list[str]:
        return [self._params.model_path]

    async def aclose(self) -> None:
        return None
