"""Model text never makes the app read a file, a socket or a device (issue 25, item 1).

A reply that names an image (inline, by reference, with brackets in its alt text, ``file:``,
``qrc:``, ``data:``) is rendered with the image's words, and nothing is read: the target here is
a FIFO, which a read would wait on for ever. The rendering runs in a subprocess with a timeout
(this file run as a script), so a freeze fails the test instead of hanging the suite: once
while the reply streams in chunks and once as a stored reply, on the real ``Transcript``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import run_text

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 40  # a pass takes ~2 s; a read of the FIFO never ends
QRC_IMAGE = "qrc:/qt-project.org/styles/commonstyle/images/file-16.png"  # a real Qt resource
DATA_IMAGE = (  # a 1×1 PNG
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8Dw"
    "HwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
)

# name -> (reply, words it must show); ``{fifo}`` is the FIFO's path
CORPUS: dict[str, tuple[str, str]] = {
    "inline": ("Look: ![a chart]({fifo})", "▣ a chart"),
    "inline_angle": ("![a chart](<{fifo}>)", "▣ a chart"),
    "inline_title": ('![a chart]({fifo} "title")', "▣ a chart"),
    "reference": ("[r]: {fifo}\nLook: ![a chart][r]", "▣ a chart"),
    "reference_collapsed": ("[r]: {fifo}\n![r][]", "▣ r"),
    "reference_shortcut": ("[r]: {fifo}\n![r]", "▣ r"),
    "reference_titled": ('[r]: <{fifo}> "t"\n![a chart][r]', "▣ a chart"),
    "nested_brackets": ("![a [b] chart]({fifo})", "▣ a [b] chart"),
    "nested_reference": ("[r]: {fifo}\n![a [b]][r]", "▣ a [b]"),
    "file_url": ("![a chart](file://{fifo})", "▣ a chart"),
    "file_reference": ("[r]: file://{fifo}\n![a chart][r]", "▣ a chart"),
    "qrc": (f"![a chart]({QRC_IMAGE})", "▣ a chart"),
    "qrc_reference": (f"[r]: {QRC_IMAGE}\n![a chart][r]", "▣ a chart"),
    "data": (f"![a chart]({DATA_IMAGE})", "▣ a chart"),
    "data_reference": (f"[r]: {DATA_IMAGE}\n![a chart][r]", "▣ a chart"),
    "in_link": ("[r]: {fifo}\n[![a chart][r]](https://example.com)", "▣ a chart"),
    "in_list": ("[r]: {fifo}\n- one ![a chart][r]\n- two", "▣ a chart"),
    "in_table": ("[r]: {fifo}\n| x |\n|---|\n| ![a chart][r] |", "▣ a chart"),
    "in_heading": ("## ![a chart]({fifo})", "▣ a chart"),
    "in_quote": ("> [r]: {fifo}\n> ![a chart][r]", "▣ a chart"),
    "autolink": ("<file://{fifo}>", "file://"),
    "raw_html": ('<img src="{fifo}"> and <p style="background-image:url({fifo})">x</p>', ""),
    "no_alt": ("![]({fifo})", "▣ image"),
    "no_alt_reference": ("[r]: {fifo}\n![][r]", ""),  # md4c gives Qt no image at all
}


def _reply(name: str, fifo: str) -> str:
    return CORPUS[name][0].replace("{fifo}", fifo)


# the subprocess ---------------------------------------------------------------------------------
def _render(fifo: str) -> dict[str, Any]:
    """Render every reply of the corpus into a Transcript, streamed in chunks and stored; lay
    out and paint every block: what each shows, and every resource any document was asked for
    (by mode)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from desktop.store.conversations import Message
    from desktop.ui.conversation.transcript import Transcript
    from desktop.ui.kit.safe_document import SafeDocument

    app = QApplication.instance() or QApplication([])
    asked: list[str] = []
    refuse = SafeDocument.loadResource

    def spy(self: SafeDocument, kind: int, name: Any) -> object:
        asked.append(name.toString())
        return refuse(self, kind, name)

    SafeDocument.loadResource = spy  # type: ignore[method-assign]

    def settle() -> None:
        for _ in range(3):
            app.processEvents()

    out: dict[str, Any] = {}
    for mode in ("stream", "stored"):
        asked.clear()
        out[mode] = {"replies": _render_all(Transcript(), fifo, mode, settle, Message)}
        out[mode]["asked"] = list(asked)
    return out


