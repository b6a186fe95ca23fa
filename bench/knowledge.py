"""Knowledge (``desktop/knowledge``): how fast folders are indexed, how fast a question is
answered at 100,000 chunks, how fast a few edited files are indexed again.

    .venv/bin/python bench/knowledge.py [--files 2000] [--chunks 100000] [--queries 300]
                                        [--embedder-gguf PATH] [--quick]

(a) ``index_chunks_per_s``: a generated corpus of ``--files`` files (a few KB each of varied
    text: words drawn from a Zipf-weighted synthetic vocabulary, Markdown with headings, plain
    text and code) is indexed by ``KnowledgeIndex.sync`` into a fresh index file: ``bm25``
    without an embedder (walk, hash, read, chunk, FTS5), ``embedder`` with one (the same plus
    the vectors). With ``--embedder-gguf`` the embedder is that GGUF model on the app's path
    (``local/embedder.py``: llama.cpp in its own process), over the first
    ``--embedder-files`` files only (a model on 2 CPU cores embeds a few chunks a second);
    else the hashed bag-of-words fake of the tests (576 dimensions), which measures the
    index's own cost, not a model's (``notes`` says so).
(a') ``embedder_reference`` (with ``--embedder-gguf``): the same 64 chunk-sized texts
    embedded in batches of 32 by llama-cpp-python in this process (``raw_texts_per_s``, the
    reference) and through the app's worker (``worker_texts_per_s``), in the same run.
(b) ``incremental_reindex_s``: 10 of the files rewritten with new content, then ``sync``
    again (the BM25 index): the walk over all files plus reading the 10.
(c) ``query_p95_ms``: an index of ``--chunks`` chunks (about 1,000 characters each) is built
    through the index's own write path (``KnowledgeIndex._write_file``: a file's row, chunks,
    FTS5 and 576-dimension vectors from the fake embedder in one transaction per "file" of
    50 chunks), then ``--queries`` questions of 2 to 5 words (common and rare) are asked with
    ``search_timed``; p50/p95 of the whole call, and the same without vectors
    (``query_p95_ms_bm25``). The target is p95 <= 50 ms with vectors on 2 cores.
(d) ``peak_rss_mb``: the process's peak resident memory (``resource.getrusage``) after the
    indexing runs of (a) and (b), before (c) loads its matrix; ``peak_rss_mb_after_query``
    with (c)'s 100,000-vector matrix in memory too.

Prints one JSON object on stdout (progress goes to stderr). ``--quick`` (the test's smoke
run): 150 files, 5,000 chunks, 50 queries.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from desktop.knowledge import KnowledgeIndex
from desktop.knowledge.chunks import Piece
from tests.knowledge.fakes import HashedEmbedder

KEYS = (
    "bench",
    "index_chunks_per_s",
    "query_p95_ms",
    "query_p95_ms_bm25",
    "query_p50_ms",
    "query_target_ms",
    "incremental_reindex_s",
    "peak_rss_mb",
    "peak_rss_mb_after_query",
    "corpus",
    "query_times_ms",
    "notes",
    "cpus",
    "load_avg",
    "embedder_reference",
)
QUERY_TARGET_MS = 50.0
DIMS = 576


def say(text: str) -> None:
    print(f"[bench/knowledge] {text}", file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


class Words:
    """A synthetic vocabulary drawn Zipf-like: a few words everywhere, most rare."""

    def __init__(self, rng: random.Random, size: int = 20_000) -> None:
        syllables = ["ka", "lo", "mi", "ne", "ru", "ta", "shi", "po", "ve", "dar", "qu", "ix"]
        seen: dict[str, None] = {}
        while len(seen) < size:
            seen["".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))] = None
        self.words = list(seen)
        self.cumulative = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(size)))
        self.rng = rng

    def draw(self, count: int) -> list[str]:
        return self.rng.choices(self.words, cum_weights=self.cumulative, k=count)

    def sentence(self) -> str:
        return " ".join(self.draw(self.rng.randint(6, 16))).capitalize() + "."


def make_corpus(folder: Path, files: int, words: Words) -> list[Path]:
    rng = words.rng
    paths = []
    for n in range(files):
        sub = folder / f"part{n % 20:02d}"
        sub.mkdir(parents=True, exist_ok=True)
        kind = n % 3
        lines: list[str] = []
        target = rng.randint(2_000, 5_000)
        size = 0
        while size < target:
            if kind == 0 and rng.random() < 0.08:
                line = "#" * rng.randint(1, 3) + " " + " ".join(words.draw(3))
            elif kind == 2:
                line = f"    {words.draw(1)[0]} = {words.draw(1)[0]}({rng.randint(0, 99)})"
            else:
                line = " ".join(words.sentence() for _ in range(rng.randint(1, 3)))
            lines.append(line)
            size += len(line) + 1
        path = sub / f"doc{n:05d}.{('md', 'txt', 'py')[kind]}"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def embedder_reference(gguf: Path, texts: list[str]) -> dict[str, Any]:
    """Texts per second, raw llama-cpp-python in this process (the reference: what llama.cpp
    does with no process between) and the app's embedding worker, on the same texts."""
    from llama_cpp import LLAMA_POOLING_TYPE_MEAN, Llama

    from desktop.local.embedder import LocalEmbedder

    raw = Llama(
        model_path=str(gguf),
        embedding=True,
        verbose=False,
        n_ctx=512,
        n_batch=512,
        n_ubatch=512,
        pooling_type=LLAMA_POOLING_TYPE_MEAN,
    )
    started = time.perf_counter()
    for at in range(0, len(texts), 32):
        raw.embed(texts[at : at + 32], truncate=True)
    raw_s = time.perf_counter() - started
    del raw
    with LocalEmbedder.start(gguf) as worker:
        started = time.perf_counter()
        for at in range(0, len(texts), 32):
            worker.embed(texts[at : at + 32])
        worker_s = time.perf_counter() - started
        # a question as a search embeds it: one short text (the query's share of query_p95_ms
        # with this model; the bench's query figures use the fake embedder's vectors)
        asked: list[float] = []
        for text in texts[:40]:
            question = " ".join(text.split()[:8])
            began = time.perf_counter()
            worker.embed([question])
            asked.append((time.perf_counter() - began) * 1000)
    return {
        "texts": len(texts),
        "raw_texts_per_s": round(len(texts) / raw_s, 2),
        "worker_texts_per_s": round(len(texts) / worker_s, 2),
        "worker_ratio": round(worker_s / raw_s, 3),
        "question_embed_p50_ms": round(statistics.median(asked), 2),
        "question_embed_p95_ms": round(percentile(asked, 95), 2),
    }


