"""The pipelined partition copier against a fake source and target (unit): what it fetches and
appends, in which order, and what it does on refusals, errors and a stop request.

The fakes keep real record batches: the source a log of batches, the target the batches it was
appended (only at its end, as a strait node would). ``fetch_partition`` and ``mirror_append`` of
``mirror._copier`` are replaced by theirs; gates let a test hold a fetch or an append in flight.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
import trio.testing

from mirror import _copier
from mirror._copier import PartitionCopier, whole_batches_from
from mirror._offsets import source_offset
from node.client import ClientError, FetchedPartition, MirrorAppendResult
from node.protocol import ErrorCode
from storage.records import build_batch, read_header

TOPIC = "orders"


def batch(base: int, records: int = 10, value_bytes: int = 100) -> bytes:
    return build_batch(
        [(1_700_000_000_000 + base + i, None, bytes(value_bytes)) for i in range(records)], base_offset=base
    )


def batches_of(data: bytes | memoryview | list[memoryview]) -> list[tuple[int, int]]:
    """(base offset, last offset) of each batch in a record set (or a list of record sets)."""
    parts = data if isinstance(data, list) else [data]
    out = []
    for part in parts:
        view, pos = memoryview(part), 0
        while pos < len(view):
            header = read_header(view, pos)
            out.append((header.base_offset, header.last_offset))
            pos += header.size
    return out


class Conn:
    address = "fake:1"

    async def aclose(self) -> None:
        pass


@dataclass
class Site:
    """A fake site: ``open_leader`` counts connections; ``timeout`` as SiteClient's."""

    name: str
    timeout: float = 10.0
    opened: int = 0

    async def open_leader(self, topic: str, partition: int) -> Conn:
        self.opened += 1
        return Conn()


@dataclass
class Fakes:
    source_log: list[bytes]
    target_log: list[tuple[int, int]] = field(default_factory=list)  # (base, last) of appended batches
    target_end: int = 0
    events: list[str] = field(default_factory=list)
    fetch_sizes: list[int] = field(default_factory=list)
    appends: int = 0
    fetch_delay_s: float = 0.0
    append_delay_s: float = 0.0
    hold_append: trio.Event | None = None  # appends wait for it once set to an unset Event
    append_started: trio.Event = field(default_factory=trio.Event)
    fail_fetch_at: set[int] = field(default_factory=set)  # fetch numbers (1-based) that raise ClientError
    fail_append_at: set[int] = field(default_factory=set)  # append numbers (1-based, not probes) that raise
    fetches: int = 0
    answer_end_off_by: int = 0  # a target answering a different end than the batches make

    @property
    def source_end(self) -> int:
        return read_header(self.source_log[-1]).last_offset + 1 if self.source_log else 0

    async def fetch(self, conn: Any, topic: str, partition: int, offset: int, **kw: Any) -> FetchedPartition:
        self.fetches += 1
        n = self.fetches
        self.events.append(f"fetch {offset} start")
        self.fetch_sizes.append(kw["max_bytes"])
        await trio.sleep(self.fetch_delay_s)
        if n in self.fail_fetch_at:
            raise ClientError(f"fetch {n} failed")
        if offset > self.source_end:
            return FetchedPartition(
                ErrorCode.OFFSET_OUT_OF_RANGE, self.source_end, self.source_end, 0, (), memoryview(b"")
            )
        out = bytearray()
        for b in self.source_log:
            if read_header(b).last_offset < offset:
                continue
            if out and len(out) + len(b) > kw["max_bytes"]:
                out += b[: kw["max_bytes"] - len(out)]  # the last batch cut short, as a fetch limit does
                break
            out += b
        if not out:
            await trio.sleep(kw["max_wait_ms"] / 1000)
        self.events.append(f"fetch {offset} end")
        return FetchedPartition(0, self.source_end, self.source_end, 0, (), memoryview(bytes(out)))

    async def append(
        self, conn: Any, link: str, topic: str, partition: int, expected: int, records: Any, **kw: Any
    ) -> MirrorAppendResult:
        if records is None:
            return MirrorAppendResult(0, None, self.target_end, self.target_end, 0)
        self.appends += 1
        n = self.appends
        self.events.append(f"append {expected} start")
        self.append_started.set()
        if self.hold_append is not None:
            await self.hold_append.wait()
        await trio.sleep(self.append_delay_s)
        if n in self.fail_append_at:
            raise ClientError(f"append {n} failed")
        if expected != self.target_end:
            return MirrorAppendResult(ErrorCode.OFFSET_OUT_OF_RANGE, None, self.target_end, self.target_end, 0)
        got = batches_of(records)
        self.target_log += got
        self.target_end = got[-1][1] + 1
        self.events.append(f"append {expected} end")
        end = self.target_end + self.answer_end_off_by
        return MirrorAppendResult(0, None, end, end, 0)


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Fakes]:
    f = Fakes([batch(i * 10) for i in range(40)])
    monkeypatch.setattr(_copier, "fetch_partition", f.fetch)
    monkeypatch.setattr(_copier, "mirror_append", f.append)
    yield f


