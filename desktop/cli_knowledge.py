"""``simi knowledge``: collections of folders agents can search, from a terminal.

simi knowledge add NAME PATH... [--embedder GGUF]
simi knowledge list [--json]
simi knowledge index NAME           (progress on standard error; Ctrl+C stops, keeping what is done)
simi knowledge search NAME QUERY [-k N] [--json]
simi knowledge rm NAME

An agent searches collections set with ``simi agents edit NAME --knowledge A,B``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from desktop.cli_common import EXIT_ERROR, EXIT_OK, err
from desktop.errors import UserError, ValidationError


def add_parser(sub: Any) -> None:
    knowledge = sub.add_parser("knowledge", help="collections of folders agents can search")
    ksub = knowledge.add_subparsers(dest="knowledge_command", required=True)
    add = ksub.add_parser("add", help="a new collection of folders and files (read in place)")
    add.add_argument("name")
    add.add_argument("paths", nargs="+", metavar="PATH")
    add.add_argument(
        "--embedder",
        metavar="GGUF",
        help="an embedding model (GGUF) for search by meaning beside keyword search",
    )
    lst = ksub.add_parser("list", help="the collections, their files and passages")
    lst.add_argument("--json", action="store_true")
    index = ksub.add_parser("index", help="read new and changed files, drop deleted ones")
    index.add_argument("name")
    search = ksub.add_parser("search", help="the best passages for a question")
    search.add_argument("name")
    search.add_argument("query")
    search.add_argument("-k", type=int, default=5, metavar="N", help="how many passages (5)")
    search.add_argument("--json", action="store_true")
    rm = ksub.add_parser("rm", help="remove a collection and its index (the files stay)")
    rm.add_argument("name")


def run(services: Any, args: argparse.Namespace) -> int:
    knowledge = services.knowledge
    cmd = args.knowledge_command
    if cmd == "add":
        made = knowledge.create(args.name, args.paths, args.embedder)
        print(f"Added collection “{made.name}” ({_count(len(made.paths), 'path')}).")
        print(f'Index it with: simi knowledge index "{made.name}"')
        return EXIT_OK
    if cmd == "list":
        return _list(knowledge, args.json)
    collection = knowledge.by_name(args.name)
    if collection is None:
        names = ", ".join(c.name for c in knowledge.collections()) or "none yet"
        err(f"no collection named “{args.name}” (collections: {names}).")
        return EXIT_ERROR
    if cmd == "index":
        return _index(knowledge, collection)
    if cmd == "search":
        if args.k < 1:
            raise ValidationError({"k": "-k must be at least 1."})
        found = knowledge.search([collection], args.query, args.k)
        if args.json:
            rows = [s.as_json() for s in found.sources]
            print(json.dumps({"query": args.query, "ms": round(found.total_ms, 1), "hits": rows}))
            return EXIT_OK
        for note in found.notices:
            print(note)
        if not found.sources and not found.notices:
            print("Nothing in the collection matches.")
        for s in found.sources:
            where = f" ({s.place})" if s.place else ""
            print(f"[{s.position}] {s.path}{where}  score {s.score:.4f}")
            print("    " + _plain(s.text)[:300])
        return EXIT_OK
    if cmd == "rm":
        knowledge.delete(collection)
        print(f"Removed collection “{collection.name}” and its index; its files are untouched.")
        return EXIT_OK
    return EXIT_ERROR


def _list(knowledge: Any, as_json: bool) -> int:
    rows = []
    for collection in knowledge.collections():
        row: dict[str, Any] = {
            "name": collection.name,
            "paths": list(collection.paths),
            "embedder": collection.embedder,
        }
        try:
            state = knowledge.state(collection)
        except UserError as exc:  # a damaged index: said on its row, the others still listed
            row |= {"files": 0, "chunks": 0, "skipped": 0, "indexed_at": None}
            rows.append(row | {"problem": exc.user_message})
            continue
        row |= {
            "files": state.files,
            "chunks": state.chunks,
            "skipped": len(state.skipped),
            "indexed_at": state.indexed_at,
        }
        rows.append(row)
    if as_json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        print("No collections yet. Add one with: simi knowledge add NAME FOLDER")
    for row in rows:
        when = row.get("problem") or row["indexed_at"] or "never indexed"
        print(
            f"{row['name']}\t{_count(row['files'], 'file')}\t{_count(row['chunks'], 'passage')}"
            f"\t{when}\t{', '.join(row['paths'])}"
        )
    return EXIT_OK


def _index(knowledge: Any, collection: Any) -> int:
    control = knowledge.new_control()
    shown = [0.0]

    def progress(p: Any) -> None:
        now = time.monotonic()
        if now - shown[0] < 0.5 and p.files_done < p.files_total:
            return
        shown[0] = now
        left = f", about {p.eta_s:.0f} s left" if p.eta_s is not None else ""
        sys.stderr.write(
            f"\r{p.files_done:,}/{p.files_total:,} files, {p.chunks:,} passages, "
            f"{p.chunks_per_s:,.0f}/s{left}   "
        )
        sys.stderr.flush()

    try:
        report = knowledge.index(collection, control, progress)
    except KeyboardInterrupt:  # between files the index is whole: the next run goes on
        control.cancel()
        sys.stderr.write("\n")
        err("stopped; what was read so far is kept (run it again to go on).")
        return EXIT_ERROR
    sys.stderr.write("\n")
    done = "Stopped" if report.cancelled else "Indexed"
    print(
        f"{done} “{collection.name}”: {_count(report.files, 'file')}, "
        f"{_count(report.chunks, 'passage')} in {report.seconds:.1f} s "
        f"({report.added} new, {report.changed} changed, {report.removed} removed, "
        f"{report.unchanged} unchanged)."
    )
    for skipped in report.skipped:
        print(f"skipped {skipped.path}: {skipped.reason}")
    return EXIT_OK


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _plain(text: str) -> str:
    """A passage on one line, control characters out (a file's text is data, not commands to
    the terminal)."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())
