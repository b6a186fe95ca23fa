"""One finished Markdown block, laid out once and painted directly (no widget, no HTML).

``BlockItem`` holds a block of ``desktop.chat.md_blocks`` and, once it is needed, its
``QTextDocument``: prose and headings through Qt's md4c reader (GFM tables, task lists,
strikethrough; raw HTML never interpreted; images shown as their words and a link, never
loaded: ``SafeDocument``, ``protect_images``), code
highlighted by Pygments into character formats on a monospace document inside a framed box
with a language line and a Copy button. ``MarkdownView`` owns the items; an item knows its own
geometry (``top``/``height`` in the view, ``exact`` once laid out at the current width, else an
estimate) and paints, hit-tests and slices its text for selection and copy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QColor,
    QFont,
    QFontDatabase,
    QFontMetricsF,
    QPainter,
    QPalette,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextFrameFormat,
    QTextListFormat,
    QTextOption,
    QTextTable,
)

from desktop.chat.md_blocks import Block
from desktop.ui.kit.safe_document import (
    IMAGE_MARK,
    SafeDocument,
    fragments,
    images_as_text,
    short_address,
)
from desktop.ui.kit.theme import Colors

if TYPE_CHECKING:
    from PySide6.QtWidgets import QToolButton

GAP = 10  # between blocks
CODE_PAD_X = 10
CODE_PAD_Y = 8
CODE_RADIUS = 6
QUOTE_INDENT = 16  # per level; the quote's bar is drawn in it
LIST_INDENT = 22
_QUOTE = QTextFormat.Property.BlockQuoteLevel
_FEATURES = (
    QTextDocument.MarkdownFeature.MarkdownDialectGitHub
    | QTextDocument.MarkdownFeature.MarkdownNoHTML
)
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\(\s*<?([^)\s>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
_MD_PUNCTUATION = re.compile(r"([\\`*_\[\]<>~|!#&])")  # escaped in a link's words
CITATION_SCHEME = "simi-source"  # a citation's link: "simi-source:2" (the reply's source 2)
_CITATION = re.compile(r"\[(\d{1,4})\]")


def protect_images(text: str) -> str:
    """``![alt](url)`` becomes a link placeholder: the image is fetched only if clicked
    (rendering never makes a request: an image URL can carry a tracking token); an address
    that is not a web one (a path, ``file:``, ``qrc:``, ``data:``) is shown, not opened.

    Only the plain inline form is matched; safety does not depend on it: every document is a
    ``SafeDocument`` (it never loads a resource) and ``images_as_text`` turns any image md4c
    still finds (a reference ``![a][r]``, brackets in the alt text) into its words."""

    def placeholder(match: re.Match[str]) -> str:
        alt, url = match.group(1).strip(), match.group(2)
        if url.lower().startswith(("http://", "https://")):
            words = "image, click to open"
        else:
            words = "image: " + _MD_PUNCTUATION.sub(r"\\\1", short_address(url))
        return f"[{IMAGE_MARK} {alt or 'image'} ({words})]({url})"

    return _IMAGE.sub(placeholder, text)


def mono_font(base: QFont) -> QFont:
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    font.setPointSizeF(base.pointSizeF() * 0.95 if base.pointSizeF() > 0 else 10)
    return font


class Style:
    """What rendering depends on besides the text: fonts and colours (one per view)."""

    def __init__(self, font: QFont, colors: Colors) -> None:
        self.font = QFont(font)
        self.mono = mono_font(font)
        self.colors = colors
        self.line = QFontMetricsF(self.font).height()
        self.mono_line = QFontMetricsF(self.mono).height()
        small = QFont(font)
        small.setPointSizeF(max(6.0, font.pointSizeF() * 0.85))
        self.small = small
        self.header = math.ceil(max(QFontMetricsF(small).height() + 8, 24))
        # the numbers of the reply's sources: "[n]" in prose links to source n (citations)
        self.citations: frozenset[int] = frozenset()


def citation_number(url: str) -> int | None:
    """The source number of a citation's link ("simi-source:2" → 2), else None."""
    scheme, _, number = url.partition(":")
    digits = number.isascii() and number.isdigit()
    return int(number) if scheme == CITATION_SCHEME and digits else None


