"""A conversation to Markdown (to read) or JSON (to keep, or to import elsewhere), and back.

The JSON holds every branch and version with its inference statistics, and never a secret:
agents are named, not copied (no endpoint, no key reference); stats rows keep the endpoint
host (as the footer shows it) but no ids from this database.

Attachments (given the attachment store): the JSON carries each message's files (name, kind,
type, SHA-256 and the bytes in base64); a Markdown file written by ``write_export`` has them in
a folder beside it (``<name>_files/``), linked by relative path. An import stores them again,
each file once, and checks every file's bytes against its SHA-256 first. Blocking (file reads
and writes): the window runs these on a worker thread.

Sources (given the knowledge store): a reply keeps the passages of the person's knowledge
collections it was given; the JSON carries them (number, collection, path, lines, page, score,
text), a Markdown export lists them under the reply (the path as text, never a link), and an
import stores them on the new reply.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import math
import shutil
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from desktop.chat.attachments import safe_file_name
from desktop.errors import UserError
from desktop.store.agents import Agent
from desktop.store.attachments import Attachment, AttachmentStore
from desktop.store.conversations import MESSAGE_STATUSES, Conversation, ConversationStore, Message
from desktop.store.knowledge import KnowledgeStore, Source
from desktop.store.stats import STATS_COLUMNS, StatsStore

if TYPE_CHECKING:
    from desktop.chat.services import Services

FORMAT = "simi-multi/conversation"
# 2: messages may carry "attachments"; 3: replies may carry "sources". A file is written as
# the lowest version that holds what it has (no sources: 2; nor attachments: 1), so an older
# SIMI Multi imports it, and refuses one whose sources or files it would drop without a word.
FORMAT_VERSION = 3
# Keys from this database that mean nothing in another one.
_LOCAL_STATS_KEYS = {"id", "message_id", "conversation_id", "agent_id"}


class _Agents(Protocol):
    def list(self) -> list[Agent]: ...


@dataclass(frozen=True, slots=True)
class Stores:
    """What an export reads and an import writes: the conversations and their stats, and,
    where given, the messages' files (``attachments``), the replies' sources (``knowledge``)
    and the agents an import links messages to by name (``agents``). Without one, what it
    holds is left out."""

    conversations: ConversationStore
    stats: StatsStore
    attachments: AttachmentStore | None = None
    knowledge: KnowledgeStore | None = None
    agents: _Agents | None = None

    @classmethod
    def of(cls, services: Services) -> Stores:
        """The app's stores: its agents, files and knowledge sources (the CLI, the window)."""
        knowledge = services.knowledge.store if services.knowledge is not None else None
        return cls(
            services.conversations,
            services.stats,
            services.attachments.store,
            knowledge,
            services.agents,
        )


class ExportError(UserError):
    """The file is not a conversation this version can import, or there is no such
    conversation to export (``user_message``, also ``str``, is the person's text)."""

    kind = "export"


