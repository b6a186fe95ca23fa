"""The compare view answers a click within a frame: Send only queues the prompt and each column
starts in a loop turn of its own; the end of the replies (each pane's final render, the
figures, the marks, the vote bar) is spread over later turns. These tests check that nothing
is lost on the way (behaviour, not timing): every column gets the prompt once and streams, a
Stop right after Send still reaches every column, and replies that end together all get their
final text, their figures and the marks.

The remote agents talk to FaultServer on loopback (see test_compare_view.py).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from tests.ui.test_compare_view import TIMEOUT_MS, _remote, _replies, _ticker


def _four(services: Any, servers: list[Any]) -> list[Any]:
    return [_remote(services, f"Loop {i}", server) for i, server in enumerate(servers)]


def test_send_returns_at_once_and_every_column_starts_in_order_with_the_prompt(
    qtbot: Any, make_view: Any, services: Any
) -> None:
    with (
        _ticker(count=12) as a,
        _ticker(count=12) as b,
        _ticker(count=12) as c,
        _ticker(count=12) as d,
    ):
        servers = [a, b, c, d]
        view = make_view(_four(services, servers))
        started: list[int] = []
        for column in view.columns:
            column.pane.presenter.turn_started.connect(
                lambda _turn, p=column.position: started.append(p)
            )
        view.composer.setPlainText("Four at once")
        with qtbot.waitSignal(view.all_finished, timeout=TIMEOUT_MS):
            qtbot.keyClick(view.composer, Qt.Key.Key_Return)
            # the click returned: the composer is empty and the view is busy at once
            assert view.composer.toPlainText() == ""
            assert view.busy and view.send_button.text() == "Stop all"
            qtbot.waitUntil(lambda: len(started) == 4, timeout=TIMEOUT_MS)
        assert started == [0, 1, 2, 3]  # left to right, each once
        assert not view.busy and view.send_button.text() == "Send"
        for column, server in zip(view.columns, servers, strict=True):
            rows = _replies(services, column)
            assert [(m.role, m.content if m.role == "user" else m.status) for m in rows] == [
                ("user", "Four at once"),
                ("assistant", "complete"),
            ]
            assert "tok11" in rows[1].content
            assert len(server.requests) == 1  # sent once, not lost, not twice
        session = services.compare.session(view.session_id)
        assert session is not None
        assert [c.conversation_id for c in session.columns] == [
            c.conversation_id for c in view.columns
        ]


def test_stop_all_right_after_send_still_sends_to_every_column_and_stops_each(
    qtbot: Any, make_view: Any, services: Any
) -> None:
    with _ticker(count=None) as a, _ticker(count=None) as b, _ticker(count=None) as c:
        view = make_view(_four(services, [a, b, c]))
        with qtbot.waitSignal(view.all_finished, timeout=TIMEOUT_MS):
            assert view.send("Stop me")
            assert view.busy  # queued: not every column has started yet
            view.stop_all()  # before the loop ran again
        assert not view.busy
        for column in view.columns:
            rows = _replies(services, column)
            assert [(m.role, m.status) for m in rows] == [
                ("user", "complete"),
                ("assistant", "cancelled"),
            ]
            assert rows[0].content == "Stop me"
            assert "stopped" in column.figures.text()


def test_replies_that_end_together_all_get_their_final_text_figures_and_marks(
    qtbot: Any, make_view: Any, services: Any
) -> None:
    # the same count and pace: the four end at about the same time; one thinks longer first
    with (
        _ticker(count=20, delay=0.01) as a,
        _ticker(count=20, delay=0.01) as b,
        _ticker(count=20, delay=0.01, first_after=0.3) as c,
        _ticker(count=20, delay=0.01) as d,
    ):
        agents = _four(services, [a, b, c, d])
        view = make_view(agents)
        finished: list[int] = []
        for column in view.columns:
            column.finished.connect(lambda p=column.position: finished.append(p))
        view.composer.setPlainText("Together")
        with qtbot.waitSignal(view.all_finished, timeout=TIMEOUT_MS):
            qtbot.keyClick(view.composer, Qt.Key.Key_Return)
    assert sorted(finished) == [0, 1, 2, 3]  # each column's end handled once
    assert view.vote_bar.isVisible()
    for column in view.columns:
        reply = _replies(services, column)[1]
        assert reply.status == "complete" and "tok19" in reply.content
        bubble = column.pane.transcript.bubble(reply.id)
        assert bubble is not None and bubble.text.strip() == reply.content.strip()
        assert column.last_reply() is not None and column.last_reply().status == "complete"
        assert "TTFT" in column.figures.text() and "tokens" in column.figures.text()
    # the slow starter has no first-token mark; some other column has it
    assert "ttft" not in view.columns[2].marks
    assert any("ttft" in c.marks for c in view.columns)


def test_a_follow_up_sent_at_once_after_the_end_keeps_the_marks_of_each_prompt_apart(
    qtbot: Any, make_view: Any, services: Any
) -> None:
    with _ticker(count=6) as a, _ticker(count=6, first_after=0.3) as b:
        view = make_view(_four(services, [a, b]))
        view.composer.setPlainText("first")
        with qtbot.waitSignal(view.all_finished, timeout=TIMEOUT_MS):
            qtbot.keyClick(view.composer, Qt.Key.Key_Return)
        assert "ttft" in view.columns[0].marks
        ends: list[bool] = []
        view.all_finished.connect(lambda: ends.append(True))
        with qtbot.waitSignal(view.all_finished, timeout=TIMEOUT_MS):
            assert view.send("second")
            assert all(c.marks == [] for c in view.columns)  # the last prompt's, gone at once
        assert ends == [True]  # one end for the second prompt
        for column in view.columns:
            rows = _replies(services, column)
            assert [m.content for m in rows if m.role == "user"] == ["first", "second"]
            assert rows[-1].status == "complete"
        assert "ttft" in view.columns[0].marks