def link_citations(doc: QTextDocument, numbers: frozenset[int]) -> None:
    """Every "[n]" of prose whose n is in ``numbers`` becomes a link to that source; in code
    spans, in a link's words, or for any other n it stays text."""
    found: list[tuple[int, int, int]] = []
    for fragment in fragments(doc):
        fmt = fragment.charFormat()
        if fmt.isAnchor() or fmt.fontFixedPitch() or fmt.fontFamilies() == ["monospace"]:
            continue
        for match in _CITATION.finditer(fragment.text()):
            if int(match[1]) in numbers:
                at = fragment.position() + match.start()
                found.append((at, at + len(match[0]), int(match[1])))
    for start, end, number in found:
        link = QTextCharFormat()
        link.setAnchor(True)
        link.setAnchorHref(f"{CITATION_SCHEME}:{number}")
        cursor = QTextCursor(doc)
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        cursor.mergeCharFormat(link)


def _prose_document(source: str, style: Style) -> QTextDocument:
    doc = SafeDocument()
    doc.setDocumentMargin(0)
    doc.setDefaultFont(style.font)
    doc.setUndoRedoEnabled(False)
    doc.setIndentWidth(LIST_INDENT)
    doc.setMarkdown(protect_images(source), _FEATURES)
    images_as_text(doc)  # before any layout: the words are painted, nothing is read
    if style.citations and "[" in source:
        link_citations(doc, style.citations)
    colors = style.colors
    link, code_bg, border = QColor(colors.accent), QColor(colors.code_bg), QColor(colors.border)
    block = doc.begin()
    while block.isValid():
        level = block.blockFormat().property(_QUOTE)
        if level:
            margin = QTextBlockFormat()
            margin.setLeftMargin(QUOTE_INDENT * int(level))
            QTextCursor(block).mergeBlockFormat(margin)
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.isValid():
                fmt = fragment.charFormat()
                change = QTextCharFormat()
                if fmt.isAnchor():
                    change.setForeground(link)
                elif fmt.fontFixedPitch() or fmt.fontFamilies() == ["monospace"]:
                    change.setBackground(code_bg)
                else:
                    it += 1
                    continue
                cursor = QTextCursor(doc)
                cursor.setPosition(fragment.position())
                cursor.setPosition(
                    fragment.position() + fragment.length(), QTextCursor.MoveMode.KeepAnchor
                )
                cursor.mergeCharFormat(change)
            it += 1
        block = block.next()
    for frame in doc.rootFrame().childFrames():
        if isinstance(frame, QTextTable):
            table_format = frame.format().toTableFormat()
            table_format.setBorderBrush(border)
            table_format.setBorderStyle(QTextFrameFormat.BorderStyle.BorderStyle_Solid)
            table_format.setBorderCollapse(True)
            table_format.setBorder(1)
            table_format.setCellPadding(4)
            table_format.setCellSpacing(0)
            frame.setFormat(table_format)
            for column in range(frame.columns()):  # the header row on a tint
                cell = frame.cellAt(0, column)
                cell_format = cell.format()
                cell_format.setBackground(code_bg)
                cell.setFormat(cell_format)
    return doc


# The languages most replies' code blocks are in. A lexer's first use compiles its rules (the
# Python lexer's took 17 ms, on the GUI thread, as four Compare replies ended), so these are
# made ahead on a worker thread after the first paint (desktop.preload): ~90 ms there.
WARM_LANGUAGES = (
    "python", "bash", "javascript", "typescript", "json", "html", "css", "sql", "java", "c",
    "cpp", "rust", "go", "yaml",
)  # fmt: skip


def warm_code_highlighting(languages: Sequence[str] = WARM_LANGUAGES) -> None:
    """Make the lexers of ``languages`` and load both themes' styles, ahead of use (Pygments
    only: no Qt object is made here, so a worker thread may call it)."""
    from pygments.lexers import get_lexer_by_name

    for dark in (False, True):
        _style(dark)
    for language in languages:
        get_lexer_by_name(language)  # compiles the class's rules once, for every instance


