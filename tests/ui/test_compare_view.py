"""The compare view: one prompt to several agents side by side, blind pairwise votes, saved
comparisons.

The remote agents talk to FaultServer on loopback streaming OpenAI-style chunks at a fixed
pace: a stand-in for remote providers (none can be reached offline) whose replies are slow
enough to still be streaming while a test acts, and whose received request bodies the tests
read. The local column uses the real starter model through the real worker process (marked
slow). Dialogs are answered by replacing ``view.pick`` / ``view.ask_text`` (the dialog itself
is filled in as a person would).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from desktop.store.agents import Agent
from desktop.ui.compare.column import MIN_COLUMN_WIDTH_PX
from desktop.ui.compare.picker import AgentPicker
from desktop.ui.compare.view import CompareView
from tests.helpers.fault_server import FaultServer, Recorded, Reply, error_reply, ticking_tokens
from tests.ui.conftest import STARTER, limit_starter

TIMEOUT_MS = 30_000
# The starter model on a loaded 2-core machine: a guard against a hang, it times nothing.
LOCAL_TIMEOUT_MS = 180_000
CHUNK_DELAY_S = 0.02


def _ticker(
    count: int | None = 30, delay: float = CHUNK_DELAY_S, first_after: float = 0.0
) -> FaultServer:
    def reply(_request: Recorded) -> Reply:
        time.sleep(first_after)  # the server "thinks" before its headers: a longer TTFT
        return Reply(body=ticking_tokens(count), chunk_delay_s=delay)

    return FaultServer(reply)


def _remote(services: Any, name: str, server: FaultServer, **fields: Any) -> Agent:
    return services.agents.create(
        Agent(
            name=name,
            kind="openai-compatible",
            base_url=server.url + "/v1",
            model=name.lower(),
            **fields,
        )
    )


@pytest.fixture
def two_remotes(services: Any) -> Iterator[tuple[Agent, Agent, FaultServer, FaultServer]]:
    with _ticker() as one, _ticker() as two:
        yield _remote(services, "Remote A", one), _remote(services, "Remote B", two), one, two


def _send(qtbot: Any, view: CompareView, text: str) -> None:
    """Type into the one composer and press Enter; wait until every column has answered."""
    view.composer.setPlainText(text)
    with qtbot.waitSignal(view.all_finished, timeout=TIMEOUT_MS):
        qtbot.keyClick(view.composer, Qt.Key.Key_Return)


def _replies(services: Any, column: Any) -> list[Any]:
    return [m for m in services.conversations.messages(column.conversation_id)]


@pytest.mark.slow
def test_one_prompt_streams_to_a_local_and_two_remote_columns_each_with_its_reply_and_figures(
    qtbot: Any, make_view: Any, services: Any, two_remotes: Any
) -> None:
    a, b, server_a, server_b = two_remotes
    local = limit_starter(services, max_tokens=12)
    view = make_view([local, a, b])
    assert [c.label for c in view.columns] == ["A", "B", "C"]
    assert all(not c.pane.composer_area.isVisible() for c in view.columns)  # one composer
    assert all(not c.pane.header.isVisible() for c in view.columns)
    assert [c.title.text() for c in view.columns] == [
        f"A · {STARTER}",
        "B · Remote A",
        "C · Remote B",
    ]

    view.composer.setPlainText("Say hello")
    with qtbot.waitSignal(view.all_finished, timeout=LOCAL_TIMEOUT_MS):
        qtbot.keyClick(view.composer, Qt.Key.Key_Return)
        assert view.busy and view.composer.toPlainText() == ""  # the click returns at once
        # each column starts in a loop turn of its own, all without waiting for a reply
        qtbot.waitUntil(lambda: all(c.busy for c in view.columns), timeout=TIMEOUT_MS)
        qtbot.waitUntil(lambda: "streaming" in view.columns[2].figures.text(), timeout=TIMEOUT_MS)
        assert "tok/s" in view.columns[2].figures.text() or "TTFT" in view.columns[2].figures.text()
    assert not view.busy

    for column in view.columns:
        rows = _replies(services, column)
        assert [(m.role, m.status) for m in rows] == [
            ("user", "complete"),
            ("assistant", "complete"),
        ]
        assert rows[0].content == "Say hello"
        assert rows[1].agent_name == column.agent_name
        shown = column.pane.transcript.bubble(rows[1].id)
        assert shown is not None and shown.text.strip() == rows[1].content.strip()
        assert "TTFT" in column.figures.text() and "tokens" in column.figures.text()
    assert "tok29" in _replies(services, view.columns[1])[1].content
    assert view.columns[0].figures.text().endswith("local")  # a local answer costs nothing

    session = services.compare.session(view.session_id)
    assert session is not None and session.title == "Say hello"
    assert [(c.label, c.agent_name, c.conversation_id) for c in session.columns] == [
        (c.label, c.agent_name, c.conversation_id) for c in view.columns
    ]
    assert len(server_a.requests) == 1 and len(server_b.requests) == 1
    assert view.vote_bar.isVisible()


def test_a_failing_column_shows_its_error_while_the_others_finish(
    qtbot: Any, make_view: Any, services: Any, two_remotes: Any
) -> None:
    a, b, *_ = two_remotes
    with FaultServer(error_reply(401, {"error": {"message": "bad key"}})) as broken:
        bad = _remote(services, "Broken", broken)
        view = make_view([a, bad, b])
        _send(qtbot, view, "hi")
    good_a, failed, good_b = view.columns
    assert failed.figures.text().startswith("failed:")
    assert _replies(services, failed)[1].status == "error"
    for column in (good_a, good_b):
        reply = _replies(services, column)[1]
        assert reply.status == "complete" and "tok29" in reply.content
        assert "TTFT" in column.figures.text()
    assert failed.marks == []


def test_stopping_one_column_leaves_the_others_streaming(
    qtbot: Any, make_view: Any, services: Any
) -> None:
    with _ticker(count=100) as one, _ticker(count=None) as endless, _ticker(count=100) as two:
        a, b = _remote(services, "Long A", one), _remote(services, "Long B", two)
        view = make_view([a, _remote(services, "Endless", endless), b])
        view.composer.setPlainText("go")
        with qtbot.waitSignal(view.all_finished, timeout=TIMEOUT_MS):
            qtbot.keyClick(view.composer, Qt.Key.Key_Return)
            middle = view.columns[1]
            qtbot.waitUntil(lambda: "streaming" in middle.figures.text(), timeout=TIMEOUT_MS)
            assert middle.stop_button.isEnabled()
            qtbot.mouseClick(middle.stop_button, Qt.MouseButton.LeftButton)
            qtbot.waitUntil(lambda: not middle.busy, timeout=TIMEOUT_MS)
            assert view.columns[0].busy and view.columns[2].busy  # the others go on
            assert not middle.stop_button.isEnabled() and view.send_button.text() == "Stop all"
    assert _replies(services, view.columns[1])[1].status == "cancelled"
    assert "stopped" in view.columns[1].figures.text()
    for column in (view.columns[0], view.columns[2]):
        reply = _replies(services, column)[1]
        assert reply.status == "complete" and "tok99" in reply.content


@pytest.mark.slow
def test_two_local_columns_take_turns_and_the_waiting_one_says_it_is_queued(
    qtbot: Any, make_view: Any, services: Any
) -> None:
    starter = limit_starter(services, max_tokens=8)
    twin = services.agents.clone(starter, "SmolLM2 twin")
    services.local.available_ram = lambda: 0  # stands in for no RAM free for a second worker
    view = make_view([starter, twin])
    view.composer.setPlainText("Count to ten")
    seen: set[str] = set()
    with qtbot.waitSignal(view.all_finished, timeout=LOCAL_TIMEOUT_MS):
        qtbot.keyClick(view.composer, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: all(c.busy for c in view.columns), timeout=TIMEOUT_MS)
        qtbot.waitUntil(
            lambda: (
                seen.update(c.figures.text() for c in view.columns)
                or any(t.startswith("queued") for t in seen)
            ),
            timeout=LOCAL_TIMEOUT_MS,
        )
    for column in view.columns:
        assert _replies(services, column)[1].status == "complete"
    queued = [
        r["queued_ms"]
        for c in view.columns
        for r in [services.stats.for_messages([c.last_reply().id])[c.last_reply().id]]
    ]
    assert max(q or 0 for q in queued) > 0  # the wait is stored as queue time


@pytest.mark.parametrize("how", ["button", "escape"])
def test_stop_all_stops_every_column(qtbot: Any, make_view: Any, services: Any, how: str) -> None:
    with _ticker(count=None) as one, _ticker(count=None) as two:
        view = make_view([_remote(services, "E1", one), _remote(services, "E2", two)])
        view.composer.setPlainText("go")
        qtbot.keyClick(view.composer, Qt.Key.Key_Return)
        qtbot.waitUntil(
            lambda: all("streaming" in c.figures.text() for c in view.columns), timeout=TIMEOUT_MS
        )
        assert view.send_button.text() == "Stop all" and view.send_button.isEnabled()
        with qtbot.waitSignal(view.all_finished, timeout=TIMEOUT_MS):
            if how == "button":
                qtbot.mouseClick(view.send_button, Qt.MouseButton.LeftButton)
            else:
                qtbot.keyClick(view.composer, Qt.Key.Key_Escape)
    assert view.send_button.text() == "Send"
    assert [_replies(services, c)[1].status for c in view.columns] == ["cancelled", "cancelled"]


def test_a_follow_up_continues_each_columns_own_history(
    qtbot: Any, make_view: Any, services: Any, two_remotes: Any
) -> None:
    a, b, server_a, server_b = two_remotes
    view = make_view([a, b])
    _send(qtbot, view, "first")
    conversations = [c.conversation_id for c in view.columns]
    _send(qtbot, view, "second")
    assert [c.conversation_id for c in view.columns] == conversations  # the same conversations
    for column, server in zip(view.columns, (server_a, server_b), strict=True):
        rows = _replies(services, column)
        assert [m.role for m in rows] == ["user", "assistant", "user", "assistant"]
        asked = server.requests[-1].json()["messages"]
        assert [m["content"] for m in asked if m["role"] == "user"] == ["first", "second"]
        assert asked[1]["role"] == "assistant" and "tok29" in asked[1]["content"]
    assert len(services.compare.sessions()) == 1  # one comparison, two prompts


def test_blind_columns_are_letters_until_a_vote_reveals_them_and_the_vote_is_stored(
    qtbot: Any, make_view: Any, services: Any, two_remotes: Any
) -> None:
    a, b, *_ = two_remotes
    view = make_view([a, b], blind=True)
    # shuffled: the test's shuffle reverses the picked order
    assert [c.agent_name for c in view.columns] == ["Remote B", "Remote A"]
    assert [c.title.text() for c in view.columns] == ["A", "B"]
    _send(qtbot, view, "Which is best?")
    for column in view.columns:
        reply = _replies(services, column)[1]
        bubble = column.pane.transcript.bubble(reply.id)
        assert bubble.label.text() == column.label  # not the agent's name
        assert not bubble.footer.isVisible()  # the footer would name the model
    assert view.vote_bar.isVisible()
    assert view.vote_bar.buttons["left"].text() == "A is better"
    assert not view.vote_bar.left_pick.isVisible()  # two columns: no pair to pick

    view.vote_bar.buttons["left"].setFocus()
    qtbot.keyClick(view.vote_bar.buttons["left"], Qt.Key.Key_Space)  # keyboard reachable

    votes = services.compare.votes(view.session_id)
    assert len(votes) == 1
    vote = votes[0]
    a_reply = _replies(services, view.columns[0])[1]
    assert (vote.left_agent_name, vote.right_agent_name, vote.outcome, vote.blind) == (
        "Remote B",
        "Remote A",
        "left",
        True,
    )
    assert vote.prompt == "Which is best?" and vote.left_message_id == a_reply.id
    assert services.compare.session(view.session_id).revealed
    assert [c.title.text() for c in view.columns] == ["A · Remote B", "B · Remote A"]
    assert view.vote_bar.left_pick.itemText(0) == "A · Remote B"  # the pair's names too
    bubble = view.columns[0].pane.transcript.bubble(a_reply.id)
    assert bubble.label.text() == "Remote B"
    assert not view.vote_bar.buttons["tie"].isEnabled()  # this pair was voted on
    assert view.vote_bar.note.text() == "Voted: A is better"


def test_with_three_columns_a_vote_is_between_the_picked_pair(
    qtbot: Any, make_view: Any, services: Any
) -> None:
    with _ticker() as one, _ticker() as two, _ticker() as three:
        agents = [_remote(services, f"R{i}", s) for i, s in enumerate((one, two, three))]
        view = make_view(agents)
        _send(qtbot, view, "q")
        bar = view.vote_bar
        assert bar.left_pick.isVisible() and bar.right_pick.isVisible()
        bar.set_pair(1, 2)
        assert bar.buttons["right"].text() == "C is better"
        qtbot.mouseClick(bar.buttons["both_bad"], Qt.MouseButton.LeftButton)
        bar.set_pair(0, 1)
        assert bar.buttons["tie"].isEnabled()  # another pair can still be voted on
        qtbot.mouseClick(bar.buttons["tie"], Qt.MouseButton.LeftButton)
    votes = services.compare.votes(view.session_id)
    assert [(v.left_agent_name, v.right_agent_name, v.outcome, v.blind) for v in votes] == [
        ("R1", "R2", "both_bad", False),
        ("R0", "R1", "tie", False),
    ]


def test_the_fastest_first_token_fastest_decode_and_cheapest_are_marked(
    qtbot: Any, make_view: Any, services: Any
) -> None:
    with (
        _ticker(delay=0.005) as quick,
        _ticker(delay=0.04, first_after=0.4) as slow,
    ):
        fast = _remote(services, "Fast", quick, price_input_per_m=5.0, price_output_per_m=20.0)
        cheap = _remote(services, "Cheap", slow, price_input_per_m=0.1, price_output_per_m=0.2)
        view = make_view([fast, cheap])
        _send(qtbot, view, "race")
    left, right = view.columns
    assert set(left.marks) == {"ttft", "decode"}, left.figures.text()
    assert right.marks == ["cost"], right.figures.text()
    assert left.badges.isVisible() and left.badges.text() == "★ best first token, decode"
    assert left.badges.toolTip() == "★ fastest first token · ★ fastest decode"
    assert right.badges.text() == "★ cheapest"
    assert "$" in right.figures.text()


def test_a_saved_comparison_reopens_with_its_columns_transcripts_and_votes(
    qtbot: Any, make_view: Any, services: Any, two_remotes: Any
) -> None:
    a, b, *_ = two_remotes
    view = make_view([a, b], blind=True)
    _send(qtbot, view, "Tell me")
    qtbot.mouseClick(view.vote_bar.buttons["right"], Qt.MouseButton.LeftButton)
    session_id = view.session_id
    before = [(c.label, c.agent_name, c.conversation_id) for c in view.columns]

    other = make_view()
    assert other.session_pick.count() == 2  # the placeholder and this comparison
    assert "Tell me" in other.session_pick.itemText(1)
    other.session_pick.activated.emit(1)  # picked from "Saved comparisons"
    assert other.session_id == session_id
    assert [(c.label, c.agent_name, c.conversation_id) for c in other.columns] == before
    assert [c.title.text() for c in other.columns] == ["A · Remote B", "B · Remote A"]
    for column in other.columns:
        reply = _replies(services, column)[1]
        assert column.pane.transcript.bubble(reply.id).text.strip() == reply.content.strip()
        assert "TTFT" in column.figures.text()
    assert other.vote_bar.isVisible() and other.prompt == "Tell me"
    assert not other.vote_bar.buttons["left"].isEnabled()  # the stored vote is there
    assert len(other.votes()) == 1 and other.votes()[0].outcome == "right"
    assert not other.blind.isEnabled()  # a started comparison keeps its mode

    _send(qtbot, other, "And more")  # reopened: follow-ups continue the same conversations
    assert [m.role for m in _replies(services, other.columns[0])] == ["user", "assistant"] * 2


def test_continue_with_this_one_asks_to_open_that_columns_conversation(
    qtbot: Any, make_view: Any, services: Any, two_remotes: Any
) -> None:
    a, b, *_ = two_remotes
    view = make_view([a, b])
    assert not view.columns[1].continue_button.isEnabled()  # no conversation yet
    _send(qtbot, view, "hello")
    column = view.columns[1]
    with qtbot.waitSignal(view.continue_requested, timeout=1000) as signal:
        qtbot.mouseClick(column.continue_button, Qt.MouseButton.LeftButton)
    assert signal.args == [column.conversation_id]
    assert services.conversations.messages(column.conversation_id)[1].agent_name == "Remote B"


def test_same_seed_and_temperature_reach_every_request(
    qtbot: Any, make_view: Any, services: Any
) -> None:
    with _ticker() as one, _ticker() as two:
        a = _remote(services, "Warm", one, temperature=1.3, seed=1)
        b = _remote(services, "Cold", two)
        view = make_view([a, b])
        assert not view.seed.isEnabled()
        view.fair.setChecked(True)
        view.seed.setValue(7)
        view.temperature.setText("0.3")
        _send(qtbot, view, "fair")
        bodies = [s.requests[-1].json() for s in (one, two)]
    assert [(body["seed"], body["temperature"]) for body in bodies] == [(7, 0.3), (7, 0.3)]
    session = services.compare.session(view.session_id)
    assert (session.fair_seed, session.fair_temperature) == (7, 0.3)
    assert not view.fair.isEnabled() and not view.seed.isEnabled()  # fixed once started
    assert services.agents.get(a.id).temperature == 1.3  # the agent itself is unchanged

    edited = services.agents.update(services.agents.get(a.id).with_changes(model="warm-2"))
    view.refresh_agents({agent.id: agent for agent in services.agents.list()})
    column = view.columns[0]
    assert (column.agent.model, column.agent.seed, column.agent.temperature) == ("warm-2", 7, 0.3)
    assert column.pane.agent == column.agent and edited.temperature == 1.3


def test_agents_are_picked_in_order_and_saved_as_a_set(
    qtbot: Any, make_view: Any, services: Any, two_remotes: Any
) -> None:
    a, b, *_ = two_remotes
    view = make_view()
    assert view.empty.isVisible() and not view.send_button.isEnabled()

    def pick(dialog: AgentPicker) -> bool:
        ok = dialog.buttons.buttons()[0]
        dialog.set_checked("Remote B")
        assert not ok.isEnabled()  # one agent is not a comparison
        dialog.set_checked("Remote A")
        return True

    view.pick = pick
    qtbot.mouseClick(view.agents_button, Qt.MouseButton.LeftButton)
    assert [c.agent_name for c in view.columns] == ["Remote B", "Remote A"]  # ticked order

    view.ask_text = lambda _title, _label, _text: "Pair"
    qtbot.mouseClick(view.save_set_button, Qt.MouseButton.LeftButton)
    saved = services.compare.sets()
    assert [(s.name, s.agent_ids) for s in saved] == [("Pair", (b.id, a.id))]

    again = make_view()
    assert again.set_pick.itemText(1) == "Pair"
    again.set_pick.activated.emit(1)
    assert [c.agent_name for c in again.columns] == ["Remote B", "Remote A"]
    with pytest.raises(ValueError):
        again.set_agents([a])


@pytest.mark.parametrize("size", [(720, 480), (1280, 800), (2560, 1440)])
def test_every_control_has_a_name_and_nothing_is_cut_or_overlaps(
    qtbot: Any, make_view: Any, services: Any, size: tuple[int, int]
) -> None:
    from tests.helpers.widget_checks import cut_labels, overlaps, unnamed_controls

    with _ticker() as one, _ticker() as two, _ticker() as three:
        agents = [_remote(services, f"Remote {i}", s) for i, s in enumerate((one, two, three))]
        view = make_view(agents)
        view.resize(*size)
        _send(qtbot, view, "check")
    QApplication.processEvents()
    assert unnamed_controls(view) == []
    assert overlaps(view) == []
    assert cut_labels(view) == []
    assert view.size().toTuple() == size  # three columns never widen a small window
    if size[0] < 3 * MIN_COLUMN_WIDTH_PX:  # they scroll sideways instead
        assert view.scroller.horizontalScrollBar().maximum() > 0


def test_editing_a_question_in_one_column_shows_that_columns_composer_until_sent(
    qtbot: Any, make_view: Any, services: Any, two_remotes: Any
) -> None:
    a, b, *_ = two_remotes
    view = make_view([a, b])
    _send(qtbot, view, "original")
    left, right = view.columns
    question = _replies(services, left)[0]
    left.pane.edit_message(question.id)
    assert left.pane.composer_area.isVisible() and not right.pane.composer_area.isVisible()
    left.pane.composer.setPlainText("edited")
    with qtbot.waitSignal(left.finished, timeout=TIMEOUT_MS):
        qtbot.keyClick(left.pane.composer, Qt.Key.Key_Return)
    assert not left.pane.composer_area.isVisible()  # hidden again: the view's composer sends
    assert [m.content for m in _replies(services, left) if m.role == "user"] == ["edited"]
    assert [m.content for m in _replies(services, right) if m.role == "user"] == ["original"]


def test_picked_agents_get_their_columns_one_per_loop_turn_in_order(
    qtbot: Any, make_view: Any, services: Any
) -> None:
    """Four columns built at once held the window 28-38 ms: the first comes with the pick,
    the others one per loop turn, left to right; anything that asks for the columns (a Send)
    gets all of them."""
    agents = [_remote(services, f"Agent {i}", _ticker()) for i in range(4)]  # never called
    view = make_view()
    view.set_agents(agents)
    assert [c.agent_name for c in view._columns] == ["Agent 0"]  # built so far
    assert not view.empty.isVisible() and view.scroller.isVisible()
    qtbot.waitUntil(lambda: len(view._columns) == 4)
    assert [c.agent_name for c in view.columns] == [f"Agent {i}" for i in range(4)]
    view.set_agents(agents[:2])  # a new set: the old columns go, the new come the same way
    assert [c.agent_name for c in view.columns] == ["Agent 0", "Agent 1"]  # asked: all now
    qtbot.wait(20)
    assert len(view.columns) == 2 and len(view.splitter.sizes()) == 2