def _stats_public(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if not row:
        return None
    return {k: v for k, v in row.items() if k not in _LOCAL_STATS_KEYS and v is not None}


def _attachment_json(store: AttachmentStore, a: Attachment) -> dict[str, Any]:
    try:
        data = store.path(a.sha256).read_bytes()
    except OSError as exc:
        raise ExportError(
            f"The attached file “{a.name}” could not be read ({exc.strerror or exc}); "
            "it may have been removed from the data folder."
        ) from exc
    return {
        "name": a.name,
        "kind": a.kind,
        "mime": a.mime,
        "sha256": a.sha256,
        "size": a.size,
        "text_limit": a.text_limit,
        "data": base64.b64encode(data).decode("ascii"),
    }


def _conversation(stores: Stores, conversation_id: int) -> Conversation:
    conv = stores.conversations.get(conversation_id)
    if conv is None:
        raise ExportError(f"There is no conversation {conversation_id}.")
    return conv


@dataclass(frozen=True, slots=True)
class _Beside:
    """What an export shows beside the messages, by message id: each reply's stats (its last
    call), each message's files (none without the attachment store), each reply's sources
    (none without the knowledge store)."""

    stats: dict[int, dict[str, Any]]
    files: dict[int, list[Attachment]]
    sources: dict[int, list[Source]]


def _beside(stores: Stores, messages: Sequence[Message]) -> _Beside:
    replies = [m.id for m in messages if m.role == "assistant"]
    attachments, knowledge = stores.attachments, stores.knowledge
    return _Beside(
        stores.stats.for_messages(replies),
        attachments.of_messages(m.id for m in messages) if attachments is not None else {},
        knowledge.sources_of(replies) if knowledge is not None else {},
    )


def to_json(stores: Stores, conversation_id: int) -> dict[str, Any]:
    """Every version and branch of the conversation, with stats; with the attachment store,
    each message's attached files too (base64); with the knowledge store, each reply's
    sources."""
    conv = _conversation(stores, conversation_id)
    messages = stores.conversations.all_messages(conversation_id)
    active = [m.id for m in stores.conversations.messages(conversation_id)]
    beside = _beside(stores, messages)
    attachments, files, sources = stores.attachments, beside.files, beside.sources
    rows: list[dict[str, Any]] = [
        {
            "id": m.id,
            "parent_id": m.parent_id,
            "active_child": m.active_child_id,
            "role": m.role,
            "content": m.content,
            "reasoning": m.reasoning or None,
            "status": m.status,
            "error_text": m.error_text,
            "error_kind": m.error_kind,
            "agent_name": m.agent_name,
            "model": m.model,
            "created_at": m.created_at,
            "updated_at": m.updated_at,
            "stats": _stats_public(beside.stats.get(m.id)),
        }
        for m in messages
    ]
    if attachments is not None:
        for row in rows:
            if row["id"] in files:
                row["attachments"] = [_attachment_json(attachments, a) for a in files[row["id"]]]
    for row in rows:
        if row["id"] in sources:
            row["sources"] = [s.as_json() for s in sources[row["id"]]]
    return {
        "format": FORMAT,
        "version": 3 if sources else 2 if files else 1,
        "conversation": {
            "title": conv.title,
            "pinned": conv.pinned,
            "created_at": conv.created_at,
            "updated_at": conv.updated_at,
            "active_root": conv.active_root_id,
        },
        "active_path": active,
        "messages": rows,
    }


def _speaker(m: Message) -> str:
    if m.role == "user":
        return "You"
    name = m.agent_name or "Assistant"
    return f"{name} ({m.model})" if m.model and m.model not in name else name


def file_names(attachments: Iterable[Attachment]) -> dict[tuple[str, str], str]:
    """(sha256, name) -> the name of its file in a Markdown export's folder: the attachment's
    own name made safe for any file system, numbered where two different files share one."""
    names: dict[tuple[str, str], str] = {}
    taken: set[str] = set()
    for a in attachments:
        key = (a.sha256, a.name)
        if key in names:
            continue
        base = safe_file_name(a.name)
        stem, dot, ext = base.rpartition(".")
        if not dot or not stem:
            stem, ext = base, ""
        name, n = base, 1
        while name.casefold() in taken:
            n += 1
            name = f"{stem} ({n}).{ext}" if ext else f"{stem} ({n})"
        taken.add(name.casefold())
        names[key] = name
    return names


def _attachment_lines(
    items: Sequence[Attachment], names: dict[tuple[str, str], str], folder: str | None
) -> list[str]:
    """A message's attachments in Markdown: linked to their copies in ``folder`` (relative to
    the document), or named only (no folder: the text went to standard output)."""
    lines = []
    for a in items:
        part = " (first part)" if a.text_limit is not None else ""
        label = " ".join(a.name.split()).replace("[", "(").replace("]", ")")
        if folder is None:
            lines.append(f"- Attached: {label}{part}")
        else:
            link = f"<{folder}/{names[(a.sha256, a.name)]}>"
            lines.append(
                f"![{label}]({link})" if a.kind == "image" else f"- [{label}]({link}){part}"
            )
    return [*lines, ""]


# what Markdown may read as markup in a name (CommonMark lets any of them be escaped)
_MARKUP = str.maketrans({c: f"\\{c}" for c in "\\`*_[]<>&~"})


def _words(text: str) -> str:
    """A name or collection as plain text in Markdown: one line, its markup escaped."""
    return " ".join(text.split()).translate(_MARKUP)


def _code(text: str) -> str:
    """``text`` as a code span (shown as it is: no link, no markup), on one line."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if not text:
        return "(no path)"
    longest = run = 0
    for c in text:
        run = run + 1 if c == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _file_name(path: str) -> str:
    """The last part of a path, with either kind of slash."""
    parts = [part for part in path.replace("\\", "/").split("/") if part]
    return parts[-1] if parts else path


def _source_lines(sources: Sequence[Source]) -> list[str]:
    """A reply's sources in Markdown: "[1] notes.md — lines 10–24 (collection “Notes”)", then
    the full path as text (a path is data, not a link)."""
    lines = ["**Sources**", ""]
    for s in sources:
        place = f" — {s.place}" if s.place else ""
        lines.append(
            f"- \\[{s.position}\\] {_words(_file_name(s.path))}{place} "
            f"(collection “{_words(s.collection)}”), {_code(s.path)}"
        )
    return [*lines, ""]


def to_markdown(stores: Stores, conversation_id: int, files_folder: str | None = None) -> str:
    """The active branch as a readable document: headings per speaker, thinking folded. With
    the attachment store each message lists its files, linked into ``files_folder`` (a folder
    beside the document, as ``write_export`` fills it) when given; with the knowledge store
    each reply lists its sources under its text."""
    from desktop.chat.format import stats_line  # Qt-free, shared with the window's footer

    conv = _conversation(stores, conversation_id)
    path = stores.conversations.messages(conversation_id)
    beside = _beside(stores, path)
    files, sources = beside.files, beside.sources
    names = file_names(a for m in path for a in files.get(m.id, ()))
    out = [f"# {conv.title or 'Conversation'}", ""]
    for m in path:
        out += [f"## {_speaker(m)}", ""]
        if m.id in files:
            out += _attachment_lines(files[m.id], names, files_folder)
        if m.reasoning:
            out += [
                "<details><summary>Thinking</summary>",
                "",
                m.reasoning.strip(),
                "",
                "</details>",
                "",
            ]
        if m.content:
            out += [m.content.rstrip(), ""]
        if m.status in ("cancelled", "interrupted"):
            out += [f"*({m.status})*", ""]
        if m.status == "error":
            out += [f"> **Error:** {m.error_text or 'the reply failed'}", ""]
        if m.id in sources:
            out += _source_lines(sources[m.id])
        line = stats_line(beside.stats.get(m.id))
        if line:
            out += [f"<sub>{line}</sub>", ""]
    return "\n".join(out).rstrip() + "\n"


def write_export(stores: Stores, conversation_id: int, fmt: str, target: Path) -> list[Path]:
    """Write the conversation to ``target`` as Markdown ("md") or JSON: a Markdown file's
    attachments go into ``<name>_files/`` beside it (replaced if it is there), linked by
    relative path; with the knowledge store the replies' sources go in too. Returns what was
    written (the file, then the folder when there is one)."""
    attachments = stores.attachments
    target = Path(target)
    if fmt != "md":
        target.write_text(dumps(to_json(stores, conversation_id)), encoding="utf-8")
        return [target]
    written = [target]
    folder_name = f"{target.stem}_files"
    used: list[Attachment] = []
    if attachments is not None:
        path = stores.conversations.messages(conversation_id)
        used = [a for items in attachments.of_messages(m.id for m in path).values() for a in items]
    text = to_markdown(stores, conversation_id, folder_name if used else None)
    if used:
        assert attachments is not None
        folder = target.parent / folder_name
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(folder)  # an earlier export of the same name: its files went stale
        folder.mkdir(parents=True)
        for (sha, _name), name in file_names(used).items():
            try:
                shutil.copyfile(attachments.path(sha), folder / name)
            except FileNotFoundError as exc:
                raise ExportError(
                    f"The attached file “{_name}” is missing from the data folder; "
                    "the export has no copy of it."
                ) from exc
        written.append(folder)
    target.write_text(text, encoding="utf-8")
    return written


def from_json(data: Any, stores: Stores) -> int:
    """Import one conversation written by ``to_json``; returns the new conversation's id.
    All or nothing (``import_conversations``)."""
    return _import([data], stores, several=False)[0]


def import_conversations(data: Any, stores: Stores) -> list[int]:
    """Import a file's JSON: one conversation written by ``to_json``, or a list of them; returns
    the new conversations' ids in the file's order.

    One transaction around the whole file, on the calling thread's connection (the stats
    store must share the conversation store's ``Database``): a file with one broken
    conversation, or a write that fails (a full disk), leaves nothing in the database, and the
    ``ExportError`` says which conversation and why. Every conversation is checked and put in
    order before the first write, and the cost is linear in messages (one INSERT per message and
    stats row; a message listed before its parent waits for it, no pass over the rest).

    With the attachment store the messages' files are stored again (each once; a file whose
    bytes do not match its SHA-256 stops the import); without it they are left out. With the
    knowledge store the replies' sources are stored again (in the same transaction); without
    it they are left out. With the agents, a message is linked to the agent of its name. A
    malformed file or source stops the import either way.
    """
    if isinstance(data, list):
        if not data:
            raise ExportError("This file holds no conversation.")
        return _import(data, stores, several=True)
    return _import([data], stores, several=False)


def import_into(services: Services, data: Any) -> list[int]:
    """``import_conversations`` into the app's stores: its agents, files and knowledge sources
    (the CLI's ``simi import`` and the window's Import)."""
    return import_conversations(data, Stores.of(services))


@dataclass(frozen=True, slots=True)
class _Planned:
    """One conversation, checked: its messages with every parent before its children."""

    info: dict[str, Any]
    rows: list[dict[str, Any]]
    active_children: list[tuple[Any, Any]]  # (message key, its active child's key)
    active_path: list[Any]
    # id(row) -> its attachments, checked: (the attachment, the file's bytes)
    files: dict[int, list[tuple[Attachment, bytes]]]
    # id(row) -> its sources, checked
    sources: dict[int, list[Source]]


def _import(exports: list[Any], stores: Stores, *, several: bool) -> list[int]:
    def which(n: int) -> str:
        return f"Conversation {n} of {len(exports)} in the file" if several else "The conversation"

    plans = []
    for n, data in enumerate(exports, 1):
        try:
            plans.append(_plan(data))
        except ExportError as exc:
            if not several:
                raise
            raise ExportError(f"{which(n)}: {exc.user_message} Nothing was imported.") from exc
    agents = stores.agents
    known = {a.name.casefold(): a.id for a in agents.list()} if agents else {}
    ids: list[int] = []
    files = _Files(stores.attachments)
    try:
        with stores.conversations.transaction():
            for plan in plans:
                ids.append(_store(plan, stores, known, files))
    except sqlite3.Error as exc:  # a full disk, a locked or damaged file: all rolled back
        files.undo()
        raise ExportError(
            f"{which(len(ids) + 1)} could not be stored ({exc}). Nothing was imported."
        ) from exc
    except OSError as exc:  # an attached file could not be written
        files.undo()
        raise ExportError(
            f"{which(len(ids) + 1)}: an attached file could not be stored "
            f"({exc.strerror or exc}). Nothing was imported."
        ) from exc
    except BaseException:
        files.undo()
        raise
    return ids


class _Files:
    """An import's attached files: stored once each; those it added are removed again when
    the import fails (their rows went with the rolled-back transaction)."""

    def __init__(self, store: AttachmentStore | None) -> None:
        self.store = store
        self._stored: set[str] = set()
        self._added: list[str] = []

    def put(self, attachment: Attachment, data: bytes) -> None:
        store = self.store
        if store is None or attachment.sha256 in self._stored:
            return
        new = not store.has(attachment.sha256)
        sha, _size = store.put_bytes(data, kind=attachment.kind, mime=attachment.mime)
        self._stored.add(sha)
        if new:
            self._added.append(sha)

    def undo(self) -> None:
        store = self.store
        if store is None:
            return
        for sha in self._added:
            store.release(sha)
            store.remove_files(sha)


def _key(value: Any, what: str) -> Any:
    if value is None or (isinstance(value, (int, str)) and not isinstance(value, bool)):
        return value
    raise ExportError(f"The export has a message whose {what} is {value!r}, not an id.")


def _plan(data: Any) -> _Planned:
    """Check one export and order its messages (parents first, the file's order otherwise),
    in one pass: a message whose parent comes later waits for it."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ExportError("This file is not a SIMI Multi conversation export.")
    try:
        version = int(data.get("version", 0))
    except (TypeError, ValueError):
        raise ExportError("The export's version is not a number.") from None
    if version > FORMAT_VERSION:
        raise ExportError(
            "This conversation was exported by a newer SIMI Multi; update to import it."
        )
    info = data.get("conversation") or {}
    rows = data.get("messages")
    if not isinstance(info, dict) or not isinstance(rows, list):
        raise ExportError("The export has no message list.")
    ordered: list[dict[str, Any]] = []
    placed: set[Any] = set()
    waiting: dict[Any, list[dict[str, Any]]] = {}
    active_children = []
    for number, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            raise ExportError(f"Message {number} of the export is not a message.")
        key, parent = _key(row.get("id"), "id"), _key(row.get("parent_id"), "parent")
        status = str(row.get("status") or "complete")
        if status not in MESSAGE_STATUSES:
            raise ExportError(f"Message {number} of the export has an unknown status {status!r}.")
        child = _key(row.get("active_child"), "active child")
        if key is not None and child is not None:
            active_children.append((key, child))
        if parent is not None and parent not in placed:
            waiting.setdefault(parent, []).append(row)
            continue
        stack = [row]
        while stack:  # this message, then those that waited for it (file order)
            ready = stack.pop()
            ordered.append(ready)
            ready_key = ready.get("id")
            if ready_key is not None:
                if ready_key in placed:
                    raise ExportError(f"The export has two messages with the id {ready_key!r}.")
                placed.add(ready_key)
                stack.extend(reversed(waiting.pop(ready_key, [])))
    if waiting:
        raise ExportError("The export's messages refer to parents that are not in it.")
    path = data.get("active_path") or []
    if not isinstance(path, list):
        raise ExportError("The export's active path is not a list.")
    files = {
        id(row): _attachments_of(row.get("attachments"), number)
        for number, row in enumerate(rows, 1)
        if row.get("attachments")
    }
    sources = {
        id(row): _sources_of(row.get("sources"), number)
        for number, row in enumerate(rows, 1)
        if row.get("sources")
    }
    return _Planned(info, ordered, active_children, path, files, sources)


def _whole(value: Any) -> bool:
    """A whole number SQLite can hold (a bigger one would not be refused but crash)."""
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def _unicode(*values: str) -> bool:
    """Text SQLite can store (JSON may hold a lone surrogate, which UTF-8 cannot)."""
    try:
        for value in values:
            value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _sources_of(value: Any, number: int) -> list[Source]:
    """A reply's sources from an export, each checked: a number, a collection, a path and the
    passage's text; lines and page whole numbers or nothing; a score a number or nothing."""
    where = f"Message {number} of the export"
    if not isinstance(value, list):
        raise ExportError(f"{where} has sources that are not a list.")
    found: list[Source] = []
    numbers: set[int] = set()
    for item in value:
        if not isinstance(item, dict):
            raise ExportError(f"{where} has a source that is not described.")
        n = item.get("n")
        if not isinstance(n, int) or not _whole(n) or n < 1:
            raise ExportError(f"{where} has a source without a number.")
        if n in numbers:
            raise ExportError(f"{where} has two sources numbered {n}.")
        numbers.add(n)
        collection, path, text = item.get("collection"), item.get("path"), item.get("text")
        if not isinstance(collection, str) or not isinstance(path, str):
            raise ExportError(f"{where}: source {n} has no collection or path.")
        if not isinstance(text, str):
            raise ExportError(f"{where}: source {n} has no text.")
        if not _unicode(collection, path, text):
            raise ExportError(f"{where}: source {n} has text that is not valid Unicode.")
        where_in = [item.get(k) for k in ("start_line", "end_line", "page")]
        if any(v is not None and not _whole(v) for v in where_in):
            raise ExportError(f"{where}: source {n} has lines or a page that are not numbers.")
        score = item.get("score")
        if score is not None and (
            isinstance(score, bool)
            or not isinstance(score, (int, float))
            or not math.isfinite(score)
        ):
            raise ExportError(f"{where}: source {n} has a score that is not a number.")
        start, end, page = where_in
        found.append(
            Source(
                n, collection, path, start, end, page, None if score is None else float(score), text
            )
        )
    return found


def _attachments_of(value: Any, number: int) -> list[tuple[Attachment, bytes]]:
    """A message's attachments from an export, each checked: its bytes decode and match its
    SHA-256 (a damaged or edited file is refused, not stored under a wrong name)."""
    where = f"Message {number} of the export"
    if not isinstance(value, list):
        raise ExportError(f"{where} has attachments that are not a list.")
    found: list[tuple[Attachment, bytes]] = []
    for item in value:
        if not isinstance(item, dict):
            raise ExportError(f"{where} has an attachment that is not described.")
        name = item.get("name")
        kind = item.get("kind")
        mime = item.get("mime")
        limit = item.get("text_limit")
        if not isinstance(name, str) or kind not in ("image", "document"):
            raise ExportError(f"{where} has an attachment without a name or kind.")
        if not isinstance(mime, str) or not isinstance(item.get("data"), str):
            raise ExportError(f"{where}: the attachment “{name}” has no data.")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise ExportError(f"{where}: the attachment “{name}” has a bad text limit.")
        try:
            data = base64.b64decode(item["data"], validate=True)
        except (binascii.Error, ValueError):
            raise ExportError(f"{where}: the attachment “{name}” is damaged.") from None
        sha = hashlib.sha256(data).hexdigest()
        claimed = item.get("sha256")
        if claimed is not None and str(claimed).lower() != sha:
            raise ExportError(
                f"{where}: the attachment “{name}” does not match its checksum (the file was "
                "damaged or changed)."
            )
        found.append((Attachment(sha, name, kind, mime, len(data), limit), data))
    return found


def _store(plan: _Planned, stores: Stores, known: dict[str, int | None], files: _Files) -> int:
    """Write one checked conversation (inside the caller's transaction): one INSERT per
    message and per stats row, then the branches on show in one go; attached files stored
    (each once) and attached to their messages; the replies' sources stored on them."""
    conversations, knowledge = stores.conversations, stores.knowledge
    info = plan.info
    conv = conversations.create(None, str(info.get("title") or "Imported conversation"))
    if info.get("pinned"):
        conversations.set_pinned(conv.id, True)
    new_ids: dict[Any, int] = {}
    parent_of: dict[int, int | None] = {}
    # as if each message had been added in turn: the last one at each place is on show ...
    active: dict[int | None, int] = {}
    for row in plan.rows:
        parent = row.get("parent_id")
        status = str(row.get("status") or "complete")
        if status == "streaming":  # it was cut off when exported
            status = "interrupted"
        agent_name = row.get("agent_name")
        agent_id = known.get(str(agent_name).casefold()) if agent_name else None
        new_parent = new_ids[parent] if parent is not None else None
        msg_id = conversations.insert_message(
            conv.id,
            str(row.get("role") or "user"),
            str(row.get("content") or ""),
            status=status,
            error_text=row.get("error_text") if status == "error" else None,
            error_kind=row.get("error_kind") if status == "error" else None,
            agent_id=agent_id,
            agent_name=agent_name,
            model=row.get("model"),
            parent_id=new_parent,
            reasoning=str(row.get("reasoning") or ""),
        )
        parent_of[msg_id] = new_parent
        active[new_parent] = msg_id
        attached = plan.files.get(id(row))
        if attached and files.store is not None:
            for attachment, data in attached:
                files.put(attachment, data)
            files.store.attach(msg_id, [a for a, _data in attached])
        given = plan.sources.get(id(row))
        if given and knowledge is not None:
            knowledge.add_sources(msg_id, given)
        if row.get("id") is not None:
            new_ids[row["id"]] = msg_id
        record = row.get("stats")
        if isinstance(record, dict):
            clean = {k: v for k, v in record.items() if k in STATS_COLUMNS}
            clean.setdefault("agent_name", agent_name or "unknown")
            clean.setdefault("provider_kind", "unknown")
            clean.setdefault("started_at", row.get("created_at") or "")
            clean.update(message_id=msg_id, conversation_id=conv.id, agent_id=agent_id)
            stores.stats.record(clean)
    # ... then the branch each message had on show, then the active path itself
    for key, child in plan.active_children:
        if child in new_ids:
            active[new_ids[key]] = new_ids[child]
    path = [new_ids[i] for i in plan.active_path if _hashable(i) and i in new_ids]
    if path:
        shown: int | None = path[-1]
        while shown is not None:
            active[parent_of[shown]] = shown
            shown = parent_of[shown]
    elif _hashable(info.get("active_root")) and info.get("active_root") in new_ids:
        active[None] = new_ids[info["active_root"]]
    conversations.point_all(conv.id, active)
    return conv.id


def _hashable(value: Any) -> bool:
    return value is None or isinstance(value, (int, str, float))


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"
