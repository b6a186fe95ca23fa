"""What the two painted texts (the streaming tail, ``stream_text``, and a finished reply's
blocks, ``view`` with ``select``) share about keys and words: Ctrl+C and Ctrl+A, and the word
a double-click selects."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QKeyEvent, QKeySequence


def copy_keys(
    event: QKeyEvent, copy: Callable[[], object], select_all: Callable[[], object]
) -> bool:
    """Copy on the platform's Copy key, select all on its Select All key; False (the caller
    passes the event on) for any other key."""
    if event.matches(QKeySequence.StandardKey.Copy):
        copy()
    elif event.matches(QKeySequence.StandardKey.SelectAll):
        select_all()
    else:
        return False
    return True


def word_bounds(text: str, at: int) -> tuple[int, int]:
    """The word around offset ``at`` (letters, digits and "_"), as (start, end); an empty
    range at ``at`` between words."""
    low = high = min(at, len(text))
    while low > 0 and (text[low - 1].isalnum() or text[low - 1] == "_"):
        low -= 1
    while high < len(text) and (text[high].isalnum() or text[high] == "_"):
        high += 1
    return low, high
