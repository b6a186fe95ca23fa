"""``simi stats``: per-agent statistics as a table, JSON or CSV, or every call as JSON or CSV.

simi stats [--agent NAME ...] [--since DATE] [--until DATE] [--json | --csv] [--rows]

The table and ``--json``/``--csv`` are ``StatsStore.summary`` (``--json`` with every key,
percentiles included); ``--rows`` exports every call (``StatsStore.export_rows``) instead.
``--since`` is inclusive, ``--until`` exclusive, both UTC ('2026-11-01' = that day's start).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from desktop.chat.format import UNKNOWN_COST, cost_text, count_text
from desktop.cli_common import Column, print_columns

if TYPE_CHECKING:
    from desktop.store.stats import StatsFilter

# desktop.store.stats (sqlite_utils, ~170 ms) is imported when a stats command runs, not when
# `simi` builds its parser: `simi --version` and `simi ask` don't pay for it.


def _date(text: str) -> str:
    """An argparse ``type``: the date as given, once it parses (``StatsFilter`` reads it).
    A bad one is a usage error in words: "argument --since: expected a date like …"."""
    from desktop.store.stats import parse_when

    try:
        parse_when(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``stats`` to the ``simi`` subcommands."""
    p: argparse.ArgumentParser = sub.add_parser(
        "stats",
        help="per-agent inference statistics (table, JSON or CSV), or every call",
        description="Per agent: calls, errors, TTFT and decode speed (p50/p95), tokens, cost "
        "(and tool calls and their time, for agents that used tools). "
        "Dates are UTC; --since is inclusive, --until exclusive.",
    )
    p.add_argument(
        "--agent", action="append", metavar="NAME", help="only this agent (repeat for several)"
    )
    p.add_argument("--since", type=_date, metavar="DATE", help="from this date on")
    p.add_argument("--until", type=_date, metavar="DATE", help="before this date")
    p.add_argument(
        "--source",
        choices=["api", "app"],
        help="api: only calls API clients made through `simi serve`; app: only the app's own",
    )
    p.add_argument(
        "--client",
        action="append",
        metavar="KEY",
        help="only API calls made with this key's name (repeat for several)",
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="as JSON (with the percentiles)")
    fmt.add_argument("--csv", action="store_true", help="as CSV")
    p.add_argument(
        "--rows",
        action="store_true",
        help="with --json or --csv: every call instead of the summary",
    )
    return p


def run(services: Any, args: argparse.Namespace) -> int:
    """Print what ``args`` asks for; the exit status. Output cut short by its reader (``simi
    stats --rows --csv | head``) is not an error."""
    try:
        return _run(services, args)
    except BrokenPipeError:
        # Python's recipe: stdout to devnull, so the flush at exit does not fail once more.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run(services: Any, args: argparse.Namespace) -> int:
    from desktop.store.stats import (
        EXPORT_COLUMNS,
        SUMMARY_KEYS,
        StatsFilter,
        rows_to_csv,
        rows_to_json,
    )

    f = StatsFilter(
        tuple(args.agent or ()),
        args.since,
        args.until,
        source=args.source,
        clients=tuple(args.client or ()),
    )
    out = sys.stdout
    if args.rows:
        if not (args.json or args.csv):
            print(
                "simi: --rows: give --json or --csv too (every call is too much for a table).",
                file=sys.stderr,
            )
            return 2
        rows = services.stats.export_rows(f)
        if args.json:
            rows_to_json(rows, out)
        else:
            rows_to_csv(rows, out, EXPORT_COLUMNS)
        return 0
    summary = services.stats.summary(f)
    if args.json:
        rows_to_json(summary, out)
    elif args.csv:
        rows_to_csv(summary, out, SUMMARY_KEYS)
    elif not summary:
        print(_nothing(f))
    else:
        print_table(summary, out)
    return 0


def _nothing(f: StatsFilter) -> str:
    if not (f.agents or f.since or f.until):
        return "No calls recorded yet."
    who = " or ".join(f"“{a}”" for a in f.agents) if f.agents else "any agent"
    when = ""
    if f.since and f.until:
        when = f" from {f.since} until {f.until}"
    elif f.since:
        when = f" since {f.since}"
    elif f.until:
        when = f" before {f.until}"
    return f"No calls for {who}{when}."


# (header, value of a summary row, right-aligned?)
_COLUMNS: tuple[Column, ...] = (
    ("agent", lambda r: str(r["agent"]), False),
    ("calls", lambda r: f"{r['calls']:,}", True),
    ("cancelled", lambda r: f"{r['cancelled']:,}", True),
    ("errors", lambda r: _errors(r), True),
    ("TTFT p50", lambda r: _ms(r["ttft_p50_ms"]), True),
    ("TTFT p95", lambda r: _ms(r["ttft_p95_ms"]), True),
    ("decode p50", lambda r: _speed(r["decode_p50_tok_s"]), True),
    ("decode p95", lambda r: _speed(r["decode_p95_tok_s"]), True),
    ("tokens in", lambda r: count_text(r["prompt_tokens"]), True),
    ("out", lambda r: count_text(r["output_tokens"]), True),
    ("cached", lambda r: _share(r["cached_share"]), True),
    ("cost", lambda r: _cost(r), False),
)
# shown when any agent's calls asked for tools (issue 18): the table is unchanged otherwise
_TOOL_COLUMNS: tuple[Column, ...] = (
    ("tool calls", lambda r: f"{r.get('tool_calls') or 0:,}", True),
    ("tool time", lambda r: _tool_ms(r.get("tool_ms")), True),
)


def print_table(summary: list[dict[str, Any]], out: Any) -> None:
    """The summary as an aligned table, then the errors by kind and what the columns mean."""
    columns = _COLUMNS
    if any(r.get("tool_calls") for r in summary):
        columns = (*_COLUMNS[:-1], *_TOOL_COLUMNS, _COLUMNS[-1])
    print_columns(columns, summary, out)
    failed = [r for r in summary if r.get("error_kinds")]
    if failed:
        print(file=out)
        print("errors by kind:", file=out)
        for r in failed:
            kinds = ", ".join(f"{kind} {n}" for kind, n in r["error_kinds"].items())
            print(f"  {r['agent']}: {kinds}", file=out)
    print(file=out)
    print(
        "p50/p95: median and 95th percentile of the calls that have the figure; TTFT in ms "
        "(Send to first token), decode in tokens/s. Cost counts priced calls only.",
        file=out,
    )
    if columns is not _COLUMNS:
        print(
            "calls: every model call (a reply that used tools makes several); tool calls: the "
            "tools those calls asked for; tool time: how long the tools ran.",
            file=out,
        )


def _errors(r: dict[str, Any]) -> str:
    if not r["errors"]:
        return "0"
    return f"{r['errors']:,} ({r['error_rate'] * 100:.1f}%)"


def _ms(value: Any) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def _tool_ms(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f} ms" if value < 10_000 else f"{value / 1000:,.1f} s"


def _speed(value: Any) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _share(value: Any) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _cost(r: dict[str, Any]) -> str:
    if r["local"]:
        return "local (free)"
    text = cost_text(r["cost_usd"])
    unpriced = r["unpriced_calls"]
    if not unpriced:
        return text
    calls = f"{unpriced:,} call{'s' if unpriced != 1 else ''} without a price"
    if text == UNKNOWN_COST:
        return f"unknown ({calls})"
    return f"{text} + {calls}"
