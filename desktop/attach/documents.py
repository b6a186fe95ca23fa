"""A document's text, and the delimited block that carries it to a model.

- Text, Markdown, code, CSV, JSON: decoded as UTF-8 (or UTF-16 / UTF-8 with a BOM); a file
  that is not UTF-8 is read as Windows-1252, unknown bytes replaced, so an old file still
  reads. Line ends become ``\\n``.
- HTML: the standard library's ``html.parser``: scripts and styles dropped, block elements
  as line breaks, entities decoded. The markup never reaches the model or the screen.
- PDF: ``pypdf`` (BSD), page by page with progress and cancel. An encrypted PDF is tried with
  the empty password first (many "protected" PDFs only restrict printing and open with it);
  a PDF whose pages hold no text is a scan, said so rather than sent empty.
- DOCX: ``zipfile`` + ``xml.etree``: paragraphs (runs, tabs, line breaks) and tables (a row
  per line, cells between tabs). Not python-docx: it pulls in lxml (~10 MB of native code in
  the package) for what the forty lines below do; headers, footers, footnotes and comments
  are left out.

Blocking; ``progress(done, total)`` is called from the reading thread, ``cancel()`` polled
between pages or chunks.
"""

from __future__ import annotations

import codecs
import logging
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import BinaryIO
from xml.etree import ElementTree

from desktop.attach.errors import AttachCancelled, AttachError, short_reason
from desktop.attach.kinds import FileKind

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
Cancel = Callable[[], bool]

CHUNK = 1024 * 1024
# the XML of a Word document, unpacked: a zip bomb stops here (a 200 MB novel is ~150 MB)
MAX_DOCX_XML = 512 * 1024 * 1024
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


@dataclass(frozen=True, slots=True)
class Extracted:
    """A document's text; ``pages`` for a PDF (None for the others)."""

    text: str
    pages: int | None = None


def extract_text(
    path: Path,
    kind: FileKind,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
    *,
    name: str | None = None,
) -> Extracted:
    """The text of the document at ``path`` (``kind`` from ``sniff``); ``name`` is the one
    the person knows it by (for the messages). ``AttachError`` for an encrypted or scanned
    PDF, a damaged file; ``AttachCancelled`` when ``cancel()`` said so."""
    pieces, pages = _extract(path, kind, progress, cancel, name or path.name)
    return Extracted("".join(pieces), pages)


def extract_utf8(
    path: Path,
    kind: FileKind,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
    *,
    name: str | None = None,
) -> tuple[bytes, int, int | None]:
    """``extract_text`` as (UTF-8 bytes, characters, pages), for the copy kept on disk: the
    text is encoded piece by piece, never joined into one string first. Joining and
    encoding a 50 MB text in one call each holds the GIL for tens of milliseconds, long
    enough for the window to miss frames while a big file is attached."""
    pieces, pages = _extract(path, kind, progress, cancel, name or path.name)
    chars = sum(len(piece) for piece in pieces)
    return b"".join([piece.encode("utf-8") for piece in pieces]), chars, pages


def _extract(
    path: Path, kind: FileKind, progress: Progress | None, cancel: Cancel | None, shown: str
) -> tuple[list[str], int | None]:
    if kind.kind != "document":
        raise AttachError(f"“{shown}” is an image, not a document.")
    try:
        if kind.format == "pdf":
            return _pdf(path, shown, progress, cancel)
        if kind.format == "docx":
            _check_cancel(cancel, shown)
            return [_docx(path, shown)], None
        with path.open("rb") as src:
            total = path.stat().st_size
            if kind.format == "html":
                return [_html(src, total, shown, progress, cancel)], None
            return _decoded(src, total, shown, progress, cancel), None
    except OSError as exc:
        raise _unreadable(shown, exc) from exc


def extract_pdf_pages(
    path: Path, cancel: Cancel | None = None, *, name: str | None = None
) -> list[str]:
    """The text of each page of the PDF at ``path``, page 1 first ("" for a page that could
    not be read), for citing pages; the same checks and ``AttachError`` as ``extract_text``."""
    shown = name or path.name
    try:
        return _pdf_pages(path, shown, None, cancel)
    except OSError as exc:
        raise _unreadable(shown, exc) from exc


def _unreadable(shown: str, exc: OSError) -> AttachError:
    if isinstance(exc, FileNotFoundError):
        return AttachError(f"“{shown}” was moved or deleted before it could be read.")
    if isinstance(exc, PermissionError):
        return AttachError(f"SIMI Multi may not read “{shown}” (permission denied).")
    return AttachError(f"“{shown}” could not be read ({exc.strerror or exc}).")


