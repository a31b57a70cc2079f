"""The proxy's window: a direction of a link holds at most ``WINDOW_BYTES`` in flight, as a real TCP
connection's receive window bounds what a long path carries (one chunk always fits)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from chaos._link import CHUNK_BYTES, WINDOW_BYTES, _Window

pytestmark = pytest.mark.unit


def test_the_window_is_linux_s_largest_receive_window() -> None:
    assert WINDOW_BYTES == 6 * 1024 * 1024 >= 64 * CHUNK_BYTES


def test_a_full_window_holds_the_reader_until_the_writer_delivers() -> None:
    async def main() -> list[str]:
        window = _Window(100)
        events: list[str] = []

        async def reader() -> None:
            await window.take(60)
            events.append("first in")
            await window.take(60)  # 120 > 100: waits for room
            events.append("second in")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            assert events == ["first in"] and window.used == 60
            window.give(60)
            await trio.testing.wait_all_tasks_blocked()
        assert window.used == 60
        return events

    assert trio.run(main) == ["first in", "second in"]


def test_one_chunk_larger_than_the_window_still_goes() -> None:
    async def main() -> int:
        window = _Window(10)
        await window.take(50)  # an empty window takes any chunk, or the link would stall
        return window.used

    assert trio.run(main) == 50
