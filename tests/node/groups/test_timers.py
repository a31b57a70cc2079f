"""``Timers``: keyed deadlines on the trio clock."""

from __future__ import annotations

import trio

from node.groups._timers import Timers
from tests.node.groups.helpers import run_trio


def test_due_keys_come_out_in_deadline_order_and_rescheduling_moves_a_key() -> None:
    timers: Timers[str] = Timers()
    timers.schedule("b", 2.0)
    timers.schedule("a", 1.0)
    timers.schedule("c", 3.0)
    timers.schedule("a", 2.5)  # moved: the old deadline no longer fires
    timers.cancel("c")
    assert timers.pop_due(1.5) == []
    assert timers.pop_due(10.0) == ["b", "a"]
    assert len(timers) == 0
    assert timers.pop_due(20.0) == []


def test_next_due_wakes_for_an_earlier_deadline_scheduled_while_it_sleeps() -> None:
    fired: list[tuple[str, float]] = []

    async def main() -> None:
        timers: Timers[str] = Timers()
        timers.schedule_in("late", 10_000)

        async def loop() -> None:
            while True:
                for key in await timers.next_due():
                    fired.append((key, trio.current_time()))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(loop)
            await trio.sleep(1)
            timers.schedule_in("early", 500)
            await trio.sleep(20)
            nursery.cancel_scope.cancel()

    run_trio(main)
    assert fired == [("early", 1.5), ("late", 10.0)]