@lru_cache(maxsize=4)
def _style(dark: bool) -> object:
    """The Pygments style for code (asked for by name: listing every style imports them all,
    ~45 ms on the GUI thread the first time a code block finishes)."""
    from pygments.styles import get_style_by_name
    from pygments.util import ClassNotFound

    for name in ("github-dark", "monokai") if dark else ("default", "friendly"):
        try:
            return get_style_by_name(name)
        except ClassNotFound:
            continue
    return get_style_by_name("default")


@lru_cache(maxsize=4)
def _token_formats(dark: bool) -> dict[object, QTextCharFormat]:
    formats: dict[object, QTextCharFormat] = {}
    for token, spec in _style(dark):  # type: ignore[attr-defined]
        fmt = QTextCharFormat()
        if spec["color"]:
            fmt.setForeground(QColor(f"#{spec['color']}"))
        if spec["bold"]:
            fmt.setFontWeight(QFont.Weight.Bold)
        if spec["italic"]:
            fmt.setFontItalic(True)
        formats[token] = fmt
    return formats


def code_document(code: str, language: str, style: Style) -> QTextDocument:
    """Highlighted code: Pygments tokens become character formats (no HTML on the way)."""
    from pygments import lex
    from pygments.lexers import get_lexer_by_name
    from pygments.lexers.special import TextLexer
    from pygments.util import ClassNotFound

    doc = SafeDocument()
    doc.setDocumentMargin(0)
    doc.setDefaultFont(style.mono)
    doc.setUndoRedoEnabled(False)
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
    doc.setDefaultTextOption(option)
    try:
        lexer = get_lexer_by_name(language) if language else TextLexer()
    except ClassNotFound:
        lexer = TextLexer()
    lexer.stripnl = False
    lexer.ensurenl = False
    formats = _token_formats(style.colors.dark)
    plain = QTextCharFormat()
    plain.setForeground(QColor(style.colors.text))
    cursor = QTextCursor(doc)
    for token, value in lex(code, lexer):
        fmt = plain
        while token is not None:
            found = formats.get(token)
            if found is not None and found.foreground().style() != Qt.BrushStyle.NoBrush:
                fmt = found
                break
            token = token.parent
        cursor.insertText(value, fmt)
    return doc


def readable_text(doc: QTextDocument) -> str:
    """A rendered block as text to paste: list items with their markers, a table's rows with
    tab-separated cells (Qt's own plain text puts every cell on a line of its own)."""
    lines: list[str] = []
    row_key: tuple[int, int] | None = None
    block = doc.begin()
    while block.isValid():
        cursor = QTextCursor(block)
        table = cursor.currentTable()
        if table is not None:
            cell = table.cellAt(cursor)
            key = (id(table), cell.row())
            if key != row_key:
                lines.append(block.text())
            elif cell.firstCursorPosition().block() == block:
                lines[-1] += "\t" + block.text()
            else:  # a second paragraph in one cell
                lines[-1] += " " + block.text()
            row_key = key
        else:
            row_key = None
            text, listed = block.text(), block.textList()
            if listed is not None:
                style = listed.format().style()
                numbered = style.value <= QTextListFormat.Style.ListDecimal.value
                marker = listed.itemText(block) if numbered else "-"
                check = block.blockFormat().marker()
                if check == QTextBlockFormat.MarkerType.Checked:
                    marker += " [x]"
                elif check == QTextBlockFormat.MarkerType.Unchecked:
                    marker += " [ ]"
                text = "  " * max(0, listed.format().indent() - 1) + f"{marker} {text}"
            lines.append(text)
        block = block.next()
    return "\n".join(lines).strip("\n")


def _plain(cursor: QTextCursor) -> str:
    return cursor.selectedText().replace("\u2029", "\n").replace("\u2028", "\n")


