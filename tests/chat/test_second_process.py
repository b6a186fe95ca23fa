"""A second process never clobbers the first (issue 25, item 3).

Every start recovers what a crash cut off: replies left streaming, tool calls left waiting or
running, prompt-set runs left running, trash whose Undo was not used. A ``simi`` command run
beside an open window must leave the window's live work alone, and still recover a process
that died (even when its pid now belongs to another process). The window here is a real
``Services`` in this process, streaming from a loopback OpenAI-compatible server; the
commands are real subprocesses on the same SIMI_HOME.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop.llm.events import TextDelta
from desktop.store.agents import Agent
from desktop.store.conversations import ConversationStore
from desktop.store.owners import STALE_AFTER_S, Heartbeat, OwnerStore, process_start_time
from desktop.store.tool_steps import ToolStep
from tests.helpers.fault_server import FaultServer, Recorded, Reply, ticking_tokens
from tests.helpers.tool_turns import ROOT

linux_only = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="process start times are read from /proc"
)


def _tokens_until(release: threading.Event) -> Iterator[bytes]:
    """OpenAI-style chunks for as long as ``release`` is not set, then a proper end."""
    n = 0
    while not release.is_set():
        chunk = {"choices": [{"index": 0, "delta": {"content": f"tok{n} "}}]}
        yield f"data: {json.dumps(chunk)}\n\n".encode()
        n += 1
    yield b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def _model(release: threading.Event):
    """model "slow": streams until released; any other ("quick", the commands' agent):
    three tokens at once."""

    def reply(request: Recorded) -> Reply:
        if request.json()["model"] == "slow":
            return Reply(body=_tokens_until(release), chunk_delay_s=0.05)
        return Reply(body=ticking_tokens(3))

    return reply


def _remote(services: Any, name: str, model: str, url: str) -> Agent:
    return services.agents.create(
        Agent(name=name, kind="openai-compatible", base_url=url + "/v1", model=model)
    )


async def _simi(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "desktop",
        *args,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    return proc.returncode or 0, out.decode(), err.decode()


def test_commands_beside_a_streaming_window_leave_its_live_work_alone(
    services, cli_env, tmp_path
) -> None:
    release = threading.Event()
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("one\n", encoding="utf-8")
    with FaultServer(_model(release)) as server:
        slow = _remote(services, "Slow", "slow", server.url)
        _remote(services, "Quick", "quick", server.url)
        conversations = services.conversations
        streaming = services.chat.begin(conversations.create(slow.id).id, slow, "stream")
        reply_id = streaming.assistant_message_id
        for position, status in enumerate(("running", "waiting")):  # as the tool loop saves them
            services.tools.steps.save(
                ToolStep(reply_id, 1, position, f"c{position}", "tools", "add", "{}", status=status)
            )
        run = services.compare.create_run(["p"], [(slow.id, "Slow")])  # the window's run
        trashed = conversations.create(slow.id, "deleted a moment ago")
        conversations.trash(trashed.id)  # its Undo is still on offer

        def live_state() -> dict[str, Any]:
            return {
                "reply": conversations.message(reply_id).status,
                "steps": [s.status for s in services.tools.steps.for_message(reply_id)],
                "run": services.compare.run(run.id).status,
                "trash": conversations.get(trashed.id) is not None,
            }

        commands = [
            ("stats",),
            ("agents", "list"),
            ("ask", "--agent", "Quick", "hi"),
            ("bench", "--agents", "Quick", "--prompts", str(prompts)),
        ]

        async def main() -> tuple[list[tuple[int, str, str]], dict[str, Any], Any]:
            flowing = asyncio.Event()

            def on_stream(event: Any) -> None:
                if isinstance(event, TextDelta):
                    flowing.set()

            task = asyncio.ensure_future(services.chat.run(streaming, on_event=on_stream))
            try:
                await asyncio.wait_for(flowing.wait(), 30)
                outs = await asyncio.gather(*(_simi(cli_env, *c) for c in commands))
                seen = live_state()  # what the commands' start-ups left of the window's work
                release.set()
                done = await asyncio.wait_for(task, 30)
            finally:
                release.set()
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                await services.aclose()
            return outs, seen, done

        outs, seen, streamed = asyncio.run(main())

    for command, (code, _out, err) in zip(commands, outs, strict=True):
        assert code == 0, (command, err)
    assert "tok0 tok1 tok2" in outs[2][1]  # `simi ask` had its own reply
    untouched = {"steps": ["running", "waiting"], "run": "running", "trash": True}
    assert seen == {"reply": "streaming", **untouched}
    assert streamed.status == "complete" and streamed.text.startswith("tok0 tok1 ")
    stored = conversations.message(reply_id)
    assert (stored.status, stored.error_text, stored.content) == ("complete", None, streamed.text)
    assert live_state() == {"reply": "complete", **untouched}
    assert services.compare.run(run.id).status == "running"
    conversations.restore(trashed.id)  # Undo still works
    assert trashed.id in [c.id for c in conversations.list()]


KILLED = """
import asyncio, sys
from desktop.chat.services import Services
from desktop.settings.paths import AppPaths
from desktop.store.tool_steps import ToolStep

services = Services.open(AppPaths.from_env())
agent = services.agents.by_name("Slow")
turn = services.chat.begin(services.conversations.create(agent.id).id, agent, "stream")
services.tools.steps.save(
    ToolStep(turn.assistant_message_id, 1, 0, "c1", "tools", "add", "{}", status="waiting")
)
run = services.compare.create_run(["p"], [(agent.id, agent.name)])
gone = services.conversations.create(agent.id, "deleted just before the crash")
services.conversations.trash(gone.id)
print(turn.assistant_message_id, run.id, gone.id, flush=True)
asyncio.run(services.chat.run(turn))
"""


def test_a_killed_process_is_still_recovered_by_the_next_start(simi_home, cli_env) -> None:
    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths

    release = threading.Event()
    with FaultServer(_model(release)) as server:
        first = Services.open(AppPaths.from_env())
        try:
            _remote(first, "Slow", "slow", server.url)
        finally:
            first.close()
        proc = subprocess.Popen(
            [sys.executable, "-c", KILLED],
            env=cli_env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            line = proc.stdout.readline() if proc.stdout else ""
            assert line.strip(), proc.stderr.read() if proc.stderr else ""
            reply_id, run_id, trashed_id = (int(x) for x in line.split())
            deadline = time.monotonic() + 30
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.requests, "the reply never started"
            time.sleep(0.3)  # a few tokens streamed
        finally:
            proc.send_signal(signal.SIGKILL)  # no cleanup at all
            proc.wait(timeout=30)
            release.set()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()

    restarted = Services.open(AppPaths.from_env())
    try:
        message = restarted.conversations.message(reply_id)
        assert message is not None and message.status == "interrupted"
        assert [s.status for s in restarted.tools.steps.for_message(reply_id)] == ["cancelled"]
        assert restarted.compare.run(run_id).status == "interrupted"
        assert restarted.conversations.get(trashed_id) is None  # its Undo died with it
        # the dead owner's row is gone; this process is the only owner left
        assert [o.id for o in restarted.owners.owners()] == [restarted.owner.id]
    finally:
        restarted.close()


@linux_only
def test_an_owner_whose_pid_now_runs_another_process_is_dead(services) -> None:
    """The recorded pid is alive (it is this very process) but started at another time: the
    process that owned the rows is gone and its pid was reused. Recovery takes its rows, and
    leaves those of a live owner (``services``, also this pid) alone."""
    from desktop.chat.services import Services
    from desktop.settings.paths import AppPaths

    db = services.db
    now = "2025-01-01T00:00:00.000+00:00"
    cur = db.execute(
        "INSERT INTO process_owners (pid, start_time, started_at, heartbeat_at) "
        "VALUES (?, ?, ?, ?)",
        [os.getpid(), "another-boot:12345", now, now],
    )
    reused = services.owners.get(int(cur.lastrowid))
    assert reused is not None and reused.pid == services.owner.pid
    assert process_start_time(os.getpid()) == services.owner.start_time
    assert not services.owners.alive(reused) and services.owners.alive(services.owner)
    assert services.owners.dead_ids() == [reused.id]

    agent = services.agents.by_name("SmolLM2 (local)")
    conv = services.conversations.create(agent.id)
    theirs = ConversationStore(db, owner_id=reused.id).add_message(
        conv.id, "assistant", "cut", status="streaming"
    )
    ours = services.conversations.add_message(conv.id, "assistant", "live", status="streaming")
    again = Services.open(AppPaths.from_env())  # a second start, beside ``services``
    try:
        assert again.conversations.message(theirs.id).status == "interrupted"
        assert again.conversations.message(ours.id).status == "streaming"
        assert {o.id for o in again.owners.owners()} == {services.owner.id, again.owner.id}
    finally:
        again.close()
    assert services.owners.get(again.owner.id) is None  # a closed process leaves no owner


def test_without_start_times_a_fresh_heartbeat_of_a_running_pid_says_alive(services) -> None:
    """Where /proc cannot be read (macOS, Windows) the owner's heartbeat tells, and on POSIX a
    pid that no longer exists is dead at once."""
    owners: OwnerStore = services.owners
    old = "2000-01-01T00:00:00.000+00:00"

    def owner(pid: int, heartbeat: str) -> Any:
        cur = services.db.execute(
            "INSERT INTO process_owners (pid, start_time, started_at, heartbeat_at) "
            "VALUES (?, NULL, ?, ?)",
            [pid, old, heartbeat],
        )
        return owners.get(int(cur.lastrowid))

    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    exited.wait()
    fresh = owner(os.getpid(), services.owner.heartbeat_at)
    stale = owner(os.getpid(), old)
    gone = owner(exited.pid, services.owner.heartbeat_at)
    assert owners.alive(fresh)
    assert not owners.alive(stale)  # older than STALE_AFTER_S
    if os.name == "posix":
        assert not owners.alive(gone)
    assert STALE_AFTER_S > 2 * 20  # a few missed beats are not death

    # a heartbeat writes its owner back when another process had judged it dead
    owners.end(stale.id)
    Heartbeat(services.paths.db_path, stale).beat()
    back = owners.get(stale.id)
    assert back is not None and owners.alive(back)
