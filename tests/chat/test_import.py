"""Import is one transaction and linear in messages (issue 25): a file of several conversations
with one broken, or a write that fails part-way, leaves nothing behind and says why; a message
listed before its parent waits for it without another pass over the file."""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from desktop.chat.export import ExportError, Stores, from_json, import_conversations
from desktop.store.conversations import ConversationStore
from desktop.store.db import open_database
from desktop.store.stats import StatsStore
from tests.helpers.exports import exported


def _stores(services: Any) -> Stores:
    """The conversations, their stats and the agents (no files, no sources)."""
    return Stores(services.conversations, services.stats, agents=services.agents)


def _counts(services: Any) -> tuple[int, int, int]:
    db = services.db
    return tuple(  # type: ignore[return-value]
        db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("conversations", "messages", "inference_stats")
    )


def _refused(services: Any, file: list[dict[str, Any]]) -> str:
    """What importing ``file`` says when it is refused; nothing may have been stored."""
    before = _counts(services)
    with pytest.raises(ExportError) as caught:
        import_conversations(file, _stores(services))
    assert _counts(services) == before
    return caught.value.user_message


def test_a_file_whose_third_of_five_conversations_is_broken_imports_nothing_and_says_why(
    services: Any,
) -> None:
    file = [exported(f"Chat {n}", 6) for n in range(1, 6)]
    file[2]["messages"][3]["parent_id"] = 99  # no such message in it
    assert _refused(services, file) == (
        "Conversation 3 of 5 in the file: The export's messages refer to parents that are not "
        "in it. Nothing was imported."
    )

    del file[2]  # the four good ones import, in the file's order
    ids = import_conversations(file, _stores(services))
    titles = [services.conversations.get(i).title for i in ids]
    assert titles == ["Chat 1", "Chat 2", "Chat 4", "Chat 5"]
    assert len(services.conversations.messages(ids[-1])) == 6


def test_a_write_that_fails_part_way_leaves_nothing(
    services: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_record = services.stats.record
    calls = 0

    def record(row: dict[str, Any]) -> int:
        nonlocal calls
        calls += 1
        if calls == 8:  # the 3rd conversation's 2nd reply
            raise sqlite3.OperationalError("disk I/O error")
        return real_record(row)

    monkeypatch.setattr(services.stats, "record", record)
    file = [exported(f"Chat {n}", 6) for n in range(1, 6)]
    assert _refused(services, file) == (
        "Conversation 3 of 5 in the file could not be stored (disk I/O error). "
        "Nothing was imported."
    )
    assert not services.db.conn.in_transaction


def test_one_broken_conversation_leaves_no_half_of_itself(services: Any) -> None:
    before = _counts(services)
    data = exported("Half", 10)
    data["messages"][7]["status"] = "exploded"
    with pytest.raises(ExportError, match="Message 8 of the export has an unknown status"):
        from_json(data, _stores(services))
    data = exported("Half", 10)
    data["messages"][9]["parent_id"] = 42
    with pytest.raises(ExportError, match="refer to parents that are not in it"):
        from_json(data, _stores(services))
    assert _counts(services) == before


def test_messages_listed_before_their_parents_import_as_the_same_tree(services: Any) -> None:
    data = exported("Backwards", 8, parents_last=True)
    # a second version of message 2, listed first of all, shown instead of the first one
    data["messages"].insert(0, {"id": 100, "parent_id": 1, "role": "assistant", "content": "v2"})
    data["messages"][-1]["active_child"] = 100  # message 1, listed last
    data["active_path"] = [1, 100]
    conv_id = from_json(data, _stores(services))
    store = services.conversations
    assert [m.content for m in store.messages(conv_id)] == ["Backwards message 1", "v2"]
    everything = store.all_messages(conv_id)
    assert len(everything) == 9
    second = next(m for m in everything if m.content == "Backwards message 2")
    assert store.versions(second.id).count == 2


def _import(folder: Path, n_messages: int, measure: Callable[[Callable[[], int]], Any]) -> Any:
    """``measure`` one import of ``n_messages`` (each listed before its parent: a pass over
    the rest per message would be quadratic) into an empty database."""
    db = open_database(folder / f"{time.monotonic_ns()}.db")
    conversations, stats = ConversationStore(db), StatsStore(db)
    data = exported("Long", n_messages, parents_last=True, stats=False)
    try:
        return measure(lambda: from_json(data, Stores(conversations, stats)))
    finally:
        assert conversations.list(), "the import stored nothing"
        db.close()


def _cpu_seconds(run: Callable[[], int]) -> float:
    """CPU time on this thread (SQLite runs on it too): steadier than wall time."""
    started = time.thread_time()
    run()
    return time.thread_time() - started


class _TooMuchWork(Exception):
    pass


def _calls(n_messages: int) -> Callable[[Callable[[], int]], int]:
    """How many Python and C functions an import calls: the same every run, where time is
    not. Stops at 200 a message (a quadratic import would take seconds to count)."""

    def measure(run: Callable[[], int]) -> int:
        count, limit = 0, 200 * n_messages

        def profile(_frame: Any, event: str, _arg: Any) -> None:
            nonlocal count
            if event in ("call", "c_call"):
                count += 1
                if count > limit:
                    raise _TooMuchWork(f"over {limit} calls for {n_messages} messages")

        sys.setprofile(profile)
        try:
            run()
        finally:
            sys.setprofile(None)
        return count

    return measure


def test_the_work_of_an_import_is_linear_in_messages(tmp_path: Path) -> None:
    small = _import(tmp_path, 2000, _calls(2000))
    large = _import(tmp_path, 4000, _calls(4000))
    assert large <= 2.05 * small, (small, large)


def test_4000_messages_take_about_twice_the_time_of_2000(tmp_path: Path) -> None:
    # turn about, so that a busy machine slows both sizes alike
    pairs = [
        (_import(tmp_path, 2000, _cpu_seconds), _import(tmp_path, 4000, _cpu_seconds))
        for _ in range(3)
    ]
    small, large = (sum(times) for times in zip(*pairs, strict=True))
    assert large < 2.8 * small, pairs
