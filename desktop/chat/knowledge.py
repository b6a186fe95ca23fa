"""Knowledge: the collections an agent searches, their indexes, and the passages a turn gets.

``KnowledgeService`` is what the window and the CLI call:

- collections (``store/knowledge.py``): create, change, remove (its index file goes too), and
  which agents search which;
- ``index``: a collection's folders read into its index (``desktop/knowledge``), blocking,
  with progress, pause and cancel (the window runs it on a worker thread);
- ``search`` / ``retrieve``: the best passages of one or more collections for a
  question, timed in its parts (embedding the question, ranking, reading the passages);
- ``Retrieval.prompt``: the question as the model gets it, the passages numbered before it
  and the request to cite them as [1], [2].

Searches run on one thread of their own, where each collection's index stays open (with the
vectors in memory, when it has an embedding model): a question does not load them again. An
embedding model runs in its own process (``local/embedder.py``), started on first use and
shared by indexing and search (a lock: one batch at a time).

``desktop.knowledge`` (and numpy) load on first use, not when the app starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from desktop.errors import UserError, ValidationError
from desktop.store.knowledge import Collection, KnowledgeStore, Source

if TYPE_CHECKING:
    import numpy

    from desktop.chat.stats_clock import StatsClock
    from desktop.knowledge import IndexControl, IndexProgress, IndexReport, KnowledgeIndex
    from desktop.local.catalog import ModelEntry

log = logging.getLogger("simi.knowledge")

# how many passages a question gets, from all of the agent's collections together
DEFAULT_PASSAGES = 5
MAX_NAME_CHARS = 80
# what the model is asked, after the numbered passages
CITE_REQUEST = (
    "Answer the question below. The numbered passages above come from the person's own files "
    "and may help: where you use one, cite it by its number in square brackets, as [1] or "
    "[2], right after the sentence it supports. If they do not hold the answer, say so and "
    "answer from what you know."
)


# llama.cpp's architectures that only embed (encoders); a decoder embeds when its file names a
# pooling (``{arch}.pooling_type``: Qwen3-Embedding and the like)
EMBEDDING_ARCHITECTURES = frozenset(
    {
        "bert",
        "nomic-bert",
        "nomic-bert-moe",
        "jina-bert-v2",
        "jina-bert-v3",
        "t5encoder",
        "modern-bert",
        "neo-bert",
        "eurobert",
        "gemma-embedding",
    }
)


DAMAGED = (
    "The collection's index is damaged or unreadable: index it again (Index now, or simi "
    "knowledge index) and it is made anew from the files."
)


class KnowledgeError(UserError):
    """A collection that cannot be indexed or searched, in words (a missing embedding model, a
    damaged index file)."""

    kind = "knowledge"


@dataclass(frozen=True, slots=True)
class CollectionState:
    """What a collection's index holds now: files, passages, the files it skipped and why,
    when it was last brought up to date (None: never)."""

    collection: Collection
    files: int
    chunks: int
    skipped: tuple[tuple[str, str], ...]
    indexed_at: str | None


@dataclass(frozen=True, slots=True)
class Retrieval:
    """The passages found for a question, numbered from 1, and how long finding them took."""

    query: str
    sources: tuple[Source, ...]
    embed_ms: float = 0.0
    search_ms: float = 0.0
    read_ms: float = 0.0
    notices: tuple[str, ...] = field(default=())

    @property
    def total_ms(self) -> float:
        return self.embed_ms + self.search_ms + self.read_ms

    def block(self) -> str:
        """The passages as the model reads them: each in a delimited block named by its
        number, file and place (a passage cannot close its block and pass as the person's
        words: ``document_block``)."""
        from desktop.attach.documents import document_block

        parts = []
        for s in self.sources:
            where = f", {s.place}" if s.place else ""
            parts.append(document_block(f"[{s.position}] {Path(s.path).name}{where}", s.text))
        return "\n\n".join(parts)

    def prompt(self, question: str) -> str:
        """The question with the passages before it and the request to cite them."""
        if not self.sources:
            return question
        return f"{self.block()}\n\n{CITE_REQUEST}\n\n{question}"

    @property
    def tokens(self) -> int:
        """What the passages add to the prompt, estimated (characters / 4): the block and the
        request to cite."""
        if not self.sources:
            return 0
        return math.ceil((len(self.block()) + len(CITE_REQUEST) + 4) / 4)

    def stats_fields(self) -> dict[str, Any]:
        """The stats row's retrieval columns (``chat/call_stats.py``)."""
        return {
            "retrieval_ms": round(self.total_ms, 2),
            "retrieval_embed_ms": round(self.embed_ms, 2),
            "retrieval_search_ms": round(self.search_ms, 2),
            "retrieval_read_ms": round(self.read_ms, 2),
            "retrieval_chunks": len(self.sources),
            "retrieval_tokens": self.tokens,
        }


