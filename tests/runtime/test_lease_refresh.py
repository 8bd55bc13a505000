"""A hold's lease refresh (``runtime/lease_refresh.py``): its rhythm, its end, and a lost lease."""

from __future__ import annotations

import asyncio

from deerflow_ext.runtime.lease_refresh import LeaseRefresh
from deerflow_ext.testing import wait_until

TICK = 0.02


class Calls:
    """A refresh that answers from a script, and the losses it led to."""

    def __init__(self, *answers: bool | Exception) -> None:
        self.answers = list(answers)
        self.made = 0
        self.lost: list[BaseException | None] = []
        self.gate: asyncio.Event | None = None  # when set, a refresh waits for it

    async def refresh(self) -> bool:
        self.made += 1
        if self.gate is not None:
            await self.gate.wait()
        answer = self.answers.pop(0) if self.answers else True
        if isinstance(answer, Exception):
            raise answer
        return answer

    def refresher(self) -> LeaseRefresh:
        return LeaseRefresh(self.refresh, TICK, self.lost.append, name="test-lease")


async def test_it_refreshes_every_interval_until_stopped() -> None:
    calls = Calls()
    refresh = calls.refresher()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await wait_until(lambda: calls.made >= 3)
    assert loop.time() - started >= TICK * 3 * 0.9, "refreshes came sooner than their interval"
    in_flight = refresh.stop()
    if in_flight is not None:  # a loaded machine's next one may have been due already
        await in_flight
    made = calls.made
    await asyncio.sleep(TICK * 4)
    assert calls.made == made and calls.lost == []


async def test_a_hold_that_ends_before_its_first_refresh_makes_none_and_stops_with_nothing_to_wait_for() -> None:
    calls = Calls()
    assert calls.refresher().stop() is None
    await asyncio.sleep(TICK * 3)
    assert calls.made == 0


async def test_nothing_refreshed_is_a_lost_lease_reported_once_and_the_end_of_refreshing() -> None:
    calls = Calls(True, False)
    calls.refresher()
    await wait_until(lambda: calls.lost)
    await asyncio.sleep(TICK * 3)
    assert calls.made == 2 and calls.lost == [None]


async def test_a_failed_refresh_is_a_lost_lease_with_its_error() -> None:
    error = ConnectionError("the session is gone")
    calls = Calls(error)
    calls.refresher()
    await wait_until(lambda: calls.lost)
    await asyncio.sleep(TICK * 3)
    assert calls.made == 1 and calls.lost == [error]


async def test_stopping_during_a_refresh_hands_it_over_and_its_failure_fences_nobody() -> None:
    calls = Calls(ConnectionError("refused"))
    calls.gate = asyncio.Event()
    refresh = calls.refresher()
    await wait_until(lambda: calls.made == 1)
    in_flight = refresh.stop()
    assert in_flight is not None and not in_flight.done()
    calls.gate.set()
    await in_flight
    await asyncio.sleep(TICK * 3)
    assert calls.made == 1 and calls.lost == [], "a stopped hold is not fenced"


async def test_a_refresh_due_but_not_yet_started_when_stopped_is_not_made() -> None:
    calls = Calls()
    refresh = LeaseRefresh(calls.refresh, 0, calls.lost.append, name="test-lease")
    await asyncio.sleep(0)  # the timer fires in the next turn, after this task's step ...
    await asyncio.sleep(0)  # ... and the refresh's task would take its first step after this one
    due = refresh.stop()
    assert due is not None, "the timer had fired"
    await due
    assert calls.made == 0 and calls.lost == []