def document_block(name: str, text: str) -> str:
    """The block a document's text travels in, inside the message: its name in a tag, the
    text, the closing tag. The name is escaped (quotes, angle brackets, line breaks) and a
    closing tag inside the text is broken, so neither a file's name nor its contents can
    end the block early and pass as the person's own words."""
    safe = " ".join(name.split()) or "document"
    safe = safe.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    safe = safe.replace(">", "&gt;")
    body = _CLOSING.sub(r"<\\/\1", text)
    return f'<document name="{safe}">\n{body}\n</document>'


_CLOSING = re.compile(r"</(document)", re.IGNORECASE)


# text ------------------------------------------------------------------------------------------


def _decoded(
    src: BinaryIO, total: int, name: str, progress: Progress | None, cancel: Cancel | None
) -> list[str]:
    """The file's text in pieces, ``\\r\\n`` and ``\\r`` made ``\\n``: UTF-8 (a BOM says
    UTF-8 or UTF-16), else Windows-1252 with unknown bytes replaced (decoding starts over:
    the bytes that are not UTF-8 may come last)."""
    head = src.read(4)
    src.seek(0)
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
    try:
        return list(_decode_as(src, encoding, "strict", total, name, progress, cancel))
    except UnicodeDecodeError:
        src.seek(0)
        return list(_decode_as(src, "cp1252", "replace", total, name, progress, cancel))


def _decode_as(
    src: BinaryIO,
    encoding: str,
    errors: str,
    total: int,
    name: str,
    progress: Progress | None,
    cancel: Cancel | None,
) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder(encoding)(errors=errors)
    done = 0
    held = ""  # a "\r" at a piece's end may be the first half of "\r\n"
    while True:
        _check_cancel(cancel, name)
        chunk = src.read(CHUNK)
        piece = held + decoder.decode(chunk, final=not chunk)
        held = ""
        if chunk and piece.endswith("\r"):
            piece, held = piece[:-1], "\r"
        if piece:
            yield piece.replace("\r\n", "\n").replace("\r", "\n")
        if not chunk:
            return
        done += len(chunk)
        if progress is not None:
            progress(min(done, total), total)


