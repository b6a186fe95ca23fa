"""``simi serve``: the local OpenAI-compatible API server, headless (``desktop/serve``, the same
code as the window's Server page).

simi serve [--host H] [--port P] [--agents A,B] [--require-key] [--cors-origin URL ...]
simi serve models [--json]
simi serve keys add NAME [--agents A,B]
simi serve keys list [--json]
simi serve keys show NAME
simi serve keys revoke NAME

A new key is printed once on stdout (and kept in the OS keyring; SQLite has only its hash).
While it serves, one line per finished request goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from desktop.cli_common import EXIT_OK, Column, cancel_on_signals, print_columns
from desktop.errors import UserError


def add_parser(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve the agents over an OpenAI-compatible API (and manage its keys)",
        description="Serve the agents as models of an OpenAI-compatible API at "
        "http://127.0.0.1:7464/v1 (loopback only unless --host says otherwise, which needs "
        "an API key).",
    )
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1: this machine)")
    serve.add_argument("--port", type=int, help="port (default 7464)")
    serve.add_argument("--agents", help="serve only these agents (comma-separated names)")
    serve.add_argument(
        "--require-key", action="store_true", default=None, help="need a key on loopback too"
    )
    serve.add_argument(
        "--cors-origin",
        action="append",
        dest="cors_origins",
        metavar="URL",
        help="a web page origin that may call the server (repeatable; none by default)",
    )
    ssub = serve.add_subparsers(dest="serve_command")
    models = ssub.add_parser("models", help="list the agents served and their model ids")
    models.add_argument("--json", action="store_true")
    keys = ssub.add_parser("keys", help="the server's API keys")
    ksub = keys.add_subparsers(dest="keys_command", required=True)
    add = ksub.add_parser("add", help="make a key (printed once; kept in the keyring)")
    add.add_argument("name", help="what uses it, e.g. editor")
    add.add_argument("--agents", help="the only agents it may call (comma-separated names)")
    lst = ksub.add_parser("list", help="list the keys (names, hints, last use)")
    lst.add_argument("--json", action="store_true")
    show = ksub.add_parser("show", help="print a key again, from the keyring")
    show.add_argument("name")
    revoke = ksub.add_parser("revoke", help="revoke a key: it stops working at once")
    revoke.add_argument("name")


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in (text or "").split(",") if n.strip())


def _agent_ids(services: Any, names: tuple[str, ...]) -> tuple[int, ...] | None:
    if not names:
        return None
    ids = []
    for name in names:
        agent = services.agents.by_name(name)
        if agent is None:
            known = ", ".join(a.name for a in services.agents.list()) or "none yet"
            raise UserError(f"There is no agent called “{name}”. Agents: {known}.")
        ids.append(agent.id)
    return tuple(ids)


def run(services: Any, args: argparse.Namespace) -> int:
    from desktop.serve.config import from_prefs
    from desktop.serve.server import ApiServer

    config = from_prefs(
        services.prefs,
        host=args.host,
        port=args.port,
        agents=_names(args.agents) or None,
        require_key=args.require_key,
        cors_origins=tuple(o.rstrip("/") for o in args.cors_origins) if args.cors_origins else None,
    )
    _agent_ids(services, config.agents)  # an unknown name is an error before listening
    server = ApiServer(services, config)
    if args.serve_command == "keys":
        return _keys(server, services, args)
    if args.serve_command == "models":
        return _models(server, args)
    return asyncio.run(_serve(server, services))


async def _serve(server: Any, services: Any) -> int:
    from desktop.serve.activity import Served

    def said(entry: Served) -> None:
        if entry.state not in ("done", "cancelled", "error", "refused"):
            return
        figures = []
        if entry.ttft_ms is not None:
            figures.append(f"TTFT {entry.ttft_ms:.0f} ms")
        if entry.decode_tok_s is not None:
            figures.append(f"{entry.decode_tok_s:.1f} tok/s")
        if entry.output_tokens is not None:
            figures.append(f"{entry.output_tokens} tokens")
        stamp = time.strftime("%H:%M:%S", time.localtime(entry.started))
        who = entry.client or "no key"
        what = entry.error if entry.state in ("error", "refused") else " · ".join(figures)
        print(
            f"{stamp} {entry.status} {entry.state} {entry.model} ({who}) {what}",
            file=sys.stderr,
            flush=True,
        )

    server.activity.listeners.append(said)
    stop = asyncio.Event()
    try:
        await server.start()
        cancel_on_signals(stop.set)
        served = _model_rows(server)
        print(f"Serving on {server.address}", flush=True)
        for model_id, agent in served:
            print(f"  {model_id}  ({agent.name})", flush=True)
        if not served:
            print("  (no agents are served: see the Server page or --agents)", flush=True)
        note = "keys required" if server.config.keys_required else "no key needed on loopback"
        print(f"{note}; Ctrl+C stops it.", file=sys.stderr, flush=True)
        await stop.wait()
    finally:
        await server.stop()
        await services.aclose()
    return EXIT_OK


def _model_rows(server: Any) -> list[tuple[str, Any]]:
    from desktop.serve.app import ApiRoutes

    routes = ApiRoutes(server.context())
    return [(m, agent) for m, (agent, _s) in routes.callable_agents(None).items()]


def _models(server: Any, args: argparse.Namespace) -> int:
    rows = _model_rows(server)
    if args.json:
        print(json.dumps([{"id": m, "agent": a.name, "local": a.is_local} for m, a in rows]))
        return EXIT_OK
    columns: list[Column] = [
        ("MODEL ID", lambda r: r[0], False),
        ("AGENT", lambda r: r[1].name, False),
    ]
    print_columns(columns, rows, sys.stdout)
    return EXIT_OK


def _keys(server: Any, services: Any, args: argparse.Namespace) -> int:
    keys = server.keys
    if args.keys_command == "add":
        record, key = keys.create(args.name, _agent_ids(services, _names(args.agents)))
        print(key)
        print(
            f"Key “{record.name}” made. Send it as 'Authorization: Bearer <key>'. "
            "`simi serve keys show NAME` prints it again.",
            file=sys.stderr,
        )
        return EXIT_OK
    if args.keys_command == "show":
        key = keys.reveal(args.name)
        if key is None:
            raise UserError(f"There is no key called “{args.name}” (see `simi serve keys list`).")
        print(key)
        return EXIT_OK
    if args.keys_command == "revoke":
        if not keys.revoke(args.name):
            raise UserError(f"There is no key called “{args.name}” (see `simi serve keys list`).")
        print(f"Key “{args.name}” revoked.", file=sys.stderr)
        return EXIT_OK
    names = {a.id: a.name for a in services.agents.list()}
    records = keys.list()
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "name": r.name,
                        "hint": r.hint,
                        "agents": None
                        if r.agent_ids is None
                        else [names.get(i, f"#{i}") for i in r.agent_ids],
                        "created_at": r.created_at,
                        "last_used_at": r.last_used_at,
                    }
                    for r in records
                ]
            )
        )
        return EXIT_OK
    if not records:
        print("No keys yet: `simi serve keys add NAME` makes one.", file=sys.stderr)
        return EXIT_OK

    def agents_of(r: Any) -> str:
        if r.agent_ids is None:
            return "every served agent"
        return ", ".join(names.get(i, f"#{i}") for i in r.agent_ids)

    columns: list[Column] = [
        ("NAME", lambda r: r.name, False),
        ("KEY", lambda r: r.hint, False),
        ("AGENTS", agents_of, False),
        ("LAST USED", lambda r: (r.last_used_at or "never")[:16].replace("T", " "), False),
    ]
    print_columns(columns, records, sys.stdout)
    return EXIT_OK