class BlockItem:
    """A finished block in a view: its document (built on first need), where it sits, and
    how to paint, hit-test and copy it. Offsets are positions in the document's plain text."""

    __slots__ = ("block", "copy_button", "doc", "exact", "height", "top", "width")

    def __init__(self, block: Block) -> None:
        self.block = block
        self.doc: QTextDocument | None = None
        self.top = 0.0
        self.height = 0.0
        self.width = 0.0  # the width it was laid out at (exact) or estimated for
        self.exact = False
        self.copy_button: QToolButton | None = None  # a code block's, owned by the view

    @property
    def is_code(self) -> bool:
        return self.block.kind == "code"

    # layout -----------------------------------------------------------------------------------
    def build(self, style: Style) -> QTextDocument:
        if self.doc is None:
            block = self.block
            if block.kind == "code":
                self.doc = code_document(block.code, block.language, style)
            else:
                self.doc = _prose_document(block.source, style)
        return self.doc

    def drop_document(self) -> None:
        """Forget the document (the theme or font changed): it is built again on need."""
        self.doc = None
        self.exact = False

    def inner_width(self, width: float) -> float:
        return max(1.0, width - 2 * CODE_PAD_X - 2) if self.is_code else max(1.0, width)

    def layout(self, width: float, style: Style) -> None:
        doc = self.build(style)
        doc.setTextWidth(self.inner_width(width))
        text_height = doc.size().height()
        if self.is_code:
            self.height = math.ceil(style.header + CODE_PAD_Y * 2 + text_height + 2)
        else:
            self.height = math.ceil(text_height)
        self.width = width
        self.exact = True

    def estimate(self, width: float, style: Style) -> None:
        """A height for a block not laid out at ``width`` (yet): scaled from the last exact
        one, or from its length."""
        if self.width > 0 and self.height > 0:
            if not self.is_code:
                text = self.height * self.width / max(1.0, width)
                self.height = max(style.line, round(text / style.line) * style.line)
        else:
            chars_per_line = max(10.0, width / (style.line * 0.45))
            lines = sum(
                1 + int(len(line) / chars_per_line) for line in self.block.source.split("\n")
            )
            extra = style.header + CODE_PAD_Y * 2 + 2 if self.is_code else 0
            self.height = math.ceil(
                lines * (style.mono_line if self.is_code else style.line) + extra
            )
        self.width = width
        self.exact = False

    def text_origin(self, style: Style) -> QPointF:
        """Where the document's (0, 0) is, in item coordinates."""
        if self.is_code:
            return QPointF(CODE_PAD_X + 1, style.header + CODE_PAD_Y + 1)
        return QPointF(0, 0)

    # painting ---------------------------------------------------------------------------------
    def paint(
        self,
        painter: QPainter,
        clip: QRectF,
        style: Style,
        palette: QPalette,
        selection: tuple[int, int] | None,
    ) -> None:
        """Paint at the painter's origin (the item's top left); ``clip`` in item coordinates."""
        doc = self.build(style)
        if self.is_code:
            paint_code_frame(painter, self.width, self.height, self.block.language, style)
        origin = self.text_origin(style)
        painter.save()
        painter.translate(origin)
        context = QAbstractTextDocumentLayout.PaintContext()
        context.palette = palette
        context.clip = clip.translated(-origin)
        if selection is not None and selection[1] > selection[0]:
            chosen = QAbstractTextDocumentLayout.Selection()
            chosen.cursor = self._cursor(*selection)
            fmt = QTextCharFormat()
            fmt.setBackground(palette.color(QPalette.ColorRole.Highlight))
            fmt.setForeground(palette.color(QPalette.ColorRole.HighlightedText))
            chosen.format = fmt
            context.selections = [chosen]
        doc.documentLayout().draw(painter, context)
        if not self.is_code and "\n>" in "\n" + self.block.source.lstrip(" "):
            paint_quote_bars(painter, doc, style)
        painter.restore()

    # text -------------------------------------------------------------------------------------
    @property
    def length(self) -> int:
        if self.doc is None:
            return len(self.block.code if self.is_code else self.block.source)
        return max(0, self.doc.characterCount() - 1)

    def copy_text(self, start: int = 0, end: int | None = None) -> str:
        """What Copy puts on the clipboard for this block (or a part of it)."""
        end = self.length if end is None else end
        if start <= 0 and end >= self.length and not self.is_code and self.doc is not None:
            return readable_text(self.doc)
        return self.plain_text(start, end)

    def plain_text(self, start: int = 0, end: int | None = None) -> str:
        """The document's own text (its offsets are the document's positions)."""
        doc = self.doc
        assert doc is not None
        end = self.length if end is None else end
        if start <= 0 and end >= self.length:
            return self.block.code if self.is_code else doc.toPlainText()
        return _plain(self._cursor(start, end))

    def markdown(self, start: int = 0, end: int | None = None) -> str:
        """The block's own source when wholly selected; else Qt's Markdown of the part (code:
        the selected code itself)."""
        end = self.length if end is None else end
        if start <= 0 and end >= self.length:
            return self.block.source
        if self.is_code:
            return self.plain_text(start, end)
        return self._cursor(start, end).selection().toMarkdown().strip("\n")

    def _cursor(self, start: int, end: int) -> QTextCursor:
        assert self.doc is not None
        cursor = QTextCursor(self.doc)
        cursor.setPosition(max(0, min(start, self.length)))
        cursor.setPosition(max(0, min(end, self.length)), QTextCursor.MoveMode.KeepAnchor)
        return cursor

    def offset_at(self, point: QPointF, style: Style) -> int:
        """The text offset nearest ``point`` (item coordinates)."""
        doc = self.build(style)
        local = point - self.text_origin(style)
        if local.y() < 0:
            return 0
        if local.y() > doc.size().height():
            return self.length
        found = doc.documentLayout().hitTest(local, Qt.HitTestAccuracy.FuzzyHit)
        return max(0, min(self.length, found))

    def anchor_at(self, point: QPointF, style: Style) -> str:
        doc = self.build(style)
        return doc.documentLayout().anchorAt(point - self.text_origin(style))

    def cursor_rect(self, offset: int, style: Style) -> QRectF:
        """The box of the character at ``offset``, in item coordinates."""
        doc = self.build(style)
        block = doc.findBlock(max(0, min(offset, self.length)))
        layout = block.layout()
        origin = self.text_origin(style)
        if layout is None or layout.lineCount() == 0:
            return QRectF(origin.x(), origin.y(), 1, style.line)
        position = offset - block.position()
        line = layout.lineForTextPosition(position)
        if not line.isValid():
            line = layout.lineAt(layout.lineCount() - 1)
        # PySide6's stub types cursorToX as returning object; it returns (x, position)
        x = line.cursorToX(position)[0]  # type: ignore[index]
        x2 = line.cursorToX(position + 1)[0]  # type: ignore[index]
        rect = doc.documentLayout().blockBoundingRect(block)
        return QRectF(
            origin.x() + rect.x() + x,
            origin.y() + rect.y() + line.y(),
            max(1.0, abs(x2 - x)),
            line.height(),
        )


