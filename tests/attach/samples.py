"""Small real files for the attachment tests and ``bench/attach.py``: PDFs (a text layer,
blank pages, encrypted), Word documents, images with EXIF. Each is made on the spot, in
a few milliseconds, so no binary fixture sits in the repository."""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path

from PIL import Image

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def text_pdf(path: Path, pages: Sequence[Sequence[str]], *, compress: bool = False) -> Path:
    """A PDF whose pages hold ``pages`` (lines of Latin-1 text each) in Helvetica, written by
    hand as a PDF 1.4 file: catalog, page tree, one font, a page and a content stream per
    page (Flate-compressed with ``compress``, as most PDFs are)."""
    count = len(pages)
    page_ids = [4 + 2 * i for i in range(count)]
    kids = " ".join(f"{i} 0 R" for i in page_ids)
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    for page_id, lines in zip(page_ids, pages, strict=True):
        shown = " ".join(f"({_pdf_string(line)}) Tj T*" for line in lines)
        data = f"BT /F1 10 Tf 12 TL 50 800 Td {shown} ET".encode("cp1252")
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (page_id + 1)
        )
        if compress:
            data = zlib.compress(data)
            head = b"<< /Length %d /Filter /FlateDecode >>" % len(data)
        else:
            head = b"<< /Length %d >>" % len(data)
        objects.append(head + b"\nstream\n" + data + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    path.write_bytes(bytes(out))
    return path


def _pdf_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def blank_pdf(path: Path, pages: int = 2) -> Path:
    """A PDF of empty pages: what a scan without OCR looks like to a text extractor."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=595, height=842)
    with path.open("wb") as out:
        writer.write(out)
    return path


def encrypted_pdf(path: Path, source: Path, *, user_password: str, owner_password: str) -> Path:
    """``source`` encrypted with AES-256 by pypdf's writer. An empty ``user_password`` is
    the common "protected" PDF that opens without asking (only printing or copying limited)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(source))
    writer.encrypt(user_password=user_password, owner_password=owner_password, algorithm="AES-256")
    with path.open("wb") as out:
        writer.write(out)
    return path


def docx(path: Path, body_xml: str) -> Path:
    """A minimal Word document (the three parts Word itself needs) whose ``w:body`` holds
    ``body_xml``."""
    content_types = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" '
        'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/word/document.xml" ContentType="application/'
        'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
    )
    rels = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
        'relationships/officeDocument" Target="word/document.xml"/></Relationships>'
    )
    document = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        f'<w:document xmlns:w="{W_NS}"><w:body>{body_xml}<w:sectPr/></w:body></w:document>'
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", content_types)
        zf.writestr("_rels/.rels", rels)
        zf.writestr("word/document.xml", document)
    return path


def paragraph(*runs: str) -> str:
    """``<w:p>`` of runs; in a run "\\t" is a tab element and "\\n" a line break."""
    out = []
    for run in runs:
        parts = []
        for i, line in enumerate(run.split("\n")):
            if i:
                parts.append("<w:br/>")
            for j, piece in enumerate(line.split("\t")):
                if j:
                    parts.append("<w:tab/>")
                if piece:
                    parts.append(f'<w:t xml:space="preserve">{_xml(piece)}</w:t>')
        out.append(f"<w:r>{''.join(parts)}</w:r>")
    return f"<w:p>{''.join(out)}</w:p>"


def table(rows: Sequence[Sequence[str]]) -> str:
    cells = "".join(
        "<w:tr>" + "".join(f"<w:tc>{paragraph(cell)}</w:tc>" for cell in row) + "</w:tr>"
        for row in rows
    )
    return f"<w:tbl><w:tblPr/>{cells}</w:tbl>"


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def image_file(
    path: Path,
    size: tuple[int, int],
    *,
    fmt: str = "PNG",
    mode: str = "RGB",
    noisy: bool = True,
    **save: object,
) -> Path:
    """An image of ``size``: left half red, right half blue (to tell a rotation), with
    noise (``noisy``: many colours, as a photo has) or flat (a drawing's few colours)."""
    width, height = size
    im = Image.new("RGB", size, (220, 30, 30))
    im.paste((30, 30, 220), (width // 2, 0, width, height))
    if noisy:
        noise = Image.merge("RGB", [Image.effect_noise(size, 40) for _ in range(3)])
        im = Image.blend(im, noise, 0.25)
    if mode != "RGB":
        im = im.convert(mode)
    im.save(path, fmt, **save)
    return path


def photo_with_exif(path: Path, size: tuple[int, int], orientation: int) -> Path:
    """A JPEG as a phone writes it: stored sideways with an EXIF Orientation, a camera make,
    a GPS position and a comment."""
    im = Image.open(image_file(path, size, fmt="JPEG"))
    exif = Image.Exif()
    exif[0x0112] = orientation
    exif[0x010F] = "PhoneMaker"  # Make
    gps = {1: "N", 2: (52.0, 31.0, 12.0), 3: "E", 4: (13.0, 24.0, 36.0)}
    exif[0x8825] = gps  # GPSInfo
    buf = io.BytesIO()
    im.save(buf, "JPEG", exif=exif.tobytes(), comment=b"holiday at home")
    path.write_bytes(buf.getvalue())
    return path
