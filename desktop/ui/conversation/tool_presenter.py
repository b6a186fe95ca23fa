"""What a conversation's presenter does for agentic turns: asks the person about tool calls.

``Approvals`` is the ``approve=`` a presenter hands ``ChatService.run``: each request gets an
asyncio future keyed by its step id, ``on_ask(request)`` tells the view (the presenter emits
``approval_requested``), and the turn waits until ``answer(step_id, decision)`` resolves it.
Stop cancels the turn's task, which cancels the wait (the loop stores the step cancelled).
Each presenter has its own, so two conversations can wait at once, each for its own answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from desktop.chat.tool_loop import ApprovalRequest, Decision
from desktop.store.tool_steps import ToolStep

DECISIONS = ("once", "always", "deny")


class Approvals:
    def __init__(self, on_ask: Callable[[ApprovalRequest], None]) -> None:
        self._on_ask = on_ask
        self._pending: dict[int, asyncio.Future[Decision]] = {}

    @property
    def waiting(self) -> list[int]:
        """The step ids waiting for an answer now."""
        return [k for k, f in self._pending.items() if not f.done()]

    async def ask(self, request: ApprovalRequest) -> Decision:
        step_id = request.step.id
        assert step_id is not None, "a stored step"
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._pending[step_id] = future
        try:
            self._on_ask(request)
            return await future
        finally:
            if self._pending.get(step_id) is future:
                del self._pending[step_id]

    def answer(self, step_id: int, decision: str) -> bool:
        """Resolve the step's wait; False when it waits no longer (or the word is unknown)."""
        future = self._pending.get(step_id)
        if future is None or future.done() or decision not in DECISIONS:
            return False
        future.set_result(decision)  # type: ignore[arg-type]
        return True


def step_status(agent_name: str, step: ToolStep) -> str | None:
    """The conversation's status line while a tool call is asked, waits or runs."""
    if step.status == "waiting":
        return f"{agent_name} · waiting for your approval to run {step.tool}"
    if step.status == "running":
        return f"{agent_name} · running {step.tool}…"
    return None
