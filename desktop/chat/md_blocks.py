"""A Markdown reply cut into top-level blocks, as it streams (Qt-free).

The transcript renders every *finished* block once (a laid-out document painted directly) and
shows only the unfinished block, the live tail, as plain streaming text. For that to hold:

- ``BlockSplitter`` decides a boundary only on complete lines (a partial last line always
  belongs to the tail), and from the lines seen so far: a block, once finished, never changes
  whatever text follows;
- feeding a text in any chunks gives the same blocks as ``split_blocks`` on the whole text
  (tests/chat/test_md_blocks.py checks both with Hypothesis);
- ``source`` of every block is the exact text it covers (``text[start:start+len(source)]``),
  so selection and copy can go back to the Markdown the model wrote.

The rules (deliberately few; each block is rendered on its own by md4c, so a split must never
change how a block reads):

1. A fenced code block (`````` or ``~~~``, up to 3 spaces of indent, an info string whose first
   word is the language) runs to its closing fence (same character, at least as long, nothing
   else on the line) and is finished by that line. Unclosed, it stays the tail and streams as
   code; at the end of the reply it is a finished block with ``closed=False`` (its trailing
   blank lines dropped).
2. An ATX heading line (``#`` to ``######`` then a space or the line's end) is a block of its
   own, finished by its newline.
3. Other non-blank lines join the current prose block while no blank line came between. After
   one or more blank lines, a line indented by 2+ spaces (or a tab) continues the block when
   the block holds a list item (a loose list, an item's second paragraph); any other line
   starts a new block, which finishes the one before.
4. Blank lines belong to no block (they sit between ``start`` offsets), except inside a code
   block or a continued list, where they are part of the source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Block:
    """One top-level block.

    kind: "prose" (paragraphs, lists, quotes, tables, rules), "heading" or "code".
    source: the block's Markdown exactly as in the text (no trailing newline or blank lines).
    start: where ``source`` begins in the whole text.
    language / code / closed: for "code", the info string's first word (lower case), the body
    with the fence's indent removed, and whether a closing fence was seen.
    """

    kind: str
    source: str
    start: int
    language: str = ""
    code: str = ""
    closed: bool = True


_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*")
_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_ITEM = re.compile(r"[ \t]*(?:[-+*]|\d{1,9}[.)])(?:[ \t]|$)")
_RULE = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*")

_NONE, _PROSE, _CODE = 0, 1, 2


def _indented(line: str) -> bool:
    """Indented by 2+ columns (a tab counts to the next multiple of 4)."""
    width = 0
    for char in line:
        if char == " ":
            width += 1
        elif char == "\t":
            width += 4 - width % 4
        else:
            return False
        if width >= 2:
            return True
    return False


def _is_item(line: str) -> bool:
    """A list item's first line (a thematic break such as ``- - -`` is not one)."""
    return _ITEM.match(line) is not None and _RULE.fullmatch(line) is None


def _opening(line: str) -> tuple[str, str] | None:
    """(fence, language) when the line opens a fenced code block."""
    match = _OPEN.fullmatch(line)
    if match is None:
        return None
    fence, info = match.group(1), match.group(2)
    if fence[0] == "`" and "`" in info:
        return None  # ```x``` on one line is an inline code span
    words = info.split()
    return fence, (words[0].lower() if words else "")


def _push(parts: list[str], piece: str) -> None:
    """Append to a rope whose pieces shrink from first to last: merging a piece into the one
    before it once it is as long keeps the list logarithmic and each character copied
    O(log n) times, so joining it (for every read of ``tail``) is one copy of the text."""
    parts.append(piece)
    while len(parts) > 1 and len(parts[-1]) >= len(parts[-2]):
        last = parts.pop()
        parts[-1] += last


def _joined(parts: list[str], *more: str) -> str:
    """The rope (and more pieces) as one string: one copy, none for a rope of one piece."""
    if not more and len(parts) == 1:
        return parts[0]
    return "".join([*parts, *more])


