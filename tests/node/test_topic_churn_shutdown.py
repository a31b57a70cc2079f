"""Stopping a site after a long churn of topics (issue 15's lead): every node stops in time.

Seen once: after a client test suite had created and deleted hundreds of topics on a 3-node
site, all three nodes missed their 30 s controlled-shutdown window and were killed, one of
them logging ``OffsetForLeaderEpoch error NOT_LEADER_OR_FOLLOWER; retrying`` in a loop. Here,
like such a suite, each round creates a few RF 3 topics, produces to them, commits a group's
offsets and deletes the round before, except every third round, left behind as by tests that
do not clean up. Then the site stops the way ``strait up`` stops it (highest broker id first,
SIGTERM, controlled shutdown): each stop moves leaderships to the others under new epochs, and
the followers must check their logs against the new leaders, which may not know yet that they
lead. Every node must exit on its own well inside the window, and a follower must ask a
leader that refuses again only every ``replica.fetch.backoff.ms``, not in a loop.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable
from datetime import datetime

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.node.harness import NodeProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

Site = Callable[..., list[NodeProcess]]

TOPICS = 150
PER_ROUND = 10  # topics created together; the round before is deleted as this one is used
KEEP_EVERY = 3  # ... but every third round is left behind: about 130 partitions live at the stop
PARTITIONS = 2
RECORDS = 20  # per partition
#: ``strait up`` gives each node 30 s to stop (``strait._site.NODE_STOP_TIMEOUT_S``); a healthy
#: node needs a few seconds, however many topics came and went before.
STOP_BOUND_S = 15.0
#: Retries of OffsetForLeaderEpoch a node may log in all: a few stale leaders per stop, each
#: partition asked again only once per ``replica.fetch.backoff.ms`` (the default, 1 s). A
#: fetcher that retries without backing off logs one per round trip.
MAX_RETRY_LINES = 100
MIN_RETRY_GAP_S = 0.9
#: The retry line, with and without (before the fix) the leader and epoch it was refused in.
RETRY_LINE = re.compile(
    r"^(\S+ \S+) INFO \S+: (\S+): OffsetForLeaderEpoch error \w+(?: \(leader \d+, epoch (\d+)\))?; retrying",
    re.MULTILINE,
)


def _bootstrap(nodes: list[NodeProcess]) -> str:
    return ",".join(n.bootstrap for n in nodes)


def _create(admin: AdminClient, names: list[str]) -> None:
    futures = admin.create_topics([NewTopic(name, PARTITIONS, 3) for name in names], operation_timeout=30)
    for future in futures.values():
        future.result(60)


def _delete(admin: AdminClient, names: list[str]) -> None:
    futures = admin.delete_topics(names, operation_timeout=30)
    for future in futures.values():
        future.result(60)


def _produce(bootstrap: str, names: list[str]) -> None:
    """Produce to the round's topics with a producer of its own (acks=all, idempotent), as each
    test of a suite has its own clients: one kept across rounds would auto-create deleted topics
    again when it refreshes their metadata."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    errors: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for name in names:
        for p in range(PARTITIONS):
            for i in range(RECORDS):
                producer.produce(name, f"{name}-{p}-{i}".encode(), partition=p, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


def _commit(bootstrap: str, names: list[str]) -> None:
    """Commit offsets for the round's topics, so ``__consumer_offsets`` (RF 3) holds data too."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "churn", "enable.auto.commit": False})
    try:
        offsets = [KafkaTopicPartition(name, p, RECORDS) for name in names for p in range(PARTITIONS)]
        consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()


def _retries(node: NodeProcess) -> dict[tuple[str, str], list[float]]:
    """When ``node`` logged an OffsetForLeaderEpoch retry, per (partition, leader epoch)."""
    found: dict[tuple[str, str], list[float]] = {}
    for stamp, tp, epoch in RETRY_LINE.findall(node.log_path.read_text(errors="replace")):
        at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
        found.setdefault((tp, epoch), []).append(at)
    return found


def test_a_site_stops_in_time_after_hundreds_of_topics_came_and_went(site: Site) -> None:
    nodes = site(3)
    bootstrap = _bootstrap(nodes)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"churn-{i:03d}" for i in range(TOPICS)]
    rounds = [names[i : i + PER_ROUND] for i in range(0, TOPICS, PER_ROUND)]
    for i, current in enumerate(rounds):
        _create(admin, current)
        _produce(bootstrap, current)
        _commit(bootstrap, current)
        if i and (i - 1) % KEEP_EVERY:
            _delete(admin, rounds[i - 1])

    stopped: dict[int, tuple[int | None, float]] = {}
    for node in reversed(nodes):  # as strait._site.LocalSite.stop: highest broker id first
        started = time.monotonic()
        code = node.stop()
        stopped[node.broker_id] = (code, time.monotonic() - started)
    retries = {n.broker_id: _retries(n) for n in nodes}
    counts = {broker_id: sum(map(len, found.values())) for broker_id, found in retries.items()}
    report = f"(exit code, seconds) per node {stopped}; OffsetForLeaderEpoch retries logged per node {counts}"
    for node in nodes:
        code, took = stopped[node.broker_id]
        assert code == 0, f"node {node.broker_id} was killed or failed: {report}\n{node.log_tail()}"
        assert took < STOP_BOUND_S, f"node {node.broker_id} took {took:.1f} s to stop: {report}\n{node.log_tail()}"
    assert max(counts.values()) <= MAX_RETRY_LINES, report
    for broker_id, found in retries.items():
        for (tp, epoch), times in found.items():
            gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
            assert not gaps or min(gaps) >= MIN_RETRY_GAP_S, (
                f"node {broker_id} asked about {tp} (epoch {epoch or '?'}) again after {min(gaps):.3f} s: {report}"
            )
