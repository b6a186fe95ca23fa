"""Compare mode as a person sees it, rendered light and dark at 1280x800 for people to look at
(``SIMI_SCREENSHOT_DIR=/tmp/simi-shots`` writes compare-*.png and runs-*.png): a three-agent
comparison (the starter local agent and two remote ones) mid-stream and finished, and a
prompt-set run's results table. Each also asserts what the picture should show.

The two remote agents talk to FaultServer on loopback, which streams OpenAI-style chunks of a
short prose reply at a fixed pace with a usage chunk at the end: a stand-in for two remote
providers (none can be reached offline), one quicker than the other so the marks have a
winner, slow enough to still be streaming when the mid-stream picture is taken. The local
column is the real starter model in the real worker process.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication, QPushButton, QWidget

from desktop.store.agents import Agent
from tests.helpers.fault_server import FaultServer, Recorded, Reply
from tests.helpers.shots import settle, shoot
from tests.helpers.widget_checks import cut_labels, overlaps
from tests.ui.conftest import STARTER, limit_starter

TIMEOUT_MS = 60_000
SIZE = (1280, 800)
PROMPT = "Why does the sea look blue? Explain it in a few paragraphs."
REPLY = (
    "The sea looks blue mostly because water absorbs red and orange light a little more "
    "strongly than blue light, so the light that comes back out of deep water is shifted "
    "towards blue. The sky adds to it: a calm surface reflects the blue sky like a mirror, "
    "which is why the sea looks grey under clouds. Particles and algae scatter light too, "
    "which turns coastal water green or turquoise."
)
WORDS = REPLY.split(" ")


def prose(words: list[str] = WORDS) -> Iterator[bytes]:
    """The reply as OpenAI chunks, a word each, then a usage chunk and the end."""
    for i, word in enumerate(words):
        text = word if i == 0 else " " + word
        chunk = {"choices": [{"index": 0, "delta": {"content": text}}]}
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    usage = {"prompt_tokens": 24, "completion_tokens": len(words), "total_tokens": 24 + len(words)}
    yield (
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        + f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
        + b"data: [DONE]\n\n"
    )


def paced(
    delay_s: float, words: list[str] = WORDS, gate: threading.Event | None = None
) -> FaultServer:
    """A server streaming ``words`` at one per ``delay_s``; with ``gate``, it answers (its
    headers, then the words) only once the gate is open (at most 30 s)."""

    def reply(_request: Recorded) -> Reply:
        if gate is not None:
            gate.wait(30)
        return Reply(body=prose(words), chunk_delay_s=delay_s)

    return FaultServer(reply)


def looks_right(widget: QWidget) -> None:
    """Nothing hides part of anything else, and no label is cut without an ellipsis."""
    assert overlaps(widget) == []
    assert cut_labels(widget) == []


def two_remotes(services: Any, quick: FaultServer, slow: FaultServer) -> list[Agent]:
    """Two OpenAI-compatible agents with prices of their own: "Cloud Quick" on ``quick`` and
    "Cloud Thrifty" on ``slow``."""
    return [
        services.agents.create(
            Agent(
                name=name,
                kind="openai-compatible",
                base_url=server.url + "/v1",
                model=model,
                price_input_per_m=price_in,
                price_output_per_m=price_out,
            )
        )
        for name, server, model, price_in, price_out in (
            ("Cloud Quick", quick, "quick-large-2025", 3.0, 15.0),
            ("Cloud Thrifty", slow, "thrifty-mini", 0.15, 0.6),
        )
    ]


GATE = threading.Event()


def warm_local(qtbot: Any, services: Any, local: Agent) -> None:
    """One short reply from the local agent in a conversation of its own, so that its model
    is loaded when the comparison starts (as it is once a person has used it)."""
    conversation = services.conversations.create(local.id, "Warm-up")
    turn = services.chat.begin(conversation.id, replace(local, max_tokens=4), "Hi")
    task = asyncio.ensure_future(services.chat.run(turn))
    qtbot.waitUntil(task.done, timeout=TIMEOUT_MS)
    assert turn.status == "complete", turn.error


@pytest.fixture
def three_agents(services: Any) -> Iterator[list[Agent]]:
    """The starter local agent (long enough to be still streaming in the mid-stream picture on
    a quick machine) and two remote ones, one quicker; the
    remote ones answer once ``GATE`` opens (so the local one, which loads its model first, is
    streaming too when the mid-stream picture is taken; their TTFT includes that wait)."""
    local = limit_starter(services, max_tokens=100)
    GATE.clear()
    with paced(0.06, gate=GATE) as quick, paced(0.12, gate=GATE) as slow:
        remotes = two_remotes(services, quick, slow)
        try:
            yield [local, *remotes]
        finally:
            GATE.set()


@pytest.mark.slow
def test_a_three_agent_comparison_mid_stream_and_finished(
    qtbot: Any,
    qloop: Any,
    qapp: QApplication,
    services: Any,
    three_agents: list[Agent],
    shot_dir: Path,
) -> None:
    compare_view = pytest.importorskip(
        "desktop.ui.compare.view", reason="helper B's CompareView is not in the tree yet"
    )
    warm_local(qtbot, services, three_agents[0])
    view = compare_view.CompareView(services)
    qtbot.addWidget(view)
    view.resize(*SIZE)
    view.set_agents(three_agents)
    view.show()
    qtbot.waitExposed(view)
    try:
        all_finished: list[bool] = []  # it may come while the mid-stream picture is taken
        view.all_finished.connect(lambda: all_finished.append(True))
        view.composer.setPlainText(PROMPT)
        view.send_button.click()
        columns = view.columns
        assert [c.agent_name for c in columns] == [STARTER, "Cloud Quick", "Cloud Thrifty"]
        for column in columns:
            assert column.agent_name in column.title.text()

        def reply_text(column: Any) -> str:
            """The text of the column's last reply bubble, as painted so far."""
            bubbles = [b for b in column.pane.transcript.bubbles() if b.role == "assistant"]
            return bubbles[-1].text if bubbles else ""  # "…" while nothing came yet

        # Mid-stream: every column has words on screen and live figures, the remote ones are
        # still going.
        qtbot.waitUntil(
            lambda: (
                reply_text(columns[0]).strip() not in ("", "…")
                and "TTFT" in columns[0].figures.text()
            ),
            timeout=TIMEOUT_MS,
        )
        GATE.set()
        qtbot.waitUntil(
            lambda: (
                all(len(reply_text(c).split()) >= 8 for c in columns[1:])
                and all("tok/s" in c.figures.text() for c in columns[1:])
            ),
            timeout=TIMEOUT_MS,
        )
        assert columns[1].busy and columns[2].busy, [
            (c.busy, reply_text(c)[:80], c.figures.text()) for c in columns
        ]
        # a Stop for each column still answering and one for all of them, ready to press
        stops = [
            b
            for b in view.findChildren(QPushButton)
            if b.isVisible() and b.isEnabled() and b.text().startswith("Stop")
        ]
        assert len(stops) == sum(c.busy for c in columns) + 1, [b.text() for b in stops]
        for column in columns[1:]:
            assert "TTFT" in column.figures.text() and "streaming" in column.figures.text()
        looks_right(view)
        shoot(qapp, view, shot_dir / "compare-streaming", 20_000)

        qtbot.waitUntil(lambda: bool(all_finished), timeout=TIMEOUT_MS)
        settle(qapp)
        for column in columns:
            reply = column.last_reply()
            assert reply is not None and reply.status == "complete" and reply.content.strip()
            figures = column.figures.text()
            assert "TTFT" in figures and "tok/s" in figures and "tokens" in figures, figures
            assert "streaming" not in figures
        assert columns[2].last_reply().content == REPLY  # type: ignore[union-attr]
        # The local one costs nothing; the two remote ones are priced from their own prices.
        assert "local" in columns[0].figures.text()
        assert "$" in columns[1].figures.text() and "$" in columns[2].figures.text()
        marked = {m for c in columns for m in c.marks}
        assert {"ttft", "decode", "cost"} <= marked
        # each mark is on the column whose stored figure is the best of the three
        rows = {c.agent_name: c.stats() or {} for c in columns}
        fastest = max(columns, key=lambda c: rows[c.agent_name]["decode_tok_s"])
        first = min(columns, key=lambda c: rows[c.agent_name]["ttft_ms"])
        assert "decode" in fastest.marks and "ttft" in first.marks, rows
        assert "decode" not in columns[2].marks  # the slower remote never decodes fastest
        assert any(c.badges.isVisible() for c in columns)
        assert view.vote_bar.isVisible()
        looks_right(view)
        shoot(qapp, view, shot_dir / "compare-finished", 20_000)
    finally:
        view.stop_all()
        qtbot.waitUntil(lambda: not view.busy, timeout=TIMEOUT_MS)
        view.close()


