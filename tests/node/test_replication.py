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

from chaos.nemesis import Kill, Pause
from node.protocol import ApiKey, ErrorCode
from tests.node.harness import NodeProcess, wait_for
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
        consumer.list_topics(topic, timeout=10)  # metadata first, else UNKNOWN_PARTITION under load
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
    # The stopping node had the controller move its leadership before it exited.
    assert "controlled shutdown: leaderships moved away" in leader.log_path.read_text()

    def moved() -> bool:
        states = [partition_states(n, "cs")[0] for n in others]
        return (
            {s["leader"] for s in states} <= {n.broker_id for n in others}
            and all(s["leader_epoch"] > epoch for s in states)
            and all(leader.broker_id not in s["isr"] for s in states)
        )

    wait_for("the survivors to agree on the new leader", moved, timeout=5)
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
    outage = Kill([preferred])
    outage.start()
    others = [n for n in nodes if n is not preferred]
    wait_for("another leader", lambda: partition_states(others[0], "pref")[0]["leader"] not in (preferred_id, -1))
    produce(bootstrap(others), "pref", [b"while away"])
    outage.heal()
    wait_for(
        "the preferred replica to lead again",
        lambda: all(partition_states(n, "pref")[0]["leader"] == preferred_id for n in nodes),
        timeout=60,
    )
    assert produce(bootstrap(nodes), "pref", [b"back"])[0][1] == 1


def test_a_lagging_follower_leaves_the_isr_and_rejoins_when_it_catches_up(site: Site) -> None:
    # Node 3 keeps its ZooKeeper session through the pause, so only the leader's lag check can drop it.
    nodes = site(3, replica_lag_time_max_ms="2000", per_node={3: {"zookeeper.session.timeout.ms": "30000"}})
    create_topic(nodes, "lag", partitions=1, rf=3, **{"min.insync.replicas": "2"})
    leader = leader_of(nodes, "lag")
    if leader.broker_id == 3:  # make sure the paused node is a follower
        leader.stop()
        leader.start()
        leader = leader_of(nodes, "lag")
    follower = nodes[2]
    with Pause([follower]):
        produce(bootstrap([n for n in nodes if n is not follower]), "lag", [b"a", b"b"])
        wait_for("the leader to drop the paused follower", lambda: 3 not in partition_states(leader, "lag")[0]["isr"])
        # acks=all still succeeds with the two remaining in-sync replicas.
        assert produce(leader.bootstrap, "lag", [b"c"])[0][1] == 2
    wait_for("the follower to rejoin the ISR", lambda: 3 in partition_states(leader, "lag")[0]["isr"])
    assert partition_states(follower, "lag")[0]["log_end_offset"] == 3


