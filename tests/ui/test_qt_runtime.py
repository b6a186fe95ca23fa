"""The installed Qt binding does not corrupt the interpreter.

PySide6 6.12.0 returns True from ``Signal.emit()`` without a reference, so a long session
(thousands of emits: every streamed flush, every status update) aborts Python with
"bool_dealloc". pyproject.toml excludes it; this test fails if such a build comes back.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal


class _Emitter(QObject):
    changed = Signal(bool)
    text = Signal(str)


def test_signal_emit_keeps_reference_counts_intact(qapp) -> None:
    emitter = _Emitter()
    emitter.changed.connect(lambda _value: None)
    emitter.text.connect(lambda _value: None)
    before = sys.getrefcount(True), sys.getrefcount(False)
    for _ in range(200):
        emitter.changed.emit(True)
        emitter.text.emit("x")
    after = sys.getrefcount(True), sys.getrefcount(False)
    assert after[0] >= before[0] - 5 and after[1] >= before[1] - 5, (before, after)