@pytest.mark.slow
def test_a_prompt_set_run_and_its_results_table(
    qtbot: Any, qloop: Any, qapp: QApplication, services: Any, shot_dir: Path
) -> None:
    runs_view = pytest.importorskip(
        "desktop.ui.compare.runs_view", reason="helper C's RunsView is not in the tree yet"
    )
    local = limit_starter(services, max_tokens=8)
    short = WORDS[:24]
    with paced(0.005, short) as quick, paced(0.01, short) as slow:
        remotes = two_remotes(services, quick, slow)
        agents = [local, *remotes]
        view = runs_view.RunsView(services)
        qtbot.addWidget(view)
        view.resize(*SIZE)
        view.show()
        qtbot.waitExposed(view)
        try:
            view.prompts_edit.setPlainText(
                "Why is the sea blue?\nName three prime numbers.\nWhat is a haiku?"
            )
            view.set_checked([a.id for a in agents])
            view.repeat_box.setValue(2)
            task = view.start_run()
            assert task is not None
            qtbot.waitUntil(task.done, timeout=TIMEOUT_MS * 2)
            assert task.result() == "complete"
            qtbot.waitUntil(lambda: view.table.rowCount() == 3, timeout=TIMEOUT_MS)
            settle(qapp)
            assert view.progress.value() == view.progress.maximum() == 3 * 3 * 2
            rows = view.table.rows_by_agent()
            assert set(rows) == {STARTER, "Cloud Quick", "Cloud Thrifty"}, rows
            headers = [
                view.table.horizontalHeaderItem(i).text() for i in range(view.table.columnCount())
            ]
            for name, cells in rows.items():
                # every figure of a measured agent is filled in (no blank cells)
                assert all(cell.strip() for cell in cells), (
                    name,
                    dict(zip(headers, cells, strict=True)),
                )
            assert view.csv_button.isEnabled() and view.json_button.isEnabled()
            looks_right(view)
            shoot(qapp, view, shot_dir / "runs-table", 20_000)
        finally:
            if view.busy:
                view.cancel()
                qtbot.waitUntil(lambda: not view.busy, timeout=TIMEOUT_MS)
            view.close()