def test_unclean_leader_election_only_where_the_topic_allows_it(site: Site) -> None:
    nodes = site(3)
    n1, n2, _ = nodes
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    topics = [
        NewTopic("clean", num_partitions=1, replica_assignment=[[1, 2]]),
        NewTopic(
            "unclean", num_partitions=1, replica_assignment=[[1, 2]], config={"unclean.leader.election.enable": "true"}
        ),
    ]
    for future in admin.create_topics(topics).values():
        future.result(30)
    for name in ("clean", "unclean"):
        produce(bootstrap(nodes), name, [b"replicated"])
    n2_down, n1_down = Kill([n2]), Kill([n1])
    n2_down.start()
    wait_for(
        "node 2 to leave both ISRs", lambda: all(partition_states(n1, t)[0]["isr"] == [1] for t in ("clean", "unclean"))
    )
    for name in ("clean", "unclean"):
        produce(n1.bootstrap, name, [b"only on node 1"])
    n1_down.start()
    n2_down.heal()
    # The out-of-sync node 2 may lead only the topic that allows unclean election (losing offset 1).
    wait_for("node 2 to lead the unclean topic", lambda: partition_states(n2, "unclean")[0]["leader"] == 2)
    assert partition_states(n2, "clean")[0]["leader"] == -1
    with connect(n2.bootstrap) as sock:
        meta = request(sock, ApiKey.METADATA, 8, {"topics": [{"name": "clean"}], "allow_auto_topic_creation": False})
    assert meta.topics[0].partitions[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    n1_down.heal()
    wait_for("node 1 to lead the clean topic again", lambda: partition_states(n2, "clean")[0]["leader"] == 1)
    read = consume_all(bootstrap(nodes), "clean")
    assert [v for _, _, v in read] == [b"replicated", b"only on node 1"]
    # Node 1 comes back as a follower of the unclean topic and truncates the record node 2 never had.
    wait_for("node 1 to rejoin the unclean topic's ISR", lambda: 1 in partition_states(n2, "unclean")[0]["isr"])
    assert partition_states(n1, "unclean")[0]["log_end_offset"] == 1
    assert [v for _, _, v in consume_all(bootstrap(nodes), "unclean")] == [b"replicated"]


def test_a_replica_catches_up_from_a_compacted_leader_keeping_its_holes(site: Site) -> None:
    nodes = site(3, log_cleaner_backoff_ms="200")
    config = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    admin.create_topics([NewTopic("compacted", num_partitions=1, replica_assignment=[[1, 2, 3]], config=config)])[
        "compacted"
    ].result(30)
    leader = leader_of(nodes, "compacted")
    late = next(n for n in nodes if n is not leader)
    late.stop()
    values = [f"v{i}-{'x' * 40}".encode() for i in range(400)]
    producer = Producer({"bootstrap.servers": bootstrap(nodes), "acks": "all", "linger.ms": 0})
    for i, value in enumerate(values):
        producer.produce("compacted", value, f"k{i % 10}".encode(), partition=0)
        if i % 20 == 19:
            producer.flush(10)
    assert producer.flush(10) == 0
    full = partition_states(leader, "compacted")[0]["size_bytes"]
    wait_for(
        "the leader's cleaner to compact", lambda: partition_states(leader, "compacted")[0]["size_bytes"] < full // 2
    )
    late.start()
    wait_for(
        "the late replica back in the ISR at the leader's end",
        lambda: (
            late.broker_id in partition_states(leader, "compacted")[0]["isr"]
            and partition_states(late, "compacted")[0]["log_end_offset"] == 400
        ),
        timeout=60,
    )


def scrape(node: NodeProcess) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the node's /metrics, by name and labels."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"{node.admin_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def phase(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], api: str, name: str, what: str) -> float:
    key = ("strait_request_phase_seconds_" + what, frozenset({("api", api), ("phase", name)}))
    return samples.get(key, 0.0)


def test_the_phases_of_a_replicated_write_are_in_metrics(site: Site) -> None:
    nodes = site(3)
    create_topic(nodes, "phased", partitions=1, rf=3, **{"min.insync.replicas": "2"})
    leader = leader_of(nodes, "phased")
    followers = [n for n in nodes if n is not leader]
    before = scrape(leader)
    produce(leader.bootstrap, "phased", [b"x" * 100] * 2000, acks="1", **{"enable.idempotence": False})
    after_acks1 = scrape(leader)
    produce(leader.bootstrap, "phased", [b"x" * 100] * 2000)
    after = scrape(leader)

    def grew(a: dict[Any, float], b: dict[Any, float], name: str, what: str) -> float:
        return phase(b, "Produce", name, what) - phase(a, "Produce", name, what)

    acks1 = grew(before, after_acks1, "local", "count")
    assert acks1 >= 1
    assert grew(before, after_acks1, "remote", "sum") == 0  # acks=1 waits on nobody
    assert grew(before, after_acks1, "unread", "count") == acks1  # a plain TCP listener stamps every request
    acks_all = grew(after_acks1, after, "remote", "count")
    assert acks_all >= 1 and grew(after_acks1, after, "remote", "sum") > 0  # waiting for the followers
    for what in ("local", "send", "unread"):
        assert grew(after_acks1, after, what, "count") == acks_all, what
    assert after[("strait_replica_fetch_wakeup_seconds_count", frozenset())] >= 1
    # The node process times its garbage collections (4,000 records make young ones at least).
    assert sum(after.get(("strait_gc_pause_seconds_count", frozenset({("generation", g)})), 0) for g in "012") >= 1
    for follower in followers:
        samples = scrape(follower)
        assert samples[("strait_replica_fetch_round_trip_seconds_count", frozenset())] >= 1
        assert samples[("strait_replica_fetch_turnaround_seconds_count", frozenset())] >= 1
        assert samples[("strait_replica_fetch_turnaround_seconds_sum", frozenset())] > 0
