"""Drive a ``TransactionCoordinator`` as the broker does, with fakes for its store, ids and markers, on a MockClock."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import trio

from node.protocol import ErrorCode
from node.txn import (
    MarkerWriteError,
    TransactionCoordinator,
    TxnConfig,
    TxnLogValue,
    TxnMarker,
    TxnStoreError,
    decode_key,
    decode_value,
)
from tests.node.groups.helpers import run_trio, wall_ms

CONFIG = TxnConfig(
    state_partitions=4,
    max_timeout_ms=60_000,
    id_expiration_ms=3_600_000,
    abort_timed_out_interval_ms=1_000,
    remove_expired_interval_ms=60_000,
)
TopicPartition = tuple[str, int]


class MemoryLog:
    """A TxnLogStore in memory. ``unavailable`` partitions raise; ``gate`` (when set) holds every append."""

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        self.unavailable: set[int] = set()
        self.gate: trio.Event | None = None

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        await trio.lowlevel.checkpoint()
        if self.gate is not None:
            await self.gate.wait()
        if partition in self.unavailable:
            raise TxnStoreError(f"__transaction_state-{partition} is not led here")
        self.records[partition].extend(records)

    def history(self, transactional_id: str) -> list[TxnLogValue | None]:
        """Every value written for ``transactional_id``, in order (None: a tombstone)."""
        return [
            None if value is None else decode_value(value)
            for records in self.records.values()
            for key, value in records
            if decode_key(key) == transactional_id
        ]

    def states(self, transactional_id: str) -> list[str]:
        return [v.state.title if v is not None else "tombstone" for v in self.history(transactional_id)]


class CountingIds:
    """Producer ids from ``first`` up; ``gate`` (when set) holds every claim."""

    def __init__(self, first: int = 1000) -> None:
        self.next = first
        self.gate: trio.Event | None = None

    async def next_id(self) -> int:
        await trio.lowlevel.checkpoint()
        if self.gate is not None:
            await self.gate.wait()
        self.next += 1
        return self.next - 1


@dataclass
class FakeMarkers:
    """A MarkerWriter: every partition is led by ``leaders`` (default node 1); ``answers`` scripts error codes.

    ``answers[tp]`` is a list of codes answered in turn (the last one repeats); absent: NONE.
    ``unreachable`` nodes raise MarkerWriteError. ``written`` records every marker a partition took.
    """

    leaders: dict[TopicPartition, int | None] = field(default_factory=dict)
    answers: dict[TopicPartition, list[int]] = field(default_factory=dict)
    unreachable: set[int] = field(default_factory=set)
    sent: list[tuple[int, TxnMarker]] = field(default_factory=list)
    written: list[tuple[TopicPartition, TxnMarker]] = field(default_factory=list)

    def leader_of(self, topic: str, partition: int) -> int | None:
        return self.leaders.get((topic, partition), 1)

    async def write_markers(self, node_id: int, markers: Sequence[TxnMarker]) -> Mapping[TopicPartition, int]:
        await trio.lowlevel.checkpoint()
        if node_id in self.unreachable:
            raise MarkerWriteError(f"node {node_id} is unreachable")
        result: dict[TopicPartition, int] = {}
        for marker in markers:
            self.sent.append((node_id, marker))
            for tp in marker.partitions:
                script = self.answers.get(tp, [])
                code = script.pop(0) if len(script) > 1 else (script[0] if script else ErrorCode.NONE)
                result[tp] = code
                if code == ErrorCode.NONE:
                    self.written.append((tp, marker))
        return result


@dataclass
class Env:
    coordinator: TransactionCoordinator
    log: MemoryLog
    ids: CountingIds
    markers: FakeMarkers
    nursery: trio.Nursery


def run(
    test: Callable[[Env], Awaitable[None]],
    *,
    config: TxnConfig = CONFIG,
    log: MemoryLog | None = None,
    markers: FakeMarkers | None = None,
    load: bool = True,
    before_run: Callable[[TransactionCoordinator], None] | None = None,
) -> None:
    """Run ``test`` against a running coordinator (every partition loaded at coordinator epoch 5) on a mock clock."""

    async def main() -> None:
        the_log = log if log is not None else MemoryLog()
        ids = CountingIds()
        the_markers = markers if markers is not None else FakeMarkers()
        coordinator = TransactionCoordinator(config, the_log, ids, the_markers, wall_clock_ms=wall_ms)
        if load:
            for p in range(config.state_partitions):
                coordinator.load_partition(p, list(the_log.records.get(p, [])), 5)
        if before_run is not None:
            before_run(coordinator)
        async with trio.open_nursery() as nursery:
            await nursery.start(coordinator.run)
            await test(Env(coordinator, the_log, ids, the_markers, nursery))
            nursery.cancel_scope.cancel()

    run_trio(main)


async def settle(check: Callable[[], bool], *, seconds: float = 600) -> None:
    """Let mock time pass until ``check()`` holds; fails after ``seconds`` of mock time."""
    with trio.fail_after(seconds):
        while not check():
            await trio.sleep(0.01)
