"""Counting the Python calls an action makes: how a test tells that work stays in C++ (a Qt
view's layout, an event's delivery) instead of calling back into Python once per row or event."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any


def python_calls(action: Callable[[], object], counted: Callable[[CodeType], bool]) -> int:
    """How many Python functions ``counted`` accepts ran during ``action()``."""
    calls = 0

    def count(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" and counted(frame.f_code):
            calls += 1

    sys.setprofile(count)
    try:
        action()
    finally:
        sys.setprofile(None)
    return calls