def copier(**kw: Any) -> PartitionCopier:
    kw.setdefault("fetch_max_wait_ms", 100)
    kw.setdefault("backoff_s", 0.01)
    return PartitionCopier("l", Site("east"), Site("west"), TOPIC, 0, **kw)  # type: ignore[arg-type]


async def run_until(c: PartitionCopier, done: Any, limit_s: float = 60) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(c.run)
        with trio.fail_after(limit_s):
            while not done():
                await trio.sleep(0.001)
        nursery.cancel_scope.cancel()


def expected_log(f: Fakes) -> list[tuple[int, int]]:
    return batches_of([memoryview(b) for b in f.source_log])


def test_everything_is_copied_once_at_its_offsets_and_the_next_fetch_flies_during_an_append(fakes: Fakes) -> None:
    fakes.fetch_delay_s = fakes.append_delay_s = 0.05
    c = copier(fetch_max_bytes=64 * 1024)
    c.sizer.size = c.sizer.minimum = c.sizer.maximum = 3 * len(fakes.source_log[0])  # 3 batches a fetch
    trio.run(run_until, c, lambda: fakes.target_end == 400, clock=trio.testing.MockClock(autojump_threshold=0))
    assert fakes.target_log == expected_log(fakes)  # no gap, no duplicate, the source's offsets
    assert c.progress.mirrored_offset == 400 and c.progress.records_copied == 400
    overlapped = 0
    for i, event in enumerate(fakes.events):
        if event.startswith("append") and event.endswith("start"):
            end = next(j for j in range(i, len(fakes.events)) if fakes.events[j] == event.replace("start", "end"))
            overlapped += any(e.startswith("fetch") and e.endswith("start") for e in fakes.events[i:end])
    assert overlapped >= 3  # fetches went out while appends were in flight
    assert c.progress.errors == 0


def test_the_appender_joins_what_is_queued_into_one_append_and_the_queue_is_bounded(fakes: Fakes) -> None:
    async def main() -> None:
        c = copier(pipeline_fetches=2, fetch_max_bytes=1024 * 1024)
        c.sizer.size = c.sizer.minimum = c.sizer.maximum = len(fakes.source_log[0])  # one batch a fetch
        fakes.hold_append = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(c.run)
            await fakes.append_started.wait()
            await trio.sleep(1)  # the fetcher runs ahead as far as it may
            fetched_while_held = fakes.fetches - 1
            assert fetched_while_held == 2  # one queued, one waiting for room: pipeline_fetches
            fakes.hold_append.set()
            with trio.fail_after(60):
                while fakes.target_end < 400:
                    await trio.sleep(0.001)
            nursery.cancel_scope.cancel()
        assert fakes.target_log == expected_log(fakes)
        assert fakes.appends < 40  # what waited went in one append

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_an_append_the_target_refuses_drops_the_queue_and_copies_on_from_the_targets_end(fakes: Fakes) -> None:
    async def main() -> None:
        c = copier(fetch_max_bytes=1024 * 1024)
        c.sizer.size = c.sizer.minimum = c.sizer.maximum = 2 * len(fakes.source_log[0])
        fakes.hold_append = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(c.run)
            await fakes.append_started.wait()
            await trio.sleep(0.5)
            # Someone else (another mirror process of the link) appended the first 50 records meanwhile.
            fakes.target_log = batches_of([memoryview(b) for b in fakes.source_log[:5]])
            fakes.target_end = 50
            fakes.hold_append.set()
            with trio.fail_after(60):
                while fakes.target_end < 400:
                    await trio.sleep(0.001)
            nursery.cancel_scope.cancel()
        assert fakes.target_log == expected_log(fakes)
        assert c.progress.errors == 0  # a refusal is no error: the target said where it ends

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_failed_fetch_lets_the_queued_appends_through_then_probes_the_target_again(fakes: Fakes) -> None:
    fakes.fail_fetch_at = {3}
    fakes.append_delay_s = 0.2
    c = copier(fetch_max_bytes=1024 * 1024)
    c.sizer.size = c.sizer.minimum = c.sizer.maximum = len(fakes.source_log[0])
    trio.run(run_until, c, lambda: fakes.target_end == 400, clock=trio.testing.MockClock(autojump_threshold=0))
    assert fakes.target_log == expected_log(fakes)
    assert c.progress.errors == 1
    assert c.source.opened == 2  # type: ignore[attr-defined]  # a fresh connection after the error
    # Fetches 1 and 2 were queued when fetch 3 (from 20) failed: both were appended, and the copier
    # fetched from 20 again after asking the target where it ends.
    starts = [e for e in fakes.events if e.endswith("start")]
    assert starts.count("fetch 0 start") == 1
    failed = starts.index("fetch 20 start")
    again = starts.index("fetch 20 start", failed + 1)
    assert starts[failed + 1 : again] == ["append 10 start"]


