"""One file's content for the index: its SHA-256, then its text (``desktop.attach``: what the
file is by its bytes, the text of text, HTML, PDF page by page, DOCX) cut into chunks.

What cannot be read is an ``Unreadable`` with the sentence a person sees, and whether the
file's earlier chunks stay (``keep``: a passing trouble, such as a permission or a file that
vanished) or go (it is no longer a document the index can hold).
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Callable
from pathlib import Path

from desktop.attach.documents import extract_pdf_pages, extract_text
from desktop.attach.errors import AttachCancelled, AttachError
from desktop.attach.kinds import sniff
from desktop.knowledge.chunks import Piece, split_text
from desktop.knowledge.scan import DENIED

Cancel = Callable[[], bool]

GONE = "Moved or deleted while it was being indexed."
# the middle of kinds.sniff's refusal: "(it is a zip archive; it reads PNG...)"
_WHAT = re.compile(r"\((it is [^;]+|its contents are binary data);")


class Unreadable(Exception):
    """A file left out: ``reason`` for a person; ``keep``: its earlier chunks stay."""

    def __init__(self, reason: str, *, keep: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.keep = keep


class Cancelled(Exception):
    """Reading stopped because the sync was cancelled (between a PDF's pages)."""


def _open(path: str) -> io.BufferedReader:
    """The file opened for reading (a seam: the tests make it fail as a file the person may
    not read would)."""
    return open(path, "rb")


def sha256_of(path: str) -> str:
    try:
        with _open(path) as src:
            return hashlib.file_digest(src, "sha256").hexdigest()
    except PermissionError as exc:
        raise Unreadable(DENIED, keep=True) from exc
    except FileNotFoundError as exc:
        raise Unreadable(GONE, keep=True) from exc
    except OSError as exc:
        reason = f"Could not be read ({exc.strerror or type(exc).__name__})."
        raise Unreadable(reason, keep=True) from exc


def read_pieces(path: str, cancel: Cancel | None = None) -> list[Piece]:
    """The chunks of the document at ``path``. ``Unreadable``, ``Cancelled``."""
    file = Path(path)
    try:
        kind = sniff(file)
        if kind.kind != "document":
            raise Unreadable(f"Not a text document (it is a {kind.label}).")
        if kind.format == "pdf":
            pages = extract_pdf_pages(file, cancel)
            pieces: list[Piece] = []
            for number, text in enumerate(pages, 1):
                pieces += split_text(text, page=number)
            return pieces
        text = extract_text(file, kind, cancel=cancel).text
    except AttachCancelled as exc:
        raise Cancelled() from exc
    except AttachError as exc:
        cause = exc.__cause__
        if isinstance(cause, PermissionError):
            raise Unreadable(DENIED, keep=True) from exc
        if isinstance(cause, FileNotFoundError):
            raise Unreadable(GONE, keep=True) from exc
        if isinstance(cause, OSError):
            raise Unreadable(exc.user_message, keep=True) from exc
        what = _WHAT.search(exc.user_message)
        if what is not None:
            raise Unreadable(f"Not a text document ({what.group(1)}).") from exc
        raise Unreadable(exc.user_message) from exc
    return split_text(text, markdown=kind.format == "markdown")
