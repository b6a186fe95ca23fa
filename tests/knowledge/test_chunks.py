"""Cutting a document into chunks: line numbers a person can open the file at, Markdown
sections starting at their heading, nothing lost between chunks."""

from __future__ import annotations

import itertools

from desktop.knowledge.chunks import LONG_LINE_CHARS, TARGET_CHARS, split_text


def test_a_short_text_is_one_chunk_with_its_lines() -> None:
    pieces = split_text("first line\nsecond line\nthird line\n")
    assert [(p.start_line, p.end_line, p.text) for p in pieces] == [
        (1, 3, "first line\nsecond line\nthird line")
    ]


def test_long_text_is_cut_between_lines_with_an_overlap_and_every_line_kept() -> None:
    lines = [f"line {n:03d} " + "word " * 18 for n in range(1, 201)]  # ~100 chars each
    pieces = split_text("\n".join(lines))
    assert len(pieces) > 10
    assert all(len(p.text) <= TARGET_CHARS + 200 for p in pieces)
    covered: set[int] = set()
    for before, after in itertools.pairwise(pieces):
        assert 1 <= before.end_line - after.start_line + 1 <= 2  # one or two lines repeated
    for p in pieces:
        assert p.text == "\n".join(lines[p.start_line - 1 : p.end_line])  # lines never cut
        covered.update(range(p.start_line, p.end_line + 1))
    assert covered == set(range(1, 201))
    assert split_text("\n".join(lines)) == pieces  # deterministic


def test_markdown_chunks_start_at_headings() -> None:
    section = "Some words about this part of the guide, long enough to stand alone.\n" * 4
    text = f"# Guide\n\n{section}\n## Install\n\n{section}\n## Configure the proxy\n\n{section}"
    pieces = split_text(text, markdown=True)
    assert [p.text.splitlines()[0] for p in pieces] == [
        "# Guide",
        "## Install",
        "## Configure the proxy",
    ]
    lines = text.split("\n")
    assert lines[pieces[2].start_line - 1] == "## Configure the proxy"
    # the same text as plain text is not cut at the headings
    assert len(split_text(text)) == 1


def test_a_line_longer_than_the_limit_is_hard_split_on_its_own_line_number() -> None:
    long_line = "x" * (LONG_LINE_CHARS + 1000)
    pieces = split_text(f"before\n{long_line}\nafter")
    assert [(p.start_line, p.end_line) for p in pieces] == [
        (1, 1),
        (2, 2),
        (2, 2),
        (2, 2),
        (2, 2),
        (2, 2),
        (3, 3),
    ]
    assert "".join(p.text for p in pieces[1:-1]) == long_line


def test_pdf_pieces_carry_their_page() -> None:
    assert {p.page for p in split_text("a\nb", page=3)} == {3}
