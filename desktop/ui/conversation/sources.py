"""A reply's sources: the passages of the person's knowledge collections it was given, listed
under its text ("[1] notes.md · lines 10–24 · 0.032", the full path in the tooltip).

A click opens the passage where it is in its file (``source_view.SourceViewer``); a citation
"[n]" in the reply's text does the same for source n (the bubble links them: see
``MarkdownView.set_citations``). Built only for a reply that has sources; during a streaming
turn it shows as soon as the search found them, before the first token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import shiboken6
from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QFrame, QLabel, QToolButton

from desktop.ui.conversation.source_view import Passage, SourceViewer, file_name
from desktop.ui.kit.theme import current_colors, current_text_scale, scale_font_sizes
from desktop.ui.kit.widgets import plain, vbox

NAME_CHARS = 48  # a file name is cut in the middle past this many characters


def short_name(name: str, limit: int = NAME_CHARS) -> str:
    if len(name) <= limit:
        return name
    half = (limit - 1) // 2
    return f"{name[:half]}…{name[-(limit - 1 - half) :]}"


def source_words(source: Passage) -> str:
    """ "notes.md · lines 10–24 · 0.032": the file, where in it, how well it matched."""
    parts = [short_name(file_name(source.path))]
    if source.place:
        parts.append(source.place)
    if source.score is not None:
        parts.append(f"{source.score:.3f}")
    return " · ".join(parts)


def source_tip(source: Passage) -> str:
    """The tooltip of a source: its full path, and the collection it came from."""
    return f"{source.path}\nFrom the collection “{source.collection}”. Click to see the passage."


def citation_tips(sources: Sequence[Passage]) -> dict[int, str]:
    """What a citation "[n]" says over it, by source number."""
    return {
        s.position: f"Source {s.position}: {file_name(s.path)}"
        + (f", {s.place}" if s.place else "")
        for s in sources
    }


def _style(scale: float) -> str:
    c = current_colors()
    css = f"""
#SourceTitle {{ color: {c.muted}; font-size: 11px; font-weight: 600; }}
QToolButton#SourceItem {{ color: {c.muted}; border: 1px solid transparent; border-radius: 5px;
              padding: 1px 4px; font-size: 11px; background: transparent; }}
QToolButton#SourceItem:hover {{ background: {c.selection}; color: {c.text}; }}
QToolButton#SourceItem:focus {{ border-color: {c.accent}; }}
QToolButton#SourceItem[chosen="true"] {{ border-color: {c.accent}; color: {c.text}; }}
"""
    return scale_font_sizes(css, scale)


class SourceList(QFrame):
    """The "Sources" under a reply: one button per source, in number order.

    ``buttons``: by source number; ``viewer``: the passage viewer last opened (one at a time).
    """

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("SourceList")
        layout = vbox(self, (0, 2, 0, 0), 0)
        self.title = plain(QLabel("Sources"))
        self.title.setObjectName("SourceTitle")
        layout.addWidget(self.title)
        self._layout = layout
        self.sources: dict[int, Passage] = {}
        self.buttons: dict[int, QToolButton] = {}
        self.viewer: SourceViewer | None = None
        self._styled: tuple[bool, float] | None = None
        self._apply_style()

    def set_sources(self, sources: Sequence[Passage]) -> None:
        """Show these sources (the same again changes nothing)."""
        wanted = {s.position: s for s in sources}
        if wanted == self.sources:
            return
        for button in self.buttons.values():
            self._layout.removeWidget(button)
            button.deleteLater()
        self.buttons.clear()
        self.sources = wanted
        for number, source in sorted(wanted.items()):
            button = QToolButton()
            button.setObjectName("SourceItem")
            button.setText(f"[{number}]  {source_words(source)}")
            button.setToolTip(source_tip(source))
            button.setAccessibleName(f"Source {number}: {file_name(source.path)}")
            button.setAutoRaise(True)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(self._opener(number))
            self._layout.addWidget(button, 0, Qt.AlignmentFlag.AlignLeft)
            self.buttons[number] = button
        self.setVisible(bool(wanted))

    def _opener(self, number: int) -> Callable[[], None]:
        # A plain closure: lambdas with default arguments on clicked(bool) upset PySide's
        # reference counting of True/False (see bubble.py).
        def open_it() -> None:
            self.open(number)

        return open_it

    def select(self, number: int) -> None:
        """Mark source ``number`` (a citation of it was clicked); the others unmarked."""
        for n, button in self.buttons.items():
            chosen = "true" if n == number else "false"
            if button.property("chosen") != chosen:
                button.setProperty("chosen", chosen)
                button.style().unpolish(button)
                button.style().polish(button)

    def open(self, number: int) -> SourceViewer | None:
        """The viewer of source ``number``, over the window (another one open closes)."""
        source = self.sources.get(number)
        if source is None:
            return None
        old = self.viewer
        if old is not None and shiboken6.isValid(old):
            old.close()
        self.select(number)
        viewer = SourceViewer(source, self.window())
        viewer.finished.connect(self._closed)
        viewer.show()
        self.viewer = viewer
        return viewer

    def _closed(self) -> None:
        if shiboken6.isValid(self):  # the bubble may have gone (paging) while it was open
            self.select(0)  # no source is marked once its viewer closed

    def _apply_style(self) -> None:
        key = (current_colors().dark, current_text_scale())
        if key != self._styled:
            self._styled = key
            self.setStyleSheet(_style(key[1]))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.StyleChange):
            self._apply_style()
