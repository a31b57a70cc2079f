"""Faults inside one site: no acknowledged record is lost, none is duplicated, replicas converge.

Three real nodes, a topic with RF 3 and ``min.insync.replicas=2``, and a confluent-kafka
idempotent producer (acks=all) writing a ledger of every acknowledged (value, partition,
offset) while a fault is injected and healed. After each fault: every acknowledged record is
read back at its acknowledged offset and no value appears twice (``chaos.ledger.check``); every
replica is back in the ISR and holds byte-for-byte the same batches as the leader (a restarted
or demoted replica truncated exactly its divergent tail); a consumer group kept its committed
offsets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from chaos.ledger import Ledger, check
from chaos.nemesis import Kill, Partition, Pause
from chaos.proxy import ProxyHandle, run_in_thread
from chaos.workload import ProducerWorkload, read_back
from node.protocol import ApiKey, ErrorCode, decode_response, encode_request, request_header
from tests.node.harness import NodeProcess, stored_batches
from tests.node.raw import connect, produce_raw, read_frame, request
from tests.node.test_replication import bootstrap, create_topic, leader_of, partition_states, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.slow]

TOPIC = "ledger"
PARTITIONS = 3
SESSION_MS = 6000
GROUP = "audit"
Site = Callable[..., list[NodeProcess]]


@pytest.fixture
def proxy() -> Iterator[ProxyHandle]:
    with run_in_thread() as handle:
        yield handle


def commit_group_offsets(nodes: list[NodeProcess]) -> dict[int, int]:
    """Commit offsets for GROUP (synchronously, through the coordinator) and return them."""
    wanted = {p: 5 + 7 * p for p in range(PARTITIONS)}
    consumer = Consumer({"bootstrap.servers": bootstrap(nodes), "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in wanted.items()], asynchronous=False)
    finally:
        consumer.close()
    return wanted


def committed_offsets(nodes: list[NodeProcess]) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap(nodes), "group.id": GROUP, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def assert_replicas_converged(nodes: list[NodeProcess]) -> None:
    """Every replica in the ISR, at the same log end, with identical batches (no divergent tail left)."""

    def converged() -> bool:
        for n in nodes:
            states = partition_states(n, TOPIC)
            ends = {p: s["log_end_offset"] for p, s in states.items()}
            for p in range(PARTITIONS):
                if sorted(states[p]["isr"]) != [1, 2, 3] or states[p]["high_watermark"] != ends[p]:
                    return False
        ends_by_node = [{p: s["log_end_offset"] for p, s in partition_states(n, TOPIC).items()} for n in nodes]
        return all(e == ends_by_node[0] for e in ends_by_node)

    wait_for("all replicas back in the ISR at the same log end", converged, timeout=60)
    for p in range(PARTITIONS):
        batches = [stored_batches(n, TOPIC, p) for n in nodes]
        assert batches[0], f"{TOPIC}-{p} has no batches"
        for n, b in zip(nodes[1:], batches[1:], strict=True):
            assert b == batches[0], f"{TOPIC}-{p}: node {n.broker_id}'s batches differ from node {nodes[0].broker_id}'s"


def run_with_fault(site_nodes: list[NodeProcess], tmp_path: Path, fault: Callable[[list[NodeProcess]], None]) -> None:
    nodes = site_nodes
    create_topic(nodes, TOPIC, partitions=PARTITIONS, rf=3, **{"min.insync.replicas": "2"})
    committed = commit_group_offsets(nodes)
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        with ProducerWorkload(bootstrap(nodes), TOPIC, ledger, rate=400) as workload:
            workload.wait_for_acks(300, timeout=60)
            fault(nodes)
            for n in nodes:
                if not n.running:
                    n.start()
            workload.wait_for_acks(workload.acked + 300, timeout=120)
        assert not workload.errors, workload.errors[:3]
        result = check(ledger, read_back(bootstrap(nodes), TOPIC, timeout=60))
    assert result.ok, result.summary()
    assert result.acknowledged >= 600
    assert_replicas_converged(nodes)
    assert committed_offsets(nodes) == committed


def controller_id(nodes: list[NodeProcess]) -> int:
    def ask() -> int | None:
        for n in nodes:
            if n.running:
                with connect(n.bootstrap) as sock:
                    meta = request(sock, ApiKey.METADATA, 8, {"topics": [], "allow_auto_topic_creation": False})
                if meta.controller_id >= 0:
                    return int(meta.controller_id)
        return None

    found: int = wait_for("a controller", ask)
    return found


def test_kill_9_the_leader_mid_stream_and_restart_it(site: Site, tmp_path: Path) -> None:
    def fault(nodes: list[NodeProcess]) -> None:
        outage = Kill([leader_of(nodes, TOPIC)])
        outage.start()
        # The outage's length is the fault itself, not a wait for something: 3 s, well inside
        # the 6 s ZooKeeper session, so the restarted node meets its own stale registration.
        time.sleep(3)
        outage.heal()

    run_with_fault(site(3), tmp_path, fault)


def test_pause_the_leader_past_its_session_timeout(site: Site, tmp_path: Path) -> None:
    def fault(nodes: list[NodeProcess]) -> None:
        victim = leader_of(nodes, TOPIC)
        others = [n for n in nodes if n is not victim]
        with Pause([victim]):
            wait_for(
                "a new leader while the old one is paused",
                lambda: partition_states(others[0], TOPIC)[0]["leader"] not in (victim.broker_id, -1),
                timeout=SESSION_MS / 1000 * 4,
            )
            elected_at = partition_states(others[0], TOPIC)[0]["high_watermark"]
            wait_for(
                "writes acknowledged under the new leader while the old one is still paused",
                lambda: partition_states(others[0], TOPIC)[0]["high_watermark"] > elected_at,
                timeout=60,
            )

    run_with_fault(site(3), tmp_path, fault)


def test_expire_a_nodes_zookeeper_session(proxy: ProxyHandle, site: Site, tmp_path: Path, zk_connect: str) -> None:
    hosts, _, chroot = zk_connect.partition("/")
    link = proxy.add_proxy("zk-node1", hosts)
    # Node 1 reaches ZooKeeper through the proxy, the others directly.
    nodes = site(3, per_node={1: {"zookeeper.connect": f"{link.listen}/{chroot}"}})
    victim = nodes[0]

    def fault(nodes: list[NodeProcess]) -> None:
        with Partition(proxy, ["zk-node1"]):
            # The session expires at the server; the others see node 1 leave.
            wait_for(
                "node 1 to leave the cluster",
                lambda: all(
                    victim.broker_id not in partition_states(n, TOPIC)[p]["isr"]
                    for n in nodes[1:]
                    for p in range(PARTITIONS)
                ),
                timeout=SESSION_MS / 1000 * 4,
            )
        # Node 1 reconnects, finds its session expired, registers again and catches up.
        assert victim.running

    run_with_fault(nodes, tmp_path, fault)
    assert "session" in victim.log_path.read_text().lower()


def test_kill_two_of_three_nodes(site: Site, tmp_path: Path) -> None:
    def fault(nodes: list[NodeProcess]) -> None:
        survivor = nodes[0]
        Kill(nodes[1:]).start()  # run_with_fault starts them again

        def alone() -> bool:
            states = partition_states(survivor, TOPIC)
            return all(states[p]["leader"] == survivor.broker_id and states[p]["isr"] == [1] for p in range(PARTITIONS))

        wait_for("the survivor to lead every partition alone", alone, timeout=SESSION_MS / 1000 * 4)
        refused = produce_raw(survivor.bootstrap, TOPIC, 0, [b"must not be acknowledged"])
        assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        # The window is what is tested, not a wait for something: the workload keeps trying
        # meanwhile, and nothing it sends may be acknowledged.
        time.sleep(2)

    run_with_fault(site(3), tmp_path, fault)


def test_kill_the_controller(site: Site, tmp_path: Path) -> None:
    def fault(nodes: list[NodeProcess]) -> None:
        first = controller_id(nodes)
        outage = Kill([next(n for n in nodes if n.broker_id == first)])
        outage.start()
        wait_for("a new controller", lambda: controller_id(nodes) != first, timeout=SESSION_MS / 1000 * 4)
        outage.heal()

    run_with_fault(site(3), tmp_path, fault)


def test_a_leader_paused_past_its_session_answers_no_stale_offsets_when_it_resumes(site: Site) -> None:
    """A request that reached the old leader while it was stopped is answered after it resumes,
    before its ZooKeeper client has even noticed the session is gone: it must not be answered
    from the leadership it lost (the high watermark it had, far behind the new leader's)."""
    nodes = site(3)
    create_topic(nodes, TOPIC, partitions=1, rf=3, **{"min.insync.replicas": "2"})
    victim = leader_of(nodes, TOPIC)
    others = [n for n in nodes if n is not victim]
    for i in range(5):
        assert produce_raw(victim.bootstrap, TOPIC, 0, [f"before-{i}".encode()]).error_code == 0
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}
        ],
    }
    with connect(victim.bootstrap) as sock:
        with Pause([victim]):
            wait_for(
                "a new leader while the old one is paused",
                lambda: partition_states(others[0], TOPIC)[0]["leader"] not in (victim.broker_id, -1),
                timeout=SESSION_MS / 1000 * 4,
            )
            new_leader = next(n for n in others if n.broker_id == partition_states(others[0], TOPIC)[0]["leader"])
            # The controller's choice reaches the new leader itself a moment later (seen on a loaded machine:
            # "broker 3 is not the leader of ledger-0 (leader 2, epoch 0)").
            wait_for(
                "the new leader to know it leads",
                lambda: partition_states(new_leader, TOPIC)[0]["leader"] == new_leader.broker_id,
                timeout=SESSION_MS / 1000 * 4,
            )
            for i in range(20):
                assert produce_raw(new_leader.bootstrap, TOPIC, 0, [f"after-{i}".encode()]).error_code == 0
            end = partition_states(new_leader, TOPIC)[0]["high_watermark"]
            assert end == 25
            # Sent now, read by the old leader the moment it runs again.
            sock.sendall(encode_request(request_header(ApiKey.LIST_OFFSETS, 4, 7, "raw-test"), body))
        frame = read_frame(sock)
    assert frame is not None, "the old leader closed the connection"
    _, answer = decode_response(ApiKey.LIST_OFFSETS, 4, frame)
    (partition,) = answer.topics[0].partitions
    assert (partition.error_code, partition.offset) in {
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1),
        (0, end),
    }, f"the old leader answered error {partition.error_code}, offset {partition.offset} (the end is {end})"