class _SharedEmbedder:
    """An embedding model's process, shared by the indexing and search threads: one batch at
    a time. A process that stopped (killed, out of memory) is started again once, for the
    batch that found it gone; a second failure is the error."""

    def __init__(self, path: Path, start: EmbedderStarter) -> None:
        self._path = path
        self._start = start
        self._inner = start(path)
        self._lock = threading.Lock()
        self.name: str = self._inner.name
        self.dims: int = self._inner.dims
        self._closed = False

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        with self._lock:
            if self._closed:
                raise KnowledgeError("The embedding model was closed.")
            try:
                return self._inner.embed(texts)
            except UserError as exc:
                if getattr(exc, "reason", None) not in ("stopped", "timeout"):
                    raise
                log.warning("the embedding model's process stopped; starting it again")
                with contextlib.suppress(Exception):
                    self._inner.close()
                self._inner = self._start(self._path)
                return self._inner.embed(texts)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._inner.close()


EmbedderStarter = Callable[[Path], Any]


def _start_local_embedder(path: Path) -> Any:
    from desktop.local.embedder import LocalEmbedder

    return LocalEmbedder.start(path)


class KnowledgeService:
    """Collections, their indexes (a file each in ``folder``) and the searches of turns."""

    def __init__(
        self,
        store: KnowledgeStore,
        folder: Path,
        *,
        start_embedder: EmbedderStarter = _start_local_embedder,
    ) -> None:
        self.store = store
        self.folder = folder
        self._start_embedder = start_embedder
        self._embedders: dict[str, _SharedEmbedder] = {}
        self._embedders_lock = threading.Lock()
        # the search thread and the indexes it keeps open (collection id -> index)
        self._searcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simi-knowledge")
        self._open: dict[int, tuple[KnowledgeIndex, str | None]] = {}
        self._closed = False

    # collections ------------------------------------------------------------------------------
    def collections(self) -> list[Collection]:
        return self.store.all()

    def get(self, collection_id: int) -> Collection | None:
        return self.store.get(collection_id)

    def by_name(self, name: str) -> Collection | None:
        return self.store.by_name(name)

    def create(
        self, name: str, paths: Iterable[str | Path], embedder: str | Path | None = None
    ) -> Collection:
        """A new collection; ``ValidationError`` for an empty or taken name, no paths, a
        path that does not exist, an embedding model that is not a file."""
        collection = self._checked(Collection(name, tuple(str(p) for p in paths), _opt(embedder)))
        return self.store.add(collection)

    def update(
        self,
        collection: Collection,
        *,
        name: str | None = None,
        paths: Iterable[str | Path] | None = None,
        embedder: object = ...,
    ) -> Collection:
        """Changed fields (``embedder=None``: keyword search only). A changed embedding model
        makes the next ``index`` compute every passage's vector again."""
        changed = collection
        if name is not None:
            changed = replace(changed, name=name)
        if paths is not None:
            changed = replace(changed, paths=tuple(str(p) for p in paths))
        if embedder is not ...:
            changed = replace(changed, embedder=_opt(embedder))
        changed = self._checked(changed)
        updated = self.store.update(changed)
        if collection.id is not None:
            self._forget(collection.id)
        return updated

    def _checked(self, collection: Collection) -> Collection:
        errors: dict[str, str] = {}
        name = " ".join(collection.name.split())
        if not name:
            errors["name"] = "Give the collection a name."
        elif len(name) > MAX_NAME_CHARS:
            errors["name"] = f"A collection's name can be at most {MAX_NAME_CHARS} characters."
        else:
            other = self.store.by_name(name)
            if other is not None and other.id != collection.id:
                errors["name"] = f"There is already a collection named “{other.name}”."
        paths: list[str] = []
        for raw in collection.paths:
            path = Path(raw).expanduser()
            if not path.exists():
                errors["paths"] = f"“{raw}” was not found: choose a folder or file that exists."
                break
            absolute = str(path.resolve())
            if absolute not in paths:
                paths.append(absolute)
        if not paths and "paths" not in errors:
            errors["paths"] = "Add at least one folder or file to the collection."
        embedder = collection.embedder
        if embedder is not None:
            model = Path(embedder).expanduser()
            if not model.is_file():
                errors["embedder"] = (
                    f"The embedding model “{embedder}” was not found: choose a GGUF file."
                )
            embedder = str(model.resolve()) if model.is_file() else embedder
        if errors:
            raise ValidationError(errors)
        return replace(collection, name=name, paths=tuple(paths), embedder=embedder)

    def delete(self, collection: Collection) -> None:
        """The collection, its index file and which agents searched it; the files it indexed
        are not touched, and replies keep the passages they were given."""
        if collection.id is None:
            return
        self.store.delete(collection.id)
        self._forget(collection.id)
        for path in _index_files(self.index_path(collection)):
            path.unlink(missing_ok=True)

    def index_path(self, collection: Collection) -> Path:
        if collection.id is None:
            raise ValueError("an unsaved collection has no index")
        return self.folder / f"collection-{collection.id}.sqlite"

    # agents -----------------------------------------------------------------------------------
    def agent_collections(self, agent_id: int) -> list[Collection]:
        return self.store.agent_collections(agent_id)

    def set_agent_collections(self, agent_id: int, collections: Iterable[Collection]) -> None:
        self.store.set_agent_collections(agent_id, [c.id for c in collections if c.id is not None])

    def copy_agent(self, source_id: int, copy_id: int) -> None:
        """A cloned agent searches what the original searches."""
        self.set_agent_collections(copy_id, self.agent_collections(source_id))

    def sources_of(self, message_ids: Iterable[int]) -> dict[int, list[Source]]:
        return self.store.sources_of(message_ids)

    # indexing (blocking) ----------------------------------------------------------------------
    @staticmethod
    def new_control() -> IndexControl:
        """A pause/resume/cancel switch for one ``index`` run (thread-safe): the window and
        the CLI get it here, not from ``desktop.knowledge``."""
        from desktop.knowledge import IndexControl

        return IndexControl()

    def index(
        self,
        collection: Collection,
        control: IndexControl | None = None,
        progress: Callable[[IndexProgress], None] | None = None,
    ) -> IndexReport:
        """Bring the collection's index up to date with its folders: new and changed files
        read, deleted ones dropped. Blocking; call it off the GUI thread."""
        from desktop.knowledge import KnowledgeIndex

        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.index_path(collection)
        embedder = self._embedder(collection)
        try:
            index = KnowledgeIndex(path, embedder)
        except sqlite3.DatabaseError:
            # the index is made from the files: a damaged one is set aside and made again
            log.warning("the index of a collection was damaged; indexing it from scratch")
            if collection.id is not None:
                self._forget(collection.id)
            damaged = path.with_name(path.name + ".damaged")
            for part in _index_files(path):
                if part.exists():
                    part.replace(damaged if part == path else part.with_name(part.name + ".old"))
            index = KnowledgeIndex(path, embedder)
        try:
            return index.sync([Path(p) for p in collection.paths], control, progress)
        except (sqlite3.OperationalError, OSError) as exc:  # the index could not be written
            raise KnowledgeError(_not_written(collection, exc)) from exc
        finally:
            index.close()

    def state(self, collection: Collection) -> CollectionState:
        """What the index holds (blocking: reads its file)."""
        path = self.index_path(collection)
        if not path.exists():
            return CollectionState(collection, 0, 0, (), None)
        from desktop.knowledge import KnowledgeIndex

        try:
            index = KnowledgeIndex(path)
            try:
                files, chunks = index.counts()
                skipped = tuple((s.path, s.reason) for s in index.skipped())
                when = index.last_indexed_at()
            finally:
                index.close()
        except sqlite3.DatabaseError as exc:
            raise KnowledgeError(DAMAGED) from exc
        return CollectionState(collection, files, chunks, skipped, when)

    def folders(self, collection: Collection) -> list[str]:
        """The folders of a collection's indexed files (blocking: reads its index); [] when it
        was never indexed."""
        path = self.index_path(collection)
        if not path.exists():
            return []
        from desktop.knowledge import KnowledgeIndex

        index = KnowledgeIndex(path)
        try:
            return index.folders()
        finally:
            index.close()

    # searching --------------------------------------------------------------------------------
    def search(
        self, collections: Sequence[Collection], query: str, k: int = DEFAULT_PASSAGES
    ) -> Retrieval:
        """The ``k`` best passages of ``collections`` for ``query``, numbered from 1 (blocking:
        it waits for the search thread)."""
        if self._closed:
            raise KnowledgeError("Knowledge search is closed.")
        return self._searcher.submit(self._search_here, list(collections), query, k).result()

    def _search_here(self, collections: list[Collection], query: str, k: int) -> Retrieval:
        try:
            return self._search_all(collections, query, k)
        except sqlite3.DatabaseError as exc:
            log.warning("a collection's index could not be searched: %s", exc)
            for collection in collections:  # opened again next time
                kept = self._open.pop(collection.id or -1, None)
                if kept is not None:
                    with contextlib.suppress(Exception):
                        kept[0].close()
            raise KnowledgeError(DAMAGED) from exc

    def _search_all(self, collections: list[Collection], query: str, k: int) -> Retrieval:
        embed_ms = search_ms = read_ms = 0.0
        found: list[tuple[float, Collection, Any]] = []
        notices: list[str] = []
        for collection in collections:
            if collection.id is None:
                continue
            index = self._opened(collection)
            if index is None:
                notices.append(f"“{collection.name}” has not been indexed yet.")
                continue
            hits, times = index.search_timed(query, k)
            embed_ms += times.embed_ms
            search_ms += times.search_ms
            read_ms += times.read_ms
            found += [(hit.score, collection, hit) for hit in hits]
        found.sort(key=lambda item: item[0], reverse=True)
        sources = tuple(
            Source(
                position=n,
                collection=collection.name,
                path=hit.chunk.path,
                start_line=hit.chunk.start_line,
                end_line=hit.chunk.end_line,
                page=hit.chunk.page,
                score=round(float(score), 6),
                text=hit.chunk.text,
            )
            for n, (score, collection, hit) in enumerate(found[:k], start=1)
        )
        return Retrieval(query, sources, embed_ms, search_ms, read_ms, tuple(notices))

    def _opened(self, collection: Collection) -> KnowledgeIndex | None:
        """The collection's index, kept open on the search thread (None: never indexed)."""
        from desktop.knowledge import KnowledgeIndex

        assert collection.id is not None
        kept = self._open.get(collection.id)
        if kept is not None and kept[1] == collection.embedder:
            return kept[0]
        if kept is not None:
            kept[0].close()
            del self._open[collection.id]
        path = self.index_path(collection)
        if not path.exists():
            return None
        index = KnowledgeIndex(path, self._embedder(collection))
        self._open[collection.id] = (index, collection.embedder)
        return index

    def _forget(self, collection_id: int) -> None:
        """Close the search thread's copy of an index (changed or removed)."""
        if self._closed:
            return

        def drop() -> None:
            kept = self._open.pop(collection_id, None)
            if kept is not None:
                kept[0].close()

        self._searcher.submit(drop).result()

    # embedding models -------------------------------------------------------------------------
    @staticmethod
    def embedding_models(entries: Iterable[ModelEntry]) -> list[tuple[str, str]]:
        """(path, file name) of the model library's ``entries`` (``ModelLibrary.entries``)
        that are embedding models, by their GGUF header: an encoder's architecture, or a file
        that names a pooling; not a reranker (its pooling is a score, not a vector) nor a file
        the library cannot use. Blocking: reads each model's header; call it off the GUI
        thread."""
        from desktop.local.embed_worker import POOLING_RANK
        from desktop.local.gguf import GGUFError, read_header

        found: list[tuple[str, str]] = []
        for entry in entries:
            if entry.info is None:
                continue
            try:
                header = read_header(entry.path)
            except (GGUFError, OSError):
                continue
            pooling = header.arch_value("pooling_type")
            if pooling == POOLING_RANK:
                continue
            if pooling is not None or header.architecture in EMBEDDING_ARCHITECTURES:
                path = Path(entry.path).resolve()
                found.append((str(path), path.name))
        return found

    def _embedder(self, collection: Collection) -> _SharedEmbedder | None:
        """The collection's embedding model, its process started on first use (blocking)."""
        if collection.embedder is None:
            return None
        with self._embedders_lock:
            shared = self._embedders.get(collection.embedder)
            if shared is None:
                started = time.perf_counter()
                shared = _SharedEmbedder(Path(collection.embedder), self._start_embedder)
                log.info(
                    "embedding model started in %.0f ms",
                    (time.perf_counter() - started) * 1000,
                )
                self._embedders[collection.embedder] = shared
            return shared

    def close(self) -> None:
        """Close the open indexes and stop the embedding models' processes."""
        if self._closed:
            return

        def close_all() -> None:
            for index, _ in self._open.values():
                index.close()
            self._open.clear()

        self._searcher.submit(close_all).result()
        self._closed = True
        self._searcher.shutdown(wait=True)
        with self._embedders_lock:
            for shared in self._embedders.values():
                try:
                    shared.close()
                except Exception:
                    log.exception("could not stop an embedding model's process")
            self._embedders.clear()


