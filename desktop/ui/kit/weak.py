"""Callbacks that do not keep their owner alive.

A part a widget builds (its action buttons, its text view) and hands one of the widget's own
methods closes a reference cycle: widget → part → bound method → widget. Python frees such a
cycle only in a full pass of the cycle collector, on the GUI thread (``kit.loop``): paging
through a 5,000-message conversation left ~45,000 such objects every 10 s, and the pass that
freed them held the window for 75-85 ms. Handed as a weak method, the part is freed with its
owner by reference counting, a few objects at a time, as the owner goes.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def weak_method(method: Callable[P, R]) -> Callable[P, R | None]:
    """``method`` (a bound method) as a callable that holds its object weakly: once the object
    is gone, calling it does nothing and returns None."""
    ref = weakref.WeakMethod(method)

    def call(*args: P.args, **kwargs: P.kwargs) -> R | None:
        bound = ref()
        return None if bound is None else bound(*args, **kwargs)

    return call
