"""``simi bench``: a prompt set sent to several agents, N times each, and the per-agent table.

simi bench --agents A,B --prompts FILE [--repeat N] [--json | --csv [--rows]] [--title T]
simi bench --resume RUN [--json | --csv [--rows]]

The run is stored like one started in the window (Compare → Prompt-set runs), so it reopens
there. One line per call on stderr ("[3/12] Prompt 2 · Claude · run 1: 412 ms to first
token"); the summary at the end on stdout: a table, or ``--json`` (the run, its per-agent
summary and every call) or ``--csv`` (the summary; with ``--rows`` every call). Ctrl+C stops
the running calls, stores the run as cancelled and prints what was measured so far;
``--resume RUN`` goes on with a stored run (cancelled, paused, cut off): only its missing calls.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from desktop.cli_common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Column,
    cancel_on_signals,
    err,
    print_columns,
)

# desktop.chat.prompt_runs and the store are imported when the command runs, not when `simi`
# builds its parser: `simi --version` does not pay for them.


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not “{text}”") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``bench`` to the ``simi`` subcommands."""
    p: argparse.ArgumentParser = sub.add_parser(
        "bench",
        help="run a prompt set against several agents and compare their speed and cost",
        description="Each prompt of FILE goes to every agent, --repeat times; remote agents "
        "answer in parallel, local ones one after another. Progress on stderr, the per-agent "
        "table (median and p95 TTFT, decode and prefill speed, tokens, cost, errors) on stdout.",
    )
    p.add_argument(
        "--agents",
        action="append",
        metavar="A,B",
        help="agent names, comma-separated (or repeat the option)",
    )
    p.add_argument(
        "--prompts",
        metavar="FILE",
        help="a text file (one prompt per line, or prompts separated by lines of ---), a "
        '.jsonl file (strings, or objects with "prompt" and optionally "attachments": '
        "a list of files, relative to the .jsonl file, sent with that prompt), or '-' for "
        "standard input",
    )
    p.add_argument("--repeat", type=_positive, default=1, metavar="N", help="runs per prompt")
    p.add_argument("--title", default="", help="the run's title (default: the file name)")
    p.add_argument(
        "--resume",
        type=_positive,
        metavar="RUN",
        help="go on with stored run RUN (cancelled, paused or cut off): only its missing calls",
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="the run, summary and calls as JSON")
    fmt.add_argument("--csv", action="store_true", help="the summary as CSV")
    p.add_argument("--rows", action="store_true", help="with --csv: every call instead")
    return p


def _agent_names(values: list[str]) -> list[str]:
    names: list[str] = []
    for value in values:
        names += [n.strip() for n in value.split(",") if n.strip()]
    return list(dict.fromkeys(names))


def run(services: Any, args: argparse.Namespace) -> int:
    from desktop.errors import UserError

    if args.rows and not args.csv:
        err("bench: --rows goes with --csv (with --json every call is there already).")
        return EXIT_USAGE
    if args.resume is not None:
        if args.agents or args.prompts:
            err("bench: --resume goes on with the run's own agents and prompts; leave out "
                 "--agents and --prompts.")  # fmt: skip
            return EXIT_USAGE
        return _resume(services, args)
    if not (args.agents and args.prompts):
        err("bench: give --agents A,B and --prompts FILE (or --resume RUN).")
        return EXIT_USAGE
    agents, unknown = [], []
    for name in _agent_names(args.agents):
        agent = services.agents.by_name(name)
        if agent is None:
            unknown.append(name)
        else:
            agents.append(agent)
    if unknown or not agents:
        names = ", ".join(a.name for a in services.agents.list()) or "none yet"
        which = ", ".join(f"“{n}”" for n in unknown) or "none given"
        err(f"bench: no agent called {which}. Agents: {names}.")
        return EXIT_USAGE
    items = _read_prompts(args.prompts)
    if not items:
        raise UserError(f"There are no prompts in {args.prompts}.")
    title = args.title or ("standard input" if args.prompts == "-" else _file_name(args.prompts))
    files = [[str(path) for path in item.attachments] for item in items]
    stored = services.compare.create_run(
        [item.text for item in items],
        [(a.id, a.name) for a in agents],
        repeat=args.repeat,
        title=title,
        attachments=files if any(files) else None,
    )
    status = _run(services, stored.id, agents)
    _print_results(services, stored.id, args, status)
    return EXIT_INTERRUPTED if status == "cancelled" else EXIT_OK


def _resume(services: Any, args: argparse.Namespace) -> int:
    from desktop.chat.prompt_runs import agents_for_run
    from desktop.errors import UserError

    stored = services.compare.run(args.resume)
    if stored is None:
        raise UserError(f"There is no prompt-set run {args.resume}.")
    status = _run(services, stored.id, agents_for_run(services, stored))
    _print_results(services, stored.id, args, status)
    return EXIT_INTERRUPTED if status == "cancelled" else EXIT_OK


def _file_name(path: str) -> str:
    from pathlib import Path

    return Path(path).name


