"""A one-line label that elides what does not fit ("Archivist · qwen2.5-7b… · TTFT 85 ms…")
instead of wrapping or widening its parent; the full text stays its ``text()``, and, unless
the caller gives one, its tooltip while elided. ``set_texts`` gives shorter wordings to try
first (the stats footer drops the names before it cuts a figure). Always plain text: it shows
names, titles and errors, never HTML (``widgets.plain``)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import QLabel, QWidget


class ElidedLabel(QLabel):
    """``text()`` is the whole text, ``shown_text()`` what fits in the label's width now."""

    def __init__(
        self,
        text: str = "",
        mode: Qt.TextElideMode = Qt.TextElideMode.ElideRight,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._full = ""
        self._shorter: list[str] = []
        self._mode = mode
        self._auto_tip = False
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setWordWrap(False)
        self.setText(text)

    def text(self) -> str:
        return self._full

    def shown_text(self) -> str:
        return super().text()

    def is_elided(self) -> bool:
        return self.shown_text() != self._full

    def setText(self, text: str) -> None:
        self.set_texts([text])

    def set_texts(self, texts: Sequence[str]) -> None:
        """The whole text first, then shorter wordings: the first that fits is shown, else
        the last one, elided."""
        lines = [" ".join(t.split("\n")) if "\n" in t else t for t in texts] or [""]
        self._full, self._shorter = lines[0], lines[1:]
        self.setAccessibleName(self._full)  # a screen reader reads it all
        self.updateGeometry()
        self._refit()

    def setToolTip(self, tip: str) -> None:
        self._auto_tip = False
        super().setToolTip(tip)

    def _refit(self) -> None:
        width = max(0, self.contentsRect().width())
        metrics = self.fontMetrics()
        fits = (t for t in (self._full, *self._shorter) if metrics.horizontalAdvance(t) <= width)
        last = self._shorter[-1] if self._shorter else self._full
        shown = next(fits, None) or metrics.elidedText(last, self._mode, width)
        if shown != super().text():
            super().setText(shown)
        if self._auto_tip or not self.toolTip():
            self._auto_tip = shown != self._full
            super().setToolTip(self._full if self._auto_tip else "")

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        margins = self.contentsMargins()
        width = self.fontMetrics().horizontalAdvance(self._full) + margins.left() + margins.right()
        return QSize(width + 2, hint.height())

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return QSize(self.fontMetrics().horizontalAdvance("Mm…"), hint.height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._refit()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._refit()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self.updateGeometry()
            self._refit()
