"""The terminal side of agents with tools: ``simi ask``'s approval prompt and its one-line
outcomes, and ``simi agents edit --tools`` (parse, check against the configured servers, say).

- stdin is a terminal: ``TerminalApprover`` asks on stderr (stdout stays the reply) and reads
  the answer from stdin through the event loop (``add_reader``: never a thread that a Ctrl+C
  would leave blocked on ``readline``). Empty or unknown answers ask again; end of input
  denies.
- stdin is not a terminal: no approver (``approve=None``: the loop refuses the call and tells
  the model nobody could approve it), unless ``--allow-tools`` (``allow_all``: "auto").
- ``StepReporter`` turns the loop's ``StepChanged`` events into one stderr line per call.

Text that came from a model or a tool server is shown with its control characters escaped, so
a tool's name, arguments or error cannot move the cursor or retitle the terminal.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from desktop.chat.tool_loop import NO_APPROVER_TEXT, ApprovalRequest, Decision, StepChanged
from desktop.errors import ValidationError
from desktop.store.tool_steps import ToolStep
from desktop.store.tools import ALL_TOOLS

QUESTION = "Allow? [y] once  [a] always for this agent  [n] no: "
# each decision, and the words (any case) a person may type for it
_WORDS: tuple[tuple[Decision, tuple[str, ...]], ...] = (
    ("once", ("y", "yes", "o", "once")),
    ("always", ("a", "always")),
    ("deny", ("n", "no")),
)
ANSWERS: dict[str, Decision] = {word: decision for decision, words in _WORDS for word in words}
NO_TERMINAL = "stdin is not a terminal; pass --allow-tools to allow tool calls"


def safe(text: str) -> str:
    """``text`` with C0/C1 control characters (newline and tab kept) written as ``\\xNN``."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in "\n\t" or not (code < 0x20 or 0x7F <= code < 0xA0):
            out.append(ch)
        else:
            out.append(f"\\x{code:02x}")
    return "".join(out)


