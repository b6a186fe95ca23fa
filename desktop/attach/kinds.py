"""What a file is, from its bytes: an image SIMI Multi can send, a document it can read, or
neither.

The name's extension is only asked for the flavour of a text (Markdown, code, CSV...): a
``.png`` that holds text is a text, a ``.pdf`` that holds a PNG is an image, and a program or
an archive renamed ``.txt`` is refused before anything reads it further. The checks read the
first 64 KiB (and, for a zip, its table of contents), never the whole file.
"""

from __future__ import annotations

import codecs
import io
import math
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Literal

from desktop.attach.errors import AttachError

MB = 1_000_000  # sizes as file managers show them
MAX_IMAGE_BYTES = 50 * MB
MAX_DOCUMENT_BYTES = 200 * MB
SAMPLE_BYTES = 64 * 1024
# a text may hold a few control characters (a form feed, colour codes in a log); more than
# this share of them is binary
MAX_CONTROL_SHARE = 0.01
ALLOWED_CONTROLS = frozenset("\t\n\r\f\v\x1b\x08")

DOCX_MIME = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
WHAT_WE_READ = "it reads PNG, JPEG, GIF and WebP images, PDF, Word (.docx) and text files"

_IMAGE_MAGIC: tuple[tuple[bytes, str, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "png", "image/png"),
    (b"\xff\xd8\xff", "jpeg", "image/jpeg"),
    (b"GIF87a", "gif", "image/gif"),
    (b"GIF89a", "gif", "image/gif"),
)
# binaries we recognise but do not read: named in the refusal, so the person knows what to do
_OTHER_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x7fELF", "it is a program"),
    (b"MZ", "it is a program"),
    (b"\xcf\xfa\xed\xfe", "it is a program"),
    (
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",  # OLE2: .doc/.xls/.ppt, or an encrypted .docx
        "it is an old or a password-protected Office file: save it as .docx or PDF, "
        "without a password",
    ),
    (b"BM", "it is a BMP image: save it as PNG or JPEG"),
    (b"II*\x00", "it is a TIFF image: save it as PNG or JPEG"),
    (b"MM\x00*", "it is a TIFF image: save it as PNG or JPEG"),
    (b"\x1f\x8b", "it is a compressed archive"),
    (b"7z\xbc\xaf\x27\x1c", "it is a compressed archive"),
    (b"Rar!", "it is a compressed archive"),
    (b"PK\x03\x04", "it is a zip archive"),
    (b"PK\x05\x06", "it is a zip archive"),
    (b"SQLite format 3\x00", "it is a database"),
)

_MARKDOWN = {"md", "markdown", "mdown", "mkd", "mdx"}
_CSV = {"csv", "tsv"}
_JSON = {"json", "jsonl", "ndjson", "geojson"}
_HTML = {"html", "htm", "xhtml"}
_CODE = {
    *("py", "pyi", "pyw", "ipynb", "js", "mjs", "cjs", "jsx", "ts", "tsx", "mts", "cts"),
    *("c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx", "m", "mm", "rs", "go", "java"),
    *("kt", "kts", "scala", "swift", "rb", "php", "cs", "fs", "vb", "dart", "lua", "pl"),
    *("pm", "r", "jl", "hs", "ml", "ex", "exs", "erl", "clj", "zig", "nim", "v", "sql"),
    *("sh", "bash", "zsh", "fish", "ps1", "bat", "cmd", "vue", "svelte", "css", "scss"),
    *("sass", "less", "yaml", "yml", "toml", "ini", "cfg", "conf", "xml", "gradle"),
    *("cmake", "mk", "proto", "graphql", "tf", "nix", "el", "lisp", "scm", "asm", "s"),
}
_CODE_NAMES = {"makefile", "dockerfile", "cmakelists.txt", "justfile", "rakefile", "gemfile"}
_TEXT_MIME = {
    "markdown": "text/markdown",
    "csv": "text/csv",
    "json": "application/json",
    "html": "text/html",
    "code": "text/plain",
    "text": "text/plain",
}
_LABELS = {
    "png": "PNG image",
    "jpeg": "JPEG image",
    "gif": "GIF image",
    "webp": "WebP image",
    "pdf": "PDF",
    "docx": "Word document",
    "markdown": "Markdown",
    "csv": "CSV",
    "json": "JSON",
    "html": "HTML",
    "code": "Code",
    "text": "Text",
}


@dataclass(frozen=True, slots=True)
class FileKind:
    """What a file is: ``kind`` (how it reaches a model: an image part or text in a block),
    its real ``mime`` type and ``format`` (which reader: "png" "jpeg" "gif" "webp" | "pdf"
    "docx" "text" "markdown" "code" "csv" "json" "html")."""

    kind: Literal["image", "document"]
    mime: str
    format: str

    @property
    def label(self) -> str:
        """A word or two for a chip: "PDF", "JPEG image", "Markdown"."""
        return _LABELS.get(self.format, self.format)


def size_text(size: int) -> str:
    """A size for a person: "500 MB", "50.4 MB" (rounded up: never shown under a limit it
    passed)."""
    mb = size / MB
    if mb >= 100:
        return f"{math.ceil(mb):,} MB"
    return f"{math.ceil(mb * 10) / 10:g} MB"


