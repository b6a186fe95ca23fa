"""Markdown as it streams (issue 14), on the real widgets offscreen: finished blocks rendered
while the reply arrives, the live tail plain, an open fence as code, no jump when the reply
ends (the finished bubble is pixel for pixel the bubble rendered from the store, and the view
does not move), selection and copy across blocks (plain or Markdown), and a width change that
lays out what is on screen first and the rest when idle.

With ``SIMI_SCREENSHOT_DIR`` set, ``markdown-<mid|done>-<light|dark>.png`` are saved there.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QFontInfo, QFontMetricsF, QImage, QTextFormat
from PySide6.QtWidgets import QApplication, QWidget

from desktop.store.conversations import Message
from desktop.ui.conversation.transcript import Transcript
from desktop.ui.kit import theme
from desktop.ui.markdown.layout import EXACT_CHARS
from desktop.ui.markdown.render import BlockItem
from desktop.ui.markdown.view import MarkdownView
from tests.helpers.widget_checks import logical_image

SHOTS = os.environ.get("SIMI_SCREENSHOT_DIR")
REPLY = """## Why the cache matters

The **KV cache** keeps *evaluated* tokens, so `n_ctx` decides how much fits. See [the docs](https://example.com/docs).

- first, the prompt is read (prefill)
- then tokens are written one by one
  1. a nested step
- last, the reply ends

> Batching shares one pass over the weights between several requests.

```python
def ttft(sent: float, first: float) -> float:
    # time to first token
    return first - sent
```

| Figure | Meaning | Unit |
|---|---|---|
| TTFT | request sent to first token | ms |
| decode | tokens after the first / their time | tok/s |

That is all for now, and this last paragraph is plain."""


def _message(text: str, status: str, message_id: int = 1) -> Message:
    return Message(message_id, 1, "assistant", text, status, None, None, None, "A", "m", "", "")


def _settle(app: QApplication) -> None:
    for _ in range(4):
        app.processEvents()


def _transcript(qapp: QApplication, size: tuple[int, int] = (900, 700)) -> Transcript:
    view = Transcript()
    view.resize(*size)
    view.show()
    _settle(qapp)
    return view


def _chunks(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    out, at = [], 0
    while at < len(text):
        step = rng.randint(1, 12)
        out.append(text[at : at + step])
        at += step
    return out


def _stream(qapp: QApplication, view: Transcript, text: str, seed: int = 1) -> MarkdownView:
    view.add_message(_message("", "streaming"))
    for chunk in _chunks(text, seed):
        view.append_text(1, chunk)
        _settle(qapp)
    bubble = view.bubble(1)
    assert bubble is not None and bubble.view is not None
    return bubble.view


def _finish(qapp: QApplication, view: Transcript, text: str) -> None:
    view.update_message(_message(text, "complete"), None)
    _settle(qapp)


def _shoot(widget: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        assert widget.grab().save(str(Path(SHOTS) / f"{name}.png"))


@pytest.fixture
def view(qapp: QApplication) -> Any:
    transcript = _transcript(qapp)
    yield transcript
    transcript.close()
    transcript.deleteLater()
    _settle(qapp)


def _heading_level(item: BlockItem) -> int:
    assert item.doc is not None
    return item.doc.begin().blockFormat().headingLevel()


def test_finished_blocks_render_while_the_reply_streams_and_only_the_tail_is_plain(
    qapp: QApplication, view: Transcript
) -> None:
    cut = REPLY.index("- then tokens")  # mid-list: the list is the unfinished block
    md = _stream(qapp, view, REPLY[:cut])
    heading, paragraph = md.items
    assert (heading.block.kind, paragraph.block.kind) == ("heading", "prose")
    assert _heading_level(heading) == 2 and heading.plain_text() == "Why the cache matters"
    # rendered: no Markdown marks left, bold and code are formats, the link is an anchor
    assert "**" not in paragraph.plain_text() and "`" not in paragraph.plain_text()
    assert paragraph.doc is not None
    html = paragraph.doc.toHtml()
    assert "font-weight:700" in html and 'href="https://example.com/docs"' in html
    assert md.tail_text == "- first, the prompt is read (prefill)"  # the live tail, as written

    rest = REPLY[cut : REPLY.index("```python")]
    for chunk in _chunks(rest, 2):
        view.append_text(1, chunk)
        _settle(qapp)
    kinds = [item.block.kind for item in md.items]
    # the list finished when the quote began; the quote at its blank line (nothing can join it)
    assert kinds == ["heading", "prose", "prose", "prose"]
    assert md.items[2].plain_text().startswith("first, the prompt")  # bullets are rendered
    assert md.items[3].plain_text().startswith("Batching")
    assert md.tail_text == ""


def test_a_finished_block_is_never_laid_out_or_built_again(
    qapp: QApplication, view: Transcript, monkeypatch: pytest.MonkeyPatch
) -> None:
    laid: list[int] = []
    original = BlockItem.layout

    def counting(self: BlockItem, width: float, style: Any) -> None:
        laid.append(id(self))
        original(self, width, style)

    monkeypatch.setattr(BlockItem, "layout", counting)
    md = _stream(qapp, view, REPLY[: REPLY.index("| Figure")])
    first_docs = [(item, item.doc) for item in md.items]
    tops = [item.top for item in md.items]
    for chunk in _chunks(REPLY[REPLY.index("| Figure") :] + "\n\nMore text follows.", 3):
        view.append_text(1, chunk)
        _settle(qapp)
    assert all(item.doc is doc for item, doc in first_docs)  # the same documents
    assert [item.top for item, _ in first_docs] == tops  # nothing above the tail moved
    assert len(laid) == len(set(laid)) == len(md.items)  # each block laid out exactly once


def test_an_open_code_fence_streams_as_code(qapp: QApplication, view: Transcript) -> None:
    text = REPLY[: REPLY.index("    return first")]
    md = _stream(qapp, view, text)
    assert md.tail_text == (
        "def ttft(sent: float, first: float) -> float:\n    # time to first token"
    )
    tail = md.findChild(QWidget, "MarkdownTail")
    assert tail is not None
    # What a person sees: every glyph of the streamed code advances the same width (a font's
    # fixedPitch flag is not that: Noto Sans Mono is monospaced and does not set it)
    advances = {QFontMetricsF(tail.font()).horizontalAdvance(ch) for ch in set(text) - {"\n"}}
    assert len(advances) == 1, advances
    assert QFontMetricsF(tail.font()).horizontalAdvance("i") == advances.pop()
    # the tail sits in a code box: the box's background is painted around it
    image = logical_image(md)
    box_bg = QColor(theme.current_colors().code_bg)
    inside = tail.geometry().bottomLeft() + QPoint(-4, 3)
    assert image.pixelColor(inside).name() == box_bg.name()
    assert not md.code_items()  # not finished yet: no highlighted block, no Copy button
    view.append_text(1, "    return first - sent\n```\n")
    _settle(qapp)
    [code] = md.code_items()
    assert code.block.closed and code.copy_button is not None and code.copy_button.isVisible()
    # the finished block is set in the font the tail streamed in: nothing jumps when it closes
    finished = code.build(md.style_).defaultFont()
    assert QFontInfo(finished).family() == QFontInfo(tail.font()).family()
    assert finished.pointSizeF() == tail.font().pointSizeF()


def _bubble_image(view: Transcript) -> QImage:
    bubble = view.bubble(1)
    assert bubble is not None
    return bubble.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_the_finished_bubble_is_the_stored_bubble_pixel_for_pixel(
    qapp: QApplication, dark: bool
) -> None:
    theme.install(qapp, dark=dark)
    tone = "dark" if dark else "light"
    try:
        streamed = _transcript(qapp)
        cut = REPLY.index("| TTFT")
        _stream(qapp, streamed, REPLY[:cut], seed=7)
        _shoot(streamed, f"markdown-mid-{tone}")
        for chunk in _chunks(REPLY[cut:], 8):
            streamed.append_text(1, chunk)
            _settle(qapp)
        _finish(qapp, streamed, REPLY)
        _shoot(streamed, f"markdown-done-{tone}")
        stored = _transcript(qapp)
        stored.show_path([_message(REPLY, "complete")])
        _settle(qapp)
        a, b = _bubble_image(streamed), _bubble_image(stored)
        assert a.size() == b.size()
        assert a == b
        # and it is rendered: the table is a table in both, not pipes
        md = stored.bubble(1).view
        assert "|" not in md.items[-2].plain_text()
    finally:
        theme.install(qapp, dark=False)
        for transcript in ("streamed", "stored"):
            widget = locals().get(transcript)
            if widget is not None:
                widget.close()
                widget.deleteLater()
        _settle(qapp)


def test_the_view_does_not_move_when_the_reply_ends(qapp: QApplication) -> None:
    long_reply = "\n\n".join([REPLY] * 3)
    for follow in (False, True):
        view = _transcript(qapp, (900, 500))
        md = _stream(qapp, view, long_reply, seed=11)
        bar = view.verticalScrollBar()
        assert bar.maximum() > 0
        if not follow:
            bar.setValue(bar.maximum() // 2)
            _settle(qapp)
        before_value = bar.value()
        before_top = md.mapTo(view.viewport(), QPoint(0, 0)).y()
        before_height = md.height()
        _finish(qapp, view, long_reply)
        assert md.height() == before_height  # the last paragraph rendered at the same height
        if follow:
            assert view.following and bar.value() == bar.maximum()
        else:
            assert bar.value() == before_value
            assert md.mapTo(view.viewport(), QPoint(0, 0)).y() == before_top
        view.close()
        view.deleteLater()
        _settle(qapp)


def test_selection_runs_across_blocks_and_copies_plain_text_or_markdown(
    qtbot: Any, qapp: QApplication, view: Transcript
) -> None:
    md = _stream(qapp, view, REPLY)
    _finish(qapp, view, REPLY)
    heading, paragraph = md.items[0], md.items[1]
    start = QPoint(2, int(heading.top + heading.height / 2))
    end = QPoint(md.width() - 2, int(paragraph.top + paragraph.height - 3))
    qtbot.mousePress(md, Qt.MouseButton.LeftButton, pos=start)
    qtbot.mouseMove(md, end)
    qtbot.mouseRelease(md, Qt.MouseButton.LeftButton, pos=end)
    plain = md.selected_text()
    assert plain.startswith("Why the cache matters\n\nThe KV cache keeps evaluated tokens")
    assert "**" not in plain and "##" not in plain
    md.setFocus()
    qtbot.keyClick(md, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert qapp.clipboard().text() == plain

    menu = md.context_menu()
    actions = {a.text(): a for a in menu.actions() if a.text()}
    assert list(actions) == ["Copy", "Copy as Markdown", "Select all"]
    actions["Copy as Markdown"].trigger()
    copied = qapp.clipboard().text()
    assert copied.startswith("## Why the cache matters\n\nThe **KV cache** keeps *evaluated*")
    actions["Select all"].trigger()
    actions["Copy as Markdown"].trigger()
    assert qapp.clipboard().text() == REPLY  # whole blocks give back their own source
    actions["Copy"].trigger()
    plain = qapp.clipboard().text()
    assert "- first, the prompt is read (prefill)\n" in plain  # list markers kept
    assert "  1. a nested step" in plain
    assert "Figure\tMeaning\tUnit\nTTFT\trequest sent to first token\tms" in plain  # rows
    assert "def ttft(sent: float, first: float) -> float:\n    # time" in plain
    menu.deleteLater()


def test_a_link_opens_only_when_clicked(
    qtbot: Any, qapp: QApplication, view: Transcript, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    monkeypatch.setattr("desktop.ui.markdown.select.open_link", opened.append)
    md = _stream(qapp, view, REPLY)
    _finish(qapp, view, REPLY)
    paragraph = md.items[1]
    assert paragraph.doc is not None
    at = paragraph.doc.toPlainText().index("the docs") + 2
    rect = paragraph.cursor_rect(at, md.style_)
    point = QPoint(int(rect.center().x()), int(paragraph.top + rect.center().y()))
    qtbot.mouseMove(md, point)
    assert md.toolTip() == "https://example.com/docs" and not opened  # hovering fetches nothing
    qtbot.mouseClick(md, Qt.MouseButton.LeftButton, pos=point)
    assert opened == ["https://example.com/docs"]


def _long_markdown(chars: int) -> str:
    rng = random.Random(3)
    words = ["cache", "token", "prefill", "decode", "**batch**", "`n_ctx`", "model", "layer"]
    parts: list[str] = []
    size = 0
    while size < chars:
        para = " ".join(rng.choice(words) for _ in range(rng.randint(20, 80)))
        parts.append(para)
        size += len(para) + 2
    return "\n\n".join(parts)


def test_a_width_change_lays_out_what_is_seen_first_and_the_rest_when_idle(
    qtbot: Any, qapp: QApplication, view: Transcript
) -> None:
    text = _long_markdown(EXACT_CHARS * 3)
    md = _stream_fast(qapp, view, text)
    bar = view.verticalScrollBar()
    bar.setValue(bar.maximum() // 3)  # reading in the middle
    _settle(qapp)
    view.resize(700, 700)
    qapp.processEvents()  # the first repaint at the new width
    assert md.laying_out  # the rest waits for idle time
    seen = _first_item_on_screen(view, md)
    exact = [item.exact for item in md.items]
    assert not all(exact) and all(exact[seen : seen + 3])  # what is on screen is laid out
    seen_y = int(md.items[seen].top) + md.mapTo(view.viewport(), QPoint(0, 0)).y()
    qtbot.waitUntil(lambda: not md.laying_out, timeout=30_000)
    _settle(qapp)
    assert all(item.exact for item in md.items)
    # what the person is reading stays where it was while the rest is laid out (within a line)
    now_y = int(md.items[seen].top) + md.mapTo(view.viewport(), QPoint(0, 0)).y()
    assert abs(now_y - seen_y) <= md.style_.line
    # and the lazy result is the full layout: a fresh view at the same width agrees
    fresh = MarkdownView()
    fresh.set_text(text, finished=False)
    fresh.resize(md.width(), 10)
    fresh.show()
    qtbot.waitUntil(lambda: fresh.width() == md.width() and not fresh.laying_out, timeout=30_000)
    assert [round(i.height) for i in fresh.items] == [round(i.height) for i in md.items]
    fresh.deleteLater()


def _stream_fast(qapp: QApplication, view: Transcript, text: str) -> MarkdownView:
    view.add_message(_message("", "streaming"))
    for at in range(0, len(text), 4000):
        view.append_text(1, text[at : at + 4000])
    _settle(qapp)
    bubble = view.bubble(1)
    assert bubble is not None and bubble.view is not None
    return bubble.view


def _first_item_on_screen(view: Transcript, md: MarkdownView) -> int:
    offset = md.mapTo(view.viewport(), QPoint(0, 0)).y()
    return next(i for i, item in enumerate(md.items) if item.top + offset >= 0)


def test_quotes_have_a_bar_and_tables_a_border(qapp: QApplication, view: Transcript) -> None:
    md = _stream(qapp, view, REPLY)
    _finish(qapp, view, REPLY)
    quote = next(i for i in md.items if i.block.source.startswith(">"))
    assert quote.doc is not None
    assert quote.doc.begin().blockFormat().property(QTextFormat.Property.BlockQuoteLevel) == 1
    image = logical_image(md)
    bar = image.pixelColor(QPoint(3, int(quote.top + quote.height / 2)))
    assert bar.name() == QColor(theme.current_colors().muted).name()


def test_a_theme_change_renders_the_blocks_again_in_its_colours(
    qtbot: Any, qapp: QApplication, view: Transcript
) -> None:
    md = _stream(qapp, view, REPLY)
    _finish(qapp, view, REPLY)
    [code] = md.code_items()
    light_doc = code.doc
    light_bg = logical_image(md).pixelColor(QPoint(md.width() - 30, int(code.top) + 40))
    theme.install(qapp, dark=True)
    try:
        _settle(qapp)
        [code] = md.code_items()
        md.grab()  # painting builds what the theme change dropped
        assert code.doc is not None and code.doc is not light_doc
        dark_bg = logical_image(md).pixelColor(QPoint(md.width() - 30, int(code.top) + 40))
        assert dark_bg.name() == QColor(theme.current_colors().code_bg).name() != light_bg.name()
        qtbot.mouseClick(code.copy_button, Qt.MouseButton.LeftButton)
        assert code.copy_button.text() == "Copied"  # feedback, then back to "Copy"
        qtbot.waitUntil(lambda: code.copy_button.text() == "Copy", timeout=5_000)
    finally:
        theme.install(qapp, dark=False)


def test_a_long_stored_reply_is_shown_whole_and_laid_out_when_idle(
    qtbot: Any, qapp: QApplication, view: Transcript
) -> None:
    text = _long_markdown(150_000)  # far past the 20,000 characters a plain label shows
    view.show_path([_message(text, "complete")])
    _settle(qapp)
    md = view.bubble(1).view
    assert md is not None and md.source == text and md.finished
    qtbot.waitUntil(lambda: not md.laying_out, timeout=30_000)
    assert all(item.exact for item in md.items)
    last = text.rsplit("\n\n", 1)[1].replace("**", "").replace("`", "")
    assert md.items[-1].plain_text() == last
    view.scroll_to_bottom()
    _settle(qapp)
    bar = view.verticalScrollBar()
    assert bar.value() == bar.maximum() > 10_000


def test_select_all_of_a_finished_reply_spans_its_whole_text(
    qapp: QApplication, view: Transcript
) -> None:
    md = _stream(qapp, view, REPLY)
    _finish(qapp, view, REPLY)
    md.select_all()
    assert md.selection_range() == (0, len(md.toPlainText()))  # what a screen reader is told
