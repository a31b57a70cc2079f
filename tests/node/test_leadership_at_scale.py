"""Moving the leaderships of a site with hundreds of partitions (issue 15's lead).

Three real nodes and about 350 partitions, all RF 3: each node leads about a third of them and
follows the rest, so a node that stops or dies takes a hundred-odd leaderships and every ISR
with it. An idempotent ``acks=all`` producer (confluent-kafka, ``chaos.workload``) keeps writing
to a ledger topic whose leaders move with the node; afterwards every acknowledged write must be
read back once, at its offset (``chaos.ledger.check``).

- Stopping: the site stops the way ``strait up`` stops it (highest broker id first, SIGTERM,
  controlled shutdown). Each node must exit on its own, well inside ``strait up``'s 30 s window.
- Dying: a node is killed (kill -9). Once ZooKeeper ends its session, the controller must have
  given all its leaderships to the others and taken it out of every ISR within a few seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from chaos.ledger import Ledger, check
from chaos.nemesis import Kill
from chaos.workload import ProducerWorkload, read_back
from node.protocol import ApiKey
from tests.node.harness import NodeProcess, wait_for
from tests.node.raw import connect, request
from tests.node.test_replication import bootstrap

pytestmark = [pytest.mark.integration, pytest.mark.slow]

Site = Callable[..., list[NodeProcess]]

LEDGER = "ledger"
LEDGER_PARTITIONS = 6
BULK_TOPICS = 115
BULK_PARTITIONS = 3  # with the ledger: 351 partitions, 1053 replicas
CREATE_BATCH = 25  # topics per CreateTopics request
#: ``strait up`` gives each node 30 s to stop (``strait._site.NODE_STOP_TIMEOUT_S``). Moving a
#: node's leaderships is one batch of ZooKeeper writes, however many partitions it has.
STOP_BOUND_S = 10.0
#: From the moment the survivors no longer list the killed node (its ZooKeeper session ended)
#: to every partition led by a survivor, with the killed node in no ISR.
FAILOVER_BOUND_S = 5.0
ACKS_PER_STEP = 200  # acknowledged writes awaited between two steps


def _create_topics(nodes: list[NodeProcess]) -> int:
    """The ledger and the bulk topics, all RF 3; returns how many partitions the site has."""
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    wanted = [NewTopic(LEDGER, LEDGER_PARTITIONS, 3)]
    wanted += [NewTopic(f"bulk-{i:03d}", BULK_PARTITIONS, 3) for i in range(BULK_TOPICS)]
    for start in range(0, len(wanted), CREATE_BATCH):
        futures = admin.create_topics(wanted[start : start + CREATE_BATCH], operation_timeout=60)
        for future in futures.values():
            future.result(90)
    expected = sum(t.num_partitions for t in wanted)

    def all_there() -> int | None:
        topics = admin.list_topics(timeout=10).topics
        found = [p for t in wanted if t.topic in topics for p in topics[t.topic].partitions.values()]
        complete = len(found) == expected and all(p.leader >= 0 and len(p.isrs) == 3 for p in found)
        return expected if complete else None

    found: int = wait_for("every partition led with a full ISR", all_there, timeout=60)
    return found


def _still_has(node: NodeProcess, gone: int) -> tuple[bool, int]:
    """What ``node`` answers in Metadata: whether it lists broker ``gone``, and how many
    partitions ``gone`` still leads or is in the ISR of."""
    with connect(node.bootstrap) as sock:
        meta = request(sock, ApiKey.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False})
    listed = any(b.node_id == gone for b in meta.brokers)
    held = sum(1 for t in meta.topics for p in t.partitions if gone == p.leader_id or gone in p.isr_nodes)
    return listed, held


def test_a_site_of_hundreds_of_partitions_stops_node_by_node_in_time_and_keeps_every_acknowledged_write(
    site: Site, tmp_path: Path
) -> None:
    nodes = site(3)
    partitions = _create_topics(nodes)
    stops: dict[int, tuple[int | None, float]] = {}
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        with ProducerWorkload(bootstrap(nodes), LEDGER, ledger, rate=300) as workload:
            workload.wait_for_acks(ACKS_PER_STEP, timeout=60)
            for node in reversed(nodes):  # as strait._site.LocalSite.stop: highest broker id first
                started = time.monotonic()
                code = node.stop()
                stops[node.broker_id] = (code, time.monotonic() - started)
                if any(n.running for n in nodes):
                    workload.wait_for_acks(workload.acked + ACKS_PER_STEP, timeout=60)
            report = f"{partitions} partitions; (exit code, seconds to stop) per node: {stops}"
            print(report)
            for node in nodes:
                node.start()
            workload.wait_for_acks(workload.acked + ACKS_PER_STEP, timeout=120)
        assert not workload.errors, workload.errors[:3]
        result = check(ledger, read_back(bootstrap(nodes), LEDGER, timeout=60))
    for node in nodes:
        code, took = stops[node.broker_id]
        assert code == 0, f"node {node.broker_id} was killed or failed: {report}"
        assert took < STOP_BOUND_S, f"node {node.broker_id} took {took:.1f} s to stop: {report}"
    assert result.ok, result.summary()
    assert result.acknowledged >= 4 * ACKS_PER_STEP


def test_a_killed_nodes_hundreds_of_partitions_fail_over_at_once_and_keep_every_acknowledged_write(
    site: Site, tmp_path: Path
) -> None:
    nodes = site(3)
    partitions = _create_topics(nodes)
    victim, survivors = nodes[2], nodes[:2]
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        with ProducerWorkload(bootstrap(nodes), LEDGER, ledger, rate=300) as workload:
            workload.wait_for_acks(ACKS_PER_STEP, timeout=60)
            outage = Kill([victim])
            outage.start()
            killed = time.monotonic()
            gone_at: dict[int, float] = {}  # per survivor: when it stopped listing the victim

            def failed_over() -> bool:
                done = True
                for node in survivors:
                    listed, held = _still_has(node, victim.broker_id)
                    if not listed:
                        gone_at.setdefault(node.broker_id, time.monotonic())
                    done = done and not listed and held == 0
                return done

            wait_for("the survivors to lead every partition without the killed node", failed_over, timeout=60)
            moved = time.monotonic()
            took = moved - max(gone_at.values())
            report = (
                f"{partitions} partitions; the survivors stopped listing node {victim.broker_id} "
                f"{max(gone_at.values()) - killed:.1f} s after the kill, and every partition had failed over "
                f"{took:.1f} s later"
            )
            print(report)
            workload.wait_for_acks(workload.acked + ACKS_PER_STEP, timeout=60)
            outage.heal()
            workload.wait_for_acks(workload.acked + ACKS_PER_STEP, timeout=120)
        assert not workload.errors, workload.errors[:3]
        result = check(ledger, read_back(bootstrap(nodes), LEDGER, timeout=60))
    assert took < FAILOVER_BOUND_S, report
    assert result.ok, result.summary()
    assert result.acknowledged >= 3 * ACKS_PER_STEP
