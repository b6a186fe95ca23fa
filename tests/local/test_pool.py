"""Local agents answer at the same time when memory allows: the runtime is a small pool of
llama.cpp workers; without room for another, a request waits and says so."""

from __future__ import annotations

import asyncio
import time

import pytest

from desktop.llm.events import Queued, TextDelta
from desktop.local import pool
from desktop.local.memory import MemoryEstimate
from desktop.local.starter import STARTER_AGENT_NAME
from tests.helpers.timers import FakeTimers

GIB = 1024**3
PLENTY = 64 * GIB  # stands in for a machine with room for several starter-sized models
NONE_FREE = 0  # stands in for a machine whose RAM is all taken


def _est(ram: int, vram: int = 0) -> MemoryEstimate:
    return MemoryEstimate(ram, vram, 0, 0, 0, 0, 256, 0, 0)


def test_a_new_worker_fits_only_with_room_for_it_the_running_ones_and_a_margin() -> None:
    assert pool.fits(_est(2 * GIB), [_est(2 * GIB)], 16 * GIB, None)
    # 6 + 6 GiB plus the margin (a fifth of 14 GiB) is more than 14 GiB
    assert not pool.fits(_est(6 * GIB), [_est(6 * GIB)], 14 * GIB, None)
    assert not pool.fits(_est(1), [], None, None)  # unknown RAM: never
    # a GPU worker needs its GPU memory known, and room there too
    assert not pool.fits(_est(GIB, vram=GIB), [_est(GIB, vram=GIB)], 32 * GIB, None)
    assert pool.fits(_est(GIB, vram=GIB), [_est(GIB, vram=GIB)], 32 * GIB, 8 * GIB)
    assert not pool.fits(_est(GIB, vram=4 * GIB), [_est(GIB, vram=4 * GIB)], 32 * GIB, 8 * GIB)