def _read_prompts(path: str) -> list[Any]:
    """The prompt set's ``PromptItem``s (each prompt and the files that go with it)."""
    from pathlib import Path

    from desktop.chat.prompt_runs import parse_prompt_set
    from desktop.errors import UserError

    if path == "-":
        return parse_prompt_set(sys.stdin.read())
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"Cannot read {path}: {exc.strerror or exc}.") from None
    except UnicodeDecodeError:
        raise UserError(f"{path} is not UTF-8 text.") from None
    return parse_prompt_set(text, filename=path)


def _run(services: Any, run_id: int, agents: list[Any]) -> str:
    import asyncio

    from desktop.chat.prompt_runs import Progress, PromptRunner

    def on_progress(p: Progress) -> None:
        if p.prompt_index is None:
            return
        print(f"[{p.done}/{p.total}] {progress_line(p)}", file=sys.stderr, flush=True)

    runner = PromptRunner(services, run_id, agents, on_progress=on_progress)

    async def main() -> str:
        cancel_on_signals(runner.cancel)
        try:
            return await runner.run()
        finally:
            await services.chat.providers.aclose()

    return asyncio.run(main())


def progress_line(p: Any) -> str:
    """ "Prompt 2 · Claude · run 1: 412 ms to first token, 38.5 tok/s" (one per call)."""
    where = f"Prompt {p.prompt_index + 1} · {p.agent_name} · run {p.repetition + 1}"
    if p.status == "error":
        return f"{where}: error: {p.error_text or 'failed'}"
    if p.status == "cancelled":
        return f"{where}: cancelled"
    if p.ttft_ms is None:
        return f"{where}: done (no first token)"
    speed = f", {p.decode_tok_s:,.1f} tok/s" if p.decode_tok_s is not None else ""
    return f"{where}: {p.ttft_ms:,.0f} ms to first token{speed}"


def _print_results(services: Any, run_id: int, args: argparse.Namespace, status: str) -> None:
    from desktop.chat.prompt_runs import (
        EXPORT_KEYS,
        SUMMARY_KEYS,
        export_rows,
        summarise,
        summary_dicts,
    )
    from desktop.store.stats_export import rows_to_csv

    summaries = summarise(services, run_id)
    out = sys.stdout
    if args.json:
        import json

        stored = services.compare.run(run_id)
        record = {
            "run": {
                "id": run_id,
                "title": stored.title,
                "status": status,
                "prompts": list(stored.prompts),
                "agents": list(stored.agent_names),
                "repeat": stored.repeat,
            },
            "summary": summary_dicts(summaries),
            "calls": export_rows(services, run_id),
        }
        json.dump(record, out, indent=2, ensure_ascii=False)
        out.write("\n")
    elif args.csv:
        if args.rows:
            rows_to_csv(export_rows(services, run_id), out, list(EXPORT_KEYS))
        else:
            rows_to_csv(summary_dicts(summaries), out, list(SUMMARY_KEYS))
    else:
        print_table(summaries, out)
        if status == "cancelled":
            print(
                "Cancelled: the table holds the calls made before the stop. Go on with: "
                f"simi bench --resume {run_id}",
                file=out,
            )
        print(f"Stored as run {run_id}; it reopens in Compare → Prompt-set runs.", file=out)
    out.flush()


# (header, value of a summary, right-aligned?)
_COLUMNS: tuple[Column, ...] = (
    ("agent", lambda s: s.agent_name, False),
    ("calls", lambda s: f"{s.calls:,}", True),
    ("cancelled", lambda s: f"{s.cancelled:,}", True),
    ("errors", lambda s: f"{s.errors:,}", True),
    ("TTFT p50", lambda s: _ms(s.ttft_p50_ms), True),
    ("TTFT p95", lambda s: _ms(s.ttft_p95_ms), True),
    ("decode p50", lambda s: _speed(s.decode_tok_s_p50), True),
    ("decode p95", lambda s: _speed(s.decode_tok_s_p95), True),
    ("prefill p50", lambda s: _speed(s.prefill_tok_s_p50), True),
    ("tokens p50", lambda s: _count(s.output_tokens_p50), True),
    ("cost", lambda s: _cost(s), False),
)


def print_table(summaries: list[Any], out: Any) -> None:
    """The per-agent summary as aligned columns (like `simi stats`), then what they mean."""
    print_columns(_COLUMNS, summaries, out)
    print(file=out)
    print(
        "p50/p95: median and 95th percentile over the calls that completed (failed and stopped\n"
        "calls are counted, not measured); TTFT in ms (send to first token), decode and prefill\n"
        "in tokens/s; tokens: output tokens per call. Cost: all calls, or unknown when one has\n"
        "no price.",
        file=out,
    )


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def _speed(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _cost(s: Any) -> str:
    from desktop.chat.format import cost_text

    if s.local:
        return "local (free)"
    return cost_text(s.cost_usd) if s.cost_usd is not None else "unknown"
