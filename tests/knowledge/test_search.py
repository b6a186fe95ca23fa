"""Searching: a person's question never breaks the query, however it is typed; with vectors, a
paraphrase that shares no word with the text still finds it; another embedder remakes every
vector while the chunks stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop.knowledge import KnowledgeIndex
from desktop.knowledge.search import fts_query, fuse
from tests.knowledge.fakes import HashedEmbedder


def folder_of(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "garage.txt").write_text(
        "Automobile maintenance schedule: change the oil every 10000 km.\n"
    )
    (folder / "kitchen.txt").write_text("Bake the bread at 220 degrees for forty minutes.\n")
    (folder / "garden.txt").write_text("Water the tomatoes every morning in summer.\n")
    (folder / "quotes.txt").write_text('He said "NEAR(x y)" and a:b -x * and more.\n')
    return folder


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""',
        "*",
        "NEAR(",
        "NEAR(a b",
        "a:b",
        "-x",
        "",
        "   ",
        "AND OR NOT",
        "^start",
        "(",
        "'",
        "x*y",
        "col:umn",
        "é",
        "🙂",
    ],
)
def test_hostile_queries_do_not_raise(tmp_path: Path, query: str) -> None:
    ix = KnowledgeIndex(tmp_path / "k.sqlite3")
    ix.sync([folder_of(tmp_path)])
    assert isinstance(ix.search(query), list)
    ix.close()


def test_query_words_are_quoted_and_ored() -> None:
    assert fts_query('what is "NEAR(x" -y a:b?') == '"near" OR "x" OR "y" OR "b"'
    assert fts_query("the and of") is None and fts_query("") is None


def test_a_stop_word_only_question_finds_nothing(tmp_path: Path) -> None:
    ix = KnowledgeIndex(tmp_path / "k.sqlite3")
    ix.sync([folder_of(tmp_path)])
    assert ix.search("what is the") == []
    assert ix.search("NEAR x")[0].chunk.path.endswith("quotes.txt")
    ix.close()


def test_fusion_adds_reciprocal_ranks() -> None:
    fused = fuse([1, 2, 3], [3, 4], k=10)
    assert [f[0] for f in fused] == [3, 1, 2, 4]  # 2 and 4 tie: BM25's first
    assert fused[0] == (3, pytest.approx(1 / 63 + 1 / 61), 3, 1)


def test_vectors_find_a_paraphrase_bm25_misses(tmp_path: Path) -> None:
    # HashedEmbedder stands in for the llama.cpp embedding model (see tests/knowledge/fakes.py)
    folder = folder_of(tmp_path)
    plain = KnowledgeIndex(tmp_path / "plain.sqlite3")
    plain.sync([folder])
    assert plain.search("car upkeep") == []  # no shared word: BM25 alone finds nothing
    plain.close()
    embedder = HashedEmbedder()
    ix = KnowledgeIndex(tmp_path / "k.sqlite3", embedder)
    report = ix.sync([folder])
    assert report.chunks_indexed == 4
    hits, times = ix.search_timed("car upkeep", k=2)
    assert hits[0].chunk.path.endswith("garage.txt")
    assert hits[0].bm25_rank is None and hits[0].vector_rank == 1
    assert times.embed_ms > 0 and times.search_ms >= 0 and times.read_ms >= 0
    # both lists: a word match and its vector agree, it is first in both
    hit = ix.search("tomatoes watering", k=1)[0]
    assert hit.chunk.path.endswith("garden.txt") and hit.bm25_rank == 1 and hit.vector_rank == 1
    ix.close()


def test_a_new_file_is_searchable_by_vector_in_an_open_reader(tmp_path: Path) -> None:
    folder = folder_of(tmp_path)
    db = tmp_path / "k.sqlite3"
    writer = KnowledgeIndex(db, HashedEmbedder())
    reader = KnowledgeIndex(db, HashedEmbedder())
    writer.sync([folder])
    assert reader.search("car upkeep")[0].chunk.path.endswith("garage.txt")
    (folder / "bike.txt").write_text("Bicycle servicing notes.\n")
    (folder / "garage.txt").unlink()
    writer.sync([folder])
    hits = reader.search("car upkeep")
    names = [Path(h.chunk.path).name for h in hits]
    assert "garage.txt" not in names and names[0] == "bike.txt"
    writer.close()
    reader.close()


def test_another_embedder_remakes_the_vectors_and_keeps_the_chunks(tmp_path: Path) -> None:
    folder = folder_of(tmp_path)
    db = tmp_path / "k.sqlite3"
    first = HashedEmbedder("model-a")
    ix = KnowledgeIndex(db, first)
    ix.sync([folder])
    assert first.texts == 4
    again = ix.sync([folder])
    assert again.chunks_indexed == 0 and first.texts == 4  # same embedder: nothing remade
    ix.close()
    second = HashedEmbedder("model-b")
    ix = KnowledgeIndex(db, second)
    # until the next sync, the old model's vectors are not used for the new model's queries
    assert all(h.vector_rank is None for h in ix.search("automobile"))
    report = ix.sync([folder])
    assert report.unchanged == 4 and report.chunks_indexed == 4 and second.texts == 4
    assert ix.search("car upkeep")[0].vector_rank == 1
    ix.close()


def test_in_a_big_index_a_word_in_most_passages_does_not_widen_the_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A word found in more than 5% of a big index's passages is left out of the keyword
    search when the question has rarer words (scoring every passage that holds it is what
    made a question slow at 100,000 passages); a question of common words only keeps its
    two rarest. "Big" is lowered to 10 passages here so the test stays small."""
    from desktop.knowledge import index as index_module

    root = tmp_path / "reports"
    root.mkdir()
    for n in range(20):
        extra = " The zeppelin landed." if n == 7 else ""
        (root / f"r{n:02}.txt").write_text(f"Weekly report {n} about the quarterly plan.{extra}\n")
    ix = KnowledgeIndex(tmp_path / "i.sqlite")
    ix.sync([root])
    wide = [Path(h.chunk.path).name for h in ix.search("report zeppelin", k=50)]
    assert len(wide) == 20 and wide[0] == "r07.txt"  # a small index: every word counts
    monkeypatch.setattr(index_module, "COMMON_MIN_CHUNKS", 10)
    ix.close()
    ix = KnowledgeIndex(tmp_path / "i.sqlite")
    narrow = [Path(h.chunk.path).name for h in ix.search("report zeppelin", k=50)]
    assert narrow == ["r07.txt"]
    assert len(ix.search("weekly report quarterly", k=50)) == 20  # all common: two kept
    ix.close()
