"""The embedding worker process: one GGUF model loaded in llama.cpp's embedding mode, so a
native crash (a damaged file, out of memory) ends this process and never the app.

The app side is ``desktop.local.embedder.LocalEmbedder``. The model is named at spawn
(``embed_worker_main``'s arguments) and loads at once; then the worker answers over a
multiprocessing Pipe (pickled tuples), one request at a time:

    worker -> app   ("ready", info) once loaded: info is a dict of plain values (``n_embd``,
                    ``n_ctx``, ``pooling``, ``load_ms``, ``gpu_layers``, ``notice``, ``pid``)
                    | ("error", kind, message) when the load fails; the worker then ends
    app -> worker   ("embed", [texts]) | ("close",)
    worker -> app   ("ok", bytes, rows, dims): a C-ordered float32 matrix, each row
                    L2-normalised (a text of no tokens is a row of zeros)
                    | ("error", kind, message)
    worker -> app   ("log", level, logger, text) at any time: the worker's log records (its
                    own, and the tracebacks of its failures), for the app's log

Texts longer than the context are cut to its first ``n_ctx`` tokens (llama-cpp-python's
``Llama.embed(truncate=True)``: tokenize, cut, evaluate the tokens; ``n_batch`` and
``n_ubatch`` equal ``n_ctx``, so any text that fits is one sequence of one batch, which
pooled embeddings need). A model whose file names no pooling (chat models; ``NONE``, which
would give a vector per token) is pooled by the mean of its tokens; one that names its own
(mean, CLS, last) keeps it; a reranker (``RANK``) is refused.

Nothing of llama.cpp reaches stderr: its log goes to ``desktop.local.loading``'s tail (quoted
when a load fails), and Python's logging to the app as "log" messages.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import Any

from desktop.errors import UserError
from desktop.local.worker import received, run_child

log = logging.getLogger("simi.local.embed_worker")

# llama.cpp's ``enum llama_pooling_type`` (llama.h)
POOLING_UNSPECIFIED = -1
POOLING_NONE = 0
POOLING_MEAN = 1
POOLING_RANK = 4
POOLING_NAMES = {-1: "unspecified", 0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}


class EmbedWorkerError(UserError):
    """A failure in the worker, sent to the app as ("error", kind, message)."""

    kind = "embedder"


def embed_worker_main(conn: Any, model_path: str, n_ctx: int, n_gpu_layers: int) -> None:
    """Entry point of the embedding worker process."""
    run_child(
        conn,
        "embedding worker",
        lambda send: _serve(conn, send, model_path, n_ctx, n_gpu_layers),
    )


def _serve(conn: Any, send: Any, model_path: str, n_ctx: int, n_gpu_layers: int) -> None:
    from desktop.local.libraries import preload_from_env
    from desktop.local.loading import capture_llama_logs

    preload_from_env()  # the llama.cpp build the app chose, before anything loads it
    try:
        capture_llama_logs()
        model = load_embedding_model(Path(model_path), n_ctx=n_ctx, n_gpu_layers=n_gpu_layers)
    except UserError as exc:
        send("error", exc.kind, exc.user_message)
        return
    except Exception as exc:  # unexpected: the app gets a sentence, the log the traceback
        log.exception("loading %s for embeddings failed", model_path)
        send("error", "embedder", f"Loading the embedding model {model_path} failed: {exc}")
        return
    llm = model.llm
    send(
        "ready",
        {
            "n_embd": int(llm.n_embd()),
            "n_ctx": int(llm.n_ctx()),
            "pooling": POOLING_NAMES.get(int(llm.pooling_type()), str(llm.pooling_type())),
            "load_ms": round(model.load_ms, 1),
            "gpu_layers": model.gpu_layers_used,
            "notice": model.gpu_note,
            "pid": os.getpid(),
        },
    )
    for message in received(conn):
        op = message[0]
        if op == "close":
            break
        if op == "embed":
            try:
                matrix = embed_texts(llm, message[1])
                send("ok", matrix.tobytes(), matrix.shape[0], matrix.shape[1])
            except UserError as exc:
                send("error", exc.kind, exc.user_message)
            except Exception as exc:
                log.exception("embedding %s texts failed", len(message[1]))
                send("error", "embedder", f"llama.cpp could not embed the text: {exc}")
        else:
            send("error", "embedder", f"The embedding worker does not know {op!r}.")


def model_pooling(path: Path) -> int:
    """The ``pooling_type`` to give llama.cpp for ``path``: the file's own when it names a
    pooling, else mean. A reranker's (``RANK``: a score, not a vector) is refused."""
    from desktop.local.gguf import GGUFError, read_header

    try:
        raw = read_header(path).arch_value("pooling_type")
    except (GGUFError, OSError):
        raw = None  # ``check_gguf_file`` says what is wrong with the file
    try:
        pooling = int(raw) if raw is not None else POOLING_NONE
    except (TypeError, ValueError):
        pooling = POOLING_NONE
    if pooling == POOLING_RANK:
        raise EmbedWorkerError(
            f"The model file {path} is a reranker, not an embedding model; choose an "
            "embedding model."
        )
    return POOLING_UNSPECIFIED if pooling > POOLING_NONE else POOLING_MEAN


def load_embedding_model(path: Path, *, n_ctx: int, n_gpu_layers: int) -> Any:
    """Load ``path`` in embedding mode through ``desktop.local.loading.load_model`` (its
    header check, its message quoting llama.cpp, its retry with fewer GPU layers when they
    do not fit). Returns the ``LoadedModel``."""
    from desktop.local.loading import LoadParams, check_gguf_file, load_model

    check_gguf_file(path)  # before the pooling is read: a bad file is named as such
    pooling = model_pooling(path)
    import llama_cpp

    loader = functools.partial(
        llama_cpp.Llama, embedding=True, pooling_type=pooling, n_ubatch=n_ctx
    )
    params = LoadParams(str(path), n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, n_batch=n_ctx)
    return load_model(params, loader=loader)


def embed_texts(llm: Any, texts: list[str]) -> Any:
    """``texts`` as a float32 matrix (one L2-normalised row each), each text cut to the
    context. An empty text is embedded as a space (a model without a start token would
    otherwise pool no tokens at all)."""
    import numpy as np

    inputs = [text if text.strip() else " " for text in texts]
    vectors = llm.embed(inputs, normalize=False, truncate=True)
    matrix = np.asarray(vectors, dtype=np.float32).reshape(len(inputs), int(llm.n_embd()))
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, norms, out=matrix, where=norms > 0)
    return np.ascontiguousarray(matrix)
