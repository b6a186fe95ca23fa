"""``simi models search | files | download | rm | token``: GGUF models from the Hugging Face
Hub (``HF_ENDPOINT`` picks the hub). Needs no database: the app folder's paths and keyring.
Progress goes to stderr, results to stdout."""

from __future__ import annotations

import argparse
import getpass
import json
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from desktop.errors import UserError

HUB_COMMANDS = ("search", "files", "download", "rm", "token")
EXIT_PAUSED = 130


def add_subcommands(msub: Any) -> None:
    search = msub.add_parser("search", help="search GGUF models on the Hugging Face Hub")
    search.add_argument("query")
    search.add_argument("--limit", type=int, default=20)
    search.add_argument("--json", action="store_true")
    files = msub.add_parser("files", help="a hub repository's GGUF models, and which fit")
    files.add_argument("repo", help="owner/name")
    files.add_argument("--ctx", type=int, default=4096, help="context size (default 4096)")
    files.add_argument("--json", action="store_true")
    download = msub.add_parser(
        "download", help="download a GGUF model into the models folder (resumable)"
    )
    download.add_argument("repo", help="owner/name")
    download.add_argument("file", help="a file path in the repository, or a model name")
    rm = msub.add_parser("rm", help="delete a model this app downloaded")
    rm.add_argument("file")
    rm.add_argument("--yes", action="store_true", help="do not ask")
    token = msub.add_parser(
        "token", help="save the hub access token in the keyring (read from a prompt or stdin)"
    )
    token.add_argument("--delete", action="store_true", help="forget the saved token")


def _service() -> Any:
    from desktop.hub.service import HubService
    from desktop.settings.paths import AppPaths
    from desktop.settings.secrets import SecretStore

    paths = AppPaths.from_env()
    return HubService(paths, SecretStore())


def run(args: argparse.Namespace) -> int:
    from desktop.hub.client import HubAuthError

    try:
        return _run(args)
    except KeyboardInterrupt:  # before a download started (a download pauses itself)
        print("Stopped.", file=sys.stderr)
        return EXIT_PAUSED
    except HubAuthError as exc:
        raise HubAuthError(
            f"{exc.user_message} In a terminal: `simi models token` saves one (or set HF_TOKEN)."
        ) from None


def _run(args: argparse.Namespace) -> int:
    hub = _service()
    cmd = args.models_command
    if cmd == "search":
        return _search(hub, args)
    if cmd == "files":
        return _files(hub, args)
    if cmd == "download":
        return _download(hub, args)
    if cmd == "rm":
        return _rm(hub, args)
    return _token(hub, args)


def _table(rows: list[list[str]], right: set[int], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(row)
        ]
        print("  ".join(cells).rstrip(), file=out)


def _search(hub: Any, args: argparse.Namespace) -> int:
    with hub.client() as client:
        found = client.search(args.query, limit=args.limit)
    if args.json:
        print(json.dumps([asdict(r) for r in found], indent=2))
        return 0
    if not found:
        print(f"No GGUF models match {args.query!r}.", file=sys.stderr)
        return 0
    rows = [["REPOSITORY", "DOWNLOADS", "LIKES", "LICENCE", "UPDATED"]]
    for r in found:
        name = r.id + (" (gated)" if r.gated else "")
        updated = (r.last_modified or "")[:10] or "—"
        rows.append([name, f"{r.downloads:,}", f"{r.likes:,}", r.license or "—", updated])
    _table(rows, {1, 2}, sys.stdout)
    return 0


def _models(hub: Any, repo: str) -> tuple[Any, list[Any]]:
    from desktop.hub.files import group_gguf

    client = hub.client()
    try:
        models = group_gguf(client.files(repo))
    except BaseException:
        client.close()
        raise
    return client, models


def _files(hub: Any, args: argparse.Namespace) -> int:
    from desktop.hub.files import fit_of, info_for, machine_memory, reference_header

    if args.ctx <= 0:
        raise UserError("--ctx must be a positive number of tokens.")
    client, models = _models(hub, args.repo)
    with client:
        reference = reference_header(client, args.repo, models) if models else None
    ram, vram = machine_memory()
    fits = [fit_of(m, args.ctx, ram, vram, info_for(m, reference)) for m in models]
    if args.json:
        data = [
            {
                "name": m.name,
                "quantization": m.quantization,
                "size": m.size,
                "files": [asdict(f) for f in m.files],
                "fit": {"verdict": fit.verdict, "label": fit.label, "detail": fit.detail},
            }
            for m, fit in zip(models, fits, strict=True)
        ]
        print(json.dumps(data, indent=2))
        return 0
    if not models:
        print(f"{args.repo} has no GGUF models.", file=sys.stderr)
        return 0
    rows = [["MODEL", "QUANT", "SIZE", "FIT", "FILES"]]
    for m, fit in zip(models, fits, strict=True):
        parts = m.first.path if len(m.files) == 1 else f"{m.first.path} (+{len(m.files) - 1})"
        rows.append([m.name, m.quantization or "—", _size(m.size), fit.label, parts])
    _table(rows, {2}, sys.stdout)
    machine = f"{_size(ram)} RAM" if ram else "unknown RAM"
    if vram:
        machine += f", {_size(vram)} GPU memory"
    how = "from the GGUF header" if reference else "estimated from file sizes"
    print(f"Fit at context {args.ctx:,} on {machine} ({how}).", file=sys.stderr)
    return 0


