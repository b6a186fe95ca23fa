"""The attach pipeline (``desktop/attach/prepare.py``) on a real SQLite file and a real
attachments folder: what a chip gets, what is kept beside the stored file, what a failure
leaves behind (nothing pending), and what a model gets at sending time."""

from __future__ import annotations

import dataclasses
import hashlib
import io
from pathlib import Path

import pytest
from PIL import Image

from desktop.attach import prepare as pipeline
from desktop.attach.documents import document_block
from desktop.attach.errors import AttachCancelled, AttachError
from desktop.attach.images import estimate_image_tokens, profile_for
from desktop.attach.prepare import (
    SIZING_VERSION,
    document_text,
    estimate_tokens,
    image_part,
    prepare,
    prepare_bytes,
)
from desktop.store.attachments import AttachmentStore
from desktop.store.conversations import ConversationStore
from desktop.store.db import Database
from tests.attach import samples


@pytest.fixture
def store(db: Database, tmp_path: Path) -> AttachmentStore:
    return AttachmentStore(db, tmp_path / "attachments")


def _unique(tmp_path: Path, request: pytest.FixtureRequest, name: str, text: str) -> Path:
    """A text file whose bytes no other test stores (the store's pending set is per process)."""
    path = tmp_path / name
    path.write_text(f"{text}\n({request.node.name})\n", encoding="utf-8")
    return path


