import hashlib
import sqlite3
from pathlib import Path

import pytest

from desktop.settings.paths import AppPaths
from desktop.store.db import MIGRATIONS_TABLE, move_aside, open_database
from desktop.store.errors import StoreUnavailable
from desktop.store.migrations import MIGRATIONS

EXPECTED_TABLES = {
    "agents",
    "endpoints",
    "conversations",
    "messages",
    "inference_stats",
    "messages_fts",
}


def _columns(db_path: Path, table: str) -> set[str]:
    with sqlite3.connect(db_path) as conn:
        return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def test_blank_database_migrates_to_expected_schema(tmp_path: Path) -> None:
    path = tmp_path / "simi.db"
    db = open_database(path)
    assert set(db.table_names()) >= EXPECTED_TABLES
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    applied = [r[0] for r in db.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY id")]
    assert applied == [name for name, _ in MIGRATIONS]
    db.conn.close()
    assert {
        "status",
        "content",
        "conversation_id",
        "error_text",
        "parent_id",
        "active_child_id",
        "reasoning",
    } <= _columns(path, "messages")
    assert {"pinned", "active_root_id", "deleted_at"} <= _columns(path, "conversations")
    with sqlite3.connect(path) as conn:
        triggers = {
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")
        }
    assert {"messages_fts_insert", "messages_fts_update", "messages_fts_delete"} <= triggers
    assert {
        "ttft_ms",
        "decode_tok_s",
        "prefill_tok_s",
        "prompt_tokens",
        "cached_tokens",
        "output_tokens",
        "finish_reason",
        "cost_usd",
        "context_fill",
        "n_gpu_layers",
        "backend",
        "load_ms",
        "agent_id",
        "message_id",
    } <= _columns(path, "inference_stats")
    assert "api_key" not in " ".join(_columns(path, "endpoints") | _columns(path, "agents"))


def test_reopening_applies_nothing_twice(tmp_path: Path) -> None:
    path = tmp_path / "simi.db"
    open_database(path).conn.close()
    db = open_database(path)
    count = db.execute(f"SELECT count(*) FROM {MIGRATIONS_TABLE}").fetchone()[0]
    assert count == len(MIGRATIONS)


def test_database_from_newer_version_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "simi.db"
    db = open_database(path)
    db.execute(f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES ('m999_future', 'x')")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.conn.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(StoreUnavailable) as info:
        open_database(path)
    assert "newer version" in info.value.user_message
    assert str(path) in info.value.user_message
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_corrupt_database_is_named_and_never_recreated(tmp_path: Path) -> None:
    path = tmp_path / "simi.db"
    garbage = b"this is not a database\n" * 500
    path.write_bytes(garbage)
    with pytest.raises(StoreUnavailable) as info:
        open_database(path)
    assert info.value.corrupt
    assert str(path) in info.value.user_message
    assert "move" in info.value.user_message.lower()
    assert path.read_bytes() == garbage
    moved = move_aside(path)
    assert not path.exists() and moved.read_bytes() == garbage
    open_database(path).conn.close()  # a fresh one now opens


def test_unwritable_simi_home_gives_clear_message(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    paths = AppPaths.from_env({"SIMI_HOME": str(blocker / "home")})
    with pytest.raises(StoreUnavailable) as info:
        paths.ensure()
    assert str(blocker / "home") in info.value.user_message
    assert "SIMI_HOME" in info.value.user_message


def test_processes_starting_at_once_all_find_the_folder_writable(tmp_path: Path) -> None:
    """A window and several `simi` commands start together: each proves the folder writable
    with a file of its own (a shared probe name once let one remove another's file between
    its write and its unlink, and the other said it cannot write to its folder)."""
    import threading

    paths = AppPaths.from_env({"SIMI_HOME": str(tmp_path / "home")})
    failures: list[BaseException] = []

    def start_up() -> None:
        for _ in range(200):
            try:
                paths.ensure()
            except StoreUnavailable as exc:
                failures.append(exc)
                return

    threads = [threading.Thread(target=start_up) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert not [p for p in (tmp_path / "home").iterdir() if p.name.startswith(".simi-write")]


def test_simi_home_holds_all_state(simi_home: Path) -> None:
    paths = AppPaths.from_env()
    assert paths.db_path.parent == simi_home
    assert paths.settings_path.parent == simi_home
    assert paths.log_dir.parent == simi_home


def test_deleting_conversation_cascades_messages_and_stats(tmp_path: Path) -> None:
    from desktop.store.conversations import ConversationStore
    from desktop.store.stats import StatsStore

    db = open_database(tmp_path / "simi.db")
    convs, stats = ConversationStore(db), StatsStore(db)
    conv = convs.create(None, "t")
    msg = convs.add_message(conv.id, "assistant", "hi")
    stats.record(
        {
            "message_id": msg.id,
            "conversation_id": conv.id,
            "agent_name": "a",
            "provider_kind": "local",
            "started_at": "now",
        }
    )
    convs.delete(conv.id)
    assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM inference_stats").fetchone()[0] == 0


def test_a_database_from_before_m002_gains_the_agent_options(tmp_path: Path) -> None:
    from desktop.store.migrations import m001_initial

    path = tmp_path / "simi.db"
    open_database(path, migrations=[("m001_initial", m001_initial)]).conn.close()
    assert "stall_timeout_s" not in _columns(path, "agents")
    open_database(path).conn.close()
    assert {"preset", "stall_timeout_s", "ca_bundle", "main_gpu", "n_batch"} <= _columns(
        path, "agents"
    )


def test_a_database_from_before_m003_becomes_one_branch_and_is_searchable(tmp_path: Path) -> None:
    from desktop.store.conversations import ConversationStore
    from desktop.store.migrations import m001_initial, m002_agent_options
    from desktop.store.search import SearchStore

    path = tmp_path / "simi.db"
    old = open_database(
        path,
        migrations=[("m001_initial", m001_initial), ("m002_agent_options", m002_agent_options)],
    )
    old.execute("INSERT INTO conversations (title, created_at, updated_at) VALUES ('t', 'x', 'x')")
    for i, (role, text) in enumerate([("user", "hello lighthouse"), ("assistant", "hi keeper")]):
        old.execute(
            "INSERT INTO messages (conversation_id, role, content, created_at, updated_at) "
            "VALUES (1, ?, ?, ?, ?)",
            [role, text, str(i), str(i)],
        )
    old.conn.close()
    db = open_database(path)
    store = ConversationStore(db)
    assert [m.content for m in store.messages(1)] == ["hello lighthouse", "hi keeper"]
    assert [h.message_id for h in SearchStore(db).search("lighthouse")] == [1]


def _schema(path: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(path) as conn:
        return sorted(conn.execute("SELECT type, name, COALESCE(sql, '') FROM sqlite_master"))


def _half_done_then_fails(db) -> None:
    """A step that changes a table, runs a script and writes rows before it fails."""
    db.execute("ALTER TABLE agents ADD COLUMN half_done TEXT")
    db.executescript(
        "CREATE TABLE leftovers (x TEXT); INSERT INTO leftovers VALUES ('a');"
        "CREATE INDEX leftovers_x ON leftovers (x);"
    )
    db.execute("UPDATE conversations SET title = 'changed'")
    db.execute("INSERT INTO no_such_table VALUES (1)")  # sqlite3.OperationalError


def test_a_failing_step_leaves_the_database_at_the_previous_version(tmp_path: Path) -> None:
    from desktop.store.migrations import m001_initial

    path = tmp_path / "simi.db"
    old = open_database(path, migrations=[("m001_initial", m001_initial)])
    old.execute("INSERT INTO conversations (title, created_at, updated_at) VALUES ('t', 'x', 'x')")
    old.conn.close()
    steps = [*MIGRATIONS, ("m900_half_done", _half_done_then_fails)]
    with pytest.raises(StoreUnavailable) as info:
        open_database(path, migrations=steps)
    assert "m900_half_done" in info.value.user_message and not info.value.corrupt
    assert str(path) in info.value.user_message
    # Every step before the broken one is in, whole; nothing of the broken one is.
    expected = tmp_path / "expected.db"
    open_database(expected).conn.close()
    assert _schema(path) == _schema(expected)
    with sqlite3.connect(path) as conn:
        names = [r[0] for r in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY id")]
        titles = [r[0] for r in conn.execute("SELECT title FROM conversations")]
    assert names == [name for name, _ in MIGRATIONS]
    assert titles == ["t"]
    assert "half_done" not in _columns(path, "agents")
    open_database(path).conn.close()  # this version opens it as before


def test_a_step_that_is_a_bug_is_rolled_back_and_surfaces_as_one(tmp_path: Path) -> None:
    path = tmp_path / "simi.db"
    open_database(path).conn.close()
    before = _schema(path)

    def buggy(db) -> None:
        db.execute("CREATE TABLE partial (x)")
        raise KeyError("a bug in the step")

    with pytest.raises(KeyError, match="a bug in the step"):
        open_database(path, migrations=[*MIGRATIONS, ("m901_buggy", buggy)])
    assert _schema(path) == before


def test_a_calls_stats_row_outlives_its_message_but_not_its_conversation(tmp_path: Path) -> None:
    from desktop.store.conversations import ConversationStore
    from desktop.store.migrations import MIGRATIONS
    from desktop.store.stats import StatsStore

    path = tmp_path / "simi.db"
    before_m004 = [step for step in MIGRATIONS if step[0] < "m004"]
    old = open_database(path, migrations=before_m004)
    convs, stats = ConversationStore(old), StatsStore(old)
    conv = convs.create(None, "t")
    kept = convs.add_message(conv.id, "assistant", "an answer")
    row = {"agent_name": "a", "provider_kind": "local", "started_at": "x", "ttft_ms": 12.5}
    kept_row = stats.record({**row, "message_id": kept.id, "conversation_id": conv.id})
    old.conn.close()

    db = open_database(path)  # m004 rebuilds inference_stats
    convs, stats = ConversationStore(db), StatsStore(db)
    assert stats.for_message(kept.id)["id"] == kept_row  # rows and ids carried over
    assert stats.for_message(kept.id)["ttft_ms"] == 12.5
    indexes = {r[1] for r in db.execute("PRAGMA index_list(inference_stats)")}
    assert {"stats_by_agent", "stats_by_message"} <= indexes
    failed = convs.add_message(conv.id, "assistant", "", status="error")
    stats.record({**row, "message_id": failed.id, "conversation_id": conv.id, "error_kind": "auth"})
    convs.delete_message(failed.id)  # what Retry does to the failed reply
    assert [(r["message_id"], r["error_kind"]) for r in stats.rows()] == [
        (None, "auth"),
        (kept.id, None),
    ]
    assert stats.per_agent()[0]["errors"] == 1
    convs.delete(conv.id)  # forgetting a conversation still forgets its calls
    assert stats.rows() == []
    db.conn.close()
