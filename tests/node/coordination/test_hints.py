"""The coalescing hint channel between kazoo's threads and trio (no ZooKeeper needed)."""

from __future__ import annotations

import threading

import trio
import trio.testing

from node.coordination._hints import Hints


def drain(receive: trio.MemoryReceiveChannel[str]) -> list[str]:
    out = []
    while True:
        try:
            out.append(receive.receive_nowait())
        except trio.WouldBlock:
            return out


def test_unread_duplicates_are_coalesced() -> None:
    async def main() -> None:
        hints = Hints()
        for _ in range(1000):
            hints.push("topics")
            hints.push("config:a")
        assert hints.pending() == 2
        assert drain(hints.receive_channel) == ["topics", "config:a"]
        hints.push("topics")  # read already, so it is queued again
        assert drain(hints.receive_channel) == ["topics"]

    trio.run(main)


def test_a_hint_handed_to_a_waiting_reader_can_be_sent_again() -> None:
    async def main() -> None:
        hints = Hints()
        got: list[str] = []

        async def reader() -> None:
            got.append(await hints.receive_channel.receive())
            got.append(await hints.receive_channel.receive())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            hints.push("brokers")  # goes straight to the waiting reader
            await trio.testing.wait_all_tasks_blocked()
            hints.push("brokers")
        assert got == ["brokers", "brokers"]

    trio.run(main)


def test_post_from_other_threads_arrives_in_trio() -> None:
    async def main() -> None:
        hints = Hints()
        hints.bind(trio.lowlevel.current_trio_token())
        names = [f"topic:t{i}" for i in range(50)]

        def producer() -> None:
            for name in names * 3:
                hints.post(name)

        threads = [threading.Thread(target=producer) for _ in range(4)]
        for thread in threads:
            thread.start()

        def join_all() -> None:
            for thread in threads:
                thread.join()

        await trio.to_thread.run_sync(join_all)
        await trio.testing.wait_all_tasks_blocked()  # run the scheduled callbacks
        received = drain(hints.receive_channel)
        assert sorted(received) == sorted(names)

    trio.run(main)


def test_closed_channel_ends_the_reader_and_ignores_later_hints() -> None:
    async def main() -> None:
        hints = Hints()
        hints.push("topics")
        hints.close()
        hints.push("brokers")
        assert [hint async for hint in hints.receive_channel] == ["topics"]

    trio.run(main)


def test_post_after_the_run_is_dropped() -> None:
    hints = Hints()

    async def main() -> None:
        hints.bind(trio.lowlevel.current_trio_token())

    trio.run(main)
    hints.post("topics")  # the run is over: no error, nothing delivered
    assert hints.pending() == 0
