"""Export a conversation to Markdown or JSON, import from JSON: the dialogs here; building the
export, writing it, and reading and storing an import run on a worker thread (a big
conversation or a slow disk never stalls the window; the worker has its own connection, so the
import's one transaction never takes in a streaming reply's writes). Where the dialogs start
and what they remember are ``desktop.chat.file_places``'s."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from desktop.chat import file_places
from desktop.chat.export import ExportError, Stores, import_into, write_export
from desktop.chat.services import Services
from desktop.ui.kit.async_door import run_blocking, start


def _write_export(services: Services, fmt: str, conversation_id: int, path: str) -> None:
    """The file (a Markdown file's attachments in ``<name>_files/`` beside it; JSON carries
    them inside)."""
    write_export(Stores.of(services), conversation_id, fmt, Path(path))


def _read_json(path: str) -> object:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def proposed_path(services: Services, suggested: str) -> str:
    """Where a save dialog opens for ``suggested``: a bare file name goes into the folder used
    last, else Documents (the Stats page's CSV export too)."""
    return file_places.proposed_path(services.prefs, suggested)


def export_conversation(
    services: Services,
    fmt: str,
    conversation_id: int | None,
    *,
    ask_save_path: Callable[[str, str, str], str | None],
    say: Callable[[str], None],
) -> asyncio.Task[None] | None:
    """File → Export as Markdown ("md") or JSON. ``ask_save_path(title, suggested, filters)``
    asks where (None: cancelled), proposing the title as a clean file name in the folder used
    last, else Documents; the folder chosen is remembered. ``say`` reports on the status
    line."""
    conv = services.conversations.get(conversation_id) if conversation_id is not None else None
    if conv is None:
        say("Open a conversation to export it.")
        return None
    suggested, filters = file_places.export_suggestion(services.prefs, conv.title, fmt)
    path = ask_save_path("Export conversation", suggested, filters)
    if not path:
        return None
    file_places.remember(services.prefs, path)
    title = conv.title

    async def write() -> None:
        try:
            await run_blocking(_write_export, services, fmt, conv.id, path)
        except ExportError as exc:
            say(f"Could not export: {exc.user_message}")
            return
        except OSError as exc:
            say(f"Could not write {path}: {exc.strerror or exc}")
            return
        say(f"Exported “{title}” to {path}")

    say(f"Exporting “{title}”…")
    return start(write(), name="export")


def _import_file(services: Services, path: str) -> list[int]:
    """Read and store an import (on a worker thread: its own connection, one transaction)."""
    data = _read_json(path)
    return import_into(services, data)


def import_conversation(
    services: Services,
    *,
    ask_open_path: Callable[[str, str, str], str | None],
    say: Callable[[str], None],
    opened: Callable[[int], None],
) -> asyncio.Task[None] | None:
    """File → Import: ``ask_open_path(title, filters, folder)`` asks which file, starting in
    the folder used last (else Documents), which is then remembered; ``opened`` shows the
    imported conversation (the first, for a file of several). Reading and storing run on a
    worker thread, all or nothing: a file that fails part-way leaves no conversation."""
    folder = file_places.import_folder(services.prefs)
    path = ask_open_path("Import conversation", file_places.IMPORT_FILTERS, folder)
    if not path:
        return None
    file_places.remember(services.prefs, path)

    async def read() -> None:
        try:
            conv_ids = await run_blocking(_import_file, services, path)
        except ExportError as exc:
            say(f"Could not import: {exc.user_message}")
            return
        except (OSError, ValueError) as exc:
            say(f"Could not import: {path}: {exc}")
            return
        opened(conv_ids[0])
        name = Path(path).name
        if len(conv_ids) == 1:
            say(f"Imported {name}")
        else:
            say(f"Imported {len(conv_ids)} conversations from {name}")

    return start(read(), name="import")
