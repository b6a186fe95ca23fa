"""Text embeddings from a GGUF model, offline: llama.cpp's embedding mode in a process of its
own (``desktop.local.embed_worker``), so a native crash never takes down the app.

``LocalEmbedder.start(path)`` spawns the worker and waits for the model to load; ``embed``
is blocking (call it off the GUI thread) and one call at a time (a lock). Every failure a
person can meet is an ``EmbedderError`` with a finished sentence: a missing or damaged file,
a model llama.cpp cannot load, a worker that stopped (killed, out of memory, a native crash)
or stopped answering. A worker that stopped stays stopped: start another embedder.

``name`` identifies the model file in an index: ``gguf:<file name>:<16 hex digits of the
SHA-256 of its first MiB and its size>``, the same for the same file wherever it lies and
whatever the load parameters; another file gets another name.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from desktop.errors import UserError

log = logging.getLogger("simi.local.embedder")
_worker_log = logging.getLogger("simi.local.embed_worker")

START_TIMEOUT_S = 300.0  # a large model from a slow disk
EMBED_TIMEOUT_S = 600.0  # one call; a worker silent this long is killed
CLOSE_GRACE_S = 3.0
POLL_S = 0.1  # how often a wait checks that the worker is alive
HASHED_BYTES = 1 << 20


class EmbedderError(UserError):
    """The embedding model cannot be used; ``user_message`` says why. ``reason``: what went
    wrong: "model_file" (missing, unreadable, not a GGUF: found before any process), "load"
    (the worker refused the model: llama.cpp's complaint, a reranker), "stopped", "timeout",
    "closed", "embed" (llama.cpp failed on these texts; the worker goes on)."""

    kind = "embedder"

    def __init__(self, user_message: str, reason: str = "embed") -> None:
        super().__init__(user_message)
        self.reason = reason


def model_identity(path: Path) -> str:
    """``gguf:<file name>:<hash>``: the SHA-256 of the file's first MiB and its size."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        digest.update(fh.read(HASHED_BYTES))
        size = path.stat().st_size
    digest.update(f"\0size={size}".encode())
    return f"gguf:{path.name}:{digest.hexdigest()[:16]}"


class LocalEmbedder:
    """A GGUF embedding model in a worker process. Build with ``start``; ``close`` (or a
    ``with`` block) ends the process."""

    name: str
    dims: int

    def __init__(
        self, path: Path, name: str, process: Any, conn: Any, info: dict[str, Any]
    ) -> None:
        self.path = path
        self.name = name
        self.dims = int(info["n_embd"])
        self.n_ctx = int(info["n_ctx"])
        self.info = dict(info)  # what the worker said at load (pooling, load_ms, gpu_layers)
        self.embed_timeout_s = EMBED_TIMEOUT_S
        self._process = process
        self._conn = conn
        self._lock = threading.Lock()
        self._closed = False
        self._busy = False  # an ``embed`` waits for the worker
        self._stopped: str | None = None  # why the worker is gone, once it is
        # ends the process if the embedder is dropped without ``close``
        self._finalizer = weakref.finalize(self, _stop_worker, process, conn)

    # lifecycle --------------------------------------------------------------------------
    @classmethod
    def start(
        cls,
        model_path: Path,
        *,
        n_gpu_layers: int = 0,
        n_ctx: int = 512,
        timeout: float = START_TIMEOUT_S,
    ) -> LocalEmbedder:
        """Spawn the worker, load ``model_path`` in it and wait until it is ready (blocking).
        Raises ``EmbedderError`` for a missing or damaged file, a load llama.cpp refuses, a
        worker that stopped or did not load within ``timeout`` seconds."""
        import multiprocessing

        from desktop.local.embed_worker import embed_worker_main
        from desktop.local.loading import check_gguf_file
        from desktop.local.worker import bare_main_module

        path = Path(model_path).expanduser()
        try:
            check_gguf_file(path)  # a bad file is said at once, without a process
            name = model_identity(path)
        except UserError as exc:
            raise EmbedderError(exc.user_message, "model_file") from exc
        except OSError as exc:
            raise EmbedderError(
                f"The embedding model file {path} cannot be read ({exc.strerror or exc}).",
                "model_file",
            ) from exc
        started = time.perf_counter()
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        process = ctx.Process(
            target=embed_worker_main,
            args=(child, str(path), int(n_ctx), int(n_gpu_layers)),
            name="simi-embed-worker",
            daemon=True,
        )
        with bare_main_module():
            process.start()
        child.close()
        try:
            reply = _wait(parent, process, timeout, "load")
        except EmbedderError:
            _stop_worker(process, parent)
            raise
        if reply[0] == "error":
            _stop_worker(process, parent)
            raise EmbedderError(reply[2], "load")
        if reply[0] != "ready":
            _stop_worker(process, parent)
            raise EmbedderError(f"The embedding worker answered {reply[0]!r} to its load.")
        embedder = cls(path, name, process, parent, reply[1])
        log.info(
            "embedding model %s ready in %.0f ms (pid %s, %s dims, pooling %s)",
            path.name,
            (time.perf_counter() - started) * 1000,
            process.pid,
            embedder.dims,
            embedder.info.get("pooling"),
        )
        return embedder

    @property
    def pid(self) -> int | None:
        pid: int | None = self._process.pid
        return pid

    @property
    def alive(self) -> bool:
        return not self._closed and self._stopped is None and self._process.is_alive()

    def close(self) -> None:
        """Ask the worker to stop, kill it if it does not within 3 s (at once while an
        ``embed`` on another thread waits for it: that call then raises "closed").
        Idempotent."""
        self._closed = True
        if self._busy and self._finalizer.alive:
            _stop_worker(self._process, self._conn, grace=0)
        self._finalizer()

    def __enter__(self) -> LocalEmbedder:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # embedding --------------------------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text, L2-normalised; a text longer than the context is
        embedded by its first ``n_ctx`` tokens. Blocking; one call at a time."""
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts, not one str")
        batch = [str(text) for text in texts]
        with self._lock:
            if self._closed:
                raise EmbedderError("The embedding model has been closed.", "closed")
            if self._stopped is not None:
                raise EmbedderError(self._stopped, "stopped")
            if not batch:
                return np.zeros((0, self.dims), dtype=np.float32)
            self._busy = True
            try:
                self._conn.send(("embed", batch))
                reply = _wait(self._conn, self._process, self.embed_timeout_s, "embed")
            except (OSError, EOFError, EmbedderError) as exc:
                if self._closed:  # ``close`` on another thread ended the worker
                    raise EmbedderError("The embedding model has been closed.", "closed") from None
                if isinstance(exc, EmbedderError):
                    self._gone(exc.user_message)
                    raise
                # the pipe broke while sending: the worker is gone
                self._process.join(1)
                self._gone(_stopped_message(self._process.exitcode))
                raise EmbedderError(self._stopped or "", "stopped") from None
            finally:
                self._busy = False
        if reply[0] == "error":
            raise EmbedderError(reply[2], "embed")
        if reply[0] != "ok":
            raise EmbedderError(f"The embedding worker answered {reply[0]!r} to embed.")
        _, data, rows, dims = reply
        if rows != len(batch) or dims != self.dims:
            raise EmbedderError(
                f"The embedding worker returned {rows}×{dims} for {len(batch)} texts of "
                f"{self.dims} dimensions."
            )
        return np.frombuffer(data, dtype=np.float32).reshape(rows, dims).copy()

    def _gone(self, why: str) -> None:
        """The worker stopped (or was killed for not answering): later calls say ``why``."""
        self._stopped = why
        self._finalizer()


def _wait(conn: Any, process: Any, timeout: float, what: str) -> tuple[Any, ...]:
    """The worker's next answer (its log records go to the app's log meanwhile). Raises
    ``EmbedderError`` when it stops, or, killing it, when it is silent ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            ready = conn.poll(POLL_S)
            message = conn.recv() if ready or conn.poll(0) else None
        except (EOFError, OSError):  # the pipe closed: the worker ended
            process.join(2)
            raise EmbedderError(_stopped_message(process.exitcode), "stopped") from None
        if message is not None:
            if message[0] == "log":
                _, level, logger, text = message
                _worker_log.log(level, "[pid %s] %s: %s", process.pid, logger, text)
                continue
            return tuple(message)
        if not process.is_alive():
            if conn.poll(0):  # its last words arrived as it ended
                continue
            raise EmbedderError(_stopped_message(process.exitcode), "stopped")
        if time.monotonic() > deadline:
            _stop_worker(process, conn, grace=0)
            raise EmbedderError(
                f"The embedding model's process did not answer within {timeout:.0f} s "
                f"({what}) and was stopped. Start it again, or embed fewer texts at once.",
                "timeout",
            )


def _stop_worker(process: Any, conn: Any, grace: float = CLOSE_GRACE_S) -> None:
    """Ask the worker to close, then kill it if it still runs after ``grace`` seconds."""
    if grace > 0 and process.is_alive():
        try:
            conn.send(("close",))
        except (OSError, ValueError):
            pass
        process.join(grace)
    if process.is_alive():
        process.kill()
        process.join(5)
    try:
        conn.close()
    except OSError:
        pass


def _stopped_message(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        how = f"signal {-exitcode}"
    elif exitcode is None:
        how = "no exit code yet"
    else:
        how = f"exit code {exitcode}"
    return (
        f"The embedding model's process stopped unexpectedly ({how}); it may have run out of "
        "memory or hit a damaged model file. Start the embedding model again to retry."
    )
