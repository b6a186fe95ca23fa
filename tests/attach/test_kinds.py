"""What a file is, by its bytes (``desktop/attach/kinds.py``), on real files in tmp_path, and
the words a person gets for each file that cannot be attached."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from desktop.attach.errors import AttachError
from desktop.attach.kinds import DOCX_MIME, MB, sniff, sniff_bytes
from tests.attach import samples

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("fmt", "name", "mime"),
    [
        ("PNG", "a.png", "image/png"),
        ("JPEG", "a.jpg", "image/jpeg"),
        ("GIF", "a.gif", "image/gif"),
        ("WEBP", "a.webp", "image/webp"),
    ],
)
def test_images_are_known_by_their_bytes(tmp_path: Path, fmt: str, name: str, mime: str) -> None:
    path = samples.image_file(tmp_path / name, (8, 8), fmt=fmt)
    kind = sniff(path)
    assert (kind.kind, kind.mime, kind.format) == ("image", mime, mime.split("/")[1])


def test_pdf_and_word_documents_are_known_by_their_bytes(tmp_path: Path) -> None:
    pdf = sniff(samples.text_pdf(tmp_path / "r.pdf", [["hello"]]))
    assert (pdf.kind, pdf.mime, pdf.format, pdf.label) == (
        "document",
        "application/pdf",
        "pdf",
        "PDF",
    )
    word = sniff(samples.docx(tmp_path / "r.docx", samples.paragraph("hi")))
    assert (word.kind, word.mime, word.format) == ("document", DOCX_MIME, "docx")


@pytest.mark.parametrize(
    ("name", "fmt", "mime"),
    [
        ("notes.md", "markdown", "text/markdown"),
        ("main.py", "code", "text/plain"),
        ("lib.rs", "code", "text/plain"),
        ("Makefile", "code", "text/plain"),
        ("data.csv", "csv", "text/csv"),
        ("data.json", "json", "application/json"),
        ("page.HTML", "html", "text/html"),
        ("readme.txt", "text", "text/plain"),
        ("no-extension", "text", "text/plain"),
    ],
)
def test_a_text_takes_its_flavour_from_the_extension(
    tmp_path: Path, name: str, fmt: str, mime: str
) -> None:
    path = tmp_path / name
    path.write_text("key = 1\nother line\n", encoding="utf-8")
    kind = sniff(path)
    assert (kind.kind, kind.format, kind.mime) == ("document", fmt, mime)


def test_a_lying_extension_is_ignored(tmp_path: Path) -> None:
    text_named_png = tmp_path / "diagram.png"
    text_named_png.write_text("not a picture at all\n", encoding="utf-8")
    assert sniff(text_named_png).format == "text"

    png_named_pdf = tmp_path / "report.pdf"
    png_named_pdf.write_bytes(samples.image_file(tmp_path / "x.png", (4, 4)).read_bytes())
    assert (sniff(png_named_pdf).kind, sniff(png_named_pdf).format) == ("image", "png")

    pdf_named_txt = tmp_path / "notes.txt"
    pdf_named_txt.write_bytes(samples.text_pdf(tmp_path / "y.pdf", [["x"]]).read_bytes())
    assert sniff(pdf_named_txt).format == "pdf"


def test_texts_in_other_encodings_are_still_texts(tmp_path: Path) -> None:
    utf16 = tmp_path / "utf16.txt"
    utf16.write_bytes("Grüße aus Köln\n".encode("utf-16"))  # with its BOM
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café crème, 5 €\n".encode("cp1252"))  # not UTF-8
    assert sniff(utf16).format == "text"
    assert sniff(latin).format == "text"


@pytest.mark.parametrize(
    ("content", "name", "says"),
    [
        (b"\x7fELF\x02\x01\x01" + bytes(200), "tool.txt", "it is a program"),
        (b"\x00\x01\x02\x03\xff\xfe\x00" * 50, "x.bin", "its contents are binary data"),
        (b"BM" + bytes(100), "scan.bmp", "it is a BMP image: save it as PNG or JPEG"),
    ],
)
def test_an_unknown_binary_is_refused_with_what_it_seems_to_be(
    tmp_path: Path, content: bytes, name: str, says: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(AttachError) as caught:
        sniff(path)
    message = caught.value.user_message
    assert message.startswith(f"“{name}” is not an image or a document SIMI Multi can read (")
    assert says in message and "PNG, JPEG, GIF and WebP" in message


def test_a_zip_that_is_not_a_word_document_is_refused(tmp_path: Path) -> None:
    import zipfile

    path = tmp_path / "report.docx"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("content.xml", "<x/>")
    with pytest.raises(AttachError, match="it is a zip archive"):
        sniff(path)


def test_a_folder_a_missing_and_an_empty_file_each_say_what_happened(tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    with pytest.raises(AttachError, match=r"“photos” is a folder: attach the files in it"):
        sniff(folder)
    with pytest.raises(AttachError, match=r"“gone\.pdf” was moved or deleted before it could be"):
        sniff(tmp_path / "gone.pdf")
    empty = tmp_path / "empty.txt"
    empty.touch()
    with pytest.raises(AttachError, match=r"“empty\.txt” is empty"):
        sniff(empty)
    with pytest.raises(AttachError, match=r"“paste\.png” is empty"):
        sniff_bytes(b"", "paste.png")


def test_an_unreadable_file_says_permission_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "secret.txt"
    path.write_text("private\n")
    path.chmod(0)
    if os.access(path, os.R_OK):  # running as root: the mode does not stop us, so inject it
        real_open = Path.open

        def denied(self: Path, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
            if self == path:
                raise PermissionError(13, "Permission denied", str(self))
            return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(Path, "open", denied)
    with pytest.raises(AttachError, match=r"may not read “secret\.txt” \(permission denied\)"):
        sniff(path)


def test_too_large_files_are_refused_before_they_are_read(tmp_path: Path) -> None:
    huge = tmp_path / "video-notes.txt"
    with huge.open("wb") as out:  # sparse: no 500 MB written
        out.truncate(500 * MB)
    with pytest.raises(AttachError) as caught:
        sniff(huge)
    assert caught.value.user_message == (
        "“video-notes.txt” is 500 MB; attachments can be at most 200 MB."
    )

    big_image = tmp_path / "panorama.png"
    with big_image.open("wb") as out:
        out.write(PNG_MAGIC)
        out.truncate(60 * MB)
    with pytest.raises(AttachError) as caught:
        sniff(big_image)
    assert caught.value.user_message == "“panorama.png” is 60 MB; images can be at most 50 MB."


def test_the_name_given_is_the_one_in_the_message(tmp_path: Path) -> None:
    path = tmp_path / "tmp123"
    path.write_bytes(b"\x7fELF" + bytes(64))
    with pytest.raises(AttachError, match=r"^“Pasted file” is not an image"):
        sniff(path, name="Pasted file")
    with pytest.raises(AttachError, match=r"^“clip\.bin” is not an image"):
        sniff_bytes(b"\x7fELF" + bytes(64), "clip.bin")
    assert sniff_bytes(b"# Title\n", "notes.md").format == "markdown"
