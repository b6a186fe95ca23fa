"""``simi mcp``: MCP servers from a terminal (the database and the keyring, no window).

simi mcp add NAME [--env K=V ...] [--secret-env K ...] [--cwd DIR] [--timeout S] -- COMMAND ARGS...
simi mcp add NAME --url URL [--bearer] [--timeout S]
simi mcp list [--json] [--check]
simi mcp tools NAME [--json]
simi mcp remove NAME

Secret values (``--secret-env``, ``--bearer``) are asked for without echo on a terminal, or read
one per line from standard input; they go to the keyring only.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from typing import Any

from desktop.errors import UserError, ValidationError

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


def add_parser(sub: Any) -> None:
    mcp = sub.add_parser("mcp", help="MCP servers: tools agents may use")
    msub = mcp.add_subparsers(dest="mcp_command", required=True)
    add = msub.add_parser(
        "add",
        help="add a server: -- COMMAND ARGS... (stdio) or --url URL (streamable HTTP)",
        description="Add an MCP server. A stdio server: simi mcp add files -- npx -y "
        "@modelcontextprotocol/server-filesystem ~/Documents. An HTTP server: simi mcp add web "
        "--url https://example.com/mcp --bearer.",
    )
    add.add_argument("name", help="a short name, e.g. files")
    _add_options(add)
    # argparse cannot take options between NAME and "--" and a positional list after it, so
    # everything after NAME is split at "--" and its options parsed again (_split_add).
    add.add_argument("rest", nargs=argparse.REMAINDER, help="[OPTIONS] -- COMMAND ARGS...")
    lst = msub.add_parser("list", help="list the servers")
    lst.add_argument("--json", action="store_true")
    lst.add_argument("--check", action="store_true", help="start each one and say its state")
    tools = msub.add_parser("tools", help="start a server and list its tools")
    tools.add_argument("name")
    tools.add_argument("--json", action="store_true")
    remove = msub.add_parser("remove", help="remove a server and its keyring entries")
    remove.add_argument("name")


def _add_options(add: argparse.ArgumentParser) -> None:
    add.add_argument("--url", help="a streamable-HTTP server's URL")
    add.add_argument(
        "--bearer", action="store_true", help="HTTP: ask for a bearer key (kept in the keyring)"
    )
    add.add_argument(
        "--env", action="append", default=[], metavar="K=V", help="a plain environment value"
    )
    add.add_argument(
        "--secret-env",
        action="append",
        default=[],
        metavar="K",
        help="an environment variable whose value is asked for and kept in the keyring",
    )
    add.add_argument("--cwd", help="the working folder of the server process")
    add.add_argument("--timeout", type=float, default=60.0, metavar="S", help="per call (60)")


def _split_add(args: argparse.Namespace) -> None:
    """``rest`` = options, then ``--`` and the command: the options into ``args``, the command
    line into ``args.command``."""
    rest = list(args.rest)
    if rest and not rest[0].startswith("-"):  # argparse dropped a "--" right after NAME
        options, args.command = [], rest
    elif "--" in rest:
        at = rest.index("--")
        options, args.command = rest[:at], rest[at + 1 :]
    else:
        options, args.command = rest, []
    if options:
        parser = argparse.ArgumentParser(prog=f"simi mcp add {args.name}")
        _add_options(parser)
        parser.parse_args(options, namespace=args)


def _secret(prompt: str) -> str:
    if sys.stdin.isatty():
        value = getpass.getpass(f"{prompt} (hidden): ")
    else:
        value = sys.stdin.readline().rstrip("\r\n")
    if not value:
        raise UserError(f"No value was given for {prompt}.")
    return value


def _env_pairs(items: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValidationError({"env": f"“{item}” is not K=V (e.g. --env LOG_LEVEL=debug)."})
        env[key] = value
    return env


def _open() -> Any:
    from desktop.settings.paths import AppPaths
    from desktop.settings.secrets import SecretStore
    from desktop.store.db import open_database
    from desktop.store.tools import ToolStore
    from desktop.tools.config import McpConfig

    paths = AppPaths.from_env()
    paths.ensure()
    db = open_database(paths.db_path)
    return db, McpConfig(ToolStore(db), SecretStore())


def run(args: argparse.Namespace) -> int:
    db, config = _open()
    try:
        handler = {"add": _add, "list": _list, "tools": _tools, "remove": _remove}
        return handler[args.mcp_command](config, args)
    finally:
        db.close()


def _add(config: Any, args: argparse.Namespace) -> int:
    from desktop.store.tools import McpServer

    _split_add(args)
    if args.url and args.command:
        raise UserError("Give either --url URL or -- COMMAND ARGS..., not both.")
    if not args.url and not args.command:
        raise UserError(
            "Give the server's command after --, e.g. simi mcp add files -- npx -y "
            "@modelcontextprotocol/server-filesystem ~/Documents, or --url URL."
        )
    if args.url:
        if args.env or args.secret_env or args.cwd:
            raise UserError("--env, --secret-env and --cwd are for a command, not a URL.")
        server = McpServer(name=args.name, transport="http", url=args.url, timeout_s=args.timeout)
        bearer = _secret(f"Bearer key for {args.name}") if args.bearer else None
        saved = config.add(server, bearer=bearer)
        print(f"Added MCP server “{saved.name}” (HTTP, {saved.url}).")
        return EXIT_OK
    if args.bearer:
        raise UserError("--bearer is for an HTTP server (--url).")
    server = McpServer(
        name=args.name,
        command=args.command[0],
        args=tuple(args.command[1:]),
        cwd=args.cwd,
        env=_env_pairs(args.env),
        secret_env=tuple(args.secret_env),
        timeout_s=args.timeout,
    )
    from desktop.tools.config import validate_server

    validate_server(server)  # before asking for any secret
    if config.get(args.name) is not None:
        raise ValidationError({"name": f"There is already an MCP server called “{args.name}”."})
    secrets = {var: _secret(f"Value of {var}") for var in server.secret_env}
    saved = config.add(server, secret_values=secrets)
    print(f"Added MCP server “{saved.name}” ({saved.where()}).")
    print(f"It starts on first use; see its tools with: simi mcp tools {saved.name}")
    return EXIT_OK


def _state_dict(state: Any) -> dict[str, Any]:
    return {
        "status": state.status,
        "tools": len(state.tools),
        "why": state.why,
        "stderr_tail": list(state.stderr_tail),
    }


async def _check_all(config: Any, names: list[str]) -> dict[str, Any]:
    from desktop.tools.manager import McpManager

    manager = McpManager(config)
    try:
        states = await asyncio.gather(*(manager.check(n) for n in names))
    finally:
        await manager.aclose()
    return dict(zip(names, states, strict=True))


def _list(config: Any, args: argparse.Namespace) -> int:
    servers = config.list()
    names = [s.name for s in servers if s.enabled]
    states = asyncio.run(_check_all(config, names)) if args.check and names else {}
    if args.json:
        rows = []
        for s in servers:
            row = s.to_public_dict()
            if s.name in states:
                row["state"] = _state_dict(states[s.name])
            rows.append(row)
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return EXIT_OK
    if not servers:
        print("No MCP servers yet. Add one with: simi mcp add NAME -- COMMAND ARGS...")
    for s in servers:
        line = f"{s.name}\t{s.transport}\t{s.where()}"
        if not s.enabled:
            line += "\toff"
        elif s.name in states:
            line += f"\t{states[s.name].describe()}"
        print(line)
        if s.name in states and states[s.name].stderr_tail:
            for tail_line in states[s.name].stderr_tail:
                print(f"    {tail_line}")
    return EXIT_OK


async def _server_tools(config: Any, name: str) -> Any:
    from desktop.tools.manager import McpManager

    manager = McpManager(config)
    try:
        return await manager.tools(name)
    finally:
        await manager.aclose()


def _tools(config: Any, args: argparse.Namespace) -> int:
    server = config.require(args.name)
    tools = asyncio.run(_server_tools(config, server.name))
    if args.json:
        rows = [
            {
                "name": t.name,
                "description": t.description,
                "required": list(t.required),
                "input_schema": t.input_schema,
            }
            for t in tools
        ]
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return EXIT_OK
    if not tools:
        print(f"“{server.name}” offers no tools.")
    for t in tools:
        required = ", ".join(t.required)
        first_line = (t.description or "").strip().splitlines()[:1]
        print(f"{t.name}({required})\t{first_line[0] if first_line else ''}")
    return EXIT_OK


def _remove(config: Any, args: argparse.Namespace) -> int:
    server = config.remove(args.name)
    print(f"Removed MCP server “{server.name}” (and its keyring entries).")
    return EXIT_OK
