"""Batched partition-state writes (``_partition_states.write_many``) over a stand-in kazoo client
that records when each request is sent and each answer awaited: the writes are pipelined, each
lands or loses on its own, and a ZooKeeper failure is raised only once every answer is in."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from kazoo.exceptions import BadVersionError, ConnectionLoss, NoNodeError  # type: ignore[import-untyped]

from node.coordination import PartitionState, StateWrites
from node.coordination._partition_states import WRITE_PIPELINE, write_many
from node.ids import NodeId
from storage import LeaderEpoch

STATE = PartitionState(NodeId(1), LeaderEpoch(3), (NodeId(1), NodeId(2)), 1, version=4)


@dataclass
class Stat:
    version: int


@dataclass
class Answer:
    client: Pipelined
    path: str
    version: int

    def get(self) -> Stat:
        self.client.events.append(("get", self.path))
        error = self.client.errors.get(self.path)
        if error is not None:
            raise error
        return Stat(self.version + 1)


@dataclass
class Pipelined:
    """``set_async`` only: answers each write with ``errors[path]`` or the next version."""

    errors: dict[str, Exception] = field(default_factory=dict)
    events: list[tuple[str, str]] = field(default_factory=list)  # ("set", path) / ("get", path), in order
    written: dict[str, tuple[bytes, int]] = field(default_factory=dict)

    def set_async(self, path: str, data: bytes, version: int = -1) -> Answer:
        self.events.append(("set", path))
        self.written[path] = (data, version)
        return Answer(self, path, version)


def path(topic: str, partition: int) -> str:
    return f"/brokers/topics/{topic}/partitions/{partition}/state"


def test_every_write_is_sent_before_any_answer_is_awaited() -> None:
    client = Pipelined()
    states = {("t", p): STATE for p in range(3)}
    assert write_many(client, states) == StateWrites({("t", p): 5 for p in range(3)}, frozenset())
    assert [kind for kind, _ in client.events] == ["set"] * 3 + ["get"] * 3
    assert {version for _, version in client.written.values()} == {4}  # compare-and-set on the version read


def test_a_lost_race_costs_only_its_own_partition() -> None:
    client = Pipelined({path("t", 1): BadVersionError(), path("gone", 0): NoNodeError()})
    states = {("t", 0): STATE, ("t", 1): STATE, ("t", 2): STATE, ("gone", 0): STATE}
    assert write_many(client, states) == StateWrites({("t", 0): 5, ("t", 2): 5}, frozenset({("t", 1), ("gone", 0)}))


def test_at_most_the_pipeline_limit_is_in_flight() -> None:
    client = Pipelined()
    count = 2 * WRITE_PIPELINE + 7
    written = write_many(client, {("t", p): STATE for p in range(count)})
    assert len(written.versions) == count and not written.lost
    kinds = [kind for kind, _ in client.events]
    rounds = [WRITE_PIPELINE, WRITE_PIPELINE, 7]
    expected = [kind for n in rounds for kind in ["set"] * n + ["get"] * n]
    assert kinds == expected


def test_a_zookeeper_failure_is_raised_once_every_answer_of_its_round_is_in() -> None:
    client = Pipelined({path("t", 1): ConnectionLoss()})
    states = {("t", p): STATE for p in range(WRITE_PIPELINE + 3)}
    with pytest.raises(ConnectionLoss):
        write_many(client, states)
    gets = [p for kind, p in client.events if kind == "get"]
    assert len(gets) == WRITE_PIPELINE  # the whole first round was answered ...
    assert len(client.written) == WRITE_PIPELINE  # ... and the next one never sent


@pytest.mark.parametrize(
    ("key", "state", "message"),
    [
        (("t", 0), PartitionState(NodeId(1), LeaderEpoch(0), (NodeId(1),), 1), "needs the version it read, not -1"),
        (("t", -1), STATE, "partition -1 is negative"),
        (("bad name!", 0), STATE, "bad name!"),
    ],
)
def test_invalid_writes_send_nothing(key: tuple[str, int], state: PartitionState, message: str) -> None:
    client = Pipelined()
    with pytest.raises(ValueError, match=message):
        write_many(client, {("fine", 0): STATE, key: state})
    assert client.events == []
