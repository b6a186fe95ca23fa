"""The prompt-set runs view as a person uses it: type prompts, tick agents, Start, watch the
progress, read the per-agent table, Pause / Resume / Cancel, export, reopen a saved run.

Real SQLite (``services``), the real ``PromptRunner`` and store. The remote agents talk to
``FaultServer`` on loopback streaming OpenAI-style chunks: a stand-in for a remote provider no
test can reach offline, slow enough to still be streaming while the test presses Pause or
Cancel. The local agent is the real starter model, its replies kept short.
"""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop.store.agents import Agent
from desktop.ui.compare.runs_view import RunsView
from desktop.ui.stats.chart_axes import ms_text
from tests.helpers.fault_server import FaultServer, Reply, ticking_tokens
from tests.helpers.shots import light_and_dark, save_grab
from tests.helpers.widget_checks import cut_labels, overlaps, unnamed_controls
from tests.ui.conftest import STARTER, limit_starter

TIMEOUT_MS = 60_000


def _remote(services: Any, server: FaultServer, name: str) -> Agent:
    return services.agents.create(
        Agent(name=name, kind="openai-compatible", base_url=server.url + "/v1", model="m")
    )


@pytest.fixture
def quick(services: Any) -> Iterator[tuple[Agent, FaultServer]]:
    """A remote agent whose replies take about 0.3 s (10 chunks, 30 ms apart)."""
    with FaultServer(lambda _r: Reply(body=ticking_tokens(10), chunk_delay_s=0.03)) as server:
        yield _remote(services, server, "Remote quick"), server


@pytest.fixture
def endless(services: Any) -> Iterator[tuple[Agent, FaultServer]]:
    """A remote agent that streams until it is stopped."""
    with FaultServer(lambda _r: Reply(body=ticking_tokens(None), chunk_delay_s=0.05)) as server:
        yield _remote(services, server, "Remote endless"), server


@pytest.fixture
def view(qtbot: Any, qloop: Any, services: Any, tmp_path: Path) -> RunsView:
    """A shown runs view whose save dialog answers with files in tmp_path."""
    answers: dict[str, str] = {}

    def ask_save(_title: str, suggested: str, filters: str) -> str:
        answers["suggested"] = suggested
        return str(tmp_path / ("run.csv" if "csv" in filters.lower() else "run.json"))

    v = RunsView(services, ask_save_path=ask_save, ask_open_path=lambda *_a: answers.get("open"))
    v.answers = answers  # type: ignore[attr-defined]
    qtbot.addWidget(v)
    v.resize(1280, 800)
    v.show()
    qtbot.waitExposed(v)
    return v


def _tick(view: RunsView, *names: str) -> None:
    """Tick the agents named, in the list as it is now (the test may have made them since the
    view was shown)."""
    view.reload_agents()
    ids = [view._services.agents.by_name(n).id for n in names]
    view.set_checked(ids)


def _start(qtbot: Any, view: RunsView, prompts: str, *agents: str, repeat: int = 1) -> None:
    view.prompts_edit.setPlainText(prompts)
    _tick(view, *agents)
    view.repeat_box.setValue(repeat)
    assert view.start_button.isEnabled()
    view.start_button.click()
    assert view.busy


def _pause_after_the_first_call(qtbot: Any, view: RunsView) -> None:
    qtbot.waitUntil(lambda: view.progress.value() >= 1, timeout=TIMEOUT_MS)
    view.pause_button.click()


def _wait_end(qtbot: Any, view: RunsView) -> str:
    with qtbot.waitSignal(view.finished, timeout=TIMEOUT_MS) as blocker:
        pass
    return str(blocker.args[0])


def _run_to_the_end(
    qtbot: Any, view: RunsView, prompts: str, *agents: str, repeat: int = 1
) -> None:
    """Start a run, wait until it is complete and the view has shown what it stored."""
    _start(qtbot, view, prompts, *agents, repeat=repeat)
    assert _wait_end(qtbot, view) == "complete"
    _wait_idle(qtbot, view)