def paint_quote_bars(painter: QPainter, doc: QTextDocument, style: Style) -> None:
    """A bar left of every block-quote paragraph (Qt only indents them)."""
    layout = doc.documentLayout()
    painter.save()
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor(style.colors.muted))
    block = doc.begin()
    while block.isValid():
        level = block.blockFormat().property(_QUOTE)
        if level:
            rect = layout.blockBoundingRect(block)
            for n in range(int(level)):
                x = QUOTE_INDENT * n + 2
                painter.drawRect(QRectF(x, rect.top(), 3, rect.height()))
        block = block.next()
    painter.restore()


def paint_code_frame(
    painter: QPainter, width: float, height: float, language: str, style: Style
) -> None:
    """A code block's box and its language line (the Copy button is a real button on top)."""
    colors = style.colors
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
    painter.setPen(QColor(colors.border))
    painter.setBrush(QColor(colors.code_bg))
    painter.drawRoundedRect(QRectF(0.5, 0.5, width - 1, height - 1), CODE_RADIUS, CODE_RADIUS)
    painter.setPen(QColor(colors.muted))
    painter.setFont(style.small)
    painter.drawText(
        QRectF(CODE_PAD_X + 1, 1, width / 2, style.header),
        int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
        language or "text",
    )
    painter.setPen(QColor(colors.border))
    painter.drawLine(QPointF(1, style.header + 0.5), QPointF(width - 1, style.header + 0.5))
    painter.restore()
