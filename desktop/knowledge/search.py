"""What a search returns, the safe FTS5 query made of a person's words, and the fusion of the
BM25 and vector rankings.

A question is free text: ``"``, ``*``, ``-``, ``NEAR(``, ``a:b`` mean something to FTS5 and
would raise a syntax error there. ``fts_query`` keeps only word tokens (letters and digits,
any script), drops English stop words, quotes each and joins them with ``OR``: BM25 ranks the
chunks that hold more of the rarer words first. Nothing left (an empty or stop-word-only
question) means no search at all.

Fusion is reciprocal rank fusion: a chunk scores ``sum(1 / (RRF_K + rank))`` over the lists it
is in (ranks 1-based, the top ``CANDIDATES`` of each list), so neither BM25's nor cosine's
scale matters, only the order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RRF_K = 60
CANDIDATES = 50
MAX_TERMS = 32

_WORD = re.compile(r"\w+", re.UNICODE)
STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
    ]
)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of an indexed file: ``path`` absolute; lines 1-based inclusive; ``page``
    1-based for a PDF (the lines then count within the page), None otherwise."""

    id: int
    path: str
    start_line: int
    end_line: int
    page: int | None
    text: str


@dataclass(frozen=True, slots=True)
class Hit:
    """A chunk found: ``score`` the fused RRF score (higher is better); its rank (1-based)
    in the BM25 and the vector list, None where it is not in that list's top 50."""

    chunk: Chunk
    score: float
    bm25_rank: int | None
    vector_rank: int | None


@dataclass(frozen=True, slots=True)
class SearchTimes:
    """Where a search's time went: embedding the question, ranking (FTS5 and vectors),
    reading the chosen chunks."""

    embed_ms: float
    search_ms: float
    read_ms: float


def query_terms(query: str) -> list[str]:
    """The words of a question worth searching for: lower case, no stop words, each once."""
    terms: dict[str, None] = {}
    for word in _WORD.findall(query.lower()):
        if word not in STOP_WORDS and word != "_":
            terms[word] = None
    return list(terms)[:MAX_TERMS]


def fts_query(query: str) -> str | None:
    """A safe FTS5 MATCH expression for free text: each word quoted, joined by OR; None when
    no word is left."""
    terms = query_terms(query)
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def fuse(
    bm25: list[int], vector: list[int], k: int
) -> list[tuple[int, float, int | None, int | None]]:
    """Reciprocal rank fusion of two rankings of chunk ids: the best ``k`` as
    (id, score, bm25 rank, vector rank); ties keep BM25's order, then the vectors'."""
    ranks: dict[int, list[int | None]] = {}
    for rank, chunk_id in enumerate(bm25[:CANDIDATES], 1):
        ranks.setdefault(chunk_id, [None, None])[0] = rank
    for rank, chunk_id in enumerate(vector[:CANDIDATES], 1):
        ranks.setdefault(chunk_id, [None, None])[1] = rank
    scored = []
    for order, (chunk_id, (b, v)) in enumerate(ranks.items()):
        score = sum(1.0 / (RRF_K + r) for r in (b, v) if r is not None)
        scored.append((-score, order, chunk_id, score, b, v))
    scored.sort()
    return [(chunk_id, score, b, v) for _, _, chunk_id, score, b, v in scored[:k]]