def _render_all(view: Any, fifo: str, mode: str, settle: Any, cls: Any) -> dict[str, Any]:
    view.resize(900, 700)
    view.show()
    settle()
    out: dict[str, Any] = {}
    for n, name in enumerate(CORPUS, start=1):
        text = _reply(name, fifo)
        if mode == "stream":
            view.add_message(_message(cls, n, "", "streaming"))
            for at in range(0, len(text), 9):
                view.append_text(n, text[at : at + 9])
                settle()
        else:
            view.add_message(_message(cls, n, text, "complete"))
        view.update_message(_message(cls, n, text, "complete"), None)
        settle()
        bubble = view.bubble(n)
        assert bubble is not None and bubble.view is not None
        md = bubble.view
        docs, texts, images = set(), [], 0
        for item in md.items:
            item.layout(800, md.style_)
            doc = item.doc
            assert doc is not None
            docs.add(type(doc).__name__)
            texts.append(doc.toPlainText())
            images += _images(doc)
        view.grab()  # paint all of it
        out[name] = {"docs": sorted(docs), "text": "\n".join(texts), "images": images}
    view.close()
    return out


def _message(cls: Any, message_id: int, text: str, status: str) -> Any:
    return cls(message_id, 1, "assistant", text, status, None, None, None, "A", "m", "", "")


def _images(doc: Any) -> int:
    count = 0
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            if it.fragment().charFormat().isImageFormat():
                count += 1
            it += 1
        block = block.next()
    return count


def _run(fifo: Path) -> dict[str, Any]:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    try:
        done = run_text([sys.executable, __file__, str(fifo)], env, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"rendering froze: a reply made Qt read the FIFO {fifo}")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def fifo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("fifo")
    if any(c.isspace() for c in str(folder)):
        # a destination with spaces is no Markdown image unless written <like this> (which
        # "inline_angle" covers): the other forms need a path without them
        folder = Path(tempfile.mkdtemp(prefix="simi-fifo-", dir="/tmp"))
    path = folder / "image.png"
    os.mkfifo(path)
    yield path
    path.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def rendered(fifo: Path) -> dict[str, Any]:
    """One subprocess renders the corpus both ways (most of its time is importing Qt)."""
    return _run(fifo)


def _check(result: dict[str, Any], fifo: Path) -> None:
    assert result["asked"] == [], result["asked"]  # no document was even asked for a resource
    for name, (_reply_text, words) in CORPUS.items():
        shown = result["replies"][name]
        assert shown["docs"] == ["SafeDocument"], (name, shown)
        assert shown["images"] == 0, (name, shown)
        assert words in shown["text"], (name, shown["text"])
    # the address is shown for what cannot be opened with a click (a path, file:, qrc:, data:)
    assert str(fifo) in result["replies"]["reference"]["text"]
    assert str(fifo) in result["replies"]["inline"]["text"]
    assert "qrc:/qt-project.org" in result["replies"]["qrc_reference"]["text"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_images_in_a_streaming_reply_are_never_read(rendered: dict[str, Any], fifo: Path) -> None:
    _check(rendered["stream"], fifo)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_images_in_a_stored_reply_are_never_read(rendered: dict[str, Any], fifo: Path) -> None:
    _check(rendered["stored"], fifo)


def test_a_safe_document_refuses_file_qrc_and_data_resources(qapp: Any, tmp_path: Path) -> None:
    """Asked directly, the document answers a blank pixel for an image (an empty answer is
    not enough: Qt would then load the path itself) and nothing for anything else, whatever
    the address; laid out, an HTML ``<img>`` of a real picture shows that pixel, not the
    picture."""
    from PySide6.QtCore import QUrl
    from PySide6.QtGui import QColor, QImage, QTextDocument

    from desktop.ui.kit.safe_document import SafeDocument

    picture = QImage(8, 8, QImage.Format.Format_ARGB32)
    picture.fill(QColor("red"))
    png = tmp_path / "red.png"
    assert picture.save(str(png))
    sheet = tmp_path / "sheet.css"
    sheet.write_text("p { color: red }")
    doc = SafeDocument()
    image_kind = QTextDocument.ResourceType.ImageResource.value
    for url in (
        QUrl.fromLocalFile(str(png)),
        QUrl(png.as_uri()),
        QUrl(QRC_IMAGE),
        QUrl(DATA_IMAGE),
    ):
        image = doc.loadResource(image_kind, url)
        assert isinstance(image, QImage) and (image.width(), image.height()) == (1, 1), url
        assert image.pixelColor(0, 0).alpha() == 0, url  # blank, not the file's red
        for kind in (
            QTextDocument.ResourceType.StyleSheetResource.value,
            QTextDocument.ResourceType.HtmlResource.value,
        ):
            assert not doc.loadResource(kind, url), url
    assert not doc.loadResource(
        QTextDocument.ResourceType.StyleSheetResource.value, QUrl.fromLocalFile(str(sheet))
    )
    # laid out: Qt's own document reads the file (an 8×8 picture), the safe one does not
    for cls, width in ((QTextDocument, 8), (SafeDocument, 1)):
        html_doc = cls()
        html_doc.setHtml(f'<img src="{png}">')
        html_doc.setTextWidth(200)
        assert html_doc.size().width() > 0
        assert html_doc.resource(image_kind, QUrl(str(png))).width() == width, cls


if __name__ == "__main__":
    print(json.dumps(_render(sys.argv[1])))