def _stored_calls(services: Any, run_id: int) -> list[Any]:
    return services.compare.calls(run_id)


def _stats_of(services: Any, run_id: int, agent: str) -> list[dict[str, Any]]:
    cur = services.db.execute(
        "SELECT s.ttft_ms FROM prompt_run_calls c JOIN inference_stats s ON s.id = c.stats_id "
        "WHERE c.run_id = ? AND c.agent_name = ? AND c.status = 'complete'",
        [run_id, agent],
    )
    return [{"ttft_ms": row[0]} for row in cur.fetchall()]


def _nearest_rank(values: list[float], p: int) -> float:
    ordered = sorted(values)
    return ordered[max(1, -(-p * len(ordered) // 100)) - 1]


def _wait_idle(qtbot: Any, view: RunsView) -> None:
    """The view's last read (table, saved list, export) has been answered."""
    qtbot.waitUntil(lambda: view.task is None or view.task.done(), timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: view._table_task is None or view._table_task.done(), timeout=TIMEOUT_MS)


@pytest.mark.slow
def test_a_run_asks_every_prompt_of_every_agent_and_the_table_shows_the_stored_figures(
    qtbot: Any, view: RunsView, services: Any, quick: tuple[Agent, FaultServer]
) -> None:
    limit_starter(services, max_tokens=6)
    remote, server = quick
    _start(qtbot, view, "Name a colour.\nName a fruit.", STARTER, remote.name, repeat=2)
    assert view.pause_button.isEnabled() and view.cancel_button.isEnabled()
    assert not view.start_button.isEnabled() and not view.prompts_edit.isEnabled()
    assert _wait_end(qtbot, view) == "complete"
    _wait_idle(qtbot, view)

    run_id = view.run_id
    calls = _stored_calls(services, run_id)
    assert len(calls) == 8 and {c.status for c in calls} == {"complete"}
    assert len(server.requests) == 4  # 2 prompts × 2 repetitions, none asked twice
    assert view.progress.value() == view.progress.maximum() == 8
    assert view.progress_label.text().startswith("8 of 8")
    assert "error" not in view.progress_label.text()

    rows = view.table.rows_by_agent()
    assert list(rows) == list(services.compare.run(run_id).agent_names)  # the run's order
    assert set(rows) == {STARTER, remote.name}
    for name, cells in rows.items():
        ttfts = [r["ttft_ms"] for r in _stats_of(services, run_id, name)]
        assert len(ttfts) == 4
        assert cells[1] == "4" and cells[2] == "0"
        assert cells[3] == ms_text(_nearest_rank(ttfts, 50))
        assert cells[4] == ms_text(_nearest_rank(ttfts, 95))
        assert cells[5].endswith("tok/s")
        assert "?" not in "".join(cells)
    assert rows[STARTER][8] == "local"
    assert rows[remote.name][8] == "—"  # a self-hosted server has no known price
    assert "Run complete: 8 calls." in view.message.text()
    assert view.start_button.isEnabled() and not view.resume_button.isEnabled()


def test_a_failing_agent_counts_errors_and_the_others_go_on(
    qtbot: Any, view: RunsView, services: Any, quick: tuple[Agent, FaultServer]
) -> None:
    remote, _ = quick
    with FaultServer(lambda _r: Reply(status=500, body=b'{"error": "down"}')) as down:
        broken = _remote(services, down, "Remote down")
        _start(qtbot, view, "one\ntwo", remote.name, broken.name)
        assert _wait_end(qtbot, view) == "complete"
    _wait_idle(qtbot, view)
    rows = view.table.rows_by_agent()
    assert rows[remote.name][2] == "0"
    assert rows[broken.name][2] == "2 of 2"
    assert rows[broken.name][3] == "—"  # no first token: unknown, never "?"
    assert view.progress_label.text().startswith("4 of 4 · 2 errors")


def test_pause_lets_the_running_call_finish_and_resume_does_only_the_missing_calls(
    qtbot: Any, view: RunsView, services: Any, quick: tuple[Agent, FaultServer]
) -> None:
    remote, server = quick
    _start(qtbot, view, "a\nb\nc\nd\ne", remote.name)
    _pause_after_the_first_call(qtbot, view)
    assert not view.pause_button.isEnabled()
    assert _wait_end(qtbot, view) == "paused"
    _wait_idle(qtbot, view)
    first = _stored_calls(services, view.run_id)
    assert 1 <= len(first) < 5 and {c.status for c in first} == {"complete"}
    assert len(server.requests) == len(first)
    assert view.resume_button.isEnabled() and view.cancel_button.isEnabled()
    assert "Resume goes on" in view.message.text()

    view.resume_button.click()
    assert _wait_end(qtbot, view) == "complete"
    calls = _stored_calls(services, view.run_id)
    assert sorted(c.prompt_index for c in calls) == [0, 1, 2, 3, 4]
    assert len(server.requests) == 5  # the paused part was not asked again
    prompts = [r.json()["messages"][-1]["content"] for r in server.requests]
    assert prompts == ["a", "b", "c", "d", "e"]


def test_cancel_stops_the_running_calls_and_ends_the_run(
    qtbot: Any, view: RunsView, services: Any, endless: tuple[Agent, FaultServer]
) -> None:
    remote, server = endless
    _start(qtbot, view, "forever\nnever asked", remote.name)
    qtbot.waitUntil(lambda: len(server.requests) == 1, timeout=TIMEOUT_MS)
    view.cancel_button.click()
    assert _wait_end(qtbot, view) == "cancelled"
    _wait_idle(qtbot, view)
    calls = _stored_calls(services, view.run_id)
    assert [c.status for c in calls] == ["cancelled"]
    assert len(server.requests) == 1
    assert services.compare.run(view.run_id).status == "cancelled"
    assert not view.resume_button.isEnabled() and not view.cancel_button.isEnabled()
    assert view.start_button.isEnabled()


def test_export_csv_and_json_hold_every_stored_call(
    qtbot: Any, view: RunsView, services: Any, quick: tuple[Agent, FaultServer], tmp_path: Path
) -> None:
    remote, _ = quick
    _run_to_the_end(
        qtbot, view, "first prompt\n---\nsecond prompt,\non two lines", remote.name, repeat=2
    )
    run_id = view.run_id
    stored = {
        (row[0], row[1]): row[2]
        for row in services.db.execute(
            "SELECT c.prompt_index, c.repetition, s.ttft_ms FROM prompt_run_calls c "
            "JOIN inference_stats s ON s.id = c.stats_id WHERE c.run_id = ?",
            [run_id],
        ).fetchall()
    }
    assert len(stored) == 4

    view.csv_button.click()
    _wait_idle(qtbot, view)
    assert Path(view.answers["suggested"]).name.endswith(".csv")  # type: ignore[attr-defined]
    with open(tmp_path / "run.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    assert [r["prompt"] for r in rows[::2]] == ["first prompt", "second prompt,\non two lines"]
    for r in rows:
        assert r["agent"] == remote.name and r["status"] == "complete"
        key = (int(r["prompt_index"]) - 1, int(r["repetition"]) - 1)
        assert float(r["ttft_ms"]) == pytest.approx(stored[key])
    assert "Exported 4 calls to run.csv" in view.message.text()

    view.json_button.click()
    _wait_idle(qtbot, view)
    doc = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert doc["run"]["prompts"] == ["first prompt", "second prompt,\non two lines"]
    assert len(doc["calls"]) == 4
    assert doc["summary"][0]["agent_name"] == remote.name
    assert doc["summary"][0]["calls"] == 4
    ttfts = [c["ttft_ms"] for c in doc["calls"]]
    assert doc["summary"][0]["ttft_p50_ms"] == pytest.approx(_nearest_rank(ttfts, 50))
    assert statistics.mean(ttfts) > 0


def test_a_saved_run_reopens_with_its_table_and_a_paused_one_resumes(
    qtbot: Any, qloop: Any, view: RunsView, services: Any, quick: tuple[Agent, FaultServer]
) -> None:
    remote, server = quick
    _run_to_the_end(qtbot, view, "p1\np2", remote.name)
    assert view.saved_box.currentData() == view.run_id  # the drop-down names the run shown
    assert "complete" in view.saved_box.currentText()
    finished_cells = view.table.rows_by_agent()
    done_id = view.run_id
    _start(qtbot, view, "q1\nq2\nq3\nq4", remote.name)
    _pause_after_the_first_call(qtbot, view)
    assert _wait_end(qtbot, view) == "paused"
    paused_id = view.run_id

    again = RunsView(services)  # another window, later
    qtbot.addWidget(again)
    again.show()
    qtbot.waitUntil(lambda: again.saved_box.count() == 3, timeout=TIMEOUT_MS)
    labels = [again.saved_box.itemText(i) for i in range(again.saved_box.count())]
    assert labels[0] == "New run"
    assert labels[1].startswith("q1 · 4 prompts × 1 agent · paused")  # newest first
    assert labels[2].startswith("p1 · 2 prompts × 1 agent · complete")

    again.saved_box.setCurrentIndex(2)
    again.saved_box.activated.emit(2)
    qtbot.waitUntil(lambda: again.table.rowCount() == 1, timeout=TIMEOUT_MS)
    assert again.run_id == done_id
    assert again.table.rows_by_agent() == finished_cells
    assert again.prompts_edit.toPlainText() == "p1\np2"
    assert again.checked_agent_ids() == [remote.id]
    assert not again.resume_button.isEnabled()

    again.saved_box.setCurrentIndex(1)
    again.saved_box.activated.emit(1)
    qtbot.waitUntil(lambda: again.run_id == paused_id and again.resume_button.isEnabled())
    asked = len(server.requests)
    done = again.progress.value()
    assert 1 <= done < 4
    again.resume_button.click()
    assert _wait_end(qtbot, again) == "complete"
    assert len(server.requests) == asked + (4 - done)
    assert services.compare.run(paused_id).status == "complete"


def test_load_file_reads_jsonl_prompts_and_says_which_line_is_wrong(
    qtbot: Any, view: RunsView, services: Any, tmp_path: Path
) -> None:
    good = tmp_path / "prompts.jsonl"
    good.write_text('"plain string"\n{"prompt": "from an object"}\n\n{"text": "two\\nlines"}\n')
    view.answers["open"] = str(good)  # type: ignore[attr-defined]
    view.load_button.click()
    _wait_idle(qtbot, view)
    assert view.prompts() == ["plain string", "from an object", "two\nlines"]
    assert "Loaded 3 prompts from prompts.jsonl" in view.message.text()

    bad = tmp_path / "bad.jsonl"
    bad.write_text('"fine"\n{oops\n')
    view.answers["open"] = str(bad)  # type: ignore[attr-defined]
    view.load_button.click()
    _wait_idle(qtbot, view)
    assert "2" in view.message.text() and "bad.jsonl" in view.message.text()
    assert view.prompts() == ["plain string", "from an object", "two\nlines"]  # kept


def test_a_loaded_prompt_goes_with_its_files_while_its_text_is_as_loaded(
    qtbot: Any, view: RunsView, services: Any, tmp_path: Path, quick: Any
) -> None:
    agent, server = quick
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "plan.md").write_text("The code word is PELICAN.\n")
    prompts = tmp_path / "set.jsonl"
    prompts.write_text(
        '{"prompt": "What is the code word?", "attachments": ["notes/plan.md"]}\n"Plain."\n'
    )
    view.answers["open"] = str(prompts)  # type: ignore[attr-defined]
    view.load_button.click()
    _wait_idle(qtbot, view)
    assert "Loaded 2 prompts (1 with attached files) from set.jsonl" in view.message.text()
    _tick(view, agent.name)
    view.start_button.click()
    assert _wait_end(qtbot, view) == "complete"
    sent = {json.dumps(r.json()["messages"]) for r in server.requests}
    assert len(sent) == 2
    with_file = [m for m in sent if "PELICAN" in m]
    assert len(with_file) == 1 and "plan.md" in with_file[0]  # the document's block
    assert "What is the code word?" in with_file[0]


def test_start_needs_prompts_and_agents(qtbot: Any, view: RunsView, services: Any) -> None:
    assert not view.start_button.isEnabled()
    view.prompts_edit.setPlainText("hello")
    assert not view.start_button.isEnabled()  # no agent ticked yet
    _tick(view, STARTER)
    assert view.start_button.isEnabled()
    assert not view.pause_button.isEnabled() and not view.cancel_button.isEnabled()
    assert not view.csv_button.isEnabled()


@pytest.mark.slow
def test_render_a_finished_run_light_and_dark(
    qtbot: Any,
    qapp: Any,
    view: RunsView,
    services: Any,
    quick: tuple[Agent, FaultServer],
    shot_dir: Path,
) -> None:
    """For people to look at: the view at 1280×800 with a finished table of a local agent and
    two remote ones (one priced by the agent's own price), to ``$SIMI_SCREENSHOT_DIR`` when
    set, else the test's tmp dir."""
    limit_starter(services, max_tokens=6)
    remote, _ = quick
    services.agents.update(remote.with_changes(price_input_per_m=0.15, price_output_per_m=0.6))
    with FaultServer(lambda _r: Reply(body=ticking_tokens(20), chunk_delay_s=0.01)) as other:
        _remote(services, other, "Remote fast")
        prompts = "Name a colour.\nName a fruit.\nSay hello in French."
        _start(qtbot, view, prompts, STARTER, remote.name, "Remote fast", repeat=2)
        assert _wait_end(qtbot, view) == "complete"
    _wait_idle(qtbot, view)
    assert view.table.rowCount() == 3
    for shade in light_and_dark(qapp):
        qapp.processEvents()
        save_grab(view, shot_dir / f"runs-view-{shade}.png", 10_000)


def test_the_view_fits_small_and_large_windows_with_every_control_named(
    qtbot: Any, qapp: Any, view: RunsView, services: Any, quick: tuple[Agent, FaultServer]
) -> None:
    remote, _ = quick
    _run_to_the_end(qtbot, view, "a prompt long enough to matter\nanother", remote.name)
    assert unnamed_controls(view) == []
    # 480×360: about what a page of the window at its 720×480 minimum leaves the view
    for size in ((480, 360), (720, 480), (1280, 800), (2560, 1440)):
        view.resize(*size)
        for _ in range(4):
            qapp.processEvents()
        assert overlaps(view) + cut_labels(view) == [], size


def test_a_run_cut_off_by_a_crash_reopens_as_cut_off_and_resumes_the_missing_calls(
    qtbot: Any, view: RunsView, services: Any, quick: tuple[Agent, FaultServer]
) -> None:
    remote, server = quick
    store = services.compare
    run = store.create_run(["x", "y", "z"], [(remote.id, remote.name)], title="crashed run")
    store.add_call(run.id, 0, (remote.id, remote.name), 0, "complete", reply="done before")
    store.add_call(run.id, 1, (remote.id, remote.name), 0, "cancelled")  # cut mid-reply
    # the process that ran it is gone (its owner row with it); the next start-up recovers it
    services.db.execute("UPDATE prompt_runs SET owner_id = -1 WHERE id = ?", [run.id])
    assert store.mark_interrupted_runs() == 1
    view.reload_saved()
    _wait_idle(qtbot, view)
    index = view.saved_box.findData(run.id)
    assert "cut off" in view.saved_box.itemText(index)
    view.saved_box.setCurrentIndex(index)
    view.saved_box.activated.emit(index)
    qtbot.waitUntil(lambda: view.resume_button.isEnabled(), timeout=TIMEOUT_MS)
    assert view.progress_label.text().startswith("1 of 3")
    assert "Resume does the missing calls" in view.message.text()
    view.resume_button.click()
    assert _wait_end(qtbot, view) == "complete"
    prompts = [r.json()["messages"][-1]["content"] for r in server.requests]
    assert prompts == ["y", "z"]  # the finished call was not asked again
    assert sorted(c.status for c in store.calls(run.id)) == ["complete"] * 3
