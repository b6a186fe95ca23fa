"""What every ``simi`` sub-command shares: the exit codes, the error line on stderr, finding an
agent by name. The command modules (``cli_ask``, ``cli_bench``, ...) and ``cli`` (the parser
and the command table) import it; it imports none of them."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from desktop.errors import UserError

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def err(text: str) -> None:
    """One line on stderr, as every command reports a problem."""
    print(f"simi: {text}", file=sys.stderr)


def agent_or_fail(services: Any, name: str) -> Any:
    """The agent called ``name``, or a ``UserError`` that lists the ones there are."""
    agent = services.agents.by_name(name)
    if agent is None:
        names = ", ".join(a.name for a in services.agents.list()) or "none yet"
        raise UserError(f"There is no agent called “{name}”. Agents: {names}.")
    return agent


# A table column: its header, the cell of a row, right-aligned?
Column = tuple[str, Callable[[Any], str], bool]


def print_columns(columns: Sequence[Column], rows: Sequence[Any], out: Any) -> None:
    """``rows`` as aligned columns under their headers (``simi stats``, ``simi bench``)."""
    header = [h for h, _, _ in columns]
    table = [[value(r) for _, value, _ in columns] for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        parts = [
            c.rjust(w) if right else c.ljust(w)
            for c, w, (_, _, right) in zip(cells, widths, columns, strict=True)
        ]
        return "  ".join(parts).rstrip()

    print(line(header), file=out)
    for row in table:
        print(line(row), file=out)


def cancel_on_signals(cancel: Callable[[], Any]) -> None:
    """Ctrl-C and SIGTERM call ``cancel`` on the running loop (where it takes signal
    handlers: not on Windows' loop, nor off the main thread)."""
    import asyncio
    import signal

    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, cancel)
        loop.add_signal_handler(signal.SIGTERM, cancel)
    except (NotImplementedError, RuntimeError):
        pass