def index_figures(
    folder: Path, files: int, words: Words, gguf: Path | None, gguf_files: int
) -> dict[str, Any]:
    docs = folder / "corpus"
    paths = make_corpus(docs, files, words)
    mb = sum(p.stat().st_size for p in paths) / 1e6
    say(f"corpus: {files} files, {mb:.1f} MB")
    plain = KnowledgeIndex(folder / "bm25.sqlite3")
    report = plain.sync([docs])
    bm25_rate = report.chunks_indexed / report.seconds
    say(f"bm25: {report.chunks_indexed} chunks in {report.seconds:.2f} s")
    embedder: Any = HashedEmbedder("hashed", DIMS)
    roots: list[Path] = [docs]
    if gguf is not None:
        from desktop.local.embedder import LocalEmbedder

        embedder = LocalEmbedder.start(gguf)
        roots = paths[:gguf_files]
    with_vectors = KnowledgeIndex(folder / "vectors.sqlite3", embedder)
    vreport = with_vectors.sync(roots)
    vector_rate = vreport.chunks_indexed / vreport.seconds
    say(f"embedder: {vreport.chunks_indexed} chunks in {vreport.seconds:.2f} s")
    with_vectors.close()
    if gguf is not None:
        embedder.close()
    for path in paths[:: max(1, len(paths) // 10)][:10]:
        path.write_text("\n".join(words.sentence() for _ in range(30)) + "\n", encoding="utf-8")
    again = plain.sync([docs])
    assert again.changed == 10, again
    say(f"incremental: {again.changed} changed in {again.seconds:.3f} s")
    plain.close()
    return {
        "rates": {"bm25": round(bm25_rate, 1), "embedder": round(vector_rate, 1)},
        "incremental_s": round(again.seconds, 4),
        "corpus": {
            "files": files,
            "mb": round(mb, 2),
            "chunks": report.chunks,
            "embedder": embedder.name,
            "dims": embedder.dims,
            "embedder_files": len(roots) if gguf is not None else files,
        },
        "sample": [p.read_text("utf-8")[:1200] for p in paths[:64]],  # chunk-sized texts
    }


def query_figures(folder: Path, chunks: int, queries: int, words: Words) -> dict[str, Any]:
    db = folder / "big.sqlite3"
    embedder = HashedEmbedder("hashed", DIMS)
    ix = KnowledgeIndex(db, embedder)
    ix._adopt_embedder()
    per_file = 50
    started = time.monotonic()
    for n in range(0, chunks, per_file):
        pieces = []
        for i in range(min(per_file, chunks - n)):
            text = " ".join(words.sentence() for _ in range(10))[:1000]
            pieces.append(Piece(i * 10 + 1, i * 10 + 10, None, text))
        vectors = ix._embed([p.text for p in pieces])
        ix._write_file(f"/bench/file{n:07d}.txt", 1, 1, "0" * 64, pieces, vectors)
    build_s = time.monotonic() - started
    say(f"{chunks} chunks written in {build_s:.1f} s")
    asked = []
    for _ in range(queries):
        common = words.draw(words.rng.randint(1, 3))
        rare = [words.rng.choice(words.words) for _ in range(words.rng.randint(1, 2))]
        asked.append(" ".join(common + rare) + "?")
    ix.search("warm up the matrix")
    hybrid, parts = timed(ix, asked)
    ix.close()
    bm25_only = KnowledgeIndex(db)
    bm25, _ = timed(bm25_only, asked)
    bm25_only.close()
    return {
        "hybrid": hybrid,
        "bm25": bm25,
        "parts": parts,
        "build_s": round(build_s, 1),
    }


def timed(ix: KnowledgeIndex, asked: list[str]) -> tuple[list[float], dict[str, float]]:
    totals, embed, search, read = [], [], [], []
    for question in asked:
        started = time.perf_counter()
        _, times = ix.search_timed(question, 5)
        totals.append((time.perf_counter() - started) * 1000)
        embed.append(times.embed_ms)
        search.append(times.search_ms)
        read.append(times.read_ms)
    parts = {
        "embed_p50": round(statistics.median(embed), 2),
        "search_p50": round(statistics.median(search), 2),
        "search_p95": round(percentile(search, 95), 2),
        "read_p50": round(statistics.median(read), 2),
    }
    return totals, parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--embedder-gguf", type=Path, default=None)
    parser.add_argument("--embedder-files", type=int, default=60)
    parser.add_argument("--quick", action="store_true", help="a smoke run for the tests")
    args = parser.parse_args()
    if args.quick:
        args.files, args.chunks, args.queries = 150, 5_000, 50
    words = Words(random.Random(7))
    with tempfile.TemporaryDirectory(prefix="simi-bench-knowledge-") as tmp:
        folder = Path(tmp)
        indexed = index_figures(folder, args.files, words, args.embedder_gguf, args.embedder_files)
        rss = peak_rss_mb()
        asked = query_figures(folder, args.chunks, args.queries, words)
    notes = []
    if args.embedder_gguf is None:
        notes.append(
            "index_chunks_per_s.embedder used the fake hashed bag-of-words embedder "
            f"({DIMS} dims), not a model: pass --embedder-gguf PATH for a real one"
        )
    notes.append(f"query figures at {args.chunks} chunks, vectors from the fake embedder")
    result: dict[str, Any] = {
        "bench": "knowledge",
        "index_chunks_per_s": indexed["rates"],
        "query_p95_ms": round(percentile(asked["hybrid"], 95), 2),
        "query_p95_ms_bm25": round(percentile(asked["bm25"], 95), 2),
        "query_p50_ms": round(statistics.median(asked["hybrid"]), 2),
        "query_target_ms": QUERY_TARGET_MS,
        "incremental_reindex_s": indexed["incremental_s"],
        "peak_rss_mb": rss,
        "peak_rss_mb_after_query": peak_rss_mb(),
        "corpus": {**indexed["corpus"], "query_chunks": args.chunks, "build_s": asked["build_s"]},
        "query_times_ms": asked["parts"],
        "notes": "; ".join(notes),
        "cpus": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "embedder_reference": (
            embedder_reference(args.embedder_gguf, indexed["sample"])
            if args.embedder_gguf is not None
            else None
        ),
    }
    assert tuple(result) == KEYS
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