def _alive(pid: int) -> bool:
    """A live (not zombie) process with this id."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _two_agents(services, max_tokens: int):
    """The starter twice, with different contexts: different load parameters."""
    starter = services.agents.by_name(STARTER_AGENT_NAME)
    one = services.agents.update(starter.with_changes(max_tokens=max_tokens, seed=1, n_ctx=1024))
    twin = services.agents.clone(one, "SmolLM2 twin")
    two = services.agents.update(twin.with_changes(n_ctx=1536, seed=2))
    return one, two


class Recorder:
    """What one turn streamed, with when each text arrived."""

    def __init__(self) -> None:
        self.texts: list[float] = []
        self.queued: list[Queued] = []

    def __call__(self, event) -> None:
        if isinstance(event, TextDelta):
            self.texts.append(time.monotonic())
        elif isinstance(event, Queued):
            self.queued.append(event)


async def _run_both(services, agents, prompt: str, while_running=None):
    recorders = [Recorder(), Recorder()]
    turns = []
    for agent, rec in zip(agents, recorders, strict=True):
        conv = services.conversations.create(agent.id)
        turns.append((services.chat.begin(conv.id, agent, prompt), rec))
    tasks = [asyncio.ensure_future(services.chat.run(t, on_event=r)) for t, r in turns]
    if while_running is not None:
        await while_running(recorders)
    results = await asyncio.gather(*tasks)
    return results, recorders


@pytest.mark.slow
def test_two_local_agents_answer_at_once_cancel_all_stops_both_and_close_ends_them(
    services,
) -> None:
    services.local.available_ram = lambda: PLENTY
    # the pool's rule on a machine of two cores (a test worker may be pinned to one:
    # tests/conftest.py), where a second worker may start
    services.local.cpu_count = max(2, services.local.cpu_count)
    timers = FakeTimers()
    services.local.scheduler = timers.call_later
    agents = _two_agents(services, max_tokens=48)
    prompt = "Write a long story about the sea."

    async def scenario():
        results, recs = await _run_both(services, agents, prompt)
        for result, rec in zip(results, recs, strict=True):
            assert result.status == "complete" and result.text.strip()
            assert rec.queued == [] and not result.stats.queued_ms
        # the streams overlapped: each one's first text came before the other's last
        assert recs[1].texts[0] < recs[0].texts[-1] and recs[0].texts[0] < recs[1].texts[-1]
        workers = [w for w in services.local.workers if w.alive]
        assert len(workers) == 2 and {w.params.n_ctx for w in workers} == {1024, 1536}
        pids = [w.pid for w in workers]

        long_agents = [a.with_changes(max_tokens=400) for a in agents]

        async def stop_when_both_write(recorders) -> None:
            while not all(len(r.texts) >= 3 for r in recorders):
                await asyncio.sleep(0.01)
            # answering together, they split the cores
            share = max(1, services.local.cpu_count // 2)
            assert [w.thread_budget for w in services.local.workers] == [share, share]
            services.local.cancel_all()

        stopped, _ = await _run_both(services, long_agents, prompt, stop_when_both_write)
        for result in stopped:
            assert result.stats.finish_reason == "cancelled"
            assert result.stats.output_tokens < 100
        assert [w.thread_budget for w in services.local.workers] == [0, 0]  # alone: all cores
        # the same two workers answered again, and they are still there
        assert sorted(w.pid for w in services.local.workers if w.alive) == sorted(pids)
        # idle, the second worker exits (the first stays: no idle-unload setting)
        [timer] = [t for t in timers.pending if not t.cancelled]
        # its whole idle time, less the moment since its own reply ended (real clock)
        assert pool.EXTRA_IDLE_S - 5 < timer.when <= pool.EXTRA_IDLE_S
        timers.advance(pool.EXTRA_IDLE_S)
        await services.local._unload_task
        assert services.local.workers == [services.local.worker]
        assert services.local.worker.alive
        return pids

    pids = asyncio.run(scenario())
    assert [_alive(pid) for pid in pids].count(True) == 1
    services.local.close()
    assert not any(_alive(pid) for pid in pids)


@pytest.mark.slow
def test_without_room_for_another_worker_the_second_waits_queued_then_answers(services) -> None:
    services.local.available_ram = lambda: NONE_FREE
    agents = _two_agents(services, max_tokens=24)

    async def scenario():
        return await _run_both(services, agents, "Tell me about the sky.")

    results, recs = asyncio.run(scenario())
    assert all(r.status == "complete" and r.text.strip() for r in results)
    waited = [i for i, rec in enumerate(recs) if rec.queued]
    assert len(waited) == 1  # one ran, the other waited for it
    [i] = waited
    assert recs[i].queued[0] == Queued(waiting=True, reason=pool.QUEUE_REASON)
    assert recs[i].queued[-1] == Queued(waiting=False)
    assert recs[i].texts[0] > recs[1 - i].texts[-1]  # it started after the other ended
    assert results[i].stats.queued_ms > 0 and not results[1 - i].stats.queued_ms
    assert [w for w in services.local.workers if w.alive] == [services.local.worker]


class _Budget:
    """Stands in for the worker's shared int (multiprocessing RawValue): a ``.value``."""

    value = 0


class _Never:
    def is_set(self) -> bool:
        return False


def test_a_reply_follows_its_thread_budget_from_the_next_token() -> None:
    """Two replies at once split the cores: the engine reads its budget per token, so a reply
    that started alone drops to its share, and goes back to the model's own threads."""
    import llama_cpp

    from desktop.llm.provider import ChatMessage, ChatRequest, Sampling
    from desktop.local.engine import LocalEngine
    from desktop.local.loading import LoadParams
    from tests.helpers import gguf_files

    engine = LocalEngine()
    engine.thread_budget = budget = _Budget()
    params = LoadParams(str(gguf_files.starter()), n_ctx=512, n_threads=2)
    request = ChatRequest(
        "m",
        (ChatMessage("user", "Write a long story about the sea."),),
        Sampling(max_tokens=40, seed=1, temperature=0.0),
    )
    seen: list[int] = []
    try:
        for event in engine.generate(params, request, _Never()):
            if isinstance(event, TextDelta):
                seen.append(llama_cpp.llama_n_threads(engine.loaded.llm._ctx.ctx))
                # share from the first token until one token ran shared, then alone again
                budget.value = 1 if 1 not in seen else 0
    finally:
        engine.unload()
    assert seen[0] == 2  # alone: the model's own count
    shared = seen.index(1)  # sharing: one thread from the next token on
    assert shared == 1 and 2 in seen[shared + 1 :]  # alone again: back to its own
