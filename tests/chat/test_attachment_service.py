"""``AttachmentService`` (``Services.attachments``), with real files and a real SQLite file:
the context check and its "send the first part", a viewing copy under the file's own name,
and files that go when the last conversation using them is deleted for good."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from desktop.chat.services import Services
from desktop.local.starter import STARTER_AGENT_NAME
from desktop.settings.paths import AppPaths
from desktop.store.agents import Agent
from desktop.store.attachments import Attachment
from tests.attach.samples import image_file

WORDS = "The quick brown fox jumps over the lazy dog while the river keeps running. "


def _doc(services: Any, path: Path, text: str) -> Attachment:
    path.write_text(text, encoding="utf-8")
    return services.attachments.prepare(path).attachment


def _stored_files(services: Any, attachment: Attachment) -> list[Path]:
    folder = services.attachments.store.path(attachment.sha256).parent
    return sorted(folder.glob(attachment.sha256 + "*")) if folder.is_dir() else []


def test_a_document_too_long_for_a_local_context_gets_a_first_part_that_fits(
    services: Any, tmp_path: Path
) -> None:
    """The starter model's own tokenizer counts (its vocabulary only: no weights load)."""
    agent = services.agents.by_name(STARTER_AGENT_NAME).with_changes(n_ctx=512, max_tokens=64)
    attachments = services.attachments
    short = _doc(services, tmp_path / "short.txt", WORDS)
    ok = attachments.context_check(agent, "Summarise.", [short])
    assert ok.fits and ok.window == 512 and ok.first_part is None
    assert 64 < ok.needed < 200  # the reply's room (64) and a few dozen tokens of text

    long = _doc(services, tmp_path / "long.txt", WORDS * 120)  # ~1,900 tokens
    over = attachments.context_check(agent, "Summarise.", [short, long])
    assert not over.fits and over.needed > 1500 and over.window == 512
    assert over.first_part is not None
    cut = {a.name: a.text_limit for a in over.first_part}
    assert 0 < cut["long.txt"] < len(WORDS * 120) and 0 < cut["short.txt"] <= len(WORDS)
    again = attachments.context_check(agent, "Summarise.", over.first_part)
    assert again.fits and again.needed <= 512


def test_the_conversation_so_far_counts_and_a_hopeless_case_offers_no_first_part(
    services: Any, tmp_path: Path
) -> None:
    agent = services.agents.by_name(STARTER_AGENT_NAME).with_changes(n_ctx=256, max_tokens=64)
    conv = services.conversations.create(agent.id)
    services.conversations.add_message(conv.id, "user", WORDS * 12)  # ~190 tokens
    doc = _doc(services, tmp_path / "a.txt", WORDS * 3)
    alone = services.attachments.context_check(agent, "Go on.", [doc])
    within = services.attachments.context_check(agent, "Go on.", [doc], conv.id)
    assert alone.fits and not within.fits and within.needed > alone.needed + 150
    assert within.first_part is None  # the history alone leaves no room for any of it


def test_a_remote_agents_window_is_unknown_so_it_fits(services: Any, tmp_path: Path) -> None:
    agent = services.agents.create(
        Agent(name="Far", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m")
    )
    doc = _doc(services, tmp_path / "big.txt", WORDS * 400)
    check = services.attachments.context_check(agent, "Hi", [doc])
    assert check.fits and check.window is None and check.first_part is None
    assert check.needed > len(WORDS * 400) // 5  # a rough figure, but of the right size


def test_a_viewing_copy_has_the_files_own_name_and_goes_at_close(
    services: Any, tmp_path: Path
) -> None:
    doc = _doc(services, tmp_path / "Q3 report.md", "# Q3\n\nup and to the right\n")
    copy = services.attachments.viewing_copy(doc)
    assert (
        copy.name == "Q3 report.md"
        and copy.read_bytes() == (tmp_path / "Q3 report.md").read_bytes()
    )
    assert services.attachments.path(doc) != copy
    sneaky = Attachment(doc.sha256, "../../etc/passwd", "document", "text/plain", doc.size)
    assert services.attachments.viewing_copy(sneaky).parent.parent == copy.parent.parent
    services.attachments.close()
    assert not copy.exists()


def test_deleting_the_last_conversation_using_a_file_removes_it(
    services: Any, tmp_path: Path
) -> None:
    chat, store = services.chat, services.conversations
    agent = services.agents.by_name(STARTER_AGENT_NAME)
    image = services.attachments.prepare(image_file(tmp_path / "p.png", (20, 20))).attachment
    one, two = store.create(agent.id), store.create(agent.id)
    chat.begin(one.id, agent, "first", [image])
    chat.begin(two.id, agent, "second", [image])  # the same bytes: stored once
    files = _stored_files(services, image)
    assert len(files) == 1

    store.delete(one.id)  # the window's Undo ran out
    services.attachments.wait_collected(5)
    assert all(f.exists() for f in files)  # the other conversation still uses it

    store.delete(two.id)
    services.attachments.wait_collected(5)
    assert not any(f.exists() for f in files)
    assert not services.attachments.store.has(image.sha256)


def test_the_trash_a_closed_window_left_takes_its_files_at_the_next_start(
    simi_home: Path, tmp_path: Path
) -> None:
    paths = AppPaths.from_env()
    services = Services.open(paths)
    try:
        agent = services.agents.by_name(STARTER_AGENT_NAME)
        doc = _doc(services, tmp_path / "kept.txt", "keep me\n")
        conv = services.conversations.create(agent.id)
        services.chat.begin(conv.id, agent, "read", [doc])
        services.conversations.trash(conv.id)  # deleted, Undo on show, then the app closed
        files = _stored_files(services, doc)
        assert files and all(f.exists() for f in files)  # its text copy too
    finally:
        services.close()
    again = Services.open(paths)
    try:
        assert again.conversations.get(conv.id) is None
        assert not any(f.exists() for f in files)
    finally:
        again.close()


def test_a_chip_removed_before_sending_lets_its_file_go(services: Any, tmp_path: Path) -> None:
    doc = _doc(services, tmp_path / "draft.txt", "not sent\n")
    services.attachments.collect()
    assert services.attachments.store.has(doc.sha256)  # a chip waits: kept
    services.attachments.release(doc)
    services.attachments.collect()
    assert not services.attachments.store.has(doc.sha256)
