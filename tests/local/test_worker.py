"""llama.cpp runs in its own process: crashes, hangs and stops never take the app down."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from desktop.llm.events import PrefillProgress, TextDelta
from desktop.local.starter import STARTER_AGENT_NAME
from desktop.local.worker import WORKER_NICE

pytestmark = pytest.mark.slow


def _starter(services, **changes):
    return services.agents.by_name(STARTER_AGENT_NAME).with_changes(**changes)


def _run_until(services, turn, n_deltas: int, action) -> asyncio.Future:
    """Run a turn; after ``n_deltas`` text deltas call ``action(task)``."""

    async def main():
        task: asyncio.Task | None = None
        seen = 0

        def on_event(event) -> None:
            nonlocal seen
            if isinstance(event, TextDelta):
                seen += 1
                if seen == n_deltas:
                    action(task)

        task = asyncio.ensure_future(services.chat.run(turn, on_event=on_event))
        try:
            return await task
        except asyncio.CancelledError:
            return turn

    return asyncio.run(main())


def test_sigkill_mid_reply_keeps_text_and_next_message_reloads(services) -> None:
    worker = services.local.worker
    agent = _starter(services, max_tokens=300, seed=2)
    conv = services.conversations.create(agent.id)
    turn = services.chat.begin(conv.id, agent, "Write a long poem about rivers.")
    result = _run_until(services, turn, 5, lambda task: os.kill(worker.pid, signal.SIGKILL))
    assert result.status == "error" and result.error.kind == "local_model"
    assert "stopped unexpectedly" in result.error.user_message
    msg = services.conversations.message(turn.assistant_message_id)
    assert msg.status == "error" and msg.content == result.text and len(result.text) > 0
    # The next message starts a fresh worker and works.
    again = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "Hello?")))
    assert again.status == "complete" and again.text.strip()
    assert again.stats.load_ms is not None  # it had to reload


def test_stop_during_long_prefill_cancels_without_killing_the_worker(services) -> None:
    # n_batch 64: the prompt below takes ~25 batches, and progress is told between them.
    agent = services.agents.update(_starter(services, max_tokens=50, n_ctx=4096, n_batch=64))
    conv = services.conversations.create(agent.id)
    # Warm the worker so the prefill below is the only slow part.
    asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "Hi")))
    pid = services.local.worker.pid
    long_prompt = "Summarise this. " + " ".join(f"w{i}" for i in range(500))  # ~1,500 tokens
    seen: list[PrefillProgress] = []
    texts: list[TextDelta] = []

    async def main():
        turn = services.chat.begin(conv.id, agent, long_prompt)
        task: asyncio.Task | None = None

        def on_event(event) -> None:
            if isinstance(event, TextDelta):
                texts.append(event)
            if isinstance(event, PrefillProgress) and not seen:
                seen.append(event)
                task.cancel()  # Stop, while the prompt is being evaluated

        task = asyncio.ensure_future(services.chat.run(turn, on_event=on_event))
        with pytest.raises(asyncio.CancelledError):
            await task
        return turn

    turn = asyncio.run(main())
    msg = services.conversations.message(turn.assistant_message_id)
    assert msg.status == "cancelled" and msg.content == "" and not texts
    row = services.stats.for_message(msg.id)
    assert row["finish_reason"] == "cancelled"
    # The cancel landed during prefill: it was sent mid-prompt, and llama.cpp evaluated only
    # part of the prompt (what it had done when the flag was seen), by its own count.
    [progress] = seen
    assert progress.evaluated < progress.total
    timing = services.local.worker.last_timing
    assert timing is not None and timing.prompt_eval_tokens is not None
    assert timing.prompt_eval_tokens < progress.total * 3 // 4  # far from the whole prompt
    assert services.local.worker.pid == pid and services.local.worker.alive  # stopped, not killed
    after = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "Still there?")))
    assert after.status == "complete"


def test_unresponsive_worker_is_killed_and_reloaded(services) -> None:
    worker = services.local.worker
    agent = _starter(services, max_tokens=300, seed=4)
    conv = services.conversations.create(agent.id)

    def freeze_then_stop(task) -> None:
        os.kill(worker.pid, signal.SIGSTOP)  # the worker can no longer answer
        task.cancel()

    turn = services.chat.begin(conv.id, agent, "Count from one to one hundred.")
    frozen_pid = None

    def action(task):
        nonlocal frozen_pid
        frozen_pid = worker.pid
        freeze_then_stop(task)

    _run_until(services, turn, 3, action)
    assert services.conversations.message(turn.assistant_message_id).status == "cancelled"
    assert not worker.alive and worker.state == "unloaded"
    again = asyncio.run(services.chat.run(services.chat.begin(conv.id, agent, "Hi")))
    assert again.status == "complete" and worker.pid != frozen_pid


def _nice_values(pid: int) -> dict[int, int]:
    """Each thread of the process: its nice value (field 19 of /proc/PID/task/TID/stat)."""
    values = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        values[int(task)] = int(fields[16])  # after the name: state is field 3, nice is 19
    return values


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads Linux's /proc")
def test_llama_cpp_threads_yield_the_cpu_to_the_window(services) -> None:
    """While a reply decodes, every thread of the worker (llama.cpp's compute threads too) runs
    below the app's priority, so a click on a small machine is not queued behind them."""
    worker = services.local.worker
    agent = _starter(services, max_tokens=200, seed=3)
    conv = services.conversations.create(agent.id)
    turn = services.chat.begin(conv.id, agent, "Write a long poem about rivers.")
    seen: dict[int, int] = {}

    def look(_task) -> None:
        seen.update(_nice_values(worker.pid))

    result = _run_until(services, turn, 5, look)
    assert result.status == "complete"
    app_nice = os.getpriority(os.PRIO_PROCESS, 0)
    assert seen  # its main thread, and llama.cpp's compute threads when it has more than one
    # (a thread the import started runs lower still: see _import_llama_quietly)
    assert all(nice >= min(19, app_nice + WORKER_NICE) for nice in seen.values()), seen