def test_a_failed_append_drops_the_queue_reconnects_and_copies_without_gap_or_duplicate(fakes: Fakes) -> None:
    fakes.fail_append_at = {2, 5}
    c = copier(fetch_max_bytes=1024 * 1024)
    c.sizer.size = c.sizer.minimum = c.sizer.maximum = 2 * len(fakes.source_log[0])
    trio.run(run_until, c, lambda: fakes.target_end == 400, clock=trio.testing.MockClock(autojump_threshold=0))
    assert fakes.target_log == expected_log(fakes)
    assert c.progress.errors == 2
    assert c.target.opened == 3  # type: ignore[attr-defined]


def test_an_end_the_batches_do_not_make_is_an_error_and_the_target_is_asked_again(fakes: Fakes) -> None:
    async def main() -> None:
        c = copier(fetch_max_bytes=1024 * 1024)
        c.sizer.size = c.sizer.minimum = c.sizer.maximum = len(fakes.source_log[0])
        fakes.answer_end_off_by = 1  # the target says it ends one past what the batches made
        async with trio.open_nursery() as nursery:
            nursery.start_soon(c.run)
            with trio.fail_after(60):
                while c.progress.errors == 0:
                    await trio.sleep(0.001)
            assert "a fetched chunk starts at" in str(c.progress.last_error)
            fakes.answer_end_off_by = 0
            with trio.fail_after(60):
                while fakes.target_end < 400:
                    await trio.sleep(0.001)
            nursery.cancel_scope.cancel()
        assert fakes.target_log == expected_log(fakes)  # the probe found the real end: nothing twice

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_request_stop_with_a_fetch_and_an_append_in_flight_finishes_the_append_and_starts_nothing(
    fakes: Fakes,
) -> None:
    async def main() -> None:
        c = copier(fetch_max_bytes=1024 * 1024, pipeline_fetches=1)
        c.sizer.size = c.sizer.minimum = c.sizer.maximum = len(fakes.source_log[0])
        fakes.hold_append = trio.Event()
        fakes.fetch_delay_s = 0.3
        async with trio.open_nursery() as nursery:
            nursery.start_soon(c.run)
            await fakes.append_started.wait()
            await trio.sleep(0.1)
            assert "fetch 10 start" in fakes.events and "fetch 10 end" not in fakes.events  # a fetch flies too
            c.request_stop()
            assert not c.idle.is_set()  # the append is in flight
            await trio.sleep(1)
            assert not c.idle.is_set()
            fakes.hold_append.set()
            with trio.fail_after(5):
                await c.idle.wait()
            end = fakes.target_end
            assert end == 10  # the append in flight went through
            await trio.sleep(2)
            assert fakes.target_end == end and fakes.appends == 1  # nothing new started
            assert "fetch 10 end" not in fakes.events  # the fetch in flight was interrupted
            nursery.cancel_scope.cancel()
        assert c.progress.mirrored_offset == 10

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_request_stop_between_appends_is_idle_at_once(fakes: Fakes) -> None:
    async def main() -> None:
        c = copier()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(c.run)
            with trio.fail_after(60):
                while fakes.target_end < 400:
                    await trio.sleep(0.001)
            c.request_stop()  # caught up: a fetch long-polls, no append flies
            assert c.idle.is_set()
            fakes.source_log.append(batch(400))
            await trio.sleep(1)
            assert fakes.target_end == 400
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_fetches_grow_to_the_maximum_while_catching_up(fakes: Fakes) -> None:
    fakes.source_log = [batch(i * 100, 100, 1000) for i in range(200)]  # ~100 KB batches, 20 MB
    c = copier(fetch_max_bytes=4 * 1024 * 1024)
    c.sizer.size = 1024 * 1024
    trio.run(run_until, c, lambda: fakes.target_end == 20_000, clock=trio.testing.MockClock(autojump_threshold=0))
    assert fakes.target_log == expected_log(fakes)
    assert fakes.fetch_sizes[0] == 1024 * 1024
    assert max(fakes.fetch_sizes) == 4 * 1024 * 1024
    assert all(s <= 4 * 1024 * 1024 for s in fakes.fetch_sizes)


def test_an_offset_out_of_range_in_the_pipeline_goes_through_the_careful_step(fakes: Fakes) -> None:
    # The target is ahead of the source (an unclean election there): the careful step says diverged.
    fakes.target_end = 500
    c = copier()
    trio.run(run_until, c, lambda: c.progress.state == "diverged", clock=trio.testing.MockClock(autojump_threshold=0))
    assert c.progress.last_error == "the mirror ends at 500, past the source's high watermark 400"
    assert fakes.appends == 0


def test_whole_batches_from_skips_what_the_target_holds_and_a_cut_last_batch() -> None:
    data = batch(0) + batch(10) + batch(20)[:-5]
    chunk = whole_batches_from(memoryview(data), source_offset(5))
    assert chunk is not None
    assert (chunk.start, chunk.first_base, chunk.end, chunk.count) == (5, 0, 20, 20)
    assert batches_of(chunk.records) == [(0, 9), (10, 19)]
    chunk = whole_batches_from(memoryview(data), source_offset(10))
    assert chunk is not None and batches_of(chunk.records) == [(10, 19)]
    assert whole_batches_from(memoryview(data), source_offset(20)) is None


def test_pipeline_fetches_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="pipeline_fetches must be at least 1, not 0"):
        copier(pipeline_fetches=0)
