"""The Server page as a person uses it: start the server, copy its address, make a key, see a
client's requests arrive in the list (with their figures), open one's timeline, stop it.

Real SQLite and keyring (``services``), the real ``ApiServer`` on the test's qasync loop. The
client is httpx on the same loop; the agent behind it is a remote one talking to
``FaultServer`` on loopback (a stand-in for an OpenAI-compatible provider: fast and offline).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PySide6.QtGui import QGuiApplication

from desktop.serve import config as serve_config
from desktop.store.agents import Agent
from desktop.ui.kit.widgets import cell_text
from desktop.ui.server.page import REQUEST_COLUMNS, ServerPage
from tests.helpers.fault_server import FaultServer, Reply, ticking_tokens
from tests.helpers.shots import save_grab
from tests.helpers.widget_checks import cut_labels, overlaps, unnamed_controls


@pytest.fixture
def page(qtbot: Any, qloop: Any, services: Any) -> Iterator[ServerPage]:
    services.prefs.set(serve_config.PREF_PORT, 0)  # a free port, whatever runs beside
    page = ServerPage(services)
    qtbot.addWidget(page)
    page.resize(900, 1100)
    page.show()
    yield page
    if page.running:
        _run(qtbot, page.stop())


def _run(qtbot: Any, coro: Any, timeout_ms: int = 30_000) -> Any:
    """Await ``coro`` as the window would: a task on the running qasync loop, Qt spinning
    (``run_until_complete`` would leave the loop not running for what comes after)."""
    task = asyncio.ensure_future(coro)
    qtbot.waitUntil(task.done, timeout=timeout_ms)
    return task.result()


def test_start_serve_watch_and_stop(
    qtbot: Any, qloop: Any, services: Any, page: ServerPage, shot_dir: Path
) -> None:
    with FaultServer(lambda _r: Reply(body=ticking_tokens(5), chunk_delay_s=0.01)) as backend:
        services.agents.create(
            Agent(
                name="Remote helper",
                kind="openai-compatible",
                base_url=backend.url + "/v1",
                model="m",
            )
        )
        page.refresh_agents()
        ids = [cell_text(page.agents_table, r, 1) for r in range(page.agents_table.rowCount())]
        assert "remote-helper" in ids and "smollm2-local" in ids

        assert page.state_label.text() == "Stopped" and not page.copy_button.isEnabled()
        page.keep.setChecked(True)  # saved at once; the server takes it when it starts
        assert services.prefs.get(serve_config.PREF_KEEP_CONVERSATIONS) is True
        assert services.prefs.get(serve_config.PREF_PORT) == 7464  # the port box's, saved too
        services.prefs.set(serve_config.PREF_PORT, 0)  # the test takes a free port
        page.start_button.click()
        qtbot.waitUntil(lambda: page.running, timeout=10_000)
        assert page.state_label.text().startswith("Running at http://127.0.0.1:")
        assert page.start_button.text() == "Stop server"
        page.copy_button.click()
        assert QGuiApplication.clipboard().text() == page.server.address

        async def ask() -> httpx.Response:
            async with httpx.AsyncClient(base_url=page.server.address, timeout=30) as client:
                await client.post(  # refused: no such model
                    "/chat/completions", json={"model": "nope", "messages": []}
                )
                return await client.post(
                    "/chat/completions",
                    json={
                        "model": "remote-helper",
                        "messages": [{"role": "user", "content": "hi"}],
                    },
                )

        reply = _run(qtbot, ask())
        assert reply.status_code == 200, reply.text
        qtbot.waitUntil(lambda: page.requests_table.rowCount() == 2, timeout=10_000)
        qtbot.waitUntil(lambda: cell_text(page.requests_table, 0, 3) == "done", timeout=10_000)
        newest = [cell_text(page.requests_table, 0, c) for c in range(len(REQUEST_COLUMNS))]
        assert newest[1:4] == ["no key", "remote-helper", "done"]
        assert newest[4].endswith(" ms") and "→ 5" in newest[6]
        assert newest[7] == ""  # a server of its own: no price known, never "free"
        assert cell_text(page.requests_table, 1, 3) == "refused (400)"

        # kept as a conversation: the client's question and the reply, the row attached to it
        (conv,) = [c for c in services.conversations.list() if c.title.startswith("API · ")]
        assert conv.title == "API · no key · hi"
        texts = [(m.role, m.content) for m in services.conversations.messages(conv.id)]
        assert texts == [("user", "hi"), ("assistant", "tok0 tok1 tok2 tok3 tok4 ")]
        row = services.db.execute(
            "select conversation_id, source from inference_stats where conversation_id = ?",
            [conv.id],
        ).fetchone()
        assert row == (conv.id, "api")

        page.requests_table.cellDoubleClicked.emit(0, 0)
        panel = page.timeline_panel
        assert panel.isVisible() and panel.windowTitle() == "Reply timeline"
        panel.close()

        # a key made here works at once, and only its fingerprint is in the database
        _run(qtbot, page._new_key("editor"))
        key = QGuiApplication.clipboard().text()
        page.key_box.close()
        assert key.startswith("simi-") and cell_text(page.keys_table, 0, 0) == "editor"
        hashes = services.db.execute("select key_hash, hint from api_keys").fetchall()
        assert key not in str(hashes)
        save_grab(page, shot_dir / "server-page.png")
        assert unnamed_controls(page) == []
        assert overlaps(page) == []
        assert cut_labels(page) == []

        page.start_button.click()
        qtbot.waitUntil(lambda: page.state_label.text() == "Stopped", timeout=10_000)
        assert not page.running and page.start_button.text() == "Start server"


def test_a_port_in_use_says_so_and_keeps_the_page_usable(
    qtbot: Any, qloop: Any, services: Any, page: ServerPage
) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        services.prefs.set(serve_config.PREF_PORT, taken.getsockname()[1])
        page.port.blockSignals(True)
        page.port.setValue(taken.getsockname()[1])
        page.port.blockSignals(False)
        page.start_button.click()
        qtbot.waitUntil(lambda: page.error_label.isVisible(), timeout=10_000)
    assert "already in use by another program" in page.error_label.text()
    assert not page.running and page.start_button.isEnabled()


def test_the_network_choice_needs_a_key_first(qtbot: Any, qloop: Any, page: ServerPage) -> None:
    page.reach.setCurrentIndex(1)
    page.start_button.click()
    qtbot.waitUntil(lambda: page.error_label.isVisible(), timeout=10_000)
    assert "needs an API key" in page.error_label.text()
    assert not page.running


def test_a_key_can_be_limited_to_some_agents(
    qtbot: Any, qloop: Any, services: Any, page: ServerPage
) -> None:
    from PySide6.QtCore import Qt

    from desktop.ui.server.page import KeyAgentsDialog

    other = services.agents.create(
        Agent(name="Other", kind="openai-compatible", base_url="http://127.0.0.1:9/v1", model="m")
    )
    _run(qtbot, page._new_key("editor"))
    page.key_box.close()
    assert cell_text(page.keys_table, 0, 2) == "every served agent"
    agents = services.agents.list()
    dialog = KeyAgentsDialog("editor", agents, None, page)
    assert dialog.chosen() is None  # every tick: every agent, new ones too
    for item in dialog._items():
        if item.text() == "Other":
            item.setCheckState(Qt.CheckState.Unchecked)
    only = dialog.chosen()
    assert only is not None and other.id not in only and len(only) == len(agents) - 1
    page._listing().keys.store.set_agents("editor", only)
    page.refresh_keys()
    assert cell_text(page.keys_table, 0, 2) == "SmolLM2 (local)"