class _TextOfHtml(HTMLParser):
    """HTML to plain text: what a browser would show, roughly, without any markup."""

    SKIP = frozenset({"script", "style", "template", "noscript", "head", "svg", "math"})
    # blocks: a line break before and after (runs of them become one blank line)
    BLOCK = frozenset(
        {
            *("p", "div", "section", "article", "header", "footer", "main", "nav", "aside"),
            *("h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "dl", "table", "pre"),
            *("blockquote", "figure", "figcaption", "form", "fieldset", "address"),
            *("details", "summary", "hr", "caption"),
        }
    )
    # lines: a line break before (list items, table rows, <br>)
    LINE = frozenset({"li", "dt", "dd", "tr", "br", "option"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0
        self._pre = 0
        self._title = False
        self._first_cell = True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":  # the one part of <head> worth keeping
            self._title = True
        if tag in self.SKIP:
            self._skip += 1
        elif tag in self.BLOCK:
            self.parts.append("\n")
        elif tag in self.LINE:
            self.parts.append("\n")
            self._first_cell = True
        elif tag in ("td", "th"):
            if not self._first_cell:
                self.parts.append("\t")
            self._first_cell = False
        if tag == "pre":
            self._pre += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._title = False
            self.parts.append("\n")
        if tag in self.SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag in self.BLOCK:
            self.parts.append("\n")
        if tag == "pre":
            self._pre = max(0, self._pre - 1)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.BLOCK or tag in self.LINE:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip and not self._title:
            return
        if self._pre:
            self.parts.append(data)
            return
        data = re.sub(r"\s+", " ", data)
        if not self.parts or self.parts[-1].endswith(("\n", "\t")):
            data = data.lstrip(" ")  # a line starts with its first word
        self.parts.append(data)

    def text(self) -> str:
        joined = "".join(self.parts)
        lines = [line.rstrip(" ") for line in joined.split("\n")]
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")


def _html(
    src: BinaryIO, total: int, name: str, progress: Progress | None, cancel: Cancel | None
) -> str:
    parser = _TextOfHtml()
    for piece in _decoded(src, total, name, progress, cancel):
        _check_cancel(cancel, name)
        parser.feed(piece)
    parser.close()
    return parser.text()


# PDF -------------------------------------------------------------------------------------------


def _pdf(
    path: Path, name: str, progress: Progress | None, cancel: Cancel | None
) -> tuple[list[str], int]:
    texts = _pdf_pages(path, name, progress, cancel)
    pieces = [texts[0]]
    for text in texts[1:]:
        pieces += ["\n\n", text]
    return pieces, len(texts)


def _pdf_pages(
    path: Path, name: str, progress: Progress | None, cancel: Cancel | None
) -> list[str]:
    from pypdf import PasswordType, PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    _check_cancel(cancel, name)
    try:
        reader = PdfReader(path)
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            raise _locked(name)
        pages = list(reader.pages)
    except (AttachError, OSError):
        raise
    except FileNotDecryptedError as exc:
        raise _locked(name) from exc
    except DependencyError as exc:
        raise AttachError(
            f"“{name}” is encrypted in a way SIMI Multi cannot open. Save a copy without "
            "encryption and attach that."
        ) from exc
    except Exception as exc:  # pypdf raises many kinds for a damaged file
        raise _damaged_pdf(name, exc) from exc
    total = len(pages)
    if total == 0:
        raise AttachError(f"“{name}” could not be read as a PDF (it has no pages).")
    texts: list[str] = []
    failed = 0
    for index, page in enumerate(pages):
        _check_cancel(cancel, name)
        try:
            texts.append((page.extract_text() or "").strip("\n"))
        except Exception as exc:  # one damaged page: the others still read
            log.warning("page %d of a PDF could not be read: %r", index + 1, exc)
            texts.append("")
            failed += 1
        if progress is not None:
            progress(index + 1, total)
    if not any(text.strip() for text in texts):
        if failed == total:
            raise _damaged_pdf(name, None)
        raise AttachError(
            f"“{name}” has no text layer: it looks like a scan. SIMI Multi cannot read text "
            "from page images yet."
        )
    return texts


def pdf_pages(path: Path) -> int | None:
    """How many pages a readable PDF has (None if it cannot say): a text cached earlier
    does not keep the count."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            reader.decrypt("")
        return len(reader.pages)
    except Exception:
        return None


def _locked(name: str) -> AttachError:
    return AttachError(
        f"“{name}” is password-protected: SIMI Multi cannot open it. Save a copy without the "
        "password and attach that."
    )


def _damaged_pdf(name: str, exc: BaseException | None) -> AttachError:
    detail = f" ({short_reason(exc)})" if exc is not None else ""
    return AttachError(
        f"“{name}” could not be read as a PDF: the file looks damaged{detail}. Open it in a PDF "
        "viewer and save it again, then attach the new copy."
    )


# DOCX ------------------------------------------------------------------------------------------


def _docx(path: Path, name: str) -> str:
    damaged = (
        f"“{name}” could not be read as a Word document: the file looks damaged. Open it in "
        "Word or LibreOffice and save it again, then attach the new copy."
    )
    try:
        with zipfile.ZipFile(path) as zf:
            info = zf.getinfo("word/document.xml")
            if info.file_size > MAX_DOCX_XML:
                raise AttachError(f"“{name}” holds more text than SIMI Multi can read at once.")
            data = zf.read(info)
    except (KeyError, zipfile.BadZipFile, EOFError, ValueError, RuntimeError) as exc:
        raise AttachError(damaged) from exc
    # a Word document has no DTD: one here could only expand entities without end
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise AttachError(damaged)
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise AttachError(damaged) from exc
    body = root.find(f"{_W}body")
    if body is None:
        raise AttachError(damaged)
    return "\n".join(_blocks(body)).strip("\n")


def _blocks(element: ElementTree.Element) -> Iterator[str]:
    """The lines of a body or a table cell, in order: a line per paragraph, one per table row
    (its cells between tabs); content controls and the like are looked into."""
    for child in element:
        if child.tag == f"{_W}p":
            yield _paragraph(child)
        elif child.tag == f"{_W}tbl":
            for row in child.findall(f"{_W}tr"):  # not iter(): a nested table is in its cell
                cells = row.findall(f"{_W}tc")
                yield "\t".join(" ".join(_blocks(cell)).strip() for cell in cells)
        elif child.tag not in (f"{_W}sectPr", f"{_W}tblPr", f"{_W}tcPr"):
            yield from _blocks(child)


def _paragraph(p: ElementTree.Element) -> str:
    parts: list[str] = []
    for el in p.iter():
        tag = el.tag
        if tag == f"{_W}t":
            parts.append(el.text or "")
        elif tag == f"{_W}tab":
            parts.append("\t")
        elif tag in (f"{_W}br", f"{_W}cr"):
            parts.append("\n")
        elif tag == f"{_W}noBreakHyphen":
            parts.append("-")
    return "".join(parts)


# shared ----------------------------------------------------------------------------------------


def _check_cancel(cancel: Cancel | None, name: str) -> None:
    if cancel is not None and cancel():
        raise AttachCancelled(f"Reading “{name}” was cancelled.")
