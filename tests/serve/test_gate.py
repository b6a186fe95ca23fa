"""``serve/gate.LocalGate``: the visible queue in front of local models. One place (slots=1)
and room for one waiter (limit=1): the second request waits, the third is refused at once
(429), a waiter past its time is refused then (503), a freed place goes to the next waiter in
order, and a waiter that gives up never keeps a place."""

from __future__ import annotations

import asyncio

import pytest

from desktop.serve.gate import LocalGate
from desktop.serve.wire import ApiError


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_second_waits_third_is_refused_429_with_retry_after() -> None:
    async def main() -> None:
        gate = LocalGate(slots=1, limit=1, timeout_s=5)
        started = await gate.enter()
        second = asyncio.ensure_future(gate.enter())
        await _settle()
        assert not second.done() and gate.waiting == 1
        with pytest.raises(ApiError) as info:
            await gate.enter()
        assert info.value.status == 429 and info.value.code == "queue_full"
        assert info.value.retry_after is not None and info.value.retry_after >= 1
        gate.leave(started)
        await asyncio.wait_for(second, 1)  # the freed place went to the waiter
        assert gate.running == 1 and gate.waiting == 0
        gate.leave(second.result())
        assert gate.running == 0

    asyncio.run(main())


def test_a_waiter_past_its_timeout_gets_503_and_leaves_the_queue() -> None:
    async def main() -> None:
        gate = LocalGate(slots=1, limit=1, timeout_s=0.1)
        await gate.enter()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(ApiError) as info:
            await gate.enter()
        assert 0.09 <= loop.time() - t0 < 2
        assert info.value.status == 503 and info.value.code == "queue_timeout"
        assert info.value.retry_after is not None
        assert gate.waiting == 0 and gate.running == 1
        # a deadline on the loop's clock cuts the wait shorter than the gate's timeout
        slow = LocalGate(slots=1, limit=1, timeout_s=30)
        await slow.enter()
        t0 = loop.time()
        with pytest.raises(ApiError):
            await slow.enter(deadline=t0 + 0.05)
        assert loop.time() - t0 < 2

    asyncio.run(main())


def test_places_go_to_waiters_in_the_order_they_came() -> None:
    async def main() -> None:
        gate = LocalGate(slots=1, limit=3, timeout_s=5)
        order: list[str] = []
        first = await gate.enter()

        async def wait(name: str) -> None:
            started = await gate.enter()
            order.append(name)
            await asyncio.sleep(0.01)
            gate.leave(started)

        tasks = []
        for name in ("a", "b", "c"):
            tasks.append(asyncio.ensure_future(wait(name)))
            await _settle()
        assert gate.waiting == 3 and order == []
        gate.leave(first)
        await asyncio.wait_for(asyncio.gather(*tasks), 2)
        assert order == ["a", "b", "c"]
        assert gate.running == 0 and gate.waiting == 0

    asyncio.run(main())


def test_a_cancelled_waiter_does_not_keep_a_place() -> None:
    async def main() -> None:
        gate = LocalGate(slots=1, limit=2, timeout_s=5)
        first = await gate.enter()
        gone = asyncio.ensure_future(gate.enter())
        behind = asyncio.ensure_future(gate.enter())
        await _settle()
        gone.cancel()
        await _settle()
        assert gone.cancelled() and gate.waiting == 1
        gate.leave(first)
        await asyncio.wait_for(behind, 1)  # the place skipped the one that gave up
        gate.leave(behind.result())
        assert gate.running == 0 and gate.waiting == 0
        assert await asyncio.wait_for(gate.enter(), 1)  # free at once: nothing leaked

    asyncio.run(main())


def test_a_waiter_cancelled_as_its_place_arrives_passes_it_on() -> None:
    async def main() -> None:
        gate = LocalGate(slots=1, limit=2, timeout_s=5)
        first = await gate.enter()
        unlucky = asyncio.ensure_future(gate.enter())
        behind = asyncio.ensure_future(gate.enter())
        await _settle()
        gate.leave(first)  # hands the place to ``unlucky``...
        unlucky.cancel()  # ...which is cancelled before it ran again
        await asyncio.wait([unlucky, behind], timeout=1)
        assert unlucky.cancelled()  # 3.11: it returned with the place instead
        assert behind.done()
        assert gate.running == 1 and gate.waiting == 0
        gate.leave(behind.result())
        assert gate.running == 0

    asyncio.run(main())


def test_retry_after_follows_the_recent_calls_pace() -> None:
    gate = LocalGate(slots=2, limit=4, timeout_s=5)
    assert gate.retry_after(ahead=0) == 5  # no pace yet: 10 s a call, two places
    gate._recent_s.extend([4.0, 4.0, 4.0])
    assert gate.retry_after(ahead=3) == 8  # 4 s a call, 4 calls, 2 places
