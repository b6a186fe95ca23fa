"""What the Models page says about each file, in words (no Qt): the State column's words and
the details panel's facts (``detail_facts``), with where a loaded model runs and the buffers
llama.cpp allocated per device (``load_facts``, from the worker's ``LoadReport``). Which agents
use a file, its disk use, the agent "New agent from this model" proposes and what Load loads
are the library's rules (``desktop.chat.model_library``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from desktop.chat.format import where_text
from desktop.chat.model_library import size_on_disk
from desktop.local.catalog import ModelEntry
from desktop.local.memory import format_bytes
from desktop.local.placement import LoadReport, buffers_text

STATE_WORDS = {
    "unloaded": "Not loaded",
    "loading": "Loading",
    "ready": "Loaded",
    "busy": "Answering",
    "error": "Error",
}


def load_facts(report: LoadReport | None) -> list[tuple[str, str]]:
    """Where a loaded model runs, as llama.cpp reported at its load: "Where it runs" ("31/31
    layers on Vulkan0 · llvmpipe (software)", "0/31 layers on GPU · CPU"), "Buffers" per
    device, and the note of an out-of-memory retry. None of them when it is not loaded."""
    if report is None:
        return []
    where = report.where
    facts = []
    text = where_text({"device": where.device, "offloaded_layers": where.offloaded_layers})
    if text:
        facts.append(("Where it runs", text))
    buffers = buffers_text(report.placement)
    if buffers:
        facts.append(("Buffers", buffers))
    if report.note:
        facts.append(("GPU note", report.note))
    return facts


def detail_facts(
    entry: ModelEntry, users: Sequence[str] = (), report: LoadReport | None = None
) -> list[tuple[str, str]]:
    """The header facts the table leaves to the details panel (and those it hides when
    narrow: size, context, the agents using the file); with ``report``
    (``LocalRuntime.placement_of``), where the loaded model runs (``load_facts``)."""
    folder = entry.folder or "installed with the app (the starter model)"
    info = entry.info
    if info is None:
        return [("File", entry.path), ("Folder", folder), ("Problem", entry.error or "")]
    heads = f"{info.head_count or '?'} ({info.head_count_kv or '?'})"
    return [
        ("Name", info.name),
        ("Size", format_bytes(size_on_disk(entry.path) or info.file_size)),
        ("Used by", ", ".join(users) or "no agent"),
        *load_facts(report),
        ("Architecture", info.architecture),
        ("Parameters", info.parameters_label),
        ("Layers", str(info.block_count or "?")),
        ("Heads (KV)", heads),
        ("Embedding", str(info.embedding_length or "?")),
        ("Trained context", f"{info.context_length:,}" if info.context_length else "?"),
        ("Chat template", "yes" if info.chat_template_present else "no: using ChatML"),
        ("Images", vision_fact(entry)),
        ("Folder", folder),
        ("File", entry.path),
    ]


def vision_fact(entry: ModelEntry) -> str:
    """Whether the model sees images: its vision projector beside it, or none."""
    if entry.mmproj:
        return f"sees them, with the vision projector {Path(entry.mmproj).name}"
    return "text only (no vision projector beside it)"
