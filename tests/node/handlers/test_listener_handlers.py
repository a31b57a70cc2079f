"""Metadata and FindCoordinator with several listeners: each client gets the addresses of the
listener it came in on, and brokers without that listener are left out, as in Kafka."""

from __future__ import annotations

from typing import Any, cast

import pytest
import trio

from node.coordination import BrokerRegistration, PartitionState
from node.handlers import GroupService, served_ranges
from node.handlers.groups import GroupServices, handle_find_coordinator
from node.handlers.metadata import MetadataServices, handle_metadata
from node.offsets_topic import OFFSETS_TOPIC
from node.protocol import ApiKey, ErrorCode
from tests.node.handlers.fakes import FakeCluster, node_config, request, topic_state

pytestmark = pytest.mark.unit


def run(fn: Any, *args: Any) -> Any:
    return trio.run(fn, *args)


def metadata_services(cluster: FakeCluster) -> MetadataServices:
    return MetadataServices(cluster, cluster, node_config(), "cluster-1", served_ranges())


def group_services(cluster: FakeCluster) -> GroupServices:
    return GroupServices(cast(GroupService, NoGroups()), cluster, cluster, node_config())


class NoGroups:
    """FindCoordinator asks the coordinator only which partition of __consumer_offsets a group maps to."""

    def partition_for(self, group_id: str) -> int:
        return 0


def two_listener_cluster() -> FakeCluster:
    """Brokers 1 and 2 on LOCAL and WAN, broker 3 on LOCAL only; broker 3 leads ``orders-1``."""
    brokers = {
        1: BrokerRegistration(1, "10.0.0.1", 9092, ("LOCAL://10.0.0.1:9092", "WAN://wan-1:19092")),
        2: BrokerRegistration(2, "10.0.0.2", 9092, ("LOCAL://10.0.0.2:9092", "WAN://wan-2:19092"), rack="r2"),
        3: BrokerRegistration(3, "10.0.0.3", 9092, ("LOCAL://10.0.0.3:9092",)),
    }
    orders = topic_state("orders", 2)
    orders.states[1] = PartitionState(3, 0, (3,), 1)
    orders.assignment[1] = (3,)
    return FakeCluster(topics={"orders": orders}, brokers=brokers)


@pytest.mark.parametrize(
    ("listener", "brokers"),
    [
        ("LOCAL", [(1, "10.0.0.1", 9092, None), (2, "10.0.0.2", 9092, "r2"), (3, "10.0.0.3", 9092, None)]),
        ("WAN", [(1, "wan-1", 19092, None), (2, "wan-2", 19092, "r2")]),
    ],
)
def test_metadata_lists_the_brokers_endpoints_on_the_clients_listener(
    listener: str, brokers: list[tuple[int, str, int, str | None]]
) -> None:
    services = metadata_services(two_listener_cluster())
    result = run(handle_metadata, services, request(ApiKey.METADATA, 8, {"topics": None}, listener=listener))
    assert [(b["node_id"], b["host"], b["port"], b["rack"]) for b in result["brokers"]] == brokers


@pytest.mark.parametrize(("version", "error"), [(8, ErrorCode.LISTENER_NOT_FOUND), (5, ErrorCode.LEADER_NOT_AVAILABLE)])
def test_metadata_gives_no_leader_where_the_leader_lacks_the_clients_listener(version: int, error: int) -> None:
    services = metadata_services(two_listener_cluster())
    body = {"topics": [{"name": "orders"}], "allow_auto_topic_creation": False}
    wan = run(handle_metadata, services, request(ApiKey.METADATA, version, body, listener="WAN"))
    partitions = wan["topics"][0]["partitions"]
    assert [(p["error_code"], p["leader_id"]) for p in partitions] == [(0, 1), (error, -1)]
    assert partitions[1]["replica_nodes"] == [3] and partitions[1]["offline_replicas"] == []
    local = run(handle_metadata, services, request(ApiKey.METADATA, version, body, listener="LOCAL"))
    assert [(p["error_code"], p["leader_id"]) for p in local["topics"][0]["partitions"]] == [(0, 1), (0, 3)]


def find_coordinator(coordinator: int, listener: str) -> dict[str, Any]:
    """FindCoordinator from a client on ``listener`` when broker ``coordinator`` leads __consumer_offsets."""
    cluster = two_listener_cluster()
    cluster.topics[OFFSETS_TOPIC] = topic_state(OFFSETS_TOPIC, 1, leader=coordinator)
    body = {"key": "g", "key_type": 0}
    result: dict[str, Any] = run(
        handle_find_coordinator, group_services(cluster), request(ApiKey.FIND_COORDINATOR, 2, body, listener=listener)
    )
    return result


@pytest.mark.parametrize(("listener", "address"), [("WAN", ("wan-2", 19092)), ("LOCAL", ("10.0.0.2", 9092))])
def test_find_coordinator_answers_on_the_clients_listener(listener: str, address: tuple[str, int]) -> None:
    result = find_coordinator(2, listener)
    assert (result["error_code"], result["node_id"], (result["host"], result["port"])) == (0, 2, address)


def test_find_coordinator_is_not_available_when_the_coordinator_lacks_the_listener() -> None:
    result = find_coordinator(3, "WAN")
    assert (result["error_code"], result["node_id"]) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
    assert result["error_message"] == "the coordinator (broker 3) has no listener WAN"
