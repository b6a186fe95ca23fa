"""The local provider: the Provider protocol over ``LocalEngine`` on its own thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from desktop.llm.errors import LocalModelError, UserError
from desktop.llm.events import StreamEvent
from desktop.llm.provider import ChatRequest
from desktop.local.engine import LoadParams, LocalEngine

_DONE = object()


class LocalRuntime:
    """The engine plus the one thread it runs on. Shared by every local agent."""

    def __init__(self, engine: LocalEngine | None = None) -> None:
        self.engine = engine or LocalEngine()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simi-llama")
        self._cancels: set[threading.Event] = set()

    def cancel_all(self) -> None:
        for event in list(self._cancels):
            event.set()

    async def aclose(self) -> None:
        self.cancel_all()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.executor, self.engine.unload)
        self.executor.shutdown(wait=True)

    def close(self) -> None:
        self.cancel_all()
        self.executor.submit(self.engine.unload)
        self.executor.shutdown(wait=True)


class LocalProvider:
    def __init__(self, runtime: LocalRuntime, params: LoadParams) -> None:
        self._runtime = runtime
        self._params = params

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        cancel = threading.Event()
        self._runtime._cancels.add(cancel)

        def put(item: object) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed under us: nobody listens
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def work() -> None:
            try:
                for event in self._runtime.engine.generate(self._params, request, cancel):
                    put(event)
                    if cancel.is_set():
                        break
            except BaseException as exc:  # handed to the consumer, raised there
                put(exc)
            finally:
                put(_DONE)

        future = loop.run_in_executor(self._runtime.executor, work)
        try:
            while True:
                item = await queue.get()
                if item is _DONE:
                    break
                if isinstance(item, UserError):
                    raise item
                if isinstance(item, BaseException):
                    raise LocalModelError(f"The local model failed: {item}") from item
                yield item
        finally:
            cancel.set()
            self._runtime._cancels.discard(cancel)
            # Decode stops within one token once ``cancel`` is set; wait so the next turn
            # starts on an idle engine.
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(future), timeout=30)

    async def list_models(self) -> list[str]:
        return [self._params.model_path]

    async def aclose(self) -> None:
        return None
