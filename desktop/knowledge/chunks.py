"""A document's text cut into chunks by lines, each knowing its first and last line.

About ``TARGET_CHARS`` characters a chunk; a line is never cut unless it alone is longer than
``LONG_LINE_CHARS`` (minified code, a one-line JSON), then it is cut every ``TARGET_CHARS``
characters. A chunk repeats the last line or two of the one before (at most
``OVERLAP_CHARS``), so a sentence on the border is whole in one of them. In Markdown a
heading starts a new chunk (once the current one holds ``MIN_BEFORE_HEADING`` characters),
without overlap: a section's chunk begins with its heading. Deterministic: the same text
gives the same chunks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TARGET_CHARS = 1200
LONG_LINE_CHARS = 4000
OVERLAP_CHARS = 300
MIN_BEFORE_HEADING = 200

_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")


@dataclass(frozen=True, slots=True)
class Piece:
    """A chunk before it is stored: lines 1-based inclusive (within ``page`` for a PDF)."""

    start_line: int
    end_line: int
    page: int | None
    text: str


def split_text(text: str, *, markdown: bool = False, page: int | None = None) -> list[Piece]:
    """``text`` in chunks; blank chunks are left out."""
    lines = text.split("\n")
    pieces: list[Piece] = []
    current: list[int] = []  # line indexes (0-based) in the chunk being built
    size = 0
    fresh = 0  # lines in ``current`` that are not overlap from the chunk before

    def emit() -> None:
        if not fresh or not current:
            return
        first, last = current[0], current[-1]
        while first < last and not lines[first].strip():
            first += 1
        while last > first and not lines[last].strip():
            last -= 1
        body = "\n".join(lines[first : last + 1])
        if body.strip():
            pieces.append(Piece(first + 1, last + 1, page, body))

    for index, line in enumerate(lines):
        if len(line) > LONG_LINE_CHARS:
            emit()
            current, size, fresh = [], 0, 0
            for at in range(0, len(line), TARGET_CHARS):
                part = line[at : at + TARGET_CHARS]
                if part.strip():
                    pieces.append(Piece(index + 1, index + 1, page, part))
            continue
        heading = markdown and _HEADING.match(line) is not None
        full = size + len(line) + 1 > TARGET_CHARS
        if fresh and (full or (heading and size >= MIN_BEFORE_HEADING)):
            emit()
            current = [] if heading else _overlap(lines, current)
            size = sum(len(lines[i]) + 1 for i in current)
            fresh = 0
        current.append(index)
        size += len(line) + 1
        fresh += 1
    emit()
    return pieces


def _overlap(lines: list[str], chunk: list[int]) -> list[int]:
    """The last one or two lines of ``chunk`` that fit in ``OVERLAP_CHARS`` (never all of a
    chunk of one or two lines: the next one must move on)."""
    kept: list[int] = []
    size = 0
    for index in reversed(chunk[-2:]):
        if len(kept) == len(chunk) - 1 or size + len(lines[index]) + 1 > OVERLAP_CHARS:
            break
        kept.insert(0, index)
        size += len(lines[index]) + 1
    return kept
