"""What every ``simi`` sub-command shares: the exit codes, the error line on stderr, finding an
agent by name. The command modules (``cli_ask``, ``cli_bench``, ...) and ``cli`` (the parser
and the command table) import it; it imports none of them."""

from __future__ import annotations

import sys
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
