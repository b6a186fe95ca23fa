"""What a stdio MCP server is started with: a minimal environment and its command resolved.

``child_environment``: PATH (the app's, then the usual tool folders that exist), HOME, LANG,
TMPDIR, then the server's configured env and its secret env (from the keyring); never the app's
own variables (SIMI_HOME, HF_TOKEN, API keys…). ``resolve_command``: ``shutil.which`` against
that PATH before anything is spawned, so "not found" names the PATH searched (a GUI app often
has a shorter PATH than a terminal: `spawn npx ENOENT`) and where the command is, when one of
the usual folders has it.
"""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Mapping

from desktop.store.tools import McpServer
from desktop.tools.errors import ToolServerError

CHILD_BASE_VARS = ("PATH", "HOME", "LANG", "TMPDIR")
# Where people's tools usually are, searched after the app's PATH (a GUI app launched from the
# desktop does not get the shell's PATH: `spawn npx ENOENT`).
_LIKELY_DIRS = (
    "~/.local/bin",
    "~/.cargo/bin",
    "~/.volta/bin",
    "~/.bun/bin",
    "~/.deno/bin",
    "~/.nvm/versions/node/*/bin",
    "/opt/homebrew/bin",
    "/usr/local/bin",
    "/snap/bin",
)


def _likely_dirs() -> list[str]:
    found: list[str] = []
    for pattern in _LIKELY_DIRS:
        found.extend(sorted(glob.glob(os.path.expanduser(pattern))))
    return [d for d in found if os.path.isdir(d)]


def child_path(parent_path: str) -> str:
    """The app's PATH, then the usual tool folders that exist and are not on it."""
    parts = [p for p in parent_path.split(os.pathsep) if p]
    parts += [d for d in _likely_dirs() if d not in parts]
    return os.pathsep.join(parts)


def child_environment(
    server: McpServer, secret_values: Mapping[str, str], parent: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The whole environment a stdio server is started with (see the module's docstring)."""
    parent = os.environ if parent is None else parent
    env = {k: parent[k] for k in CHILD_BASE_VARS if parent.get(k)}
    env["PATH"] = child_path(parent.get("PATH", ""))
    env.setdefault("LANG", "C.UTF-8")
    env.update(server.env)
    env.update(secret_values)
    return env


def resolve_command(server: McpServer, path: str) -> str:
    """The absolute path of the server's command on ``path``; else ``ToolServerError`` saying
    which PATH was searched, and where the command is when one of the usual folders has it."""
    command = server.command
    candidate = command
    if server.cwd and not os.path.isabs(command) and os.sep in command:
        candidate = os.path.join(server.cwd, command)
    found = shutil.which(candidate, path=path)
    if found:
        return os.path.abspath(found)
    if os.sep in command:
        raise ToolServerError(
            f"MCP server “{server.name}”: {candidate} does not exist or is not executable."
        )
    elsewhere = shutil.which(command, path=os.pathsep.join(_likely_dirs()))
    hint = (
        f"It is at {elsewhere}: give that absolute path as the command."
        if elsewhere
        else f"Give its absolute path as the command (in a terminal, `which {command}` prints it)."
    )
    raise ToolServerError(
        f"MCP server “{server.name}”: the command “{command}” was not found. Searched PATH: "
        f"{path or '(empty)'}. {hint}"
    )
