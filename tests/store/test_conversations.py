"""Conversation trees, soft delete and full-text search on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop.store.conversations import ConversationStore
from desktop.store.db import open_database
from desktop.store.search import HIT_END, HIT_START, SearchStore, fts_query


@pytest.fixture
def db(tmp_path: Path):
    database = open_database(tmp_path / "simi.db")
    yield database
    database.conn.close()


def _texts(store: ConversationStore, conv_id: int) -> list[str]:
    return [m.content for m in store.messages(conv_id)]


def test_a_new_version_of_a_reply_keeps_the_old_one_reachable(db) -> None:
    store = ConversationStore(db)
    conv = store.create(None, "t")
    question = store.add_message(conv.id, "user", "Q")
    first = store.add_message(conv.id, "assistant", "answer one")
    store.add_message(conv.id, "user", "follow-up")
    second = store.add_message(conv.id, "assistant", "answer two", parent_id=question.id)
    assert _texts(store, conv.id) == ["Q", "answer two"]
    assert store.versions(second.id).index == 1 and store.versions(second.id).count == 2
    assert store.switch_version(second.id, -1) == first.id
    # the old branch comes back with what followed it
    assert _texts(store, conv.id) == ["Q", "answer one", "follow-up"]
    assert store.switch_version(first.id, -1) is None  # nothing before the first version


def test_an_edited_first_question_is_a_new_branch_beside_the_old(db) -> None:
    store = ConversationStore(db)
    conv = store.create(None, "t")
    old = store.add_message(conv.id, "user", "old question")
    store.add_message(conv.id, "assistant", "old answer")
    new = store.add_message(conv.id, "user", "new question", parent_id=None)
    store.add_message(conv.id, "assistant", "new answer")
    assert _texts(store, conv.id) == ["new question", "new answer"]
    assert store.versions_for(store.messages(conv.id))[new.id].ids == (old.id, new.id)
    store.activate(old.id)
    assert _texts(store, conv.id) == ["old question", "old answer"]
    assert [m.content for m in store.ancestors(store.messages(conv.id)[1].id)] == ["old question"]


def test_deleting_a_message_keeps_what_followed_it(db) -> None:
    store = ConversationStore(db)
    conv = store.create(None, "t")
    store.add_message(conv.id, "user", "a")
    middle = store.add_message(conv.id, "assistant", "b")
    store.add_message(conv.id, "user", "c")
    store.delete_message(middle.id)
    assert _texts(store, conv.id) == ["a", "c"]


def test_stale_streaming_replies_become_interrupted_with_their_text(db) -> None:
    store = ConversationStore(db)
    conv = store.create(None, "t")
    reply = store.add_message(conv.id, "assistant", "", status="streaming")
    store.checkpoint(reply.id, "partial text", "some thoughts")
    assert store.mark_stale_streaming() == 1
    msg = store.message(reply.id)
    assert msg.status == "interrupted" and msg.content == "partial text"
    assert msg.reasoning == "some thoughts" and "Interrupted" in msg.error_text


def test_trash_hides_a_conversation_until_restored_or_purged(db) -> None:
    store = ConversationStore(db)
    keep, gone = store.create(None, "keep"), store.create(None, "gone")
    store.trash(gone.id)
    assert [c.title for c in store.list()] == ["keep"]
    store.restore(gone.id)
    assert {c.title for c in store.list()} == {"keep", "gone"}
    store.trash(gone.id)
    assert store.purge_trash() == 1 and store.get(gone.id) is None and store.get(keep.id)


def test_pinned_conversations_come_first_and_filter_by_agent(db) -> None:
    store = ConversationStore(db)
    db.execute(
        "INSERT INTO agents (id, name, kind, created_at, updated_at) VALUES (7, 'a', 'local', "
        "'x', 'x')"
    )
    older = store.create(7, "older")
    store.create(None, "newer")
    store.set_pinned(older.id, True)
    assert [c.title for c in store.list()] == ["older", "newer"]
    assert [c.title for c in store.list(agent_id=7)] == ["older"]


def test_search_finds_words_across_conversations_and_follows_edits(db) -> None:
    store, search = ConversationStore(db), SearchStore(db)
    one, two = store.create(None, "Boats"), store.create(None, "Lights")
    store.add_message(one.id, "user", "Tell me about the lighthouse keeper")
    reply = store.add_message(two.id, "assistant", "", status="streaming")
    store.checkpoint(reply.id, "A lighthouse guides ships")  # findable while streaming
    hits = search.search("lighthouse")
    assert {h.conversation_title for h in hits} == {"Boats", "Lights"}
    assert all(f"{HIT_START}lighthouse{HIT_END}" in h.snippet for h in hits)
    assert [h.message_id for h in search.search("guid")] == [reply.id]  # prefix of last word
    store.finish_message(reply.id, content="Beacons guide ships", status="complete")
    assert search.search("lighthouse")[0].conversation_title == "Boats"
    store.trash(one.id)
    assert search.search("lighthouse") == []


def test_a_trailing_space_searches_the_whole_word_only(db) -> None:
    store, search = ConversationStore(db), SearchStore(db)
    conv = store.create(None, "Cats")
    cat = store.add_message(conv.id, "user", "my cat sleeps")
    catalogue = store.add_message(conv.id, "assistant", "see the catalogue")
    assert fts_query("cat") == '"cat"*' and fts_query("cat ") == '"cat"'
    assert fts_query("big cat\t") == '"big" "cat"'
    assert {h.message_id for h in search.search("cat")} == {cat.id, catalogue.id}
    assert [h.message_id for h in search.search("cat ")] == [cat.id]
    assert [h.message_id for h in search.search("catalogue ")] == [catalogue.id]


@pytest.mark.parametrize("text", ['"', "AND", "NEAR(", "*", "a OR", "-x", "col:val", "^"])
def test_search_input_is_never_an_fts_syntax_error(db, text: str) -> None:
    ConversationStore(db).add_message(ConversationStore(db).create(None).id, "user", "x")
    SearchStore(db).search(text)  # no sqlite3.OperationalError
    assert fts_query("  ") == ""
