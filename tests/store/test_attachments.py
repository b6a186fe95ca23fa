"""Attached files in the store (``desktop/store/attachments.py``) on a real SQLite file and a
real folder: stored once by their bytes, rows per use, clean-up only of what nothing uses."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from desktop.store.attachments import Attachment, AttachmentStore
from desktop.store.conversations import ConversationStore
from desktop.store.db import Database


@pytest.fixture
def store(db: Database, tmp_path: Path) -> AttachmentStore:
    return AttachmentStore(db, tmp_path / "attachments")


def _bytes(request: pytest.FixtureRequest, label: str = "") -> bytes:
    """Bytes no other test stores: the pending set is shared by the whole process."""
    return f"{request.node.nodeid} {label}\n".encode()


def _files(store: AttachmentStore) -> list[Path]:
    return sorted(p for p in store.folder.rglob("*") if p.is_file())


def _message(db: Database) -> tuple[ConversationStore, int, int]:
    conversations = ConversationStore(db)
    conversation = conversations.create(None, "t")
    return (
        conversations,
        conversation.id,
        conversations.add_message(conversation.id, "user", "q").id,
    )


def test_the_same_bytes_are_stored_once_under_two_names(
    store: AttachmentStore, db: Database, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    data = _bytes(request)
    first, second = tmp_path / "report.txt", tmp_path / "report (copy).txt"
    first.write_bytes(data)
    second.write_bytes(data)
    sha, size = store.put_file(first, kind="document", mime="text/plain")
    again = store.put_file(second, kind="document", mime="text/plain")
    assert again == (sha, size) == (hashlib.sha256(data).hexdigest(), len(data))
    assert store.put_bytes(data, kind="document", mime="text/plain") == (sha, size)
    assert _files(store) == [store.path(sha)] and store.has(sha)
    assert db.execute("SELECT COUNT(*) FROM attachment_files").fetchone()[0] == 1

    _, _, message_id = _message(db)
    store.attach(
        message_id,
        [
            Attachment(sha, "report.txt", "document", "text/plain", size),
            Attachment(sha, "report (copy).txt", "document", "text/plain", size, text_limit=5),
        ],
    )
    assert [(a.name, a.text_limit) for a in store.of_message(message_id)] == [
        ("report.txt", None),
        ("report (copy).txt", 5),
    ]


def test_attachments_are_read_back_per_message_in_order_and_copied(
    store: AttachmentStore, db: Database, request: pytest.FixtureRequest
) -> None:
    conversations, conversation_id, first = _message(db)
    second = conversations.add_message(conversation_id, "user", "edited q").id
    shas = [
        store.put_bytes(_bytes(request, str(i)), kind="document", mime="text/plain")
        for i in range(3)
    ]
    attachments = [
        Attachment(sha, f"f{i}.txt", "document", "text/plain", size)
        for i, (sha, size) in enumerate(shas)
    ]
    store.attach(first, list(reversed(attachments)))
    assert [a.name for a in store.of_message(first)] == ["f2.txt", "f1.txt", "f0.txt"]
    assert store.copy(first, second) == store.of_message(second) == store.of_message(first)
    assert set(store.of_messages([first, second, 999])) == {first, second}
    assert store.of_message(999) == []


def test_collect_removes_a_file_only_when_no_message_uses_it(
    store: AttachmentStore, db: Database, request: pytest.FixtureRequest
) -> None:
    conversations, conversation_id, message_id = _message(db)
    data = _bytes(request)
    sha, size = store.put_bytes(data, kind="document", mime="text/plain")
    text_copy = store.write_copy(sha, "text", b"extracted")
    store.attach(message_id, [Attachment(sha, "a.txt", "document", "text/plain", size)])
    assert store.collect() == 0 and store.has(sha)

    # a second conversation uses it too: deleting the first keeps it
    _, other_conversation, other_message = _message(db)
    store.attach(other_message, [Attachment(sha, "b.txt", "document", "text/plain", size)])
    conversations.delete(conversation_id)
    assert store.collect() == 0 and store.has(sha)

    conversations.delete(other_conversation)  # the last one that used it
    assert store.collect() == 1
    assert not store.has(sha) and not text_copy.exists() and _files(store) == []
    assert db.execute("SELECT COUNT(*) FROM attachment_files").fetchone()[0] == 0


def test_a_pending_file_is_kept_until_released(
    store: AttachmentStore, request: pytest.FixtureRequest
) -> None:
    sha, _ = store.put_bytes(_bytes(request), kind="image", mime="image/png")
    assert store.collect() == 0 and store.has(sha)  # a chip in a composer still holds it
    store.release(sha)  # the chip was removed
    assert store.collect() == 1 and not store.has(sha)


def test_the_same_file_on_two_chips_is_kept_until_both_let_go(
    store: AttachmentStore, request: pytest.FixtureRequest
) -> None:
    data = _bytes(request)
    sha, _ = store.put_bytes(data, kind="document", mime="text/plain")
    assert store.put_bytes(data, kind="document", mime="text/plain")[0] == sha  # attached twice
    store.release(sha)  # one chip removed: the other still holds the file
    assert store.collect() == 0 and store.has(sha)
    store.release(sha)
    assert store.collect() == 1 and not store.has(sha)


def test_a_vanished_or_unreadable_source_leaves_no_temporary_file(
    store: AttachmentStore, tmp_path: Path
) -> None:
    with pytest.raises(FileNotFoundError):
        store.put_file(tmp_path / "gone.pdf", kind="document", mime="application/pdf")
    with pytest.raises(IsADirectoryError):
        store.put_file(tmp_path, kind="document", mime="text/plain")
    assert _files(store) == []


def test_stray_temporary_files_go_only_once_they_are_old(
    store: AttachmentStore, request: pytest.FixtureRequest
) -> None:
    sha, _ = store.put_bytes(_bytes(request), kind="document", mime="text/plain")
    store.release(sha)
    store.folder.mkdir(parents=True, exist_ok=True)
    old = store.folder / ".incoming-old"
    fresh = store.folder / ".incoming-fresh"  # a copy still being written by another thread
    old_copy = store.path(sha).parent / ".copy-old"
    for path in (old, fresh, old_copy):
        path.write_bytes(b"partial")
    hours_ago = time.time() - 2 * 3600
    os.utime(old, (hours_ago, hours_ago))
    os.utime(old_copy, (hours_ago, hours_ago))
    store.collect()
    assert fresh.exists() and not old.exists() and not old_copy.exists()


def test_copies_sit_beside_the_file_and_are_replaced_whole(
    store: AttachmentStore, request: pytest.FixtureRequest
) -> None:
    sha, _ = store.put_bytes(_bytes(request), kind="image", mime="image/png")
    path = store.write_copy(sha, "openai.jpg", b"first")
    assert path == store.path(sha, "openai.jpg") and path.parent == store.path(sha).parent
    store.write_copy(sha, "openai.jpg", b"second")
    assert path.read_bytes() == b"second"
    assert [p.name for p in _files(store)] == sorted([sha, f"{sha}.openai.jpg"])
