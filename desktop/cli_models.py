"""``simi models``: the local model library (GGUF files) and what llama.cpp can offload.

It needs no database, only the app folder's paths and preferences.
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_parser(sub: Any) -> None:
    """Add ``models list|gpu [--json] | add-folder PATH | remove-folder PATH`` and the hub's
    ``search | files | download | rm | token`` (``cli_hub``)."""
    models = sub.add_parser("models", help="the local model library (GGUF files)")
    msub = models.add_subparsers(dest="models_command", required=True)
    for name, help_text, argument in (
        ("list", "list GGUF files with what their headers say", "--json"),
        ("add-folder", "link a folder of .gguf files (never copied)", "path"),
        ("remove-folder", "unlink a folder (its files are kept)", "path"),
        ("gpu", "what the installed llama.cpp build supports", "--json"),
    ):
        command = msub.add_parser(name, help=help_text)
        if argument == "--json":
            command.add_argument("--json", action="store_true")
        else:
            command.add_argument(argument)
    from desktop import cli_hub

    cli_hub.add_subcommands(msub)


def run(args: argparse.Namespace) -> int:
    """Run the ``models`` command in ``args``; the exit status (a ``UserError`` is raised)."""
    from desktop import cli_hub

    if args.models_command in cli_hub.HUB_COMMANDS:
        return cli_hub.run(args)
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
        count = sum(1 for _file, where in catalog.files() if where == folder)
        print(f"Linked {folder} ({count} GGUF files). The files stay where they are.")
        return 0
    if cmd == "remove-folder":
        folder = catalog.remove_folder(args.path)
        print(f"Unlinked {folder}. Its files were not touched.")
        return 0
    support = detect()
    if cmd == "gpu":
        if args.json:
            print(json.dumps(support.to_public_dict(), indent=2))
        else:
            print(support.summary)
        return 0
    entries = catalog.entries()
    if args.json:
        data = {
            "folders": [str(f) for f in catalog.folders()],
            "gpu": support.to_public_dict(),
            "models": [e.to_public_dict() for e in entries],
        }
        print(json.dumps(data, indent=2))
        return 0
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
    return 0
