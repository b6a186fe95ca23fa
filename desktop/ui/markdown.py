"""Markdown for the transcript: CommonMark + GFM (tables, task lists, strikethrough) through
Qt's md4c reader, fenced code highlighted by Pygments, and nothing fetched from the network.

A reply is cut into segments: prose (rendered to rich text for a QLabel) and fenced code
(highlighted, shown in its own block with a Copy button). Raw HTML is never interpreted and
remote images become links the person can click to open in the browser: rendering a reply
never makes a request (privacy; an image URL can carry a tracking token).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import lru_cache

from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor, QTextDocument

from desktop.ui.theme import Colors

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)[^`]*$")
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\(\s*<?([^)\s>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
IMAGE_MARK = "▣"  # in every common UI font (an emoji may show as a box)


@dataclass(frozen=True, slots=True)
class Prose:
    text: str


@dataclass(frozen=True, slots=True)
class Code:
    code: str
    language: str
    closed: bool = True


Segment = Prose | Code


def split_segments(text: str) -> list[Segment]:
    """Prose and fenced code, in order. An unclosed fence runs to the end (streaming)."""
    segments: list[Segment] = []
    prose: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            prose.append(lines[i])
            i += 1
            continue
        indent, fence, language = len(match.group(1)), match.group(2), match.group(3)
        if fence[0] == "`" and "`" in lines[i][indent + len(fence) :]:
            prose.append(lines[i])  # an inline code span, not a fence
            i += 1
            continue
        if any(p.strip() for p in prose):
            segments.append(Prose("\n".join(prose)))
        prose = []
        body: list[str] = []
        i += 1
        closed = False
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                closed = True
                i += 1
                break
            line = lines[i]
            # remove up to the fence's indentation (CommonMark)
            cut = min(indent, len(line) - len(line.lstrip(" ")))
            body.append(line[cut:])
            i += 1
        segments.append(Code("\n".join(body), language.lower(), closed))
    if any(p.strip() for p in prose):
        segments.append(Prose("\n".join(prose)))
    return segments


def protect_images(text: str) -> str:
    """``![alt](url)`` becomes a link placeholder: the image is fetched only if clicked."""

    def placeholder(match: re.Match[str]) -> str:
        alt, url = match.group(1).strip(), match.group(2)
        label = alt or "image"
        return f"[{IMAGE_MARK} {label} (image, click to open)]({url})"

    return _IMAGE.sub(placeholder, text)


def prose_html(text: str, colors: Colors, font: QFont | None = None) -> str:
    """Markdown to rich text for a QLabel: tinted inline code, theme-coloured links."""
    doc = QTextDocument()
    if font is not None:
        doc.setDefaultFont(font)
    features = (
        QTextDocument.MarkdownFeature.MarkdownDialectGitHub
        | QTextDocument.MarkdownFeature.MarkdownNoHTML
    )
    doc.setMarkdown(protect_images(text), features)
    code_bg = QColor(colors.code_bg)
    link = QColor(colors.accent)
    block = doc.begin()
    while block.isValid():
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
    body = doc.toHtml()
    # Tables: md4c gives border="1"; a light rule reads better on both themes.
    return body.replace(
        'border="1" style=" border-collapse:collapse;"',
        f'border="1" style=" border-collapse:collapse; border-color:{colors.border};"',
    )


@lru_cache(maxsize=2)
def _style_name(dark: bool) -> str:
    from pygments.styles import get_all_styles

    names = set(get_all_styles())
    for name in ("github-dark", "monokai") if dark else ("default", "friendly"):
        if name in names:
            return name
    return "default"


def code_html(code: str, language: str, dark: bool) -> str:
    """Pygments-highlighted code as inline-styled HTML (Qt rich text knows no CSS classes)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name
    from pygments.lexers.special import TextLexer
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(language) if language else TextLexer()
    except ClassNotFound:
        lexer = TextLexer()
    formatter = HtmlFormatter(noclasses=True, nowrap=True, style=_style_name(dark))
    spans = highlight(code, lexer, formatter).rstrip("\n")
    # Pygments' own background would fight the block's; the block paints it.
    spans = re.sub(r"background-color: ?#[0-9a-fA-F]+;? ?", "", spans)
    return f'<pre style="white-space: pre-wrap; margin: 0;">{spans}</pre>'


def plain_html(text: str) -> str:
    return f'<pre style="white-space: pre-wrap; margin: 0;">{html.escape(text)}</pre>'
