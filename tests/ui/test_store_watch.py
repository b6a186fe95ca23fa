"""One store, many doors: what the `simi` command or a second window writes to the database
shows in an open window within a second or so, without a restart, and without losing what the
person had (the highlighted agent, the conversation shown, the list's scroll position, a
streaming reply). The window's own writes cause no refresh.

The other door is real: `simi agents add` in a subprocess on the same SIMI_HOME, or a second
``Services`` (its own SQLite connection) on the same folder, as a second window has."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import Qt

from desktop.chat.services import Services
from desktop.settings.paths import AppPaths
from desktop.store.agents import Agent
from desktop.ui.kit.widgets import SUBTITLE_ROLE
from tests.helpers.fault_server import FaultServer, Reply, ticking_tokens
from tests.ui.conftest import STARTER

SHOWS_WITHIN_MS = 10_000  # generous: the window polls every 500 ms


@pytest.fixture
def other_door(services: Any) -> Iterator[Services]:
    """A second connection to the same database (a second window, or the CLI)."""
    other = Services.open(AppPaths.from_env())
    yield other
    other.close()


def _agent_names(window: Any) -> list[str]:
    return [a.name for a in window.agents.agents]


def _listed(window: Any) -> dict[int, str]:
    model = window.browser.conversation_list.list_model
    rows = (model.conversation(row) for row in range(model.rowCount()))
    return {c.id: c.title for c in rows if c is not None}


def test_an_agent_added_with_the_cli_appears_in_the_open_window(
    qtbot: Any, services: Any, make_window: Any, cli_env: dict[str, str]
) -> None:
    window = make_window(services)
    starter = services.agents.by_name(STARTER)
    window.select_agent(starter.id)
    shown_pane = window.pane
    added = subprocess.run(
        [sys.executable, "-m", "desktop", "agents", "add", "--name", "Vllm box",
         "--kind", "openai-compatible", "--base-url", "http://127.0.0.1:8000/v1",
         "--model", "/models/qwen2.5-7b-instruct-q4_k_m.gguf"],
        env=cli_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    qtbot.waitUntil(lambda: "Vllm box" in _agent_names(window), timeout=SHOWS_WITHIN_MS)
    assert window.agents.highlighted is not None and window.agents.highlighted.id == starter.id
    assert window.pane is shown_pane
    row = window.agents.agent_list.item(_agent_names(window).index("Vllm box"))
    assert "/models/qwen2.5-7b-instruct-q4_k_m.gguf" in row.toolTip()  # the whole name
    assert row.data(SUBTITLE_ROLE).endswith("· qwen2.5-7b-instruct-q4_k_m.gguf")
    # the header's "Switch agent" menu offers it too
    window.pane.agent_menu.aboutToShow.emit()
    assert "Vllm box" in [a.text() for a in window.pane.agent_menu.actions()]
    # and the filter above the conversation list
    combo = window.browser.agent_filter
    assert "Vllm box" in [combo.itemText(i) for i in range(combo.count())]

    removed = subprocess.run(
        [sys.executable, "-m", "desktop", "agents", "remove", "Vllm box"],
        env=cli_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert removed.returncode == 0, removed.stderr
    qtbot.waitUntil(lambda: "Vllm box" not in _agent_names(window), timeout=SHOWS_WITHIN_MS)


def test_conversations_created_renamed_and_deleted_elsewhere_show_and_nothing_jumps(
    qtbot: Any, services: Any, make_window: Any, other_door: Services
) -> None:
    agent_id = services.agents.by_name(STARTER).id
    convs = [services.conversations.create(agent_id, f"Chat {n:02d}") for n in range(60)]
    window = make_window(services)
    window.resize(1000, 700)
    newest = convs[-1].id  # at the top of the list: scrolled out of sight below
    window.open_conversation(newest)
    view = window.browser.conversation_list
    bar = view.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0)
    bar.setValue(bar.maximum() // 2)
    scrolled = bar.value()

    other = other_door.conversations
    made = other.create(agent_id, "Written by the other window")
    qtbot.waitUntil(lambda: made.id in _listed(window), timeout=SHOWS_WITHIN_MS)
    other.rename(convs[5].id, "Renamed elsewhere")
    qtbot.waitUntil(
        lambda: _listed(window).get(convs[5].id) == "Renamed elsewhere", timeout=SHOWS_WITHIN_MS
    )
    other.trash(convs[6].id)
    qtbot.waitUntil(lambda: convs[6].id not in _listed(window), timeout=SHOWS_WITHIN_MS)

    assert window.conversation_id == newest and view.current_id() == newest
    assert bar.value() == scrolled  # the list did not jump while it changed under the person


def test_the_windows_own_writes_cause_no_refresh_and_another_connections_do(
    qtbot: Any, services: Any, make_window: Any, other_door: Services
) -> None:
    window = make_window(services)
    watch = window.store_watch
    agent_id = services.agents.by_name(STARTER).id
    before = watch.refreshes
    for n in range(5):  # the window's own connection: data_version stays
        conv = services.conversations.create(agent_id, f"Own {n}")
        services.conversations.add_message(conv.id, "user", "hello")
    services.agents.create(
        Agent(name="Own", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m")
    )
    qtbot.wait(1_500)  # three polls
    assert watch.refreshes == before

    other_door.conversations.create(agent_id, "From elsewhere")
    qtbot.waitUntil(lambda: watch.refreshes > before, timeout=SHOWS_WITHIN_MS)
    qtbot.wait(1_500)
    assert watch.refreshes == before + 1  # one commit elsewhere, one refresh


def test_a_streaming_reply_goes_on_while_the_lists_refresh(
    qtbot: Any, services: Any, make_window: Any, other_door: Services
) -> None:
    with FaultServer(lambda _r: Reply(body=ticking_tokens(60), chunk_delay_s=0.03)) as server:
        ticker = services.agents.create(
            Agent(name="Ticker", kind="openai-compatible", base_url=server.url + "/v1", model="t")
        )
        window = make_window(services)
        window.select_agent(ticker.id)
        pane = window.pane
        pane.composer.setPlainText("count")
        qtbot.keyClick(pane.composer, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: pane.busy, timeout=10_000)
        before = window.store_watch.refreshes
        other_door.agents.create(
            Agent(name="Added mid-stream", kind="openai-compatible", base_url=server.url, model="x")
        )
        qtbot.waitUntil(lambda: "Added mid-stream" in _agent_names(window), timeout=10_000)
        assert window.store_watch.refreshes > before
        assert pane.busy, "the reply ended before the refresh: make it longer"
        qtbot.waitUntil(lambda: not pane.busy, timeout=30_000)
    assert pane.conversation_id is not None
    reply = services.conversations.messages(pane.conversation_id)[-1]
    assert reply.status == "complete" and "tok59" in reply.content  # every token, in place
    assert window.pane is pane and pane.agent is not None and pane.agent.id == ticker.id


def test_the_agent_list_keeps_its_scroll_and_highlight_when_an_agent_arrives(
    qtbot: Any, services: Any, make_window: Any, other_door: Services
) -> None:
    for n in range(12):
        services.agents.create(
            Agent(name=f"Box {n:02d}", kind="openai-compatible", base_url="http://127.0.0.1:9/v1",
                  model="m")
        )  # fmt: skip
    window = make_window(services)
    starter = services.agents.by_name(STARTER)
    window.select_agent(starter.id)
    bar = window.agents.agent_list.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0)
    bar.setValue(bar.maximum())
    scrolled = bar.value()
    other_door.agents.create(
        Agent(name="Zed", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m")
    )
    qtbot.waitUntil(lambda: "Zed" in _agent_names(window), timeout=SHOWS_WITHIN_MS)
    assert window.agents.highlighted is not None and window.agents.highlighted.id == starter.id
    assert bar.value() == scrolled


def test_an_open_agent_editor_is_left_alone_and_the_list_follows_when_it_closes(
    qtbot: Any, services: Any, make_window: Any, other_door: Services
) -> None:
    window = make_window(services)
    editor = window.agents.editor(None)
    editor.setModal(True)
    editor.show()
    qtbot.waitExposed(editor)
    editor.name.setText("Half typed")
    other_door.agents.create(
        Agent(name="Zed", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m")
    )
    qtbot.wait(1_500)  # three polls while the editor is open
    assert "Zed" not in _agent_names(window) and editor.isVisible()
    assert editor.name.text() == "Half typed"
    editor.reject()
    qtbot.waitUntil(lambda: "Zed" in _agent_names(window), timeout=SHOWS_WITHIN_MS)
    editor.deleteLater()


def test_the_shown_conversation_deleted_elsewhere_gives_way_to_a_new_chat(
    qtbot: Any, services: Any, make_window: Any, other_door: Services
) -> None:
    agent_id = services.agents.by_name(STARTER).id
    conv = services.conversations.create(agent_id, "About to go")
    services.conversations.add_message(conv.id, "user", "Still here?")
    window = make_window(services)
    window.open_conversation(conv.id)
    assert window.conversation_id == conv.id
    other_door.conversations.trash(conv.id)
    qtbot.waitUntil(lambda: window.conversation_id is None, timeout=SHOWS_WITHIN_MS)
    assert conv.id not in _listed(window)
    assert not [p for p in window.panes if p.conversation_id == conv.id]  # its pane closed