class BlockSplitter:
    """Incremental: ``feed`` text as it arrives, read ``finished`` and ``tail``.

    ``feed(text)`` returns the blocks that text finished (in order; usually none or one).
    ``tail`` is the unfinished block as it stands, partial last line included (None when the
    text so far ends between blocks). ``finish()`` ends the stream: returns the blocks it
    finishes (the tail, if any). Cost of ``feed`` is proportional to the text fed plus the
    current line, never to the reply so far.
    """

    def __init__(self) -> None:
        self._finished: list[Block] = []
        self._pos = 0  # where the partial line begins in the whole text
        self._partial: list[str] = []
        self._state = _NONE
        self._done = False
        # The open block: its text so far without the last line's end (kept in _term: a
        # finished block's source ends without one), then the blank lines after it while a
        # list may go on.
        self._start = 0
        self._parts: list[str] = []
        self._term = ""
        self._blanks: list[str] = []
        self._has_item = False
        # The open fence: its run of ` or ~, indent, language, the body so far.
        self._fence = ""
        self._indent = 0
        self._language = ""
        self._code: list[str] = []
        self._code_lines = 0
        # lengths of the source and the code so far, and up to their last non-blank line
        self._src_len = self._src_keep = self._code_len = self._code_keep = 0
        self._tail: Block | None = None
        self._tail_fresh = True

    @property
    def finished(self) -> list[Block]:
        return list(self._finished)

    @property
    def tail(self) -> Block | None:
        if not self._tail_fresh:
            self._tail = self._make_tail()
            self._tail_fresh = True
        return self._tail

    def feed(self, text: str) -> list[Block]:
        if self._done:
            raise ValueError("the stream is finished")
        if not text:
            return []
        self._tail_fresh = False
        out: list[Block] = []
        end = text.find("\n")
        if end < 0:
            _push(self._partial, text)
            return out
        if self._partial:
            first = _joined(self._partial, text[: end + 1])
            self._partial = []
        else:
            first = text[: end + 1]
        self._line(first, out)
        begin = end + 1
        end = text.find("\n", begin)
        while end >= 0:
            self._line(text[begin : end + 1], out)
            begin = end + 1
            end = text.find("\n", begin)
        if begin < len(text):
            _push(self._partial, text[begin:])
        return out

    def finish(self) -> list[Block]:
        if self._done:
            return []
        self._done = True
        self._tail_fresh = False
        out: list[Block] = []
        last = _joined(self._partial)
        self._partial = []
        if last.rstrip("\r"):  # a last line "\r" is a line end, not an empty code line
            self._line(last, out)
        if self._state == _CODE:
            self._end_code(out, closed=False)
        elif self._state == _PROSE:
            self._end_prose(out)
        return out

    # One complete line (the last one of a finished stream may have no line end).

    def _line(self, raw: str, out: list[Block]) -> None:
        line = raw[:-1] if raw.endswith("\n") else raw
        if line.endswith("\r"):
            line = line[:-1]
        term = raw[len(line) :]
        start = self._pos
        self._pos += len(raw)
        if self._state == _CODE:
            close = _CLOSE.fullmatch(line)
            self._src_len += len(self._term) + len(line)
            self._append(line, term)
            if (
                close
                and close.group(1)[0] == self._fence[0]
                and len(close.group(1)) >= len(self._fence)
            ):
                self._end_code(out, closed=True)
            else:
                self._add_code(line)
                if line.strip():
                    self._src_keep, self._code_keep = self._src_len, self._code_len
            return
        if not line.strip():
            if self._state == _PROSE:
                if self._has_item:
                    self._blanks.append(raw)  # a list may go on after it
                else:
                    self._end_prose(out)
            return
        opening = _opening(line)
        if opening is not None:
            if self._state == _PROSE:
                self._end_prose(out)
            self._state = _CODE
            self._open(start, line, term)
            self._fence, self._language = opening
            self._indent = len(line) - len(line.lstrip(" "))
            self._code = []
            self._code_lines = 0
            self._src_len = self._src_keep = len(line)
            self._code_len = self._code_keep = 0
            return
        if _HEADING.match(line):
            if self._state == _PROSE:
                self._end_prose(out)
            self._emit(out, Block("heading", line, start))
            return
        if self._state == _PROSE:
            if self._blanks and not _indented(line):
                self._end_prose(out)
            else:
                _push(self._parts, _joined([self._term, *self._blanks, line]))
                self._blanks = []
                self._term = term
                self._has_item = self._has_item or _is_item(line)
                return
        self._state = _PROSE
        self._open(start, line, term)
        self._has_item = _is_item(line)

    def _open(self, start: int, line: str, term: str) -> None:
        self._start = start
        self._parts = [line]
        self._term = term
        self._blanks = []

    def _append(self, line: str, term: str) -> None:
        _push(self._parts, self._term + line)
        self._term = term

    def _body_line(self, line: str) -> str:
        """A code line without the fence's indent (at most as many spaces as it has)."""
        if self._indent == 0:
            return line
        cut = min(self._indent, len(line) - len(line.lstrip(" ")))
        return line[cut:]

    def _add_code(self, line: str) -> None:
        piece = "\n" + self._body_line(line) if self._code_lines else self._body_line(line)
        _push(self._code, piece)
        self._code_len += len(piece)
        self._code_lines += 1

    def _emit(self, out: list[Block], block: Block) -> None:
        self._finished.append(block)
        out.append(block)

    def _end_prose(self, out: list[Block]) -> None:
        self._emit(out, Block("prose", _joined(self._parts), self._start))
        self._reset()

    def _end_code(self, out: list[Block], closed: bool) -> None:
        code = _joined(self._code)
        source = _joined(self._parts)
        if not closed and self._src_keep < self._src_len:
            # the reply ended inside the fence: its trailing blank lines are not part of it
            source, code = source[: self._src_keep], code[: self._code_keep]
        self._emit(out, Block("code", source, self._start, self._language, code, closed))
        self._reset()

    def _reset(self) -> None:
        self._state = _NONE
        self._parts = []
        self._term = ""
        self._blanks = []
        self._has_item = False
        self._code = []
        self._code_lines = 0

    def _make_tail(self) -> Block | None:
        if self._done:
            return None
        partial = _joined(self._partial)
        if self._state == _CODE:
            if not partial:
                source = _joined(self._parts)
                code = _joined(self._code)
            else:
                source = _joined(self._parts, self._term, partial)
                last = self._body_line(partial[:-1] if partial.endswith("\r") else partial)
                if not last:
                    code = _joined(self._code)
                elif self._code_lines:
                    code = _joined(self._code, "\n", last)
                else:
                    code = last
            return Block("code", source, self._start, self._language, code, closed=False)
        visible = bool(partial.strip())
        if self._state == _PROSE:
            if visible:
                source = _joined(self._parts, self._term, *self._blanks, partial)
            else:
                source = _joined(self._parts)
            return Block("prose", source, self._start)
        if visible:
            return Block("prose", partial, self._pos)
        return None


def split_blocks(text: str) -> list[Block]:
    """The blocks of a whole text (a stored reply): the same as feeding it and finishing."""
    splitter = BlockSplitter()
    splitter.feed(text)
    splitter.finish()
    return splitter.finished
