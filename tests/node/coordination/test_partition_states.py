"""Batched partition-state writes (``_partition_states.write_many``) over a stand-in kazoo client
that records when each request is sent and each answer awaited: the writes go in transactions,
several in flight; each write lands or loses on its own (the others of a transaction that a lost
race failed are written again singly); a ZooKeeper failure is raised only once every answer of
its round is in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from kazoo.exceptions import (  # type: ignore[import-untyped]
    BadVersionError,
    ConnectionLoss,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)

from node.coordination import PartitionState, StateWrites
from node.coordination._partition_states import MULTI_OPS, MULTI_PIPELINE, WRITE_PIPELINE, write_many
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
class Committed:
    """A transaction's answer, as ZooKeeper gives it: all landed, or the first failure with the
    writes before it rolled back and those after it not looked at."""

    client: Pipelined
    writes: list[tuple[str, int]]

    def get(self) -> list[Any]:
        self.client.events.append(("commit-get", str(len(self.writes))))
        if self.client.tx_error is not None:
            raise self.client.tx_error
        failed = next((i for i, (path, _) in enumerate(self.writes) if path in self.client.errors), None)
        if failed is None:
            return [Stat(version + 1) for _, version in self.writes]
        return [
            RolledBackError() if i < failed else self.client.errors[path] if i == failed else RuntimeInconsistency()
            for i, (path, _) in enumerate(self.writes)
        ]


@dataclass
class Transaction:
    client: Pipelined
    writes: list[tuple[str, int]] = field(default_factory=list)

    def set_data(self, path: str, data: bytes, version: int = -1) -> None:
        self.writes.append((path, version))
        self.client.written[path] = (data, version)

    def commit_async(self) -> Committed:
        self.client.events.append(("commit", str(len(self.writes))))
        return Committed(self.client, self.writes)


@dataclass
class Pipelined:
    """``transaction`` and ``set_async``: each write answered with ``errors[path]`` or the next
    version; ``tx_error`` fails every transaction's answer (a lost connection)."""

    errors: dict[str, Exception] = field(default_factory=dict)
    tx_error: Exception | None = None
    events: list[tuple[str, str]] = field(default_factory=list)  # (kind, path or write count), in order
    written: dict[str, tuple[bytes, int]] = field(default_factory=dict)

    def transaction(self) -> Transaction:
        return Transaction(self)

    def set_async(self, path: str, data: bytes, version: int = -1) -> Answer:
        self.events.append(("set", path))
        self.written[path] = (data, version)
        return Answer(self, path, version)


def path(topic: str, partition: int) -> str:
    return f"/brokers/topics/{topic}/partitions/{partition}/state"


def test_writes_go_in_transactions_all_sent_before_any_answer_is_awaited() -> None:
    client = Pipelined()
    count = 2 * MULTI_OPS + 7
    written = write_many(client, {("t", p): STATE for p in range(count)})
    assert written == StateWrites({("t", p): 5 for p in range(count)}, frozenset())
    sizes = [str(MULTI_OPS), str(MULTI_OPS), "7"]
    assert client.events == [("commit", n) for n in sizes] + [("commit-get", n) for n in sizes]
    assert {version for _, version in client.written.values()} == {4}  # compare-and-set on the version read


def test_at_most_the_pipeline_limit_of_transactions_is_in_flight() -> None:
    client = Pipelined()
    write_many(client, {("t", p): STATE for p in range((MULTI_PIPELINE + 1) * MULTI_OPS)})
    kinds = [kind for kind, _ in client.events]
    assert kinds == ["commit"] * MULTI_PIPELINE + ["commit-get"] * MULTI_PIPELINE + ["commit", "commit-get"]


def test_a_lost_race_costs_only_its_own_partition() -> None:
    client = Pipelined({path("t", 1): BadVersionError(), path("gone", 0): NoNodeError()})
    states = {("t", 0): STATE, ("t", 1): STATE, ("t", 2): STATE, ("gone", 0): STATE}
    assert write_many(client, states) == StateWrites({("t", 0): 5, ("t", 2): 5}, frozenset({("t", 1), ("gone", 0)}))
    # The transaction failed on ("t", 1); the three others were written singly, pipelined, and
    # ("gone", 0) lost there on its own.
    singles = [p for kind, p in client.events if kind == "set"]
    assert singles == [path("t", 0), path("t", 2), path("gone", 0)]


def test_a_zookeeper_failure_is_raised_once_every_answer_of_its_round_is_in() -> None:
    client = Pipelined(tx_error=ConnectionLoss())
    with pytest.raises(ConnectionLoss):
        write_many(client, {("t", p): STATE for p in range((MULTI_PIPELINE + 1) * MULTI_OPS)})
    kinds = [kind for kind, _ in client.events]
    assert kinds == ["commit"] * MULTI_PIPELINE + ["commit-get"] * MULTI_PIPELINE  # the next round never sent


def test_a_failure_of_a_single_write_is_raised_once_its_round_is_answered() -> None:
    # Both transactions fail on their first write: 2 x (MULTI_OPS - 1) writes go singly, more than
    # one round of them, and the first round meets a lost connection.
    lost = {path("t", 0): BadVersionError(), path("t", MULTI_OPS): BadVersionError()}
    client = Pipelined(lost | {path("t", 1): ConnectionLoss()})
    assert 2 * (MULTI_OPS - 1) > WRITE_PIPELINE
    with pytest.raises(ConnectionLoss):
        write_many(client, {("t", p): STATE for p in range(2 * MULTI_OPS)})
    singles = [p for kind, p in client.events if kind == "get"]
    assert len(singles) == WRITE_PIPELINE  # the first round of single writes was answered ...
    assert sum(1 for kind, _ in client.events if kind == "set") == WRITE_PIPELINE  # ... the next never sent


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