async def retrieve(
    knowledge: KnowledgeService | None,
    agent_id: int | None,
    question: str,
    clock: StatsClock | None = None,
) -> tuple[Retrieval | None, str | None]:
    """The passages of an agent's collections for a question, found off the event loop, and
    what to tell the person (a collection not indexed yet; a search that failed: the
    question then goes without passages). (None, None): the agent searches nothing. The
    call's ``clock`` says "searching NAMES" meanwhile (the reply's waiting line)."""
    if knowledge is None or agent_id is None or not question.strip():
        return None, None
    collections = knowledge.agent_collections(agent_id)
    if not collections:
        return None, None
    if clock is not None:
        clock.searching = "searching " + ", ".join(c.name for c in collections)
    try:
        found = await asyncio.to_thread(knowledge.search, collections, question)
    except UserError as exc:
        return None, f"Knowledge was not searched: {exc.user_message}"
    finally:
        if clock is not None:
            clock.searching = None
    return found, " ".join(found.notices) or None


def _not_written(collection: Collection, exc: BaseException) -> str:
    """Why indexing stopped, in words; what was indexed before is kept either way (a
    transaction per file)."""
    full = getattr(exc, "errno", None) == errno.ENOSPC or "full" in str(exc).lower()
    if full:
        return (
            f"The disk is full: indexing “{collection.name}” stopped. What was indexed is "
            "kept; free some space and index again to go on."
        )
    detail = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return (
        f"Indexing “{collection.name}” stopped: its index could not be written ({detail}). "
        "What was indexed is kept."
    )


def _opt(value: object) -> str | None:
    if value is None or value == "":
        return None
    return str(value)


def _index_files(path: Path) -> list[Path]:
    return [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]
