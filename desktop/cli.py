"""The ``simi`` command: the window when run bare, and the same services without one.

simi                       open the window
simi ask [--agent NAME] [--attach FILE ...] [--json] [--allow-tools] PROMPT  (desktop.cli_ask)
simi agents list|show|add|edit|clone|remove      (edit NAME --tools SERVER[:TOOL],...
                                                       --knowledge A,B)
simi stats [--agent NAME ...] [--since DATE] [--until DATE] [--source api|app] [--client KEY]
           [--json|--csv] [--rows]
                                                                        (desktop.cli_stats)
simi models list|gpu [--json] | add-folder PATH | remove-folder PATH   (desktop.cli_models)
simi bench --agents A,B --prompts FILE [--repeat N] [--json|--csv]      (desktop.cli_bench)
simi mcp add|list|tools|remove                                          (desktop.cli_mcp)
simi knowledge add|list|index|search|rm                           (desktop.cli_knowledge)
simi serve [--host H] [--port P] [--agents A,B] | serve keys add|list|show|revoke  (cli_serve)
simi export CONVERSATION [--format md|json] [-o FILE]
simi import FILE
simi db move-aside
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from desktop import APP_NAME, __version__
from desktop.cli_common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    agent_or_fail,
    err,
)
from desktop.errors import UserError, ValidationError


def _arg_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse ``type``: the ``ValueError`` of ``parse`` (a person's message) becomes the
    usage error."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def _number(p: argparse.ArgumentParser, option: str, dest: str = "", **kw: Any) -> None:
    """A numeric Agent field, parsed as the agent editor parses it (``agent_rules``)."""
    from desktop.chat.agent_rules import number_field

    field = number_field(dest or option[2:].replace("-", "_"))
    p.add_argument(option, dest=field.name, type=_arg_type(field.parse), **kw)


def _add_agent_fields(p: argparse.ArgumentParser, *, creating: bool) -> None:
    """Each option stores into the Agent field it is named after (its ``dest``)."""
    from desktop.chat.kinds import kind_names
    from desktop.store.agents import KV_TYPES

    if creating:
        p.add_argument("--name", required=True, help="a unique name, e.g. 'GPT-4o mini'")
    else:
        p.add_argument("--name", dest="new_name", help="rename the agent")
    p.add_argument("--kind", required=creating, choices=kind_names())
    p.add_argument("--base-url", help="endpoint base URL, e.g. http://localhost:8080/v1")
    p.add_argument("--model", help="model name as the provider knows it")
    p.add_argument("--system", dest="system_prompt", metavar="SYSTEM", help="system prompt")
    for option in ("--temperature", "--top-p", "--max-tokens", "--seed"):
        _number(p, option)
    p.add_argument("--stop", action="append", help="stop sequence (repeat for several)")
    p.add_argument(
        "--model-file", dest="model_path", metavar="MODEL_FILE", help="local: path to a .gguf file"
    )
    _number(p, "--n-ctx", help="local: context size in tokens")
    _number(p, "--n-gpu-layers", help="local: -1 all, 0 none, N layers")
    _number(p, "--threads", "n_threads", metavar="THREADS", help="local: CPU threads")
    p.add_argument("--flash-attn", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--kv-type", choices=KV_TYPES)
    for side in ("input", "output"):
        p.add_argument(
            f"--price-{side}",
            dest=f"price_{side}_per_m",
            metavar="USD",
            type=_arg_type(partial(_price, f"price_{side}_per_m")),
            help=f"remote: what you pay per million {side} tokens, in USD (wins over the "
            "price list; 'none' goes back to it)",
        )
    p.add_argument(
        "--api-key-stdin",
        action="store_true",
        help="read the API key from standard input (it goes to the OS keyring only)",
    )


_CLEAR = object()  # an option given as "none": the field goes back to its default


def _price(field: str, text: str) -> object:
    """A price override option: a number (parsed as the agent editor parses it), or "none"."""
    from desktop.chat.agent_rules import number_field

    if text.strip().casefold() in ("none", "dataset"):
        return _CLEAR
    return number_field(field).parse(text)


def _command(
    sub: Any, name: str, help_text: str, *positionals: str, json_flag: bool = False
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help_text)
    for positional in positionals:
        parser.add_argument(positional)
    if json_flag:
        parser.add_argument("--json", action="store_true")
    return parser


def build_parser() -> argparse.ArgumentParser:
    from desktop import cli_bench, cli_knowledge, cli_mcp, cli_models, cli_serve, cli_stats
    from desktop.chat.agent_rules import parse_number

    parser = argparse.ArgumentParser(
        prog="simi", description=f"{APP_NAME}: many AI models, one desktop workspace."
    )
    parser.add_argument("--version", action="version", version=f"{APP_NAME} {__version__}")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="with --version: also Python, Qt, the llama.cpp build and backend, the data "
        "folder and the licences of bundled parts",
    )
    sub = parser.add_subparsers(dest="command")

    ask = sub.add_parser("ask", help="send one prompt to an agent and stream the reply")
    ask.add_argument("prompt", help="the prompt ('-' reads standard input)")
    ask.add_argument("--agent", help="agent name (default: the starter agent)")
    conversation_id = partial(parse_number, what="The conversation id", whole=True)
    ask.add_argument(
        "--conversation", type=_arg_type(conversation_id), help="continue this conversation id"
    )
    ask.add_argument(
        "--json", action="store_true", help="print the call's stats as JSON on the last line"
    )
    ask.add_argument(
        "--attach",
        action="append",
        default=[],
        metavar="FILE",
        help="send FILE with the prompt (repeat for several): an image (PNG, JPEG, GIF, WebP) "
        "for an agent that can see, or a document (text, Markdown, code, CSV, JSON, HTML, PDF, "
        "DOCX), sent as its text",
    )
    ask.add_argument(
        "--allow-tools",
        action="store_true",
        help="run every tool call the agent asks for without asking (needed when standard "
        "input is not a terminal; otherwise each call is asked about)",
    )

    agents = sub.add_parser("agents", help="list and manage agents")
    asub = agents.add_subparsers(dest="agents_command", required=True)
    _command(asub, "list", "list agents", json_flag=True)
    _command(asub, "show", "show one agent", "name", json_flag=True)
    _add_agent_fields(_command(asub, "add", "create an agent"), creating=True)
    edit = _command(asub, "edit", "change an agent", "name")
    _add_agent_fields(edit, creating=False)
    edit.add_argument(
        "--tools",
        dest="tool_list",
        metavar="SERVER[:TOOL],...",
        help="the MCP tools it may use: a server's name (all its tools) or SERVER:TOOL, "
        "comma-separated ('' for none); see simi mcp list and simi mcp tools SERVER",
    )
    edit.add_argument(
        "--knowledge",
        dest="knowledge_list",
        metavar="COLLECTION,...",
        help="the knowledge collections it searches before answering, comma-separated ('' "
        "for none); see simi knowledge list",
    )
    clone = _command(asub, "clone", "copy an agent", "name")
    clone.add_argument("--as", dest="new_name", help="name of the copy")
    _command(asub, "remove", "delete an agent (its conversations stay)", "name")

    cli_stats.add_parser(sub)
    cli_bench.add_parser(sub)

    export = sub.add_parser("export", help="write a conversation as Markdown or JSON")
    export.add_argument("conversation", help="conversation id, or (part of) its title")
    export.add_argument("--format", choices=["md", "json"], default="md")
    export.add_argument(
        "-o",
        "--output",
        help="file to write (default: standard output); a Markdown file's attachments go into "
        "a folder beside it, NAME_files/",
    )
    imp = sub.add_parser("import", help="add conversations from a JSON export (all or nothing)")
    imp.add_argument(
        "file",
        help="a file written by `simi export --format json`, or a JSON list of them ('-': stdin)",
    )

    cli_models.add_parser(sub)
    cli_mcp.add_parser(sub)
    cli_knowledge.add_parser(sub)
    cli_serve.add_parser(sub)

    db = sub.add_parser("db", help="database maintenance")
    dsub = db.add_subparsers(dest="db_command", required=True)
    dsub.add_parser("move-aside", help="rename a damaged database so a fresh one is made")
    dsub.add_parser("path", help="print where the database lives")
    return parser


def _no_display() -> bool:
    import os

    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM"):
        return False
    return not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _wants_verbose_version(argv: Sequence[str]) -> bool:
    """`simi --version --verbose` (either order, before any sub-command)."""
    top: list[str] = []
    for arg in argv:
        if not arg.startswith("-"):
            break
        top.append(arg)
    return "--version" in top and "--verbose" in top


_WINDOW = argparse.Namespace(command=None)  # `simi` alone


def main(argv: Sequence[str] | None = None) -> int:
    if _wants_verbose_version(sys.argv[1:] if argv is None else argv):
        from desktop.identity import price_check, verbose_text

        print(verbose_text())
        if os.environ.get("SIMI_SELF_CHECK") == "1":
            print(price_check())
        return 0
    words = sys.argv[1:] if argv is None else list(argv)
    # The window needs no parser (building one imports every command's module).
    args = build_parser().parse_args(words) if words else _WINDOW
    if args.command is None:
        if _no_display():
            err(
                "no display found (DISPLAY and WAYLAND_DISPLAY are unset), so the window cannot "
                "open. Run `simi` inside a desktop session, or use the terminal commands, e.g. "
                '`simi ask "Hello"` (see `simi --help`).'
            )
            return EXIT_ERROR
        from desktop.app import run_app

        return run_app()  # chooses the llama.cpp build once its window's frame has painted
    from desktop.local.libraries import choose_at_start

    choose_at_start()  # which llama.cpp build, before anything loads one
    from desktop import cli_ask, cli_bench, cli_knowledge, cli_mcp, cli_models, cli_serve

    try:
        if args.command == "db":
            return _db(args)
        if args.command == "models":
            return cli_models.run(args)
        if args.command == "mcp":
            return cli_mcp.run(args)
        from desktop.chat.services import Services
        from desktop.settings.paths import AppPaths

        commands = {
            "ask": cli_ask.run,
            "agents": _agents,
            "stats": _stats,
            "bench": cli_bench.run,
            "export": _export,
            "import": _import,
            "serve": cli_serve.run,
            "knowledge": cli_knowledge.run,
        }
        if args.command in commands:
            services = Services.open(AppPaths.from_env())
            try:
                return commands[args.command](services, args)
            finally:
                services.close()
    except ValidationError as exc:
        for field, message in exc.fields.items():
            err(f"{field.replace('_', '-')}: {message}")
        return EXIT_ERROR
    except UserError as exc:
        err(exc.user_message)
        return EXIT_ERROR
    except Exception as exc:  # a bug: reported like the window's crash dialog, keys blanked
        _report_bug(exc)
        return EXIT_ERROR
    build_parser().print_help()
    return EXIT_USAGE


def _report_bug(exc: BaseException) -> None:
    """An unexpected error's traceback, with every known secret redacted, to the log (when it
    is set up) and to stderr: the terminal never shows a key, even in a traceback."""
    import logging
    import traceback

    from desktop.settings.secrets import redact

    details = redact("".join(traceback.format_exception(exc)))
    logging.getLogger("simi.cli").error("unexpected error\n%s", details)
    err(f"unexpected error (a bug in SIMI Multi; please report it):\n{details.rstrip()}")


# db ---------------------------------------------------------------------------------------------
def _db(args: argparse.Namespace) -> int:
    from desktop.settings.paths import AppPaths
    from desktop.store.db import move_aside

    path = AppPaths.from_env().db_path
    if args.db_command == "path":
        print(path)
        return EXIT_OK
    if not path.exists():
        err(f"there is no database at {path}; nothing to move.")
        return EXIT_ERROR
    target = move_aside(path)
    print(f"Moved {path} to {target}. A fresh database is created on the next start.")
    return EXIT_OK


# agents -----------------------------------------------------------------------------------------
def _fields_from(args: argparse.Namespace) -> dict[str, Any]:
    """The Agent fields given on the command line (options left out are not changed)."""
    from dataclasses import fields

    from desktop.store.agents import Agent

    given = {f.name: getattr(args, f.name, None) for f in fields(Agent)}
    changes = {f: v for f, v in given.items() if v is not None and f not in ("name", "stop")}
    changes.update({f: None for f, v in changes.items() if v is _CLEAR})
    if getattr(args, "stop", None):
        changes["stop"] = tuple(args.stop)
    return changes


def _read_key(args: argparse.Namespace) -> str | None:
    if not getattr(args, "api_key_stdin", False):
        return None
    key = sys.stdin.readline().strip()
    if not key:
        raise ValidationError({"api_key": "No API key was given on standard input."})
    return key


def _collection_names(services: Any, agent_id: int) -> list[str]:
    return [c.name for c in services.knowledge.agent_collections(agent_id)]


def _checked_collections(services: Any, text: str) -> list[Any] | None:
    """``--knowledge A,B`` as collections ('' for none); None after saying which name is
    unknown (nothing is stored then)."""
    found = []
    for name in (n.strip() for n in text.split(",")):
        if not name:
            continue
        collection = services.knowledge.by_name(name)
        if collection is None:
            known = ", ".join(c.name for c in services.knowledge.collections()) or "none yet"
            err(f"knowledge: no collection named “{name}” (collections: {known}).")
            return None
        found.append(collection)
    return found


def _agents(services: Any, args: argparse.Namespace) -> int:
    from desktop.cli_tools_prompt import checked_tools, tools_list, tools_text
    from desktop.store.agents import Agent

    svc = services.agents
    cmd = args.agents_command
    if cmd == "list":
        agents = svc.list()
        if args.json:
            print(json.dumps([svc.public_dict(a) for a in agents], indent=2))
        else:
            if not agents:
                print("No agents yet. Add one with: simi agents add --name N --kind KIND ...")
            for a in agents:
                where = a.model_path if a.is_local else a.base_url
                line = f"{a.name}\t{a.kind}\t{a.model}\t{where or ''}"
                pairs = services.tools.tools.agent_tools(a.id)
                line += f"\ttools: {tools_text(pairs)}" if pairs else ""
                searched = _collection_names(services, a.id)
                print(line + (f"\tknowledge: {', '.join(searched)}" if searched else ""))
        return EXIT_OK
    if cmd == "show":
        agent = agent_or_fail(services, args.name)
        data = svc.public_dict(agent, has_key=svc.has_key(agent) if not agent.is_local else None)
        pairs = services.tools.tools.agent_tools(agent.id)
        data["tools"] = tools_list(pairs) if args.json else tools_text(pairs)
        searched = _collection_names(services, agent.id)
        data["knowledge"] = searched if args.json else ", ".join(searched)
        if args.json:
            print(json.dumps(data, indent=2))
        else:
            for key, value in data.items():
                print(f"{key}: {value}")
        return EXIT_OK
    if cmd == "add":
        fields = _fields_from(args)  # a local agent's empty context: Settings' default
        agent = svc.create(Agent(name=args.name, **fields), api_key=_read_key(args))
        print(f"Added agent “{agent.name}” ({agent.kind}, {agent.model}).")
        return EXIT_OK
    if cmd == "edit":
        from desktop.chat.agent_rules import key_left_behind

        agent = agent_or_fail(services, args.name)
        tools = None
        if args.tool_list is not None:  # checked before anything is stored
            try:
                tools = checked_tools(services, args.tool_list)
            except ValidationError as exc:
                err(f"tools: {exc.fields['tools']}")
                return EXIT_USAGE
        collections = None
        if args.knowledge_list is not None:
            collections = _checked_collections(services, args.knowledge_list)
            if collections is None:
                return EXIT_USAGE
        changes = _fields_from(args)
        if args.new_name:
            changes["name"] = args.new_name
        key = _read_key(args)
        updated = svc.update(agent.with_changes(**changes), api_key=key)
        if tools is not None:
            services.tools.tools.set_agent_tools(updated.id, tools)
        if collections is not None:
            services.knowledge.set_agent_collections(updated.id, collections)
        print(f"Saved agent “{updated.name}”.")
        if tools is not None:
            print(f"tools: {tools_text(services.tools.tools.agent_tools(updated.id))}")
        if collections is not None:
            print(f"knowledge: {', '.join(_collection_names(services, updated.id)) or 'none'}")
        moved = agent.key_ref is not None and updated.key_ref not in (None, agent.key_ref)
        why = key_left_behind(agent.base_url, updated.base_url) if moved else None
        if key is None and why and not svc.has_key(updated):
            print(f'{why}. Give it with: simi agents edit "{updated.name}" --api-key-stdin')
        return EXIT_OK
    if cmd == "clone":
        agent = agent_or_fail(services, args.name)
        copy = svc.clone(agent, args.new_name)
        print(f"Cloned “{agent.name}” as “{copy.name}”.")
        return EXIT_OK
    if cmd == "remove":
        agent = agent_or_fail(services, args.name)
        svc.delete(agent)
        print(f"Removed agent “{agent.name}”. Its conversations and statistics are kept.")
        return EXIT_OK
    return EXIT_USAGE


# stats ------------------------------------------------------------------------------------------
def _stats(services: Any, args: argparse.Namespace) -> int:
    """``simi stats`` (desktop.cli_stats): per agent, or every call with ``--rows``."""
    from desktop import cli_stats

    return cli_stats.run(services, args)


# export / import ----------------------------------------------------------------------------
def _conversation_or_fail(services: Any, ref: str) -> Any:
    if ref.isdigit():
        conv = services.conversations.get(int(ref))
        if conv is not None and conv.deleted_at is None:
            return conv
    matches = services.conversations.find(ref, limit=5)
    exact = [c for c in matches if c.title.casefold() == ref.casefold()]
    if len(exact) == 1 or len(matches) == 1:
        return (exact or matches)[0]
    if matches:
        names = "; ".join(f"{c.id}: {c.title}" for c in matches)
        raise UserError(f"“{ref}” matches several conversations ({names}). Give its id.")
    raise UserError(f"There is no conversation “{ref}”. Give its id or part of its title.")


def _export(services: Any, args: argparse.Namespace) -> int:
    from desktop.chat.export import Stores, dumps, to_json, to_markdown, write_export

    conv = _conversation_or_fail(services, args.conversation)
    stores = Stores.of(services)
    if args.output:
        from pathlib import Path

        try:
            written = write_export(stores, conv.id, args.format, Path(args.output))
        except OSError as exc:
            raise UserError(f"Cannot write {args.output}: {exc.strerror or exc}.") from exc
        also = f" (attachments in {written[1]})" if len(written) > 1 else ""
        print(f"Wrote “{conv.title}” to {args.output}{also}.", file=sys.stderr)
        return EXIT_OK
    if args.format == "json":
        text = dumps(to_json(stores, conv.id))
    else:  # standard output: attachments are named, with no files to link to
        text = to_markdown(stores, conv.id)
    sys.stdout.write(text)
    return EXIT_OK


def _import(services: Any, args: argparse.Namespace) -> int:
    from pathlib import Path

    from desktop.chat.export import import_into

    try:
        raw = sys.stdin.read() if args.file == "-" else Path(args.file).read_text("utf-8")
        data = json.loads(raw)
    except OSError as exc:
        raise UserError(f"Cannot read {args.file}: {exc.strerror or exc}.") from exc
    except ValueError as exc:
        raise UserError(f"{args.file} is not JSON ({exc}).") from exc
    # all or nothing: a file of several conversations with one broken imports none
    conv_ids = import_into(services, data)
    for conv_id in conv_ids:
        conv = services.conversations.get(conv_id)
        print(f"Imported “{conv.title}” as conversation {conv_id}.")
    return EXIT_OK


def _fmt(value: object) -> str:
    return "-" if value is None else f"{value}"


if __name__ == "__main__":
    raise SystemExit(main())