def _size(n: float) -> str:
    from desktop.hub.transfer import size_text

    return size_text(n)


def _pick(models: list[Any], wanted: str) -> Any:
    """By file path, model name, file name (when one model has it), then name in any case."""
    w = wanted.strip().strip("/")
    tries = (
        lambda m: any(f.path == w for f in m.files),
        lambda m: m.name == w,
        lambda m: any(Path(f.path).name == w for f in m.files),
        lambda m: m.name.lower() == w.lower(),
    )
    for test in tries:
        found = [m for m in models if test(m)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            paths = ", ".join(m.first.path for m in found)
            raise UserError(f"{wanted} names more than one model here: say which ({paths}).")
    names = ", ".join(m.name for m in models) or "none"
    raise UserError(f"{wanted} is not a GGUF model of this repository. Its models: {names}.")


class _Progress:
    """One line rewritten with \\r on a terminal, else a line per 10 %."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.last_decile = -1
        self.lock = threading.Lock()

    def __call__(self, p: Any) -> None:
        if p.state != "running" or not p.total:
            return
        pct = 100 * p.done / p.total
        speed = f"{_size(p.speed_bps)}/s" if p.speed_bps else "—/s"
        eta = f"{_duration(p.eta_s)} left" if p.eta_s is not None else ""
        line = f"{pct:5.1f}%  {_size(p.done)} of {_size(p.total)}  {speed}  {eta}".rstrip()
        with self.lock:
            if self.tty:
                print("\r" + line.ljust(70), end="", file=self.out, flush=True)
                return
            decile = int(pct // 10)
            if decile > self.last_decile:
                self.last_decile = decile
                print(line, file=self.out, flush=True)

    def end(self) -> None:
        if self.tty:
            print(file=self.out)


def _duration(s: float) -> str:
    s = max(int(s), 0)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def _download(hub: Any, args: argparse.Namespace) -> int:
    client, models = _models(hub, args.repo)
    client.close()
    model = _pick(models, args.file)
    dl = hub.downloads
    paths = [dl.target_path(args.repo, f) for f in model.files]
    there = dl.downloaded_path(args.repo, model)  # the manifest's word: nothing read
    if there is None and all(dl.local_path(args.repo, f).is_file() for f in model.files):
        print("Checking the sha256 of the file already there…", file=sys.stderr)
        there = dl.downloaded_path(args.repo, model, deep=True)
    if there is not None:
        print(f"Already downloaded: {there}", file=sys.stderr)
        print(there)
        return 0
    have = dl.bytes_on_disk(args.repo, model)
    if have:
        print(f"Resuming {model.name} from {_size(have)} of {_size(model.size)}.", file=sys.stderr)
    else:
        print(
            f"Downloading {model.name} ({_size(model.size)}) into {paths[0].parent}",
            file=sys.stderr,
        )
    progress = _Progress(sys.stderr)
    handle = dl.start(args.repo, model, progress)
    try:
        while not handle.finished:
            handle.wait(0.2)
    except KeyboardInterrupt:
        handle.pause()
        deadline = time.monotonic() + 10
        while handle.progress.state not in ("paused", "complete", "failed"):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        progress.end()
        if handle.progress.state == "paused":
            p = handle.progress
            print(
                f"Paused at {100 * p.done / max(p.total, 1):.0f}%. Run the same command again "
                "to resume.",
                file=sys.stderr,
            )
            return EXIT_PAUSED
    final = handle.wait()
    progress.end()
    if final.state == "complete":
        print(f"Downloaded and verified (sha256): {final.path}", file=sys.stderr)
        print(final.path)
        return 0
    if final.state == "failed":
        if handle.exception is not None:
            raise handle.exception
        raise UserError(final.error or "The download failed.")
    print(f"The download ended: {final.state}.", file=sys.stderr)
    return 1


def _rm(hub: Any, args: argparse.Namespace) -> int:
    dl = hub.downloads
    path = Path(args.file).expanduser()
    if not path.is_absolute() and not path.exists():
        found = [p for p in dl.manifest.entries() if p.name == path.name]
        if len(found) == 1:
            path = found[0]
    path = path.absolute()
    entry = dl.manifest.entry(path)
    if entry is None:
        raise UserError(
            f"{path} was not downloaded by this app, so it is left alone (delete it yourself if "
            "you mean to)."
        )
    if not args.yes:
        print(f"Delete {path}? [y/N] ", end="", file=sys.stderr, flush=True)
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            print("Nothing deleted.", file=sys.stderr)
            return 1
    removed = dl.delete(path)
    for p in removed:
        print(f"Deleted {p}")
    return 0


def _token(hub: Any, args: argparse.Namespace) -> int:
    if args.delete:
        hub.set_token(None)
        print("The hub access token was removed from the keyring.", file=sys.stderr)
        return 0
    if sys.stdin.isatty():
        value = getpass.getpass("Hugging Face access token (hidden): ")
    else:
        value = sys.stdin.readline()
    value = value.strip()
    if not value:
        raise UserError("No token given: nothing was saved.")
    hub.set_token(value)
    print("The hub access token is saved in the keyring.", file=sys.stderr)
    return 0
