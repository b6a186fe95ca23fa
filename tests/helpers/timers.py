"""A scheduler whose clock the test moves (stands in for the loop's ``call_later``)."""

from __future__ import annotations


class FakeTimers:
    """The idle timer's scheduler with a clock the test moves: nothing waits in real time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pending: list[FakeTimers.Handle] = []

    class Handle:
        def __init__(self, when: float, callback) -> None:
            self.when, self.callback, self.cancelled = when, callback, False

        def cancel(self) -> None:
            self.cancelled = True

    def call_later(self, delay: float, callback) -> FakeTimers.Handle:
        handle = FakeTimers.Handle(self.now + delay, callback)
        self.pending.append(handle)
        return handle

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = [h for h in self.pending if not h.cancelled and h.when <= self.now]
        self.pending = [h for h in self.pending if h not in due and not h.cancelled]
        for handle in due:
            handle.callback()
