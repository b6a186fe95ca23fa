"""A collection's figures in words for the Knowledge page (pure functions, no Qt)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # desktop.knowledge loads numpy: only when an index runs
    from desktop.chat.knowledge import CollectionState
    from desktop.knowledge import IndexProgress, IndexReport
    from desktop.store.knowledge import Collection, Source

PREVIEW_CHARS = 160  # of a passage, in the search results (the whole of it: its tooltip)


def count(n: int, word: str) -> str:
    """ "1 file", "1,204 files"."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def when(iso: str | None) -> str:
    """An ISO time as local date and time, "never" for None."""
    if not iso:
        return "never"
    try:
        moment = datetime.fromisoformat(iso).astimezone()
    except ValueError:
        return iso
    shape = "%d %b, %H:%M" if moment.year == datetime.now().year else "%d %b %Y, %H:%M"
    return moment.strftime(shape).lstrip("0")


def seconds(s: float) -> str:
    if s < 1:
        return "under a second"
    if s < 90:
        return f"{s:.0f} s"
    minutes, rest = divmod(round(s), 60)
    if minutes < 90:
        return f"{minutes} min {rest:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def paths_line(collection: Collection) -> str:
    return ", ".join(collection.paths) if collection.paths else "no folders"


def row_subtitle(collection: Collection, state: CollectionState | str | None) -> str:
    """The collection's row under its name: files, passages, when it was last indexed and
    its folders' names (an index that cannot be read: why)."""
    if state is None:
        figures = "…"
    elif isinstance(state, str):
        figures = state
    elif state.indexed_at is None and not state.files:
        figures = "not indexed yet"
    else:
        figures = (
            f"{count(state.files, 'file')} · {count(state.chunks, 'passage')} · "
            f"indexed {when(state.indexed_at)}"
        )
    names = ", ".join(Path(p).name or p for p in collection.paths)
    return f"{figures} · {names}" if names else figures


def progress_text(p: IndexProgress) -> str:
    """ "12 of 40 files · 230 passages · 45 passages/s · about 10 s left"."""
    parts = [
        f"{p.files_done:,} of {count(p.files_total, 'file')}",
        count(p.chunks, "passage"),
    ]
    if p.chunks_per_s > 0:
        parts.append(f"{p.chunks_per_s:,.0f} passages/s")
    if p.eta_s is not None and p.files_done < p.files_total:
        parts.append(f"about {seconds(p.eta_s)} left")
    elif p.files_total == 0:
        parts.append("looking for files")
    return " · ".join(parts)


def report_text(report: IndexReport) -> str:
    """What a run did, in one or two sentences."""
    changes = (
        f"{report.added:,} added, {report.changed:,} changed, {report.removed:,} removed, "
        f"{report.unchanged:,} unchanged"
    )
    holds = f"The index holds {count(report.files, 'file')} and {count(report.chunks, 'passage')}"
    skipped = f"; {count(len(report.skipped), 'file')} skipped" if report.skipped else ""
    if report.cancelled:
        return (
            f"Cancelled after {seconds(report.seconds)} ({changes}). What was read is kept: "
            f"Index now goes on from there. {holds}{skipped}."
        )
    return f"Indexed in {seconds(report.seconds)}: {changes}. {holds}{skipped}."


def state_text(state: CollectionState) -> str:
    if state.indexed_at is None and not state.files:
        return "Not indexed yet: Index now reads its files."
    skipped = f"; {count(len(state.skipped), 'file')} skipped" if state.skipped else ""
    return (
        f"{count(state.files, 'file')} and {count(state.chunks, 'passage')}, last indexed "
        f"{when(state.indexed_at)}{skipped}."
    )


def shown_path(path: str, roots: tuple[str, ...]) -> str:
    """``path`` from the folder of the collection it is under ("Project notes/photo.bin"),
    else whole."""
    for root in roots:
        try:
            inside = Path(path).relative_to(root)
        except ValueError:
            continue
        return str(Path(Path(root).name) / inside) if str(inside) != "." else Path(root).name
    return path


def skipped_line(path: str, reason: str) -> str:
    return f"{path} — {reason}"


def source_text(source: Source) -> str:
    """A passage found: "1. notes.md · lines 10–24 · score 0.0164" and the start of its text
    on the next line."""
    head = [f"{source.position}. {Path(source.path).name}"]
    if source.place:
        head.append(source.place)
    if source.score is not None:
        head.append(f"score {source.score:.4f}")
    text = " ".join(source.text.split())
    if len(text) > PREVIEW_CHARS:
        text = text[: PREVIEW_CHARS - 1].rstrip() + "…"
    return " · ".join(head) + "\n" + text
