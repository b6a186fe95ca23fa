"""The Markdown block splitter: which text the transcript renders as one block, and that a
stream cut into any chunks gives the blocks of the whole text, a finished block never changing.
"""

from __future__ import annotations

import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from desktop.chat.md_blocks import Block, BlockSplitter, split_blocks


def shape(text: str) -> list[tuple[str, str]]:
    return [(block.kind, block.source) for block in split_blocks(text)]


# Rule 1: fenced code


def test_a_fence_is_one_code_block_between_prose() -> None:
    text = "Intro\n```Python extra words\nx = 1\n\ny = 2\n```\nAfter"
    blocks = split_blocks(text)
    assert [b.kind for b in blocks] == ["prose", "code", "prose"]
    code = blocks[1]
    assert code.source == "```Python extra words\nx = 1\n\ny = 2\n```"
    assert (code.language, code.code, code.closed) == ("python", "x = 1\n\ny = 2", True)
    assert blocks[2].source == "After"


def test_a_fence_closes_only_on_its_own_character_and_length() -> None:
    assert split_blocks("````\n```\n````\n")[0].code == "```"
    assert split_blocks("~~~\n```\n~~~\n")[0].code == "```"
    # text after a closing run makes it a code line, not a close
    blocks = split_blocks("```\n``` x\n```\nafter")
    assert blocks[0].code == "``` x"
    assert shape("```\n``` x\n```\nafter")[1] == ("prose", "after")


def test_an_indented_fence_loses_its_indent_from_the_body() -> None:
    block = split_blocks("  ```js\n    a\n   b\nc\n  ```\n")[0]
    assert (block.kind, block.language, block.code) == ("code", "js", "  a\n b\nc")


def test_four_spaces_or_inline_backticks_are_not_a_fence() -> None:
    assert shape("para\n    ```\nmore") == [("prose", "para\n    ```\nmore")]
    assert shape("```x``` is inline code\nnext line") == [
        ("prose", "```x``` is inline code\nnext line")
    ]
    # a tilde fence's info string may hold backticks
    block = split_blocks("~~~ a`b\nx\n~~~")[0]
    assert (block.kind, block.language, block.code) == ("code", "a`b", "x")


def test_an_unterminated_fence_streams_as_code() -> None:
    splitter = BlockSplitter()
    assert splitter.feed("Look:\n```py\nprint(1)\nprint(") == [Block("prose", "Look:", 0)]
    tail = splitter.tail
    assert tail is not None
    assert (tail.kind, tail.closed, tail.language) == ("code", False, "py")
    assert tail.source == "```py\nprint(1)\nprint("
    assert tail.code == "print(1)\nprint("
    assert tail.start == len("Look:\n")
    splitter.feed("2)\n")
    assert splitter.tail is not None and splitter.tail.code == "print(1)\nprint(2)"
    (last,) = splitter.finish()
    assert (last.kind, last.closed, last.code) == ("code", False, "print(1)\nprint(2)")
    assert splitter.tail is None


def test_a_fence_line_still_partial_is_prose_tail() -> None:
    splitter = BlockSplitter()
    assert splitter.feed("Text\n```py") == []
    assert splitter.tail == Block("prose", "Text\n```py", 0)
    assert splitter.feed("\n") == [Block("prose", "Text", 0)]
    assert splitter.tail is not None and splitter.tail.kind == "code"
    assert splitter.tail.code == ""


def test_a_closing_fence_finishes_the_block_at_its_newline() -> None:
    splitter = BlockSplitter()
    splitter.feed("```\nx\n```")
    assert splitter.finished == []
    (code,) = splitter.feed("\n")
    assert (code.code, code.closed) == ("x", True)
    assert splitter.tail is None


# Rule 2: headings


def test_a_heading_is_a_block_of_its_own() -> None:
    text = "# One\nText\n## Two\n#tag\n####### seven\n###\n"
    assert shape(text) == [
        ("heading", "# One"),
        ("prose", "Text"),
        ("heading", "## Two"),
        ("prose", "#tag\n####### seven"),
        ("heading", "###"),
    ]


def test_a_heading_is_finished_by_its_newline() -> None:
    splitter = BlockSplitter()
    assert splitter.feed("# Tit") == []
    assert splitter.feed("le") == []
    assert splitter.feed("\nBody") == [Block("heading", "# Title", 0)]
    assert splitter.tail == Block("prose", "Body", 8)


# Rule 3: prose


def test_lines_without_a_blank_between_are_one_block() -> None:
    table = "| a | b |\n|---|:-:|\n| 1 | 2 |\n| 3 | 4 |"
    quote = "> quoted\n> more\n>\n> after an empty quote line"
    setext = "Title\n---"
    text = f"Para *one*\nstill one\n\n{table}\n\n{quote}\n\n{setext}\n\n---\n\nlast"
    assert shape(text) == [
        ("prose", "Para *one*\nstill one"),
        ("prose", table),
        ("prose", quote),
        ("prose", setext),
        ("prose", "---"),
        ("prose", "last"),
    ]


