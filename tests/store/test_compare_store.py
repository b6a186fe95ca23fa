"""Compare sessions, pairwise votes, agent sets and prompt-set runs on a real SQLite file."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from desktop.store.agents import Agent, AgentStore
from desktop.store.compare import CompareStore, column_label
from desktop.store.conversations import ConversationStore
from desktop.store.db import open_database
from desktop.store.migrations import MIGRATIONS
from desktop.store.stats import StatsStore


@pytest.fixture
def db(tmp_path: Path):
    database = open_database(tmp_path / "simi.db")
    yield database
    database.conn.close()


def _agent(db, name: str) -> int:
    made = AgentStore(db).insert(Agent(name=name, kind="openai-compatible", model="m"))
    assert made.id is not None
    return made.id


def test_a_session_keeps_its_columns_in_order_and_the_newest_comes_first(db) -> None:
    store = CompareStore(db)
    a, b, c = _agent(db, "Alpha"), _agent(db, "Beta"), _agent(db, "Gamma")
    conv = ConversationStore(db).create(a, "with alpha")
    first = store.create_session(
        [(a, "Alpha"), (b, "Beta"), (c, "Gamma")],
        [conv.id, None, None],
        blind=True,
        title="three",
        fair_seed=42,
        fair_temperature=0.2,
    )
    second = store.create_session([(b, "Beta"), (a, "Alpha")], [None, None])
    assert [col.label for col in first.columns] == ["A", "B", "C"]
    assert [col.agent_name for col in first.columns] == ["Alpha", "Beta", "Gamma"]
    assert first.columns[0].conversation_id == conv.id and first.columns[1].conversation_id is None
    assert (first.blind, first.revealed, first.fair_seed, first.fair_temperature) == (
        True,
        False,
        42,
        0.2,
    )
    assert store.session(first.id) == first
    assert [s.id for s in store.sessions()] == [second.id, first.id]
    time.sleep(0.002)  # timestamps are to the millisecond
    store.touch(first.id)
    assert [s.id for s in store.sessions()] == [first.id, second.id]
    assert store.session(999) is None


def test_a_column_gets_its_conversation_on_first_send_and_a_blind_session_is_revealed(db) -> None:
    store = CompareStore(db)
    a, b = _agent(db, "Alpha"), _agent(db, "Beta")
    made = store.create_session([(a, "Alpha"), (b, "Beta")], [None, None], blind=True)
    conv = ConversationStore(db).create(b, "")
    store.set_column_conversation(made.id, 1, conv.id)
    again = store.session(made.id)
    assert again is not None
    assert [col.conversation_id for col in again.columns] == [None, conv.id]
    with pytest.raises(ValueError):
        store.set_column_conversation(made.id, 5, conv.id)
    store.reveal(made.id)
    store.rename_session(made.id, "  renamed ")
    shown = store.session(made.id)
    assert shown is not None and shown.revealed and shown.title == "renamed"


def test_deleting_a_session_keeps_its_conversations_and_votes(db) -> None:
    store, convs = CompareStore(db), ConversationStore(db)
    a, b = _agent(db, "Alpha"), _agent(db, "Beta")
    ca, cb = convs.create(a, ""), convs.create(b, "")
    made = store.create_session([(a, "Alpha"), (b, "Beta")], [ca.id, cb.id])
    vote = store.add_vote(made.id, "hi", (a, "Alpha", None), (b, "Beta", None), "tie", False)
    store.delete_session(made.id)
    assert store.session(made.id) is None
    assert db.execute("SELECT count(*) FROM compare_columns").fetchone()[0] == 0
    assert convs.get(ca.id) is not None and convs.get(cb.id) is not None
    (kept,) = store.votes()
    assert kept.id == vote.id and kept.session_id is None and kept.outcome == "tie"


def test_votes_round_trip_and_refuse_a_bad_outcome_or_an_agent_against_itself(db) -> None:
    store = CompareStore(db)
    a, b = _agent(db, "Alpha"), _agent(db, "Beta")
    made = store.create_session([(a, "Alpha"), (b, "Beta")], [None, None], blind=True)
    first = store.add_vote(made.id, "q1", (a, "Alpha", 11), (b, "Beta", 12), "left", True)
    store.add_vote(None, "q2", (b, "Beta", None), (a, "Alpha", None), "both_bad", False)
    assert (first.left_agent_name, first.left_message_id, first.right_message_id) == (
        "Alpha",
        11,
        12,
    )
    assert first.blind and first.prompt == "q1" and first.created_at
    assert [v.prompt for v in store.votes()] == ["q1", "q2"]
    assert [v.prompt for v in store.votes(made.id)] == ["q1"]
    with pytest.raises(ValueError, match="outcome"):
        store.add_vote(made.id, "q", (a, "Alpha", None), (b, "Beta", None), "win", True)
    with pytest.raises(ValueError, match="itself"):
        store.add_vote(made.id, "q", (a, "Alpha", None), (a, "Alpha", None), "tie", True)
    with pytest.raises(ValueError, match="itself"):  # the same name, without ids
        store.add_vote(None, "q", (None, "alpha", None), (None, "ALPHA ", None), "tie", True)
    assert len(store.votes()) == 2


def test_an_agent_set_is_replaced_by_name_without_regard_to_case(db) -> None:
    store = CompareStore(db)
    a, b, c = _agent(db, "Alpha"), _agent(db, "Beta"), _agent(db, "Gamma")
    made = store.save_set("Fast ones", [a, b, a])
    assert made.agent_ids == (a, b)
    replaced = store.save_set("fast ONES", [c, a])
    other = store.save_set("All", [a, b, c])
    assert replaced.id == made.id and replaced.agent_ids == (c, a) and replaced.name == "fast ONES"
    assert [(s.name, s.agent_ids) for s in store.sets()] == [
        ("All", (a, b, c)),
        ("fast ONES", (c, a)),
    ]
    with pytest.raises(ValueError):
        store.save_set("  ", [a])
    with pytest.raises(ValueError):
        store.save_set("empty", [])
    store.delete_set(other.id)
    assert [s.name for s in store.sets()] == ["fast ONES"]


def test_runs_and_their_calls_round_trip_and_a_redone_call_replaces_its_row(db) -> None:
    store = CompareStore(db)
    a, b = _agent(db, "Alpha"), _agent(db, "Beta")
    stats_id = StatsStore(db).record(
        {"agent_name": "Beta", "provider_kind": "openai-compatible", "started_at": "2026-01-01"}
    )
    run = store.create_run(["one", "two"], [(a, "Alpha"), (b, "Beta")], repeat=2, title="t")
    assert (run.prompts, run.agent_ids, run.agent_names, run.repeat, run.status) == (
        ("one", "two"),
        (a, b),
        ("Alpha", "Beta"),
        2,
        "running",
    )
    assert run.total_calls == 8
    store.add_call(run.id, 1, (a, "Alpha"), 0, "complete", reply="r")
    store.add_call(run.id, 0, (b, "Beta"), 1, "cancelled", reply="partial")
    store.add_call(run.id, 0, (a, "Alpha"), 0, "error", error_text="Rate limited")
    redone = store.add_call(run.id, 0, (b, "Beta"), 1, "complete", reply="full", stats_id=stats_id)
    calls = store.calls(run.id)
    assert [(c.prompt_index, c.agent_name, c.repetition, c.status) for c in calls] == [
        (0, "Alpha", 0, "error"),
        (0, "Beta", 1, "complete"),
        (1, "Alpha", 0, "complete"),
    ]
    assert calls[1] == redone and redone.reply == "full" and redone.stats_id == stats_id
    assert calls[0].error_text == "Rate limited"
    store.set_run_status(run.id, "paused")
    reopened = store.run(run.id)
    assert reopened is not None and reopened.status == "paused"
    with pytest.raises(ValueError):
        store.set_run_status(run.id, "sleeping")
    with pytest.raises(ValueError):
        store.add_call(run.id, 0, (a, "Alpha"), 1, "done")
    second = store.create_run(["x"], [(a, "Alpha")])
    assert [r.id for r in store.runs()] == [second.id, run.id]
    store.delete_run(second.id)
    assert store.run(second.id) is None and store.calls(second.id) == []


def test_a_stats_row_can_name_its_run(db) -> None:
    store = CompareStore(db)
    run = store.create_run(["p"], [(None, "Someone")])
    stats = StatsStore(db)
    row_id = stats.record(
        {
            "agent_name": "Someone",
            "provider_kind": "local",
            "started_at": "2026-01-01T00:00:00",
            "prompt_run_id": run.id,
        }
    )
    (row,) = [r for r in stats.rows() if r["id"] == row_id]
    assert row["prompt_run_id"] == run.id and row["message_id"] is None


def test_runs_left_running_by_a_crash_are_marked_interrupted(tmp_path: Path) -> None:
    path = tmp_path / "simi.db"
    db = open_database(path)
    store = CompareStore(db)
    running = store.create_run(["p"], [(None, "A")])
    done = store.create_run(["p"], [(None, "A")])
    store.set_run_status(done.id, "complete")
    db.conn.close()  # the app stopped without finishing the first run
    db = open_database(path)
    store = CompareStore(db)
    assert store.mark_interrupted_runs() == 1
    assert [store.run(r.id).status for r in (running, done)] == ["interrupted", "complete"]
    assert store.mark_interrupted_runs() == 0
    db.conn.close()


def test_deleting_an_agent_keeps_its_name_everywhere(db) -> None:
    store, agents = CompareStore(db), AgentStore(db)
    a, b, c = _agent(db, "Alpha"), _agent(db, "Beta"), _agent(db, "Gamma")
    session = store.create_session([(a, "Alpha"), (c, "Gamma")], [None, None])
    store.add_vote(session.id, "q", (a, "Alpha", None), (c, "Gamma", None), "right", True)
    store.save_set("trio", [c, a, b])
    run = store.create_run(["p"], [(a, "Alpha"), (c, "Gamma")])
    store.add_call(run.id, 0, (c, "Gamma"), 0, "complete", reply="r")
    agents.delete(c)
    reused = _agent(db, "Newcomer")
    assert reused == c  # agents.id is no AUTOINCREMENT: the id comes back
    shown = store.session(session.id)
    assert shown is not None
    assert [(col.agent_id, col.agent_name) for col in shown.columns] == [
        (a, "Alpha"),
        (None, "Gamma"),
    ]
    (vote,) = store.votes()
    assert (vote.right_agent_id, vote.right_agent_name) == (None, "Gamma")
    (kept,) = store.sets()
    assert kept.agent_ids == (a, b)  # the set forgets it, and never names the newcomer
    again = store.run(run.id)
    assert again is not None
    assert again.agent_ids == (a, None) and again.agent_names == ("Alpha", "Gamma")
    (call,) = store.calls(run.id)
    assert (call.agent_id, call.agent_name) == (None, "Gamma")


@pytest.mark.parametrize(("position", "label"), [(0, "A"), (5, "F"), (25, "Z"), (26, "AA")])
def test_columns_are_labelled_by_position(position: int, label: str) -> None:
    assert column_label(position) == label


def test_a_database_from_before_compare_mode_keeps_its_stats_rows(tmp_path: Path) -> None:
    path = tmp_path / "simi.db"
    old = open_database(path, migrations=[m for m in MIGRATIONS if m[0] != "m007_compare"])
    StatsStore(old).record(
        {"agent_name": "A", "provider_kind": "local", "started_at": "2026-01-01T00:00:00"}
    )
    old.conn.close()
    db = open_database(path)
    (row,) = StatsStore(db).rows()
    assert row["agent_name"] == "A" and row["prompt_run_id"] is None
    assert CompareStore(db).runs() == [] and CompareStore(db).sessions() == []
    db.conn.close()
