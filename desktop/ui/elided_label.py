"""A one-line label that elides what does not fit ("Archivist · qwen2.5-7b… · TTFT 85 ms…")
instead of wrapping or widening its parent; the full text stays its ``text()``, and, unless
the caller gives one, its tooltip while elided."""

from __future__ import annotations

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
        self._mode = mode
        self._auto_tip = False
        self.setWordWrap(False)
        self.setText(text)

    def text(self) -> str:  # type: ignore[override]
        return self._full

    def shown_text(self) -> str:
        return super().text()

    def is_elided(self) -> bool:
        return self.shown_text() != self._full

    def setText(self, text: str) -> None:  # type: ignore[override]
        self._full = " ".join(text.split("\n")) if "\n" in text else text
        self.setAccessibleName(self._full)  # a screen reader reads it all
        self.updateGeometry()
        self._refit()

    def setToolTip(self, tip: str) -> None:  # type: ignore[override]
        self._auto_tip = False
        super().setToolTip(tip)

    def _refit(self) -> None:
        width = self.contentsRect().width()
        shown = self.fontMetrics().elidedText(self._full, self._mode, max(0, width))
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
