"""Documents that never read a file, a socket or a device for what they show.

A ``QTextDocument`` asks ``loadResource`` for every image (and style sheet) its text names, and
Qt's own answer reads the path from disk: an image in a reply (``![a](/some/fifo)``, a
reference ``![a][r]``, ``qrc:``, ``data:``) would be read on the GUI thread while the reply is
laid out, and a FIFO or ``/dev/zero`` never ends. ``SafeDocument`` refuses every resource:
an image is a blank pixel (an empty answer is not enough: Qt then loads the path itself with
``QImage.load``), anything else is empty. ``images_as_text`` then turns each image into its alt
text and address, so a person still sees what the model meant.

Every document that shows text from a model, a tool, a server or a file is a ``SafeDocument``
(``md_render``: prose and code blocks; ``conversation_list``: search hits).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

from PySide6.QtCore import QByteArray, QUrl
from PySide6.QtGui import (
    QImage,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
    QTextFragment,
)

IMAGE_MARK = "▣"  # in every common UI font (an emoji may show as a box)
ADDRESS_CHARS = 80  # a data: address can be megabytes long
_IMAGE = int(QTextDocument.ResourceType.ImageResource.value)
_ALT = getattr(QTextFormat.Property, "ImageAltText", None)  # Qt ≥ 6.8


@lru_cache(maxsize=1)
def _blank() -> QImage:
    image = QImage(1, 1, QImage.Format.Format_ARGB32)
    image.fill(0)
    return image


class SafeDocument(QTextDocument):
    """A ``QTextDocument`` whose resources are never loaded (see the module's text)."""

    def loadResource(self, kind: int, name: QUrl | str) -> object:
        number = int(getattr(kind, "value", kind))
        return _blank() if number == _IMAGE else QByteArray()


def short_address(address: str) -> str:
    return address if len(address) <= ADDRESS_CHARS else address[: ADDRESS_CHARS - 1] + "…"


def image_words(alt: str, address: str) -> str:
    """What an image shows instead: ``▣ alt (image: address)``."""
    return f"{IMAGE_MARK} {alt.strip() or 'image'} (image: {short_address(address)})"


def fragments(doc: QTextDocument) -> Iterator[QTextFragment]:
    """Each run of text in ``doc`` with one character format, block by block, in order (the
    caller changes the document only once the walk is over)."""
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            if fragment.isValid():
                yield fragment
            it += 1
        block = block.next()


def images_as_text(doc: QTextDocument) -> int:
    """Every image in ``doc`` becomes its alt text and address, a link to the address (opened
    only when clicked, and only a web address); the number replaced."""
    found = [
        (fragment.position(), fragment.length(), fragment.charFormat())
        for fragment in fragments(doc)
        if fragment.charFormat().isImageFormat()
    ]
    for position, length, fmt in reversed(found):
        image = fmt.toImageFormat()
        address = image.name()
        alt = str(image.property(_ALT) or "") if _ALT is not None else ""
        words = QTextCharFormat()
        words.setAnchor(True)
        words.setAnchorHref(address)
        words.setToolTip(short_address(address))
        cursor = QTextCursor(doc)
        for at in reversed(range(position, position + length)):  # one image per character
            cursor.setPosition(at)
            cursor.setPosition(at + 1, QTextCursor.MoveMode.KeepAnchor)
            cursor.insertText(image_words(alt, address), words)
    return sum(length for _, length, _ in found)