def test_a_list_goes_on_after_blank_lines_with_indented_lines() -> None:
    lists = "- a\n\n  second paragraph of a\n\n\n  - nested\n    - deeper\n- b\n\n\tTabbed"
    text = f"{lists}\n\nNot indented: a new block"
    assert shape(text) == [("prose", lists), ("prose", "Not indented: a new block")]
    # ordered lists too; a new item at the margin after a blank starts a new block
    assert shape("1. one\n\n   more\n\n2. two") == [
        ("prose", "1. one\n\n   more"),
        ("prose", "2. two"),
    ]


def test_an_indented_line_after_a_paragraph_and_a_blank_is_a_new_block() -> None:
    assert shape("para\n\n  indented") == [("prose", "para"), ("prose", "  indented")]
    # a thematic break is not a list item
    assert shape("- - -\n\n  x") == [("prose", "- - -"), ("prose", "  x")]


def test_a_paragraph_is_finished_by_a_blank_line_a_list_by_the_next_line() -> None:
    splitter = BlockSplitter()
    assert splitter.feed("para\n\n") == [Block("prose", "para", 0)]
    assert splitter.tail is None
    assert splitter.feed("- a\n\n") == []  # an indented line may still continue it
    assert splitter.tail == Block("prose", "- a", 6)
    assert splitter.feed("  b") == []
    assert splitter.tail == Block("prose", "- a\n\n  b", 6)
    assert splitter.feed("\n\n") == []
    assert splitter.feed("next\n") == [Block("prose", "- a\n\n  b", 6)]
    assert splitter.finish() == [Block("prose", "next", 16)]


# Rule 4 and text shapes


def test_blank_lines_belong_to_no_block() -> None:
    assert split_blocks("") == []
    assert split_blocks("\n\n \n\t\n") == []
    assert shape("\n\npara\n\n\n") == [("prose", "para")]
    assert split_blocks("\n\npara\n")[0].start == 2
    assert split_blocks("```\n\n\n```")[0].code == "\n"
    # a reply that ends inside a fence: trailing blank lines are not part of the code
    (code,) = split_blocks("```\nx\n\n  \n")
    assert (code.source, code.code, code.closed) == ("```\nx", "x", False)


def test_crlf_line_ends_keep_the_source_exact() -> None:
    text = "a\r\nb\r\n\r\n# h\r\n```py\r\nx\r\n\r\ny\r\n```\r\ntail\r\n"
    blocks = split_blocks(text)
    assert [(b.kind, b.source) for b in blocks] == [
        ("prose", "a\r\nb"),
        ("heading", "# h"),
        ("code", "```py\r\nx\r\n\r\ny\r\n```"),
        ("prose", "tail"),
    ]
    assert blocks[2].code == "x\n\ny"
    # a chunk boundary between \r and \n changes nothing
    splitter = BlockSplitter()
    splitter.feed("# h\r")
    assert splitter.finished == []
    splitter.feed("\nx")
    assert splitter.finished == [Block("heading", "# h", 0)]


def test_text_without_a_trailing_newline() -> None:
    assert shape("a\nb") == [("prose", "a\nb")]
    assert shape("# h") == [("heading", "# h")]
    (code,) = split_blocks("```")
    assert (code.kind, code.closed, code.code) == ("code", False, "")


def test_feeding_after_the_end_is_refused_and_finish_is_idempotent() -> None:
    splitter = BlockSplitter()
    splitter.feed("x")
    assert splitter.finish() == [Block("prose", "x", 0)]
    assert splitter.finish() == []
    try:
        splitter.feed("y")
    except ValueError:
        pass
    else:
        raise AssertionError("feed after finish was accepted")


# Properties over Markdown-ish texts and random chunkings

LINES = [
    "# Title",
    "## Sub *em*",
    "#",
    "#tag",
    "####### seven",
    "```",
    "```python",
    "~~~",
    "~~~~ js",
    "  ```",
    "````",
    "    ```",
    "```x``` inline",
    "- item",
    "* star",
    "1. one",
    "2) two",
    "  - nested",
    "    deep",
    "\tTabbed",
    "  cont",
    "- - -",
    "---",
    "***",
    "> quote",
    ">",
    "| a | b |",
    "|---|---|",
    "| 1 | 2 |",
    "",
    "  ",
    "\t",
]
WORDS = st.text(alphabet="ab *_`#-|>1.", min_size=1, max_size=8)
LINE = st.one_of(st.sampled_from(LINES), WORDS)
NEWLINE = st.sampled_from(["\n", "\n", "\r\n"])


