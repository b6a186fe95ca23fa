"""File → Export / Import from the window: real files, the real store; the writing happens
on a worker thread so a slow disk never stalls the window."""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

from desktop.store.agents import Agent
from tests.helpers.exports import exported


def _window_on_conversation(services: Any, make_window: Any) -> tuple[Any, int]:
    conv_id = _conversation(services)
    window = make_window(services)
    window.open_conversation(conv_id)
    return window, conv_id


def _conversation(services: Any) -> int:
    agent = services.agents.create(
        Agent(
            name="Archivist", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m"
        )
    )
    conv = services.conversations.create(agent.id, title="Harbour notes")
    user = services.conversations.add_message(conv.id, "user", "Where is the lighthouse?")
    services.conversations.add_message(
        conv.id, "assistant", "At the end of the pier.", parent_id=user.id, agent_name="Archivist"
    )
    return conv.id


def test_export_writes_markdown_off_the_gui_thread_and_says_where(
    qtbot: Any, services: Any, make_window: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    window, _conv_id = _window_on_conversation(services, make_window)
    target = tmp_path / "notes.md"
    asked: list[str] = []
    window.ask_save_path = lambda _title, suggested, _filters: (
        asked.append(suggested) or str(target)
    )
    writers: list[bool] = []
    real_write = Path.write_text

    def write_text(self: Path, *args: Any, **kwargs: Any) -> int:
        writers.append(threading.current_thread() is threading.main_thread())
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    task = window.export_conversation("md")
    assert task is not None
    qtbot.waitUntil(task.done, timeout=10_000)
    assert [Path(p).name for p in asked] == ["Harbour notes.md"]  # see test_export_paths
    text = target.read_text(encoding="utf-8")
    assert "Where is the lighthouse?" in text and "At the end of the pier." in text
    assert writers == [False]  # written on a worker thread
    assert window.status_label.text() == f"Exported “Harbour notes” to {target}"


def test_export_to_a_place_that_cannot_be_written_says_so_and_loses_nothing(
    qtbot: Any, services: Any, make_window: Any, tmp_path: Path
) -> None:
    window, conv_id = _window_on_conversation(services, make_window)
    window.ask_save_path = lambda *_args: str(tmp_path)  # a folder, not a file
    task = window.export_conversation("json")
    qtbot.waitUntil(task.done, timeout=10_000)
    assert window.status_label.text().startswith(f"Could not write {tmp_path}")
    assert len(services.conversations.messages(conv_id)) == 2
    assert window.pane.conversation_id == conv_id


def test_import_opens_the_conversation_and_garbage_gets_a_clear_error(
    qtbot: Any, services: Any, make_window: Any, tmp_path: Path
) -> None:
    window, conv_id = _window_on_conversation(services, make_window)
    exported = tmp_path / "harbour.json"
    window.ask_save_path = lambda *_args: str(exported)
    qtbot.waitUntil(window.export_conversation("json").done, timeout=10_000)
    assert json.loads(exported.read_text(encoding="utf-8"))

    window.ask_open_path = lambda *_args: str(exported)
    qtbot.waitUntil(window.import_conversation().done, timeout=10_000)
    assert window.conversation_id not in (None, conv_id)
    assert window.status_label.text() == "Imported harbour.json"
    texts = [m.content for m in services.conversations.messages(window.conversation_id)]
    assert texts == ["Where is the lighthouse?", "At the end of the pier."]

    garbage = tmp_path / "garbage.json"
    garbage.write_text("{ not json", encoding="utf-8")
    shown = window.conversation_id
    window.ask_open_path = lambda *_args: str(garbage)
    qtbot.waitUntil(window.import_conversation().done, timeout=10_000)
    assert window.status_label.text().startswith("Could not import:")
    assert window.conversation_id == shown


def _message_count(services: Any) -> int:
    return int(services.db.execute("SELECT count(*) FROM messages").fetchone()[0])


def test_importing_2000_messages_runs_on_a_worker_while_the_window_keeps_ticking(
    qtbot: Any, services: Any, make_window: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    from PySide6.QtCore import QTimer

    from desktop.ui.shell import transfer

    window = make_window(services)
    big = tmp_path / "big.json"
    big.write_text(json.dumps(exported("Long talk", 2000)), encoding="utf-8")
    stored_on: list[bool] = []
    stored_at: list[float] = []
    real_import = transfer.import_into

    def import_into(*args: Any, **kwargs: Any) -> list[int]:
        stored_on.append(threading.current_thread() is threading.main_thread())
        try:
            return real_import(*args, **kwargs)
        finally:
            stored_at.append(time.perf_counter())

    monkeypatch.setattr(transfer, "import_into", import_into)
    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start()
    window.ask_open_path = lambda *_args: str(big)
    qtbot.waitUntil(lambda: len(ticks) >= 3, timeout=5_000)  # the window has settled
    clicked = time.perf_counter()
    task = window.import_conversation()
    qtbot.waitUntil(task.done, timeout=30_000)
    timer.stop()
    assert stored_on == [False]  # parsed and stored on a worker thread
    assert window.status_label.text() == "Imported big.json"
    assert len(services.conversations.messages(window.conversation_id)) == 2000
    # from the click until the import was stored (showing 2,000 messages is the pane's cost)
    while_storing = [clicked, *(t for t in ticks if clicked < t < stored_at[0]), stored_at[0]]
    largest_gap = max(b - a for a, b in itertools.pairwise(while_storing))
    assert largest_gap < 0.1, f"the GUI loop stalled {largest_gap * 1000:.0f} ms"


def test_a_file_whose_third_of_five_conversations_is_broken_imports_nothing_and_says_why(
    qtbot: Any, services: Any, make_window: Any, tmp_path: Path
) -> None:
    window, conv_id = _window_on_conversation(services, make_window)
    file = [exported(f"Chat {n}", 4) for n in range(1, 6)]
    file[2]["messages"][2]["parent_id"] = 99
    broken = tmp_path / "five.json"
    broken.write_text(json.dumps(file), encoding="utf-8")
    conversations, messages = len(services.conversations.list()), _message_count(services)
    window.ask_open_path = lambda *_args: str(broken)
    qtbot.waitUntil(window.import_conversation().done, timeout=10_000)
    assert window.status_label.text() == (
        "Could not import: Conversation 3 of 5 in the file: The export's messages refer to "
        "parents that are not in it. Nothing was imported."
    )
    assert len(services.conversations.list()) == conversations
    assert _message_count(services) == messages
    assert window.conversation_id == conv_id

    del file[2]
    good = tmp_path / "four.json"
    good.write_text(json.dumps(file), encoding="utf-8")
    window.ask_open_path = lambda *_args: str(good)
    qtbot.waitUntil(window.import_conversation().done, timeout=10_000)
    assert window.status_label.text() == "Imported 4 conversations from four.json"
    assert services.conversations.get(window.conversation_id).title == "Chat 1"
    assert len(services.conversations.list()) == conversations + 4
