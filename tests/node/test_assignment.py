"""Replica placement for new topics and partitions: round-robin, rack-aware (no processes)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from node.cluster import ClusterState
from node.config import NodeConfig
from node.coordination import BrokerRegistration
from node.errors import BrokerError
from node.protocol import ErrorCode


def cluster_of(racks: dict[int, str | None]) -> ClusterState:
    config = NodeConfig.from_properties({"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/t"})
    fake: Any = None  # plan_assignment reads only the broker registrations
    cluster = ClusterState(config, fake, fake)
    cluster.brokers = {b: BrokerRegistration(b, "127.0.0.1", 9000 + b, rack=rack) for b, rack in racks.items()}
    return cluster


@pytest.mark.parametrize("seed_start", [0, 1, 2, 5])
def test_replicas_of_a_partition_land_in_different_racks(seed_start: int) -> None:
    cluster = cluster_of({1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"})
    plan = cluster.plan_assignment(12, 3, start=seed_start)
    rack = {b: r.rack for b, r in cluster.brokers.items()}
    for p, replicas in plan.items():
        assert len(set(replicas)) == 3, (p, replicas)
        assert len({rack[b] for b in replicas}) == 3, (p, replicas)
    leaders = Counter(replicas[0] for replicas in plan.values())
    assert set(leaders) == {1, 2, 3, 4, 5, 6} and max(leaders.values()) == 2


def test_more_replicas_than_racks_uses_every_rack_first() -> None:
    cluster = cluster_of({1: "a", 2: "a", 3: "b", 4: "b"})
    rack = {b: r.rack for b, r in cluster.brokers.items()}
    for replicas in cluster.plan_assignment(8, 3, start=0).values():
        assert len(set(replicas)) == 3
        assert {rack[b] for b in replicas} == {"a", "b"}


def test_without_racks_it_is_round_robin_and_spreads_leaders() -> None:
    cluster = cluster_of({1: None, 2: None, 3: None})
    plan = cluster.plan_assignment(6, 3, start=0)
    assert all(len(set(r)) == 3 for r in plan.values())
    assert Counter(r[0] for r in plan.values()) == {1: 2, 2: 2, 3: 2}


def test_a_replication_factor_above_the_live_brokers_is_refused() -> None:
    cluster = cluster_of({1: None, 2: None})
    with pytest.raises(BrokerError) as info:
        cluster.plan_assignment(1, 3)
    assert info.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
