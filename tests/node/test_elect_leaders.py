"""ElectLeaders (KIP-460) through confluent-kafka's AdminClient against a real 3-node site:
a preferred election moves leadership back to the first replica once it is in sync again, an
unclean one gives an offline partition to a live out-of-sync replica, and each answers
ELECTION_NOT_NEEDED / UNKNOWN_TOPIC_OR_PARTITION / PREFERRED_LEADER_NOT_AVAILABLE as Kafka does."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from chaos.nemesis import Kill
from tests.node.harness import NodeProcess, wait_for
from tests.node.test_replication import Site, bootstrap, partition_states, produce

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _elect(admin: AdminClient, kind: ElectionType, partitions: list[TopicPartition] | None) -> dict[Any, Any]:
    results: dict[Any, Any] = admin.elect_leaders(kind, partitions).result(30)
    return {(tp.topic, tp.partition): (err.code() if err is not None else None) for tp, err in results.items()}


def _leader(node: NodeProcess, topic: str) -> int:
    return int(partition_states(node, topic)[0]["leader"])


def test_preferred_and_unclean_elections_on_request(site: Site) -> None:
    nodes = site(3, auto_leader_rebalance_enable="false")
    n1, n2, n3 = nodes
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    topics = [
        NewTopic("pref", num_partitions=1, replica_assignment=[[1, 2, 3]]),
        NewTopic("lost", num_partitions=1, replica_assignment=[[2, 3]]),
    ]
    for future in admin.create_topics(topics).values():
        future.result(30)
    for name in ("pref", "lost"):
        produce(bootstrap(nodes), name, [b"replicated"])
    pref, lost = TopicPartition("pref", 0), TopicPartition("lost", 0)

    assert _elect(admin, ElectionType.PREFERRED, [pref]) == {("pref", 0): KafkaError.ELECTION_NOT_NEEDED}
    assert _elect(admin, ElectionType.PREFERRED, [TopicPartition("nowhere", 0)]) == {
        ("nowhere", 0): KafkaError.UNKNOWN_TOPIC_OR_PART
    }

    # Node 1 goes away: node 2 leads "pref". Back in sync, node 1 does not lead again by itself.
    away = Kill([n1])
    away.start()
    wait_for("node 2 to lead pref", lambda: _leader(n2, "pref") == 2)
    admin = AdminClient({"bootstrap.servers": bootstrap([n2, n3])})
    assert _elect(admin, ElectionType.PREFERRED, [pref]) == {("pref", 0): KafkaError.PREFERRED_LEADER_NOT_AVAILABLE}
    away.heal()
    wait_for("node 1 back in the ISR", lambda: 1 in partition_states(n2, "pref")[0]["isr"], timeout=60)
    assert _leader(n2, "pref") == 2
    # The controller learns of the ISR change from ZooKeeper a moment after the leader wrote it;
    # until then it answers PREFERRED_LEADER_NOT_AVAILABLE, as Kafka's would.
    answers = [_elect(admin, ElectionType.PREFERRED, [pref])]
    while answers[-1] == {("pref", 0): KafkaError.PREFERRED_LEADER_NOT_AVAILABLE} and len(answers) < 50:
        time.sleep(0.2)
        answers.append(_elect(admin, ElectionType.PREFERRED, [pref]))
    assert answers[-1] == {("pref", 0): None}, answers
    wait_for("node 1 to lead pref", lambda: all(_leader(n, "pref") == 1 for n in nodes))

    # "lost": node 3 falls out of the ISR, then its leader node 2 dies: offline, as unclean
    # election is off. On request, node 3 leads it uncleanly.
    node3_down, node2_down = Kill([n3]), Kill([n2])
    node3_down.start()
    wait_for("node 3 out of lost's ISR", lambda: partition_states(n2, "lost")[0]["isr"] == [2])
    produce(n2.bootstrap, "lost", [b"only on node 2"])
    node2_down.start()
    node3_down.heal()
    wait_for("lost offline", lambda: _leader(n3, "lost") == -1 and _leader(n1, "lost") == -1)
    admin = AdminClient({"bootstrap.servers": bootstrap([n1, n3])})
    assert _elect(admin, ElectionType.PREFERRED, [lost]) == {("lost", 0): KafkaError.PREFERRED_LEADER_NOT_AVAILABLE}
    assert _elect(admin, ElectionType.UNCLEAN, [lost]) == {("lost", 0): None}
    wait_for("node 3 to lead lost", lambda: _leader(n3, "lost") == 3 and _leader(n1, "lost") == 3)
    assert partition_states(n3, "lost")[0]["isr"] == [3]
    assert _elect(admin, ElectionType.UNCLEAN, [lost]) == {("lost", 0): KafkaError.ELECTION_NOT_NEEDED}
    # Every partition: only those where an election was needed are answered (none now).
    assert _elect(admin, ElectionType.UNCLEAN, None) == {}
    node2_down.heal()