def sniff(path: Path, *, name: str | None = None) -> FileKind:
    """What ``path`` holds, by its content. ``name`` (default: the path's) is the name the
    person knows it by: the refusals use it and its extension picks a text's flavour.

    Raises ``AttachError`` for a missing file, a folder, an empty or unreadable file, one
    larger than the limits, or bytes that are neither an image nor a document."""
    shown = name or path.name
    try:
        info = path.stat()
    except OSError as exc:
        raise _os_error(shown, exc) from exc
    if stat.S_ISDIR(info.st_mode):
        raise AttachError(f"“{shown}” is a folder: attach the files in it instead.")
    if not stat.S_ISREG(info.st_mode):
        raise AttachError(
            f"“{shown}” is not a regular file (a device, a pipe or a socket): SIMI Multi "
            "attaches files only."
        )
    size = info.st_size
    _check_size(shown, size, None)
    try:
        with path.open("rb") as src:
            head = src.read(SAMPLE_BYTES)
    except OSError as exc:
        raise _os_error(shown, exc) from exc
    if not head:
        raise _empty(shown)
    kind = _classify(head, size, shown, path)
    _check_size(shown, size, kind)
    return kind


def sniff_bytes(data: bytes, name: str) -> FileKind:
    """``sniff`` for bytes in memory (a pasted image): the same checks and refusals."""
    _check_size(name, len(data), None)
    if not data:
        raise _empty(name)
    kind = _classify(data[:SAMPLE_BYTES], len(data), name, data)
    _check_size(name, len(data), kind)
    return kind


def text_format(name: str) -> str:
    """A text's flavour from its name: "markdown", "code", "csv", "json", "html" or "text"."""
    pure = PurePath(name)
    ext = pure.suffix.lower().lstrip(".")
    if ext in _MARKDOWN:
        return "markdown"
    if ext in _CSV:
        return "csv"
    if ext in _JSON:
        return "json"
    if ext in _HTML:
        return "html"
    if ext in _CODE or pure.name.lower() in _CODE_NAMES:
        return "code"
    return "text"


def looks_like_text(head: bytes, complete: bool) -> bool:
    """Whether ``head`` (the first bytes; ``complete``: all of them) reads as text: UTF-8,
    UTF-16 with its BOM, or a single-byte encoding without NULs, with few control
    characters."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        decoder = codecs.getincrementaldecoder("utf-16")(errors="strict")
        try:
            text = decoder.decode(head, final=complete)
        except UnicodeDecodeError:
            return False
    else:
        if b"\x00" in head:
            return False
        try:
            text = codecs.getincrementaldecoder("utf-8-sig")().decode(head, final=complete)
        except UnicodeDecodeError:
            # not UTF-8: an older single-byte encoding (read as Windows-1252), still text
            text = head.decode("cp1252", errors="replace")
    if not text:
        return True
    controls = sum(1 for ch in text if (ch < " " or ch == "\x7f") and ch not in ALLOWED_CONTROLS)
    return controls <= MAX_CONTROL_SHARE * len(text)


# internals ------------------------------------------------------------------------------------


def _classify(head: bytes, size: int, name: str, source: Path | bytes) -> FileKind:
    for magic, fmt, mime in _IMAGE_MAGIC:
        if head.startswith(magic):
            return FileKind("image", mime, fmt)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return FileKind("image", "image/webp", "webp")
    if b"%PDF-" in head[:1024]:  # the header may follow a little junk (the PDF spec allows it)
        return FileKind("document", "application/pdf", "pdf")
    is_zip = head.startswith((b"PK\x03\x04", b"PK\x05\x06"))
    if is_zip and _is_docx(source):
        return FileKind("document", DOCX_MIME, "docx")
    if not is_zip and looks_like_text(head, complete=size <= len(head)):
        fmt = text_format(name)
        return FileKind("document", _TEXT_MIME[fmt], fmt)
    what = next((w for magic, w in _OTHER_MAGIC if head.startswith(magic)), None)
    if what is None:
        what = "its contents are binary data"
    raise AttachError(
        f"“{name}” is not an image or a document SIMI Multi can read ({what}; {WHAT_WE_READ})."
    )


def _is_docx(source: Path | bytes) -> bool:
    """A zip with ``word/document.xml``: a Word document (its table of contents only)."""
    try:
        with zipfile.ZipFile(io.BytesIO(source) if isinstance(source, bytes) else source) as zf:
            return "word/document.xml" in zf.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return False


def _check_size(name: str, size: int, kind: FileKind | None) -> None:
    if size > MAX_DOCUMENT_BYTES:
        raise AttachError(
            f"“{name}” is {size_text(size)}; attachments can be at most "
            f"{size_text(MAX_DOCUMENT_BYTES)}."
        )
    if size == 0:
        raise _empty(name)
    if kind is not None and kind.kind == "image" and size > MAX_IMAGE_BYTES:
        raise AttachError(
            f"“{name}” is {size_text(size)}; images can be at most {size_text(MAX_IMAGE_BYTES)}."
        )


def _empty(name: str) -> AttachError:
    return AttachError(f"“{name}” is empty: there is nothing in it to attach.")


def _os_error(name: str, exc: OSError) -> AttachError:
    """The words for a file that could not be opened or read."""
    if isinstance(exc, FileNotFoundError):
        return AttachError(f"“{name}” was moved or deleted before it could be attached.")
    if isinstance(exc, PermissionError):
        return AttachError(
            f"SIMI Multi may not read “{name}” (permission denied): check the file's "
            "permissions, or copy it somewhere you can read it and attach the copy."
        )
    if isinstance(exc, IsADirectoryError):
        return AttachError(f"“{name}” is a folder: attach the files in it instead.")
    reason = exc.strerror or type(exc).__name__
    return AttachError(f"“{name}” could not be read ({reason}).")
