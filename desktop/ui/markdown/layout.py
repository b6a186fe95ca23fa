"""Layout on a width change, for ``MarkdownView`` (a mixin).

A text up to ``EXACT_CHARS`` long is laid out whole. A longer one lays out exactly the items
a person can see (those in the scroll area's viewport, and the last screenful, where a view
that follows the reply will be) and estimates the others' heights; an idle timer
(``self._lazy``) then lays out the rest ``SLICE_S`` at a time, moving the scroll bar by what
changed above the viewport so what is on screen stays where it was.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, QEvent, QPoint
from PySide6.QtWidgets import QAbstractScrollArea, QWidget

from desktop.ui.markdown.render import GAP

if TYPE_CHECKING:
    from PySide6.QtCore import QTimer

    from desktop.ui.markdown.render import BlockItem, Style

# What mypy checks the mixin against: the QWidget it is mixed into (at run time, no base).
if TYPE_CHECKING:
    _Widget = QWidget
else:
    _Widget = object

EXACT_CHARS = 30_000  # texts up to this long are laid out whole on a width change
SLICE_S = 0.006  # idle layout works in slices this long


class LazyLayout(_Widget):
    """Mixed into ``MarkdownView`` (before QWidget), which holds the state it reads."""

    _items: list[BlockItem]
    _tops: list[float]
    _width: int
    _lazy: QTimer

    if TYPE_CHECKING:

        @property
        def style_(self) -> Style: ...
        @property
        def source(self) -> str: ...
        def _place_copy_button(self, item: BlockItem) -> None: ...
        def _place_tail(self) -> None: ...
        def _fit(self, grow_only: bool = False) -> bool: ...

    # layout -----------------------------------------------------------------------------------
    def _relayout(self) -> None:
        """Lay out again at the current width: everything for a short text; else what can be
        seen now, the rest estimated and laid out when the loop is idle."""
        if self._width <= 0:
            return
        style = self.style_
        exact_all = len(self.source) <= EXACT_CHARS
        wanted = self._wanted_rect() if not exact_all else None
        top = 0.0
        self._tops = []
        for item in self._items:
            item.top = top
            if item.exact and item.width == self._width:
                pass
            elif wanted is None or _touches(top, item.height or style.line, wanted):
                item.layout(self._width, style)
            else:
                item.estimate(self._width, style)
            self._tops.append(top)
            self._place_copy_button(item)
            top += item.height + GAP
        self._place_tail()
        self._fit()
        if any(not item.exact for item in self._items):
            self._lazy.start()

    def _wanted_rect(self) -> tuple[float, float]:
        """The y range (view coordinates) worth laying out first: the part of the view inside
        its scroll area's viewport, widened to include the last screenful."""
        area = self._scroll_area()
        height = float(area.viewport().height()) if area is not None else 800.0
        low, high = max(0.0, self.height() - height * 1.5), float(self.height())
        if area is not None:
            seen = self.mapFrom(area.viewport(), QPoint(0, 0)).y()
            low, high = min(low, max(0.0, seen - height / 2)), max(high, seen + height * 1.5)
            low = max(0.0, min(low, seen))
        return low, high

    def _scroll_area(self) -> QAbstractScrollArea | None:
        parent = self.parentWidget()
        while parent is not None and not isinstance(parent, QAbstractScrollArea):
            parent = parent.parentWidget()
        return parent

    def _layout_slice(self) -> None:
        """Lay out estimated items for a few ms; keep what is on screen where it was."""
        deadline = time.perf_counter() + SLICE_S
        style = self.style_
        area = self._scroll_area()
        seen_top = self.mapFrom(area.viewport(), QPoint(0, 0)).y() if area is not None else 0
        shift = 0.0
        pending = False
        for item in self._items:
            if item.exact:
                continue
            if time.perf_counter() > deadline:
                pending = True
                break
            before = item.height
            item.layout(self._width, style)
            if item.top + before <= seen_top:
                shift += item.height - before
        self._restack()
        bar = area.verticalScrollBar() if area is not None else None
        following = bar is not None and bar.value() >= bar.maximum() - 4
        grew = self._fit()
        if area is not None and bar is not None and shift and not following:
            _relayout_up_to(self, area)
            bar.setValue(bar.value() + round(shift))
        if grew or shift:
            self.update()
        if not pending:
            self._lazy.stop()

    def _restack(self) -> None:
        """Tops (and code blocks' Copy buttons, the tail) from the items' heights."""
        top = 0.0
        for index, item in enumerate(self._items):
            item.top = top
            self._tops[index] = top
            self._place_copy_button(item)
            top += item.height + GAP
        self._place_tail()

    @property
    def laying_out(self) -> bool:
        """True while estimated heights are still being replaced by exact ones."""
        return self._lazy.isActive()


def _relayout_up_to(widget: QWidget, area: QAbstractScrollArea) -> None:
    """Lay out every parent between ``widget`` and the scroll area now, bottom-up, and the
    area's range, so a scroll-bar value set next is not clamped to the old range."""
    parent = widget.parentWidget()
    content = area.viewport()
    while parent is not None and parent is not content and parent is not area:
        layout = parent.layout()
        if layout is not None:
            layout.activate()
        parent = parent.parentWidget()
    settle = getattr(area, "relayout_now", None)
    if callable(settle):
        settle()
    else:
        QCoreApplication.sendEvent(area, QEvent(QEvent.Type.LayoutRequest))


def _touches(top: float, height: float, wanted: tuple[float, float]) -> bool:
    return top + height >= wanted[0] and top <= wanted[1]