@st.composite
def markdownish(draw: st.DrawFn, lines: st.SearchStrategy[str] = LINE) -> str:
    pieces = draw(st.lists(st.tuples(lines, NEWLINE), max_size=25))
    text = "".join(line + end for line, end in pieces)
    if pieces and draw(st.booleans()):
        text = text[: -len(pieces[-1][1])]  # no trailing newline
    return text


@st.composite
def chunked(draw: st.DrawFn, texts: st.SearchStrategy[str]) -> tuple[str, list[str]]:
    text = draw(texts)
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in itertools.pairwise(bounds)]


def stream(chunks: list[str]) -> tuple[list[Block], list[list[Block]], list[Block | None]]:
    """Feed the chunks: the final blocks, `finished` after each chunk, `tail` after each."""
    splitter = BlockSplitter()
    returned: list[Block] = []
    snapshots: list[list[Block]] = []
    tails: list[Block | None] = []
    for chunk in chunks:
        returned += splitter.feed(chunk)
        snapshots.append(splitter.finished)
        tails.append(splitter.tail)
    returned += splitter.finish()
    assert returned == splitter.finished  # what feed/finish return is what `finished` holds
    return returned, snapshots, tails


def check_covers(text: str, blocks: list[Block]) -> None:
    at = 0
    rebuilt = []
    for block in blocks:
        assert block.start >= at  # in order, not overlapping
        gap = text[at : block.start]
        assert not gap.strip(), f"text outside every block: {gap!r}"
        assert text[block.start : block.start + len(block.source)] == block.source
        assert block.source.strip() and not block.source.endswith("\n")
        rebuilt += [gap, block.source]
        at = block.start + len(block.source)
    assert not text[at:].strip()
    assert "".join(rebuilt) + text[at:] == text


PROPERTY = settings(max_examples=200, deadline=None)


@PROPERTY
@given(chunked(markdownish()))
def test_any_chunking_gives_the_blocks_of_the_whole_text(case: tuple[str, list[str]]) -> None:
    text, chunks = case
    blocks, snapshots, tails = stream(chunks)
    assert blocks == split_blocks(text)
    seen = ""
    for chunk, finished, tail in zip(chunks, snapshots, tails, strict=True):
        seen += chunk
        assert finished == blocks[: len(finished)]  # a finished block never changes
        if tail is not None:
            assert seen[tail.start : tail.start + len(tail.source)] == tail.source
            assert not finished or tail.start >= finished[-1].start + len(finished[-1].source)
    check_covers(text, blocks)


@PROPERTY
@given(chunked(st.text(alphabet="a #`~-> \t\n\r1.|", max_size=60)))
def test_any_text_any_chunking(case: tuple[str, list[str]]) -> None:
    """Arbitrary characters (lone \\r, odd fences): the same invariants hold."""
    text, chunks = case
    blocks, snapshots, _ = stream(chunks)
    assert blocks == split_blocks(text)
    for finished in snapshots:
        assert finished == blocks[: len(finished)]
    check_covers(text, blocks)


def closes_a_fence(line: str) -> bool:
    return re.fullmatch(r" {0,3}(`{3,}|~{3,})[ \t]*", line) is not None


BODY_LINE = LINE.filter(lambda line: not closes_a_fence(line))


@st.composite
def open_fence_case(draw: st.DrawFn) -> tuple[str, str, list[str]]:
    before = draw(markdownish())
    blocks = split_blocks(before)
    if blocks and not blocks[-1].closed:
        run = re.match(r" *(`+|~+)", blocks[-1].source)
        assert run is not None
        before += f"\n{run.group(1)}\n"  # close the fence the text left open
    elif before and not before.endswith("\n"):
        before += "\n"
    fence = draw(st.sampled_from(["```", "```rust", "~~~ sh", "````"]))
    body = draw(markdownish(BODY_LINE))
    text = f"{before}{fence}{draw(NEWLINE)}{body}"
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return text, body, [text[a:b] for a, b in itertools.pairwise(bounds)]


@PROPERTY
@given(open_fence_case())
def test_an_unterminated_fence_is_the_rest_of_the_text_as_code(
    case: tuple[str, str, list[str]],
) -> None:
    text, body, chunks = case
    blocks, _, tails = stream(chunks)
    last = blocks[-1]
    lines = re.sub(r"\r?\n\Z", "", body).replace("\r\n", "\n").split("\n")
    streamed = "\n".join(lines)
    while lines and not lines[-1].strip():
        lines.pop()  # trailing blank lines at the very end are dropped
    expected = "\n".join(lines)
    assert (last.kind, last.closed, last.code) == ("code", False, expected)
    assert text[last.start :].startswith(last.source)
    assert not text[last.start + len(last.source) :].strip()
    # while it streamed, the tail was this code so far
    tail = tails[-1]
    assert tail is not None and (tail.kind, tail.closed, tail.code) == ("code", False, streamed)
    assert text[tail.start :].startswith(tail.source)
