"""A source's passage where it is in its file: a small read-only viewer.

The file is read on a worker thread (``async_door``) and shown as plain text (monospace for
code), scrolled to the passage, its lines highlighted; the header names the file, where in it
and the collection. When the file cannot show the passage (gone, changed since it was
searched, a PDF or Word document, unreadable) the passage as it was found is shown instead, and
one line says why. "Open file" opens the person's own file with the system's app: only a local
absolute path, the one the person clicked; never an address from a reply's text.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import Protocol

import shiboken6
from PySide6.QtCore import QEvent, Qt, QUrl
from PySide6.QtGui import (
    QCloseEvent,
    QColor,
    QDesktopServices,
    QFont,
    QFontDatabase,
    QTextCursor,
    QTextFormat,
)
from PySide6.QtWidgets import (
    QDialog,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTextEdit,
    QWidget,
)

from desktop.ui.kit.async_door import loop_running, run_blocking, start
from desktop.ui.kit.elided_label import ElidedLabel
from desktop.ui.kit.theme import current_colors
from desktop.ui.kit.widgets import fit_over, hbox, plain, vbox

MAX_BYTES = 20 * 1024 * 1024  # a bigger file shows its passage only
CONTEXT_LINES = 3  # lines shown above the passage when the viewer scrolls to it
PREFERRED_W, PREFERRED_H = 780, 560
AS_FOUND = "this is the passage as it was found."
# files whose passages are text read out of them: their lines are not the file's lines
NOT_PLAIN = {
    ".pdf": "a PDF",
    ".docx": "a Word document",
    ".doc": "a Word document",
    ".odt": "an OpenDocument text",
    ".rtf": "a rich-text document",
    ".html": "a web page",
    ".htm": "a web page",
    ".epub": "an e-book",
}
_CODE = (
    ".py .pyi .js .jsx .ts .tsx .c .h .cc .cpp .hpp .cs .java .kt .go .rs .rb .php .swift .m "
    ".scala .sh .bash .zsh .ps1 .bat .sql .json .jsonl .yaml .yml .toml .ini .cfg .conf .xml "
    ".css .scss .lua .r .jl .hs .ml .ex .exs .erl .clj .dart .vue .svelte .tf .cmake .mk "
    ".gradle .proto .graphql .csv .tsv .log .diff .patch"
)
CODE_SUFFIXES = frozenset(_CODE.split())  # shown in a monospace font, lines not wrapped

_SEPARATORS = re.compile(r"[\\/]")


class Passage(Protocol):
    """What a source is to the window (``desktop.store.knowledge.Source``)."""

    @property
    def position(self) -> int: ...
    @property
    def collection(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def start_line(self) -> int | None: ...
    @property
    def end_line(self) -> int | None: ...
    @property
    def page(self) -> int | None: ...
    @property
    def score(self) -> float | None: ...
    @property
    def text(self) -> str: ...
    @property
    def place(self) -> str: ...


def file_name(path: str) -> str:
    """The last part of a path, with either kind of slash ("C:\\docs\\a.md" → "a.md")."""
    parts = [part for part in _SEPARATORS.split(path) if part]
    return parts[-1] if parts else path


def open_file(url: QUrl) -> bool:
    """The system's app for the person's file (tests replace this)."""
    return QDesktopServices.openUrl(url)


def is_local_path(path: str) -> bool:
    """An absolute path on this computer (not an address: "https://…", "file:…")."""
    return bool(path) and "://" not in path and os.path.isabs(path)


def is_code(path: str) -> bool:
    return PurePath(file_name(path)).suffix.lower() in CODE_SUFFIXES


@dataclass(frozen=True, slots=True)
class Shown:
    """What the viewer shows: ``text``, the lines to highlight (0-based, inclusive; None:
    none), and why the file itself is not shown ("" when it is); ``gone``: no file to open."""

    text: str
    first: int | None
    last: int | None
    note: str
    gone: bool = False


def _squash(text: str) -> str:
    return " ".join(text.split())


def _as_found(source: Passage, why: str, gone: bool = False) -> Shown:
    return Shown(source.text, None, None, f"{why}: {AS_FOUND}", gone)


def read_passage(source: Passage) -> Shown:
    """The file around the passage, or the passage alone and why (blocking: a worker's)."""
    path = source.path
    suffix = PurePath(file_name(path)).suffix.lower()
    if not is_local_path(path):
        return _as_found(source, "The file is not on this computer", gone=True)
    if suffix in NOT_PLAIN or source.page is not None:
        what = NOT_PLAIN.get(suffix, "a paged document")
        return Shown(
            source.text,
            None,
            None,
            f"{file_name(path)} is {what}: this is the passage as it was read from it.",
        )
    if source.start_line is None:
        return _as_found(source, "The passage has no line numbers")
    try:
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            return _as_found(source, "The file is too large to show")
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return _as_found(source, "The file is no longer there", gone=True)
    except IsADirectoryError:
        return _as_found(source, "The path is a folder now", gone=True)
    except OSError as exc:
        return _as_found(source, f"The file could not be read ({exc.strerror or 'error'})")
    if b"\x00" in data[:8192]:
        return _as_found(source, "The file is not plain text any more")
    text = data.decode("utf-8-sig", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    first = source.start_line - 1
    last = (source.end_line or source.start_line) - 1
    if first < 0 or last < first or last >= len(lines):
        return _as_found(source, "The file has changed since it was searched")
    held, wanted = _squash("\n".join(lines[first : last + 1])), _squash(source.text)
    if held != wanted and not (first == last and wanted and wanted in held):
        return _as_found(source, "The file has changed since it was searched")
    return Shown(text, first, last, "")


class SourceViewer(QDialog):
    """One source's passage in its file (a window of its own, closed with Esc or Close).

    ``loading``: the read under way (None once shown); ``shown``: what it shows."""

    def __init__(self, source: Passage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("SourceViewer")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose, True)
        self.source = source
        name = file_name(source.path)
        place = f" · {source.place}" if source.place else ""
        self.setWindowTitle(f"Source [{source.position}] · {name}{place}")
        layout = vbox(self, (18, 14, 18, 14), 6)

        self.heading = plain(QLabel(f"[{source.position}]  {name}"))
        self.heading.setObjectName("SourceHeading")
        font = QFont(self.heading.font())
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.15 if font.pointSizeF() > 0 else 11)
        self.heading.setFont(font)
        layout.addWidget(self.heading)
        where = [source.place] if source.place else []
        where.append(f"from the collection “{source.collection}”")
        if source.score is not None:
            where.append(f"score {source.score:.3f}")
        words = " · ".join(where)
        self.detail = plain(QLabel(words[:1].upper() + words[1:]))
        self.detail.setObjectName("DialogNote")
        layout.addWidget(self.detail)
        self.path_label = ElidedLabel(source.path, Qt.TextElideMode.ElideMiddle)
        self.path_label.setObjectName("DialogNote")
        self.path_label.setToolTip(source.path)
        self.path_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.path_label)

        self.note = plain(QLabel())
        self.note.setObjectName("SourceNote")
        self.note.setWordWrap(True)
        italic = QFont(self.note.font())
        italic.setItalic(True)
        self.note.setFont(italic)
        layout.addWidget(self.note)

        self.text = QPlainTextEdit()
        self.text.setObjectName("SourceText")
        self.text.setReadOnly(True)
        self.text.setAccessibleName(f"The text of {name}")
        self.text.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextSelectableByMouse
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self._code = is_code(source.path)
        if self._code:
            mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
            self.text.setFont(mono)
            self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        layout.addWidget(self.text, 1)

        buttons = hbox(None, (0, 4, 0, 0), 8)
        self.open_button = QPushButton("Open file")
        self.open_button.setToolTip(f"Open {name} with its app on this computer")
        self.open_button.clicked.connect(self.open_file)
        self.open_button.setVisible(is_local_path(source.path))
        buttons.addWidget(self.open_button)
        buttons.addStretch(1)
        self.close_button = QPushButton("Close")
        self.close_button.setDefault(True)
        self.close_button.clicked.connect(self.close)
        buttons.addWidget(self.close_button)
        layout.addLayout(buttons)

        self.shown: Shown | None = None
        self.loading: asyncio.Task[None] | None = None
        fit_over(self, parent, PREFERRED_W, PREFERRED_H, 40)
        if loop_running():
            self.note.setText(f"Reading {name}…")
            self.loading = start(self._load(), name="source-viewer")
        else:  # no loop to read on (a test without one): the passage as it was found
            self.show_text(Shown(source.text, None, None, ""))

    async def _load(self) -> None:
        shown = await run_blocking(read_passage, self.source)
        if shiboken6.isValid(self):
            self.loading = None
            self.show_text(shown)

    def show_text(self, shown: Shown) -> None:
        """Show ``shown``: the file scrolled to the passage, its lines highlighted."""
        self.shown = shown
        self.note.setText(shown.note)
        self.note.setVisible(bool(shown.note))
        if shown.gone:
            self.open_button.setEnabled(False)
            self.open_button.setToolTip("The file is not there to open")
        if shown.first is None:  # the passage alone: its lines wrap, code too
            self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.text.setPlainText(shown.text)
        if shown.first is None or shown.last is None:
            return
        self._mark()
        doc = self.text.document()
        first = doc.findBlockByNumber(shown.first)
        # to the end, then up to a few lines above the passage: it starts near the top
        self.text.moveCursor(QTextCursor.MoveOperation.End)
        above = doc.findBlockByNumber(max(0, shown.first - CONTEXT_LINES))
        self.text.setTextCursor(QTextCursor(above))
        self.text.setTextCursor(QTextCursor(first))

    def _mark(self) -> None:
        """The passage's lines on a tint of the theme's accent, the view's whole width."""
        shown = self.shown
        if shown is None or shown.first is None or shown.last is None:
            return
        doc = self.text.document()
        colors = current_colors()
        color = QColor(colors.accent)
        color.setAlpha(70 if colors.dark else 40)
        marks = []
        for number in range(shown.first, shown.last + 1):
            mark = QTextEdit.ExtraSelection()
            mark.format.setBackground(color)
            mark.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
            mark.cursor = QTextCursor(doc.findBlockByNumber(number))
            marks.append(mark)
        self.text.setExtraSelections(marks)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.StyleChange):
            self._mark()  # the other theme's tint

    @property
    def highlighted(self) -> str:
        """The text of the highlighted lines ("" when none)."""
        return "\n".join(mark.cursor.block().text() for mark in self.text.extraSelections())

    def open_file(self) -> None:
        """The person's own file, with the system's app (a local absolute path only)."""
        path = self.source.path
        if not is_local_path(path):
            return
        if not open_file(QUrl.fromLocalFile(path)):
            self.note.setText("No app on this computer opened the file.")
            self.note.show()

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.loading is not None:
            self.loading.cancel()
            self.loading = None
        super().closeEvent(event)