def test_a_document_is_stored_and_its_text_kept_beside_it(
    store: AttachmentStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    source = _unique(tmp_path, request, "notes.md", "# Plan\r\nShip it.")
    prepared = prepare(source, store)
    a = prepared.attachment
    data = source.read_bytes()
    assert (a.sha256, a.name, a.kind, a.mime, a.size) == (
        hashlib.sha256(data).hexdigest(),
        "notes.md",
        "document",
        "text/markdown",
        len(data),
    )
    text = store.path(a.sha256, "text").read_text(encoding="utf-8")
    assert text.startswith("# Plan\nShip it.\n") and prepared.text_chars == len(text)
    assert store.path(a.sha256).read_bytes() == data  # the original, byte for byte
    assert document_text(store, a) == text


def test_a_pdf_reports_its_pages_and_is_read_once_for_two_names(
    store: AttachmentStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdf = samples.text_pdf(tmp_path / "report.pdf", [["alpha page"], ["beta page"], ["gamma"]])
    first = prepare(pdf, store, name="report.pdf")
    assert (first.pages, first.attachment.mime) == (3, "application/pdf")

    # the same bytes again under another name: the kept text serves, nothing is re-read
    def must_not_run(*args: object, **kwargs: object) -> object:
        raise AssertionError("extracted twice")

    monkeypatch.setattr(pipeline, "extract_text", must_not_run)
    monkeypatch.setattr(pipeline, "extract_utf8", must_not_run)
    second = prepare(pdf, store, name="copy of report.pdf")
    assert second.attachment.sha256 == first.attachment.sha256
    assert second.attachment.name == "copy of report.pdf"
    assert (second.pages, second.text_chars) == (3, first.text_chars)


def test_an_image_is_inspected_and_sized_once_per_provider(
    store: AttachmentStore, tmp_path: Path
) -> None:
    photo = samples.photo_with_exif(tmp_path / "IMG_1.jpg", (900, 600), orientation=6)
    prepared = prepare(photo, store)
    assert (prepared.width, prepared.height) == (600, 900)  # upright
    assert prepared.attachment.kind == "image"
    a = prepared.attachment

    part = image_part(store, a, "local")  # the 1024-px profile: a quarter turn, no resize
    assert (part.mime, part.width, part.height, part.name) == ("image/jpeg", 600, 900, "IMG_1.jpg")
    kept = store.path(a.sha256, f"local.v{SIZING_VERSION}.jpg")
    assert kept.read_bytes() == part.data
    assert image_part(store, a, "local") == part  # read back from the kept copy

    claude = image_part(store, a, "anthropic")
    assert claude.width * claude.height <= 1_150_000
    assert store.path(a.sha256, f"anthropic.v{SIZING_VERSION}.jpg").is_file()
    assert Image.open(io.BytesIO(claude.data)).size == (claude.width, claude.height)


def test_a_failed_extraction_releases_the_stored_file(
    store: AttachmentStore, tmp_path: Path
) -> None:
    scan = samples.blank_pdf(tmp_path / "scan.pdf")
    with pytest.raises(AttachError, match="has no text layer"):
        prepare(scan, store)
    sha = hashlib.sha256(scan.read_bytes()).hexdigest()
    assert store.path(sha).is_file()  # copied before it was read...
    assert store.collect() == 1  # ...and not pending: the clean-up takes it
    assert not store.path(sha).exists()


def test_cancel_stops_and_releases(store: AttachmentStore, tmp_path: Path) -> None:
    pdf = samples.text_pdf(tmp_path / "long.pdf", [[f"page {i}"] for i in range(5)])
    pages_read: list[int] = []
    with pytest.raises(AttachCancelled):
        prepare(
            pdf,
            store,
            progress=lambda done, total: pages_read.append(done),
            cancel=lambda: len(pages_read) >= 2,
        )
    assert pages_read == [1, 2]
    assert store.collect() == 1


def test_a_source_that_vanishes_before_the_copy_leaves_nothing(
    store: AttachmentStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "draft.txt"
    source.write_text("soon gone\n")
    real_sniff = pipeline.sniff

    def sniff_then_vanish(path: Path, *, name: str | None = None):  # type: ignore[no-untyped-def]
        kind = real_sniff(path, name=name)
        if path == source:
            path.unlink()  # moved away between the check and the copy
        return kind

    monkeypatch.setattr(pipeline, "sniff", sniff_then_vanish)
    with pytest.raises(AttachError) as caught:
        prepare(source, store)
    assert caught.value.user_message == (
        "“draft.txt” was moved or deleted before it could be attached."
    )
    assert [p for p in store.folder.rglob("*") if p.is_file()] == []


def test_refusals_come_before_anything_is_stored(store: AttachmentStore, tmp_path: Path) -> None:
    program = tmp_path / "run.txt"
    program.write_bytes(b"\x7fELF" + bytes(300))
    with pytest.raises(AttachError, match="is not an image or a document"):
        prepare(program, store)
    with pytest.raises(AttachError, match="is a folder"):
        prepare(tmp_path, store)
    assert not store.folder.exists() or not any(store.folder.rglob("*"))


def test_a_pasted_image_is_prepared_from_bytes(store: AttachmentStore, tmp_path: Path) -> None:
    png = samples.image_file(tmp_path / "clip.png", (64, 48)).read_bytes()
    prepared = prepare_bytes(png, "Pasted image.png", store)
    assert (prepared.width, prepared.height, prepared.attachment.mime) == (64, 48, "image/png")
    assert store.path(prepared.attachment.sha256).read_bytes() == png
    with pytest.raises(AttachError, match=r"“junk\.png” is not an image"):
        prepare_bytes(b"\x00\x01" * 100, "junk.png", store)


def test_a_damaged_image_is_refused_at_attach_time(store: AttachmentStore, tmp_path: Path) -> None:
    whole = samples.image_file(tmp_path / "w.png", (120, 120)).read_bytes()
    cut = tmp_path / "cut.png"
    cut.write_bytes(whole[: len(whole) // 3])
    with pytest.raises(AttachError, match="could not be read as an image"):
        prepare(cut, store)
    assert store.collect() == 1  # released


def test_token_estimates_for_the_chip(
    store: AttachmentStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    doc = prepare(_unique(tmp_path, request, "a.txt", "x" * 4000), store)
    a = doc.attachment
    overhead = len(document_block("a.txt", ""))
    expected = -(-(doc.text_chars + overhead) // 4)
    assert estimate_tokens(doc, store, "openai") == expected
    assert estimate_tokens(a, store, "gemini") == expected  # from the kept text
    cut = dataclasses.replace(a, text_limit=400)
    assert estimate_tokens(cut, store, "openai") == -(-(400 + overhead) // 4)
    assert estimate_tokens(dataclasses.replace(doc, attachment=cut), store, "openai") == (
        -(-(400 + overhead) // 4)
    )

    photo = prepare(samples.image_file(tmp_path / "p.png", (1000, 1000), noisy=False), store)
    assert estimate_tokens(photo, store, "anthropic") == 1334
    assert estimate_tokens(photo.attachment, store, "anthropic") == 1334  # header only
    assert estimate_tokens(photo, store, "openai") == estimate_image_tokens(
        1000, 1000, profile_for("openai")
    )


def test_the_text_is_cut_to_its_limit_and_extracted_again_if_lost(
    store: AttachmentStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    prepared = prepare(_unique(tmp_path, request, "long.txt", "0123456789" * 10), store)
    a = prepared.attachment
    limited = dataclasses.replace(a, text_limit=25)
    assert document_text(store, limited) == ("0123456789" * 3)[:25]
    store.path(a.sha256, "text").unlink()
    assert document_text(store, a).startswith("0123456789" * 10)
    assert store.path(a.sha256, "text").is_file()  # kept again


def test_a_stored_file_that_is_gone_says_attach_it_again(
    store: AttachmentStore, db: Database, tmp_path: Path
) -> None:
    photo = prepare(samples.image_file(tmp_path / "gone.png", (10, 10)), store)
    conversations = ConversationStore(db)
    message = conversations.add_message(conversations.create(None).id, "user", "look")
    store.attach(message.id, [photo.attachment])
    store.path(photo.attachment.sha256).unlink()  # the data folder was tidied by hand
    with pytest.raises(AttachError, match=r"“gone\.png” is no longer in SIMI Multi's attachments"):
        image_part(store, photo.attachment, "openai")
