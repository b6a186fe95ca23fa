"""The one pipeline from a file to an attachment, and from an attachment to what a model gets.

``prepare`` (the window's chips, ``simi ask --attach``, prompt sets): what the file is
(``kinds.sniff``), a copy in the attachments folder (``AttachmentStore.put_file``: by
SHA-256, once however often it is attached), then, for a document, its text extracted once
and kept beside the copy (suffix ``text``); for an image, one full decode to catch a damaged
file now. A failure releases the stored copy, so nothing half-built stays pending.

When a message is sent: ``document_text`` (the kept text, cut to ``text_limit``) and
``image_part`` (the image sized for the agent's provider, kept as ``<profile>.jpg|png``).

Everything blocks (copies, hashing, parsing): call it off the GUI thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from desktop.attach.documents import (
    Cancel,
    Progress,
    document_block,
    extract_text,
    extract_utf8,
    pdf_pages,
)
from desktop.attach.errors import AttachCancelled, AttachError
from desktop.attach.images import (
    estimate_image_tokens,
    inspect_image,
    oriented_size,
    prepare_image,
    profile_for,
)
from desktop.attach.kinds import FileKind, sniff, sniff_bytes
from desktop.llm.provider import ImagePart
from desktop.store.attachments import Attachment, AttachmentStore

TEXT_COPY = "text"
CHARS_PER_TOKEN = 4  # the usual rough rule for English text and code


@dataclass(frozen=True, slots=True)
class Prepared:
    """An attachment ready for a message, and what its chip shows: an image's size
    (as shown, upright), a document's characters and a PDF's pages."""

    attachment: Attachment
    width: int = 0
    height: int = 0
    text_chars: int = 0
    pages: int | None = None


def prepare(
    path: Path,
    store: AttachmentStore,
    *,
    name: str | None = None,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> Prepared:
    """Attach the file at ``path`` under ``name`` (default: its file name): checked, stored,
    read. ``AttachError`` with the words for its chip when it cannot be
    (``AttachCancelled`` when ``cancel()`` said stop)."""
    shown = name or path.name
    kind = sniff(path, name=shown)  # refuse early, before copying a file that cannot go
    _check_cancel(cancel, shown)
    try:
        sha, size = store.put_file(path, kind=kind.kind, mime=kind.mime)
    except OSError as exc:
        raise _copy_error(shown, exc, path) from exc
    return _finish(store, sha, size, shown, progress, cancel)


def prepare_bytes(data: bytes, name: str, store: AttachmentStore) -> Prepared:
    """``prepare`` for bytes in memory: an image pasted from the clipboard."""
    kind = sniff_bytes(data, name)
    try:
        sha, size = store.put_bytes(data, kind=kind.kind, mime=kind.mime)
    except OSError as exc:
        raise _copy_error(name, exc, None) from exc
    return _finish(store, sha, size, name, None, None)


def estimate_tokens(item: Prepared | Attachment, store: AttachmentStore, agent_kind: str) -> int:
    """About how many tokens the attachment adds to a message for an agent of
    ``agent_kind``: a document's block at ~4 characters a token, an image by its provider's
    formula. Blocking (it may read the kept text or an image's header)."""
    prepared = item if isinstance(item, Prepared) else None
    attachment = item.attachment if isinstance(item, Prepared) else item
    if attachment.kind == "image":
        if prepared is not None and prepared.width and prepared.height:
            width, height = prepared.width, prepared.height
        else:
            width, height = oriented_size(store.path(attachment.sha256))
        return estimate_image_tokens(width, height, profile_for(agent_kind))
    overhead = len(document_block(attachment.name, ""))
    if prepared is not None and prepared.text_chars:
        chars = prepared.text_chars
        if attachment.text_limit is not None:
            chars = min(chars, attachment.text_limit)
    else:
        chars = len(document_text(store, attachment))
    return math.ceil((chars + overhead) / CHARS_PER_TOKEN)


def document_text(store: AttachmentStore, attachment: Attachment) -> str:
    """A document's text as the model gets it: the kept copy (extracted again if it is
    missing), cut to ``attachment.text_limit`` characters when set."""
    copy = store.path(attachment.sha256, TEXT_COPY)
    try:
        text = copy.read_text(encoding="utf-8")
    except FileNotFoundError:
        source = _stored(store, attachment)
        kind = sniff(source, name=attachment.name)
        text = extract_text(source, kind, name=attachment.name).text
        store.write_copy(attachment.sha256, TEXT_COPY, text.encode("utf-8"))
    if attachment.text_limit is not None:
        return text[: max(0, attachment.text_limit)]
    return text


SIZING_VERSION = 1  # raised when profiles or encoding change: kept sized copies are remade


def image_part(store: AttachmentStore, attachment: Attachment, agent_kind: str) -> ImagePart:
    """The image as an ``ImagePart`` for an agent of ``agent_kind``: sized by its profile,
    made once and kept beside the stored file (``<profile>.v<N>.jpg`` or ``.png``: a release
    that sizes images differently raises ``SIZING_VERSION``, and old copies are not reused)."""
    profile = profile_for(agent_kind)
    for ext, mime in (("jpg", "image/jpeg"), ("png", "image/png")):
        kept = store.path(attachment.sha256, f"{profile.name}.v{SIZING_VERSION}.{ext}")
        try:
            data = kept.read_bytes()
        except FileNotFoundError:
            continue
        width, height = oriented_size(kept)
        return ImagePart(mime, data, name=attachment.name, width=width, height=height)
    part = prepare_image(_stored(store, attachment), profile, name=attachment.name)
    ext = "png" if part.mime == "image/png" else "jpg"
    store.write_copy(attachment.sha256, f"{profile.name}.v{SIZING_VERSION}.{ext}", part.data)
    return part


# internals -------------------------------------------------------------------------------------


def _finish(
    store: AttachmentStore,
    sha: str,
    size: int,
    name: str,
    progress: Progress | None,
    cancel: Cancel | None,
) -> Prepared:
    """Read the stored copy (what is sent is what was stored, even if the original changed
    after the check); on any failure the copy is released."""
    try:
        stored = store.path(sha)
        kind = sniff(stored, name=name)
        attachment = Attachment(sha, name, kind.kind, kind.mime, size)
        _check_cancel(cancel, name)
        if kind.kind == "image":
            width, height, _mime = inspect_image(stored, name=name)
            return Prepared(attachment, width=width, height=height)
        chars, pages = _document(store, sha, stored, kind, name, progress, cancel)
        return Prepared(attachment, text_chars=chars, pages=pages)
    except BaseException:
        store.release(sha)
        raise


def _document(
    store: AttachmentStore,
    sha: str,
    stored: Path,
    kind: FileKind,
    name: str,
    progress: Progress | None,
    cancel: Cancel | None,
) -> tuple[int, int | None]:
    """(characters, pages) of a stored document, extracting its text unless it was kept
    already (the same bytes attached before)."""
    kept = store.path(sha, TEXT_COPY)
    if kept.is_file():
        text = kept.read_text(encoding="utf-8")
        return len(text), pdf_pages(stored) if kind.format == "pdf" else None
    data, chars, pages = extract_utf8(stored, kind, progress, cancel, name=name)
    _check_cancel(cancel, name)
    store.write_copy(sha, TEXT_COPY, data)
    return chars, pages


def _stored(store: AttachmentStore, attachment: Attachment) -> Path:
    path = store.path(attachment.sha256)
    if not path.is_file():
        raise AttachError(
            f"“{attachment.name}” is no longer in SIMI Multi's attachments folder, so it "
            "cannot be sent. Attach the file again."
        )
    return path


def _check_cancel(cancel: Cancel | None, name: str) -> None:
    if cancel is not None and cancel():
        raise AttachCancelled(f"Attaching “{name}” was cancelled.")


def _copy_error(name: str, exc: OSError, source: Path | None) -> AttachError:
    """The words for a failed copy: the source's fault (gone, unreadable) or the data
    folder's (full, read-only)."""
    source_gone = source is not None and not source.exists()
    if source_gone:
        return AttachError(f"“{name}” was moved or deleted before it could be attached.")
    if isinstance(exc, PermissionError) and source is not None and not _readable(source):
        return AttachError(
            f"SIMI Multi may not read “{name}” (permission denied): check the file's "
            "permissions, or copy it somewhere you can read it and attach the copy."
        )
    reason = exc.strerror or str(exc)
    return AttachError(
        f"“{name}” could not be copied into SIMI Multi's data folder ({reason}). Free some "
        "disk space and try again."
    )


def _readable(path: Path) -> bool:
    try:
        with path.open("rb"):
            return True
    except OSError:
        return False