def one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(safe(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def step_label(step: ToolStep) -> str:
    """``add (tools)``: the tool and its server (a tool no server offers: its name alone)."""
    name = safe(step.tool or step.model_name)
    return f"{name} ({safe(step.server)})" if step.server else name


def question(request: ApprovalRequest) -> str:
    step = request.step
    where = f" (server {safe(step.server)})" if step.server else ""
    arguments = "\n".join("  " + line for line in safe(request.pretty_arguments).splitlines())
    return f"{safe(request.agent_name)} wants to run {safe(step.tool)}{where}:\n{arguments}\n"


def _size(chars: int) -> str:
    return f"{chars:,} char" + ("" if chars == 1 else "s")


def _duration(ms: float | None) -> str:
    if ms is None:
        return ""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def outcome(step: ToolStep) -> str | None:
    """The line said when a step ends (None while it is not final)."""
    name = safe(step.tool or step.model_name)
    status = step.status
    if status == "done" and not step.is_error:
        parts = [_size(step.size)]
        if step.truncated:
            parts.append(f"cut to {_size(len(step.result))}")
        parts.append(_duration(step.duration_ms))
        return f"{name} → done, " + ", ".join(p for p in parts if p)
    if status == "done":
        return f"{name} → tool error: {one_line(step.result) or 'no message'}"
    if status == "refused" and step.result == NO_APPROVER_TEXT:
        return f"did not run {step_label(step)}: {NO_TERMINAL}"
    words = {
        "denied": "denied",
        "timeout": "timed out",
        "cancelled": "stopped",
    }
    if status in words:
        return f"{name} → {words[status]}"
    if status == "error":
        return f"{name} → failed: {one_line(step.result) or 'the server gave no reason'}"
    if status == "invalid":
        return f"{name} → not run: {one_line(step.result)}"
    if status == "refused":
        return f"{name} → {one_line(step.result)}"
    return None


class StepReporter:
    """Says on ``err`` when a call runs unasked and how each call ended."""

    def __init__(self, err: TextIO | None = None, before: Callable[[], None] = lambda: None):
        self._err = err
        self._before = before  # clears a "waiting…" line standing on the terminal
        self._said: set[int] = set()

    def _say(self, text: str) -> None:
        self._before()
        err = self._err or sys.stderr
        print(f"simi: {text}", file=err, flush=True)

    def __call__(self, event: object) -> None:
        if not isinstance(event, StepChanged):
            return
        step = event.step
        if step.status == "running" and step.approval in ("auto", "granted"):
            why = "" if step.approval == "auto" else ", always allowed for this agent"
            self._say(f"running {step_label(step)}{why}")
            return
        line = outcome(step)
        key = step.id if step.id is not None else id(step)
        if line is not None and key not in self._said:
            self._said.add(key)
            self._say(line)


async def _allow_all(_request: ApprovalRequest) -> Decision:
    return "auto"


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


class TerminalApprover:
    """Asks about each call on ``err`` and reads the answer from the terminal ``fd``."""

    def __init__(
        self, fd: int, err: TextIO | None = None, before: Callable[[], None] = lambda: None
    ):
        self._fd = fd
        self._err = err
        self._before = before
        self._buffer = b""
        self._eof = False

    async def _line(self) -> str | None:
        """One line typed on the terminal (None at end of input), read when the loop says
        the descriptor is readable; cancelling it (Ctrl+C) leaves nothing blocked."""
        while b"\n" not in self._buffer and not self._eof:
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[None] = loop.create_future()
            loop.add_reader(self._fd, _wake, ready)
            try:
                await ready
            finally:
                loop.remove_reader(self._fd)
            chunk = os.read(self._fd, 4096)
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True
        if b"\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition(b"\n")
            return line.decode("utf-8", "replace")
        if self._buffer:
            line, self._buffer = self._buffer, b""
            return line.decode("utf-8", "replace")
        return None

    async def __call__(self, request: ApprovalRequest) -> Decision:
        self._before()
        err = self._err or sys.stderr
        err.write(question(request))
        while True:
            err.write(QUESTION)
            err.flush()
            try:
                line = await self._line()
            except asyncio.CancelledError:
                err.write("\n")
                err.flush()
                raise
            if line is None:
                err.write("\n(no answer: denied)\n")
                err.flush()
                return "deny"
            answer = ANSWERS.get(line.strip().casefold())
            if answer is not None:
                return answer


def approver_for(
    *, allow_all: bool, stdin: TextIO | None = None, before: Callable[[], None] = lambda: None
) -> Any:
    """What ``ChatService.run`` gets as ``approve``: "auto" for every call (``--allow-tools``),
    a terminal prompt when stdin is a terminal, else None (calls are refused)."""
    if allow_all:
        return _allow_all
    stdin = stdin or sys.stdin
    try:
        interactive = stdin.isatty()
    except (ValueError, OSError):
        interactive = False
    return TerminalApprover(stdin.fileno(), before=before) if interactive else None


# simi agents ... --tools -------------------------------------------------------------------
def tools_text(pairs: list[tuple[str, str]]) -> str:
    """``files (all), web:search``; "none" for an agent without tools."""
    if not pairs:
        return "none"
    return ", ".join(f"{s} (all)" if t == ALL_TOOLS else f"{s}:{t}" for s, t in pairs)


def tools_list(pairs: list[tuple[str, str]]) -> list[str]:
    """The JSON form, in ``--tools`` syntax: ``["files", "web:search"]``."""
    return [s if t == ALL_TOOLS else f"{s}:{t}" for s, t in pairs]


def checked_tools(services: Any, text: str) -> list[tuple[str, str]]:
    """``--tools`` parsed and checked: every server named must be configured (its stored
    spelling is used). ``ValidationError`` (field "tools") naming the configured ones if not."""
    from desktop.tools.config import parse_tool_list

    pairs = parse_tool_list(text)
    config = services.tools.manager.config
    out: list[tuple[str, str]] = []
    missing: list[str] = []
    for server, tool in pairs:
        found = config.get(server)
        if found is None:
            missing.append(server)
        else:
            out.append((found.name, tool))
    if missing:
        names = ", ".join(s.name for s in config.list()) or "none yet (add one with simi mcp add)"
        unknown = ", ".join(f"“{m}”" for m in missing)
        raise ValidationError(
            {"tools": f"There is no MCP server called {unknown}. Servers: {names}."}
        )
    return out
