"""Consumer groups with real clients against a real node: balance, rebalances, durability, static members."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from chaos.nemesis import kill_9
from node.proc import spawn
from tests.node.harness import NodeProcess, wait_for

pytestmark = pytest.mark.integration

NodeFactory = Callable[..., NodeProcess]
DEADLINE_S = 60.0
SESSION_MS = 6000


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    wait_for(what, predicate, timeout, interval=0.05)


def create_topic(node: NodeProcess, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})  # keep it alive until the future resolves
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(node: NodeProcess, topic: str, n: int, start: int = 0, partitions: int = 6) -> set[bytes]:
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 2})
    values = set()
    for i in range(start, start + n):
        value = f"r{i}".encode()
        producer.produce(topic, value, partition=i % partitions)
        values.add(value)
    assert producer.flush(30) == 0
    return values


@dataclass
class Member:
    """A confluent-kafka group member polling in a thread; records what it owns and reads."""

    node: NodeProcess
    group: str
    topic: str
    name: str
    extra: dict[str, object] = field(default_factory=dict)
    assigned: set[int] = field(default_factory=set)
    seen: list[tuple[int, int, bytes]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Member:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        conf = {
            "bootstrap.servers": self.node.bootstrap,
            "group.id": self.group,
            "client.id": self.name,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 500,
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 200,
            **self.extra,
        }
        consumer = Consumer(conf)
        cooperative = conf.get("partition.assignment.strategy") == "cooperative-sticky"

        def on_assign(c: Consumer, parts: list[TopicPartition]) -> None:
            self.assigned |= {p.partition for p in parts}

        def on_revoke(c: Consumer, parts: list[TopicPartition]) -> None:
            self.assigned -= {p.partition for p in parts}

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.1)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        self.errors.append(str(msg.error()))
                    continue
                self.seen.append((msg.partition(), msg.offset(), msg.value()))
        finally:
            if not cooperative or self._stop.is_set():
                consumer.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)


@pytest.fixture
def node(node_factory: NodeFactory) -> NodeProcess:
    return node_factory(1)


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for m in started:
        m.stop()


def balanced(ms: list[Member], partitions: int) -> bool:
    owned = [p for m in ms for p in m.assigned]
    return sorted(owned) == list(range(partitions)) and all(m.assigned for m in ms)


def test_three_members_share_six_partitions_and_read_each_record_once(node: NodeProcess, members: list[Member]) -> None:
    create_topic(node, "events", 6)
    members += [Member(node, "g3", "events", f"m{i}").start() for i in range(3)]
    wait_until(lambda: balanced(members, 6), "three members to own two partitions each")
    assert sorted(len(m.assigned) for m in members) == [2, 2, 2]
    sent = produce(node, "events", 600)
    wait_until(lambda: sum(len(m.seen) for m in members) >= 600, "all records consumed")
    got = [v for m in members for _, _, v in m.seen]
    assert sorted(got) == sorted(sent)  # every record once, none twice
    for m in members:
        assert {p for p, _, _ in m.seen} <= m.assigned, f"{m.name} read a partition it does not own"
        assert not m.errors


def test_leaving_and_dead_members_hand_over_their_partitions(
    node: NodeProcess, members: list[Member], tmp_path
) -> None:  # type: ignore[no-untyped-def]
    create_topic(node, "handover", 6)
    members += [Member(node, "gh", "handover", f"m{i}").start() for i in range(2)]
    # A third member in another process, killed with SIGKILL later: no LeaveGroup, no heartbeats.
    script = tmp_path / "member.py"
    script.write_text(
        "import sys\nfrom confluent_kafka import Consumer\n"
        f"c = Consumer({{'bootstrap.servers': '{node.bootstrap}', 'group.id': 'gh', 'session.timeout.ms': {SESSION_MS},"
        " 'heartbeat.interval.ms': 500, 'auto.offset.reset': 'earliest'})\n"
        "c.subscribe(['handover'], on_assign=lambda c, p: print('assigned', len(p), flush=True))\n"
        "while True:\n    c.poll(0.1)\n"
    )
    doomed = spawn([sys.executable, str(script)], tmp_path / "member.log", name="doomed member")
    try:
        wait_until(
            lambda: sum(len(m.assigned) for m in members) == 4 and all(m.assigned for m in members),
            "the in-process members to own 4 of 6 partitions",
        )
        kill_9(doomed)
        killed_at = time.monotonic()
        wait_until(lambda: balanced(members, 6), "the dead member's partitions to move", timeout=SESSION_MS / 1000 * 3)
        assert time.monotonic() - killed_at < SESSION_MS / 1000 * 3
    finally:
        doomed.kill()
    leaver = members.pop()
    leaver.stop()  # close() sends LeaveGroup
    wait_until(lambda: sorted(members[0].assigned) == list(range(6)), "the last member to own everything", timeout=10)
    sent = produce(node, "handover", 60)
    wait_until(lambda: sent <= {v for _, _, v in members[0].seen}, "the last member to read new records")


def test_cooperative_sticky_keeps_partitions_in_place(node: NodeProcess, members: list[Member]) -> None:
    create_topic(node, "sticky", 6)
    extra = {"partition.assignment.strategy": "cooperative-sticky"}
    first = Member(node, "gc", "sticky", "m0", extra).start()
    members.append(first)
    wait_until(lambda: first.assigned == set(range(6)), "the first member to own everything")
    second = Member(node, "gc", "sticky", "m1", extra).start()
    members.append(second)
    wait_until(lambda: balanced(members, 6) and len(second.assigned) == 3, "an incremental rebalance to 3/3")
    assert first.assigned < set(range(6))  # kept a subset: only 3 partitions moved


def test_kcat_balanced_consumer(node: NodeProcess) -> None:
    create_topic(node, "kcat-group", 3)
    sent = produce(node, "kcat-group", 90, partitions=3)
    # -G: librdkafka 2.0.2's balanced consumer (FindCoordinator, Join/Sync/Heartbeat, OffsetCommit);
    # -e exits once every assigned partition is read to its end.
    args = ["kcat", "-b", node.bootstrap, "-G", "kcat-g", "-o", "beginning", "-e", "-q", "-f", "%s\\n", "kcat-group"]
    done = subprocess.run(args, capture_output=True, timeout=DEADLINE_S, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert set(done.stdout.split()) == sent
    assert len(done.stdout.split()) == len(sent)
    # The group committed its position: a second run (no -o: start at the committed offsets) reads only new records.
    more = produce(node, "kcat-group", 9, start=1000, partitions=3)
    resume = [a for a in args if a not in ("-o", "beginning")]
    again = subprocess.run(resume, capture_output=True, timeout=DEADLINE_S, check=False)
    assert again.returncode == 0, again.stderr.decode()
    assert set(again.stdout.split()) == more


def test_kafka_python_and_aiokafka_groups_commit_and_resume(
    node: NodeProcess, caplog: pytest.LogCaptureFixture
) -> None:
    from kafka import KafkaConsumer

    # Seen once under load: nothing consumed in 60 s, then LeaveGroup answered UNKNOWN_MEMBER_ID. Keep
    # kafka-python's join/sync/leave story (INFO) and the node's log for the next time it fails.
    caplog.set_level(logging.INFO, logger="kafka.coordinator")
    create_topic(node, "pyg", 2)
    sent = produce(node, "pyg", 40, partitions=2)
    consumer = KafkaConsumer(
        "pyg",
        bootstrap_servers=node.bootstrap,
        group_id="kp-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got: set[bytes] = set()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while got != sent and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=200).values():
                got |= {m.value for m in msgs}
        consumer.commit()
    finally:
        consumer.close()
    assert got == sent, f"kafka-python consumed {len(got)} of {len(sent)}; the node's log:\n{node.log_tail(60)}"

    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    more = produce(node, "pyg", 10, start=1000, partitions=2)

    async def resume() -> set[bytes]:
        c = AIOKafkaConsumer("pyg", bootstrap_servers=node.bootstrap, group_id="kp-group", auto_offset_reset="earliest")
        await c.start()
        seen: set[bytes] = set()
        try:
            committed = {p: await c.committed(ATP("pyg", p)) for p in (0, 1)}
            assert sum(committed.values()) == 40  # kafka-python's commit, read back by aiokafka
            deadline = time.monotonic() + DEADLINE_S
            while seen != more and time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=200)).values():
                    seen |= {m.value for m in msgs}
        finally:
            await c.stop()
        return seen

    assert asyncio.run(resume()) == more  # only what came after the commit


def committed(node: NodeProcess, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group})
    try:
        return {
            tp.partition: tp.offset
            for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
        }
    finally:
        c.close()


def test_committed_offsets_survive_kill_9(node: NodeProcess) -> None:
    create_topic(node, "durable-offsets", 3)
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "gd"})
    try:
        c.commit(offsets=[TopicPartition("durable-offsets", p, 10 * (p + 1)) for p in range(3)], asynchronous=False)
    finally:
        c.close()
    before = committed(node, "gd", "durable-offsets", 3)
    assert before == {0: 10, 1: 20, 2: 30}
    node.restart(hard=True)
    assert committed(node, "gd", "durable-offsets", 3) == before


def test_a_commit_for_a_topic_or_partition_the_site_lacks_is_refused(node: NodeProcess) -> None:
    create_topic(node, "two-partitions", 2)
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "g-unknown"})
    try:
        with pytest.raises(KafkaException) as refused:
            c.commit(offsets=[TopicPartition("no-such-topic", 0, 5)], asynchronous=False)
        assert refused.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        # One partition it has, one it lacks: the first is stored, the commit reports the second.
        with pytest.raises(KafkaException) as partly:
            c.commit(
                offsets=[TopicPartition("two-partitions", 1, 7), TopicPartition("two-partitions", 9, 3)],
                asynchronous=False,
            )
        assert partly.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    finally:
        c.close()
    assert committed(node, "g-unknown", "two-partitions", 2) == {0: -1001, 1: 7}


def test_static_member_restart_causes_no_rebalance(node: NodeProcess, members: list[Member]) -> None:
    create_topic(node, "static", 4)
    a = Member(node, "gs", "static", "a", {"group.instance.id": "instance-a"}).start()
    b = Member(node, "gs", "static", "b", {"group.instance.id": "instance-b"}).start()
    members += [a, b]
    wait_until(lambda: balanced(members, 4), "two static members to share 4 partitions")
    b_partitions = set(b.assigned)
    a_partitions = set(a.assigned)
    b._stop.set()
    b._thread.join(30)  # type: ignore[union-attr]
    # A static member's close() sends no LeaveGroup: restart it within the session timeout.
    b2 = Member(node, "gs", "static", "b", {"group.instance.id": "instance-b"}).start()
    members.append(b2)
    wait_until(lambda: b2.assigned == b_partitions, "the restarted static member to get its old partitions")
    assert a.assigned == a_partitions  # a kept everything: no rebalance happened


def test_reset_offsets_moves_a_stopped_group(node: NodeProcess) -> None:
    create_topic(node, "resettable", 2)
    produce(node, "resettable", 20, partitions=2)
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "gr"})
    try:
        c.commit(offsets=[TopicPartition("resettable", p, 10) for p in range(2)], asynchronous=False)
    finally:
        c.close()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "strait.cli", "groups", *args, "-b", node.bootstrap],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    dry = cli("reset-offsets", "gr", "--topic", "resettable", "--to-earliest", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert committed(node, "gr", "resettable", 2) == {0: 10, 1: 10}
    done = cli("reset-offsets", "gr", "--topic", "resettable", "--to-earliest")
    assert done.returncode == 0, done.stderr
    assert committed(node, "gr", "resettable", 2) == {0: 0, 1: 0}
    done = cli("reset-offsets", "gr", "--topic", "resettable", "--to-offset", "7")
    assert committed(node, "gr", "resettable", 2) == {0: 7, 1: 7}
    described = cli("describe", "gr")
    assert described.returncode == 0 and "resettable" in described.stdout and "lag 6" in described.stdout
    assert "gr" in cli("list").stdout.split()

    # Lag on the admin HTTP API and in /metrics: committed 7, high watermark 10 in both partitions.
    import json
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(node.admin_url + "/v1/groups/gr", timeout=10) as response:
        group = json.loads(response.read())
    assert [(o["partition"], o["committed"], o["log_end"], o["lag"]) for o in group["offsets"]] == [
        (0, 7, 10, 3),
        (1, 7, 10, 3),
    ]
    with urllib.request.urlopen(node.admin_url + "/metrics", timeout=10) as response:
        families = {f.name: f for f in text_string_to_metric_families(response.read().decode())}
    totals = {s.labels["group"]: s.value for s in families["strait_group_lag_total"].samples}
    assert totals["gr"] == 6.0
