"""Export a conversation to Markdown or JSON, import one from JSON: the dialogs here; building
the export, writing it and reading an import run on a worker thread (a big conversation or a
slow disk never stalls the window)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from desktop.chat.export import ExportError, dumps, from_json, to_json, to_markdown
from desktop.chat.services import Services
from desktop.ui.async_door import run_blocking, start


def _export_text(services: Services, fmt: str, conversation_id: int) -> str:
    store, stats = services.conversations, services.stats
    if fmt == "md":
        return to_markdown(store, stats, conversation_id)
    return dumps(to_json(store, stats, conversation_id))


def _read_json(path: str) -> object:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def export_conversation(
    services: Services,
    fmt: str,
    conversation_id: int | None,
    *,
    ask_save_path: Callable[[str, str, str], str | None],
    say: Callable[[str], None],
) -> asyncio.Task[None] | None:
    """File → Export as Markdown ("md") or JSON. ``ask_save_path(title, suggested, filters)``
    asks where (None: cancelled); ``say`` reports on the status line."""
    conv = services.conversations.get(conversation_id) if conversation_id is not None else None
    if conv is None:
        say("Open a conversation to export it.")
        return None
    stem = "".join(c if c.isalnum() or c in " -_" else "_" for c in conv.title)[:60]
    suffix, filters = (".md", "Markdown (*.md)") if fmt == "md" else (".json", "JSON (*.json)")
    path = ask_save_path("Export conversation", (stem or "conversation") + suffix, filters)
    if not path:
        return None
    title = conv.title

    async def write() -> None:
        try:
            text = await run_blocking(_export_text, services, fmt, conv.id)
            await run_blocking(Path(path).write_text, text, encoding="utf-8")
        except OSError as exc:
            say(f"Could not write {path}: {exc.strerror or exc}")
            return
        say(f"Exported “{title}” to {path}")

    say(f"Exporting “{title}”…")
    return start(write(), name="export")


def import_conversation(
    services: Services,
    *,
    ask_open_path: Callable[[str, str], str | None],
    say: Callable[[str], None],
    opened: Callable[[int], None],
) -> asyncio.Task[None] | None:
    """File → Import: ``ask_open_path(title, filters)`` asks which file; ``opened`` shows the
    imported conversation."""
    path = ask_open_path("Import conversation", "SIMI Multi JSON (*.json)")
    if not path:
        return None

    async def read() -> None:
        try:
            data = await run_blocking(_read_json, path)
            # stored on the loop's thread: the connection is shared with streaming replies
            conv_id = from_json(data, services.conversations, services.stats, services.agents)
        except (OSError, ValueError) as exc:
            message = str(exc) if isinstance(exc, ExportError) else f"{path}: {exc}"
            say(f"Could not import: {message}")
            return
        opened(conv_id)
        say(f"Imported {Path(path).name}")

    return start(read(), name="import")
