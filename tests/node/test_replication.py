"""Replication inside a site: three real nodes, RF 3, leaders, followers, ISR and the high watermark."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from node.protocol import ApiKey, ErrorCode
from tests.node.harness import NodeProcess
from tests.node.raw import connect, produce_raw, request

pytestmark = pytest.mark.integration

Site = Callable[..., list[NodeProcess]]


def bootstrap(nodes: list[NodeProcess]) -> str:
    return ",".join(n.bootstrap for n in nodes if n.running)


def create_topic(nodes: list[NodeProcess], name: str, partitions: int = 1, rf: int = 3, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    futures = admin.create_topics([NewTopic(name, partitions, rf, config=configs)])
    futures[name].result(30)


def partition_states(node: NodeProcess, topic: str) -> dict[int, dict[str, Any]]:
    """Per partition, what ``node`` reports on its admin API (leader, isr, epoch, offsets, role)."""
    with urllib.request.urlopen(f"{node.admin_url}/v1/topics/{topic}", timeout=10) as response:
        body = json.loads(response.read())
    return {p["partition"]: p for p in body["partitions"]}


def wait_for(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (KeyError, OSError, ValueError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def leader_of(nodes: list[NodeProcess], topic: str, partition: int = 0) -> NodeProcess:
    live = [n for n in nodes if n.running]

    def find() -> NodeProcess | None:
        leaders = {partition_states(n, topic)[partition]["leader"] for n in live}
        if len(leaders) != 1:
            return None
        (leader,) = leaders
        return next((n for n in live if n.broker_id == leader), None)

    found: NodeProcess = wait_for(f"one agreed leader of {topic}-{partition}", find)
    return found


def produce(bootstrap_servers: str, topic: str, values: list[bytes], **conf: object) -> list[tuple[int, int, bytes]]:
    """Produce with acks=all and idempotence; returns (partition, offset, value) of each acknowledged record."""
    acked: list[tuple[int, int, bytes]] = []
    errors: list[str] = []
    producer = Producer(
        {"bootstrap.servers": bootstrap_servers, "acks": "all", "enable.idempotence": True, "linger.ms": 5, **conf}
    )

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            errors.append(str(err))

    for value in values:
        producer.produce(topic, value, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    return acked


def consume_all(bootstrap_servers: str, topic: str, partitions: int = 1) -> list[tuple[int, int, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "reader", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        out: list[tuple[int, int, bytes]] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + 60
        while len(done) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.partition(), msg.offset(), msg.value()))
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        assert len(done) == partitions, f"read {len(out)} records, ends {ends}"
        return out
    finally:
        consumer.close()


def test_rf3_topic_replicates_to_every_node_and_reads_back(site: Site) -> None:
    nodes = site(3)
    create_topic(nodes, "ledger", partitions=3, rf=3, **{"min.insync.replicas": "2"})
    values = [f"v{i}".encode() for i in range(3000)]
    acked = produce(bootstrap(nodes), "ledger", values)
    assert sorted(v for _, _, v in acked) == sorted(values)
    ends = {p: 0 for p in range(3)}
    for p, offset, _ in acked:
        ends[p] = max(ends[p], offset + 1)

    def replicated() -> bool:
        for n in nodes:
            states = partition_states(n, "ledger")
            for p, end in ends.items():
                s = states[p]
                if s["log_end_offset"] != end or sorted(s["isr"]) != [1, 2, 3]:
                    return False
        return True

    wait_for("every replica to hold every record", replicated)
    read = consume_all(bootstrap(nodes), "ledger", 3)
    assert sorted(read) == sorted(acked)


def test_metadata_agrees_on_every_node_and_a_follower_says_not_leader(site: Site) -> None:
    nodes = site(3)
    create_topic(nodes, "t", partitions=1, rf=3)
    leader = leader_of(nodes, "t")
    follower = next(n for n in nodes if n is not leader)
    for n in nodes:
        with connect(n.bootstrap) as sock:
            meta = request(sock, ApiKey.METADATA, 8, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False})
        (part,) = meta.topics[0].partitions
        assert part.leader_id == leader.broker_id
        assert part.leader_epoch >= 0
        assert sorted(part.isr_nodes) == [1, 2, 3]
        assert meta.controller_id in (1, 2, 3)
    assert produce_raw(follower.bootstrap, "t", 0, [b"x"]).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_offset_for_leader_epoch_answers_the_end_of_each_epoch(site: Site) -> None:
    nodes = site(3)
    create_topic(nodes, "e", partitions=1, rf=3)
    produce(bootstrap(nodes), "e", [b"a", b"b", b"c"])
    leader = leader_of(nodes, "e")
    epoch = partition_states(leader, "e")[0]["leader_epoch"]
    with connect(leader.bootstrap) as sock:
        body = request(
            sock,
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            3,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "topic": "e",
                        "partitions": [{"partition": 0, "current_leader_epoch": epoch, "leader_epoch": epoch}],
                    }
                ],
            },
        )
        (part,) = body.topics[0].partitions
        assert (part.error_code, part.leader_epoch, part.end_offset) == (0, epoch, 3)
        stale = request(
            sock,
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            3,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "topic": "e",
                        "partitions": [{"partition": 0, "current_leader_epoch": epoch + 5, "leader_epoch": 0}],
                    }
                ],
            },
        )
        assert stale.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_controlled_shutdown_moves_leadership_before_the_node_stops(site: Site) -> None:
    nodes = site(3)
    create_topic(nodes, "cs", partitions=1, rf=3)
    produce(bootstrap(nodes), "cs", [b"1", b"2"])
    leader = leader_of(nodes, "cs")
    epoch = partition_states(leader, "cs")[0]["leader_epoch"]
    assert leader.stop() == 0
    others = [n for n in nodes if n is not leader]
    # Right after the stop, the survivors already agree on a new leader with a newer epoch.
    states = [partition_states(n, "cs")[0] for n in others]
    assert {s["leader"] for s in states} <= {n.broker_id for n in others}
    assert all(s["leader_epoch"] > epoch for s in states)
    assert leader.broker_id not in states[0]["isr"]
    assert "controlled shutdown" in leader.log_path.read_text()
    acked = produce(bootstrap(others), "cs", [b"3"])
    assert acked[0][1] == 2


def test_acks_all_fails_with_not_enough_replicas_when_the_isr_is_too_small(site: Site) -> None:
    nodes = site(3)
    create_topic(nodes, "mi", partitions=1, rf=3, **{"min.insync.replicas": "2"})
    produce(bootstrap(nodes), "mi", [b"before"])
    leader = leader_of(nodes, "mi")
    for n in nodes:
        if n is not leader:
            n.stop()
    wait_for("the ISR to shrink to the leader", lambda: partition_states(leader, "mi")[0]["isr"] == [leader.broker_id])
    refused = produce_raw(leader.bootstrap, "mi", 0, [b"refused"], acks=-1)
    assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce_raw(leader.bootstrap, "mi", 0, [b"acks=1 is fine"], acks=1).error_code == ErrorCode.NONE


def test_preferred_leader_election_moves_leadership_back_after_a_restart(site: Site) -> None:
    nodes = site(3, leader_imbalance_check_interval_seconds="1")
    create_topic(nodes, "pref", partitions=1, rf=3)
    preferred_id = partition_states(nodes[0], "pref")[0]["replicas"][0]
    preferred = next(n for n in nodes if n.broker_id == preferred_id)
    assert leader_of(nodes, "pref") is preferred
    preferred.kill()
    others = [n for n in nodes if n is not preferred]
    wait_for("another leader", lambda: partition_states(others[0], "pref")[0]["leader"] not in (preferred_id, -1))
    produce(bootstrap(others), "pref", [b"while away"])
    preferred.start()
    wait_for(
        "the preferred replica to lead again",
        lambda: all(partition_states(n, "pref")[0]["leader"] == preferred_id for n in nodes),
        timeout=60,
    )
    assert produce(bootstrap(nodes), "pref", [b"back"])[0][1] == 1
