"""Attachments for the window, the CLI and prompt sets: files made ready to send, what they
cost an agent's context, whether the agent can see images, and what a message with
attachments becomes in a request.

``AttachmentService`` (``Services.attachments``) is the window's door to ``desktop.attach``
and the attachment store: the window may not import either beyond their read models
(``tests/test_layers.py``). Everything here that reads or writes files is blocking: the window
calls it through ``run_blocking``, a turn off the event loop (``ChatService.run``).

A document is text in the message (``document_block`` per file, before the person's words); an
image is an ``ImagePart`` sized for the agent's provider. A local agent sees images only with a
vision projector (``Agent.mmproj_path``); a remote agent is taken to see them (a server that
cannot says so, and the wire reports it in words).
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from desktop.attach.documents import document_block
from desktop.attach.prepare import (
    CHARS_PER_TOKEN,
    Prepared,
    document_text,
    estimate_tokens,
    image_part,
    prepare,
    prepare_bytes,
)
from desktop.errors import UserError
from desktop.llm.provider import ChatMessage, ImagePart
from desktop.local.context import DEFAULT_REPLY_RESERVE
from desktop.local.vision import cannot_see_message, sees_images
from desktop.store.agents import Agent
from desktop.store.attachments import Attachment, AttachmentStore
from desktop.store.conversations import ConversationStore

log = logging.getLogger("simi.chat")

# A document cut to fit ("Send the first part") keeps at least this many tokens of its text:
# less would be a name and a few words, not worth sending.
MIN_PART_TOKENS = 64

Counter = Callable[[list[ChatMessage]], int]


@dataclass(frozen=True, slots=True)
class ContextCheck:
    """Whether a message with its attachments fits the agent's context. ``needed``: the
    tokens of the prompt (history, text, attachments) plus room for the reply; ``window``: the
    agent's context (None: not known, a remote agent: taken to fit). ``first_part``: the same
    attachments with ``text_limit`` set on documents so all fits ("Send the first part");
    None when it fits, or when cutting documents cannot make it fit."""

    fits: bool
    needed: int
    window: int | None
    first_part: list[Attachment] | None = None


@dataclass(frozen=True, slots=True)
class MessageParts:
    """What a user message's attachments add to it: the documents' blocks (text before the
    person's words) and the images."""

    blocks: str = ""
    images: tuple[ImagePart, ...] = ()

    def content(self, text: str) -> str:
        return "\n\n".join(part for part in (self.blocks, text) if part)


# what a message sends --------------------------------------------------------------------------
def documents_text(store: AttachmentStore, attachments: Iterable[Attachment]) -> str:
    """The delimited blocks of the documents among ``attachments``, in order (blocking: reads
    their cached text, extracting it if missing)."""
    blocks = [
        document_block(a.name, document_text(store, a)) for a in attachments if a.kind == "document"
    ]
    return "\n\n".join(blocks)


def message_parts(
    store: AttachmentStore, attachments: Sequence[Attachment], agent_kind: str
) -> MessageParts:
    """A user message's attachments as they are sent to an agent of ``agent_kind``. Blocking
    (the first time an image is sized for a provider, Pillow resizes it): off the loop."""
    return MessageParts(
        documents_text(store, attachments),
        tuple(image_part(store, a, agent_kind) for a in attachments if a.kind == "image"),
    )


def parts_of(
    store: AttachmentStore, found: Mapping[int, Sequence[Attachment]], agent_kind: str
) -> dict[int, MessageParts]:
    """``message_parts`` for each message of ``found`` (message id -> its attachments)."""
    return {mid: message_parts(store, items, agent_kind) for mid, items in found.items()}


def with_parts(message: ChatMessage, parts: MessageParts | None) -> ChatMessage:
    """``message`` with its attachments: the documents before its text, its images."""
    if parts is None:
        return message
    return replace(
        message, content=parts.content(message.content), images=message.images + parts.images
    )


# who can see ------------------------------------------------------------------------------------
def images_problem(agent: Agent, images: int) -> str | None:
    """Why ``agent`` cannot take ``images`` images, in words for the person; None: it can
    (or there are none). A local model needs its vision projector file
    (``desktop.local.vision``); a remote agent is taken to see (its server says otherwise, and
    the wire reports that in words)."""
    if images <= 0 or sees_images(agent):
        return None
    return cannot_see_message(agent, images)


def vision_problem(agent: Agent, attachments: Sequence[Attachment]) -> str | None:
    """``images_problem`` for the images among ``attachments``."""
    return images_problem(agent, sum(1 for a in attachments if a.kind == "image"))


# the service ------------------------------------------------------------------------------------
class AttachmentService:
    """What the window, the CLI and prompt sets do with attachments (``Services.attachments``).
    Every method but ``vision_problem`` is blocking: call it off the GUI thread."""

    def __init__(
        self,
        store: AttachmentStore,
        conversations: ConversationStore | None = None,
        *,
        counter_for: Callable[[Agent], Counter] | None = None,
    ) -> None:
        self.store = store
        self._conversations = conversations
        # how a local agent's prompt is counted (None: its own tokenizer, vocabulary only)
        self._counter_for = counter_for
        self._view_root: Path | None = None
        self._collecting: threading.Thread | None = None
        self._collect_again = False
        self._lock = threading.Lock()

    # files --------------------------------------------------------------------------------
    def prepare(
        self,
        path: Path,
        *,
        name: str | None = None,
        progress: Callable[[int, int], None] | None = None,
        cancel: Callable[[], bool] | None = None,
    ) -> Prepared:
        """Check, store and read a file (``desktop.attach.prepare``); ``AttachError`` in words
        for its chip."""
        return prepare(Path(path), self.store, name=name, progress=progress, cancel=cancel)

    def prepare_bytes(self, data: bytes, name: str) -> Prepared:
        """A pasted image (or file) from memory."""
        return prepare_bytes(data, name, self.store)

    def release(self, attachment: Attachment) -> None:
        """A chip removed before sending: its file may go once no message uses it."""
        self.store.release(attachment.sha256)

    def estimate_tokens(self, attachment: Attachment, agent: Agent) -> int:
        """What the attachment takes of ``agent``'s context, about (the chip's figure)."""
        return int(estimate_tokens(attachment, self.store, agent.kind))

    def path(self, attachment: Attachment) -> Path:
        """The stored file (a thumbnail reads it)."""
        return self.store.path(attachment.sha256)

    def viewing_copy(self, attachment: Attachment) -> Path:
        """A copy under the attachment's own name in a temporary folder, for the system's
        viewer (the stored file has no name a viewer knows what to do with). The folder goes
        when the app closes (``close``)."""
        with self._lock:
            if self._view_root is None:
                self._view_root = Path(tempfile.mkdtemp(prefix="simi-attachments-"))
            root = self._view_root
        folder = Path(tempfile.mkdtemp(dir=root))
        target = folder / safe_file_name(attachment.name)
        shutil.copyfile(self.path(attachment), target)
        return target

    # who can see ------------------------------------------------------------------------------
    def vision_problem(self, agent: Agent, attachments: Sequence[Attachment]) -> str | None:
        """Why ``agent`` cannot take these attachments' images (None: fine). Not blocking."""
        return vision_problem(agent, attachments)

    # the context ------------------------------------------------------------------------------
    def context_check(
        self,
        agent: Agent,
        text: str,
        attachments: Sequence[Attachment],
        conversation_id: int | None = None,
    ) -> ContextCheck:
        """Whether ``text`` with ``attachments`` (after the conversation's branch on show, when
        ``conversation_id`` is given) fits ``agent``'s context with room for the reply.
        A local agent's prompt is counted by its own tokenizer; a remote agent's window is not
        known, so it is taken to fit (``needed`` is then a rough figure). Blocking."""
        reserve = min(agent.max_tokens or DEFAULT_REPLY_RESERVE, 1024)
        history, history_images = self._history(agent, conversation_id)
        image_tokens = history_images + sum(
            self.estimate_tokens(a, agent) for a in attachments if a.kind == "image"
        )
        window = (agent.n_ctx or 2048) if agent.is_local else None
        store = self.store

        def message(items: Sequence[Attachment]) -> ChatMessage:
            return ChatMessage("user", MessageParts(documents_text(store, items)).content(text))

        if window is None:
            needed = _rough([*history, message(attachments)]) + image_tokens + reserve
            return ContextCheck(True, needed, None)
        counter = self._counter(agent)
        try:

            def count(items: Sequence[Attachment]) -> int:
                return counter([*history, message(items)]) + image_tokens + reserve

            needed = count(attachments)
            if needed <= window:
                return ContextCheck(True, needed, window)
            return ContextCheck(False, needed, window, self._first_part(attachments, window, count))
        finally:
            close = getattr(counter, "close", None)
            if callable(close):
                close()

    def _first_part(
        self,
        attachments: Sequence[Attachment],
        window: int,
        count: Callable[[Sequence[Attachment]], int],
    ) -> list[Attachment] | None:
        """The attachments with their documents cut, all by the same share, so the whole fits
        ``window``; None when even empty documents leave too little room."""
        docs = [i for i, a in enumerate(attachments) if a.kind == "document"]
        if not docs:
            return None
        full = {
            i: len(document_text(self.store, replace(attachments[i], text_limit=None)))
            for i in docs
        }

        def cut(share: float) -> list[Attachment]:
            out = list(attachments)
            for i in docs:
                out[i] = replace(out[i], text_limit=max(0, int(full[i] * share)))
            return out

        base = count(cut(0.0))  # everything but the documents' text
        room = window - base
        if room < MIN_PART_TOKENS:
            return None
        whole = count(cut(1.0)) - base
        share = room / max(whole, 1)
        for _ in range(5):  # tokens per character vary along a text: shrink until it fits
            candidate = cut(min(share, 1.0))
            took = count(candidate) - base
            if took <= room:
                return candidate
            share *= room / took * 0.97
        return None

    def _counter(self, agent: Agent) -> Counter:
        if self._counter_for is not None:
            return self._counter_for(agent)
        from desktop.chat.kinds import load_params_for
        from desktop.local.context import PromptCounter

        try:
            return _Fallback(PromptCounter(load_params_for(agent).model_path))
        except UserError:  # no model file: the send says so; a rough count will do here
            return _rough

    def _history(self, agent: Agent, conversation_id: int | None) -> tuple[list[ChatMessage], int]:
        """The system prompt and the conversation's branch on show, as a request would send it
        (documents as text), and the image tokens of that branch's attachments."""
        history: list[ChatMessage] = []
        if agent.system_prompt.strip():
            history.append(ChatMessage("system", agent.system_prompt))
        if conversation_id is None or self._conversations is None:
            return history, 0
        path = [
            m
            for m in self._conversations.messages(conversation_id)
            if m.role == "user" or (m.role == "assistant" and m.status != "error" and m.content)
        ]
        found = self.store.of_messages(m.id for m in path if m.role == "user")
        images = 0
        for m in path:
            items = found.get(m.id, [])
            images += sum(self.estimate_tokens(a, agent) for a in items if a.kind == "image")
            blocks = documents_text(self.store, items)
            history.append(ChatMessage(m.role, MessageParts(blocks).content(m.content)))  # type: ignore[arg-type]
        return history, images

    # clean-up ---------------------------------------------------------------------------------
    def collect(self) -> int:
        """Remove the files no message uses any more (blocking); how many went."""
        return self.store.collect()

    def collect_soon(self) -> None:
        """``collect`` on a thread of its own (it has its own connection): a conversation just
        deleted in the window takes its last files with it, without the window waiting."""
        with self._lock:
            if self._collecting is not None and self._collecting.is_alive():
                self._collect_again = True
                return
            self._collecting = threading.Thread(
                target=self._collect_loop, name="simi-collect-attachments", daemon=True
            )
            self._collecting.start()

    def _collect_loop(self) -> None:
        while True:
            try:
                removed = self.store.collect()
                if removed:
                    log.info("removed %d attachment files no message uses", removed)
            except Exception:  # the database closed at exit, a file held open: next time
                log.exception("could not remove unused attachment files")
            with self._lock:
                if not self._collect_again:
                    return
                self._collect_again = False

    def wait_collected(self, timeout: float | None = None) -> None:
        """Wait for a ``collect_soon`` under way (at exit, before the database closes)."""
        thread = self._collecting
        if thread is not None:
            thread.join(timeout)

    def close(self) -> None:
        """At exit: the collection under way ends, the viewing copies go."""
        self.wait_collected(5.0)
        root, self._view_root = self._view_root, None
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


class _Fallback:
    """A local agent's own tokenizer, or a rough count when it cannot load (a damaged file:
    the send says why; the context check should not)."""

    def __init__(self, counter: Any) -> None:
        self._counter = counter
        self._broken = False

    def __call__(self, messages: list[ChatMessage]) -> int:
        if not self._broken:
            try:
                return int(self._counter(messages))
            except (UserError, ValueError, OSError):
                self._broken = True
        return _rough(messages)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._counter.close()


def _rough(messages: list[ChatMessage]) -> int:
    """About how many tokens, where no tokenizer is at hand: four characters a token, and a
    few for each message's framing."""
    return sum(len(m.content) // CHARS_PER_TOKEN + 4 for m in messages)


_UNSAFE = re.compile(r'[\x00-\x1f<>:"/\\|?*]')


def safe_file_name(name: str, fallback: str = "attachment") -> str:
    """``name`` as a file name of its own on any system: no folders, no characters Windows
    refuses, no leading dots (a name from an imported file is data, never a path)."""
    base = _UNSAFE.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip().lstrip(".")
    base = base.rstrip(". ")
    if base.split(".")[0].upper() in _RESERVED:
        base = "_" + base
    return base[:180] or fallback


_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10))} | {
    f"LPT{i}" for i in range(1, 10)
}
