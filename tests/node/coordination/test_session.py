"""ZkSession without ZooKeeper: the connection deadline on trio's clock (a MockClock jumps it),
the run primitive before start and after close, and what an operation is called in errors."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import trio
import trio.testing

from node.coordination import BrokerRegistration, CoordinationError, PartitionState, ZkState
from node.coordination._session import ZkSession


class NeverConnects:
    """A kazoo client whose session never comes: listeners are never called."""

    made: ClassVar[list[tuple[str, NeverConnects]]] = []

    def __init__(self, hosts: str, session_timeout_s: float) -> None:
        self.hosts = hosts
        self.session_timeout_s = session_timeout_s
        self.listeners: list[Any] = []
        self.started = self.stopped = self.closed = False
        NeverConnects.made.append((hosts, self))

    def add_listener(self, listener: Any) -> None:
        self.listeners.append(listener)

    def start_async(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.stopped = True

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize(
    ("connect", "clients"),
    [("127.0.0.1:2181", ["127.0.0.1:2181"]), ("127.0.0.1:2181/site", ["127.0.0.1:2181"])],
)
def test_start_gives_up_at_the_connection_deadline_and_leaves_nothing_running(connect: str, clients: list[str]) -> None:
    NeverConnects.made.clear()
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def main() -> None:
        session = ZkSession(connect, connection_timeout_ms=30_000, session_timeout_ms=6000, new_client=NeverConnects)
        began = trio.current_time()
        with pytest.raises(CoordinationError, match=f"could not connect to ZooKeeper at {connect} within 30 s"):
            await session.start()
        assert trio.current_time() - began == pytest.approx(30.0)
        assert [hosts for hosts, _ in NeverConnects.made] == clients  # the chroot's session came first
        assert all(c.started and c.stopped and c.closed for _, c in NeverConnects.made)
        assert NeverConnects.made[0][1].session_timeout_s == 6.0
        assert [hint async for hint in session.events()] == []  # the channel ended
        with pytest.raises(CoordinationError, match="was started before"):
            await session.start()

    trio.run(main, clock=clock)


def test_operations_need_a_started_open_session_and_say_what_they_were() -> None:
    async def main() -> None:
        zk = ZkState("127.0.0.1:1/x", new_client=NeverConnects)
        with pytest.raises(CoordinationError, match=r"ZkState\('127.0.0.1:1/x'\) is not started; cannot list topics"):
            await zk.topics()
        with pytest.raises(CoordinationError, match="not started; cannot write state of t-3"):
            await zk.set_partition_state("t", 3, PartitionState(1, 0, (1,), 1))
        with pytest.raises(CoordinationError, match="not started; cannot start reassigning 2 partitions"):
            await zk.start_reassignment({("t", 0): [1], ("t", 1): [2]})
        with pytest.raises(CoordinationError, match="not started; cannot register broker 4"):
            await zk.register_broker(BrokerRegistration(4, "h", 9092, ("PLAINTEXT://h:9092",), None))
        await zk.close()
        with pytest.raises(CoordinationError, match="is closed; cannot read topic 'orders'"):
            await zk.topic("orders")

    trio.run(main)


def test_each_operation_is_described_from_its_arguments() -> None:
    assert ZkState._create_topic.describe("orders", {0: (1,)}, {}) == "create topic 'orders'"
    assert ZkState._create_topic.describe(name="o", partitions={}, config={}) == "create topic 'o'"
    assert ZkState.claim_producer_id_block.describe(2, 1000) == "claim 1000 producer ids for broker 2"
    assert ZkState.complete_reassignment.describe("t", 7) == "complete the reassignment of t-7"
    assert ZkState._snapshot.describe() == "read a cluster snapshot"
    assert ZkState.topic.__doc__ == "One topic's assignment, or None if it does not exist."
