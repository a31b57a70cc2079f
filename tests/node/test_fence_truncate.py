"""Fencing and truncation to a cut on a real three-node site, with real clients.

A fenced topic (``strait.fenced``) refuses every Produce with POLICY_VIOLATION and the fence's
text, and keeps everything else working. TruncatePartitions (through
``node.client.AdminClient.truncate_partitions``) cuts a fenced or mirror topic's partitions
back to an offset below the high watermark on every replica, with a leader epoch bump; a
replica that was down does it when it returns. See docs/replication.md ("Fencing and
truncation").
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import trio
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaPartition

from node.client import AdminClient, NodeConnection, SiteClient, TruncationResult, mirror_append
from node.protocol import ApiKey, ErrorCode
from storage.records import build_batch
from tests.node.harness import NodeProcess, stored_batches, wait_for
from tests.node.raw import connect, produce_raw, request
from tests.node.test_replication import bootstrap, create_topic, leader_of, partition_states

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(120)]

Site = Callable[..., list[NodeProcess]]
FENCED = "strait.fenced"
LINK_KEY = "strait.mirror.link"
FENCE = "site east was failed over to west (link east-to-west); produce to west: 127.0.0.1:19092"
BATCH = 10  # records per produced batch: the batch boundaries are the multiples of 10


# -- helpers --------------------------------------------------------------------------------------------


def alter(servers: str, topic: str, set_: dict[str, str] | None = None, delete: list[str] | None = None) -> None:
    """IncrementalAlterConfigs through node.client (what the mirror and failover use)."""

    async def run() -> None:
        async with await AdminClient.connect(servers) as admin:
            await admin.alter_topic_configs(topic, set_ or {}, delete or [])

    trio.run(run)


def truncate(
    servers: str, cuts: dict[tuple[str, int], int], *, timeout: float = 30.0, site: bool = False
) -> dict[tuple[str, int], TruncationResult]:
    async def run() -> dict[tuple[str, int], TruncationResult]:
        if site:
            client = SiteClient("east", servers, client_id="test-truncate", timeout=5.0)
            try:
                return await AdminClient(client).truncate_partitions(cuts, timeout=timeout)
            finally:
                await client.aclose()
        async with await AdminClient.connect(servers) as admin:
            return await admin.truncate_partitions(cuts, timeout=timeout)

    return trio.run(run)


def described(node: NodeProcess, topic: str, key: str) -> str | None:
    """``key`` of ``topic`` as this node's own view answers DescribeConfigs (None: not set)."""
    with connect(node.bootstrap) as sock:
        body = {
            "resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": [key]}],
            "include_synonyms": False,
        }
        response = request(sock, ApiKey.DESCRIBE_CONFIGS, 1, body)
    (result,) = response.results
    value = next((c.value for c in result.configs if c.name == key), None)
    return value or None


def produce_batches(leader: NodeProcess, topic: str, partition: int, batches: int, tag: str = "v") -> int:
    """``batches`` acks=all batches of BATCH records straight to the leader; returns the log end after them."""
    end = -1
    for b in range(batches):
        values = [f"{tag}{b}-{i}".encode() for i in range(BATCH)]
        answer = produce_raw(leader.bootstrap, topic, partition, values)
        assert answer.error_code == 0, answer.error_message
        end = answer.base_offset + BATCH
    return end


def read_all(servers: str, topic: str, partition: int = 0, group: str | None = None) -> list[tuple[int, bytes]]:
    """(offset, value) of every record a confluent-kafka consumer reads up to the high watermark."""
    conf: dict[str, Any] = {"bootstrap.servers": servers, "group.id": group or "reader", "enable.auto.commit": False}
    consumer = Consumer(conf)
    try:
        tp = KafkaPartition(topic, partition, OFFSET_BEGINNING)
        consumer.assign([tp])
        low, high = consumer.get_watermark_offsets(KafkaPartition(topic, partition), timeout=10)
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while high > low and (not out or out[-1][0] + 1 < high) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.offset(), msg.value()))
        if group is not None and out:
            consumer.commit(offsets=[KafkaPartition(topic, partition, out[-1][0] + 1)], asynchronous=False)
        return out
    finally:
        consumer.close()


def confluent_produce(servers: str, topic: str, value: bytes) -> tuple[KafkaError | None, int]:
    """One confluent-kafka (librdkafka) produce, acks=all: (error or None, offset)."""
    outcome: list[tuple[KafkaError | None, int]] = []
    producer = Producer({"bootstrap.servers": servers, "acks": "all", "message.timeout.ms": 15000})

    def report(err: Any, msg: Any) -> None:
        outcome.append((err, msg.offset() if err is None else -1))

    producer.produce(topic, value, partition=0, on_delivery=report)
    assert producer.flush(30) == 0
    (result,) = outcome
    return result


def replica_ends(nodes: list[NodeProcess], topic: str, partition: int = 0) -> dict[int, tuple[int, int, int]]:
    """Per running node: (log end, high watermark, leader epoch) of its replica, from its admin API."""
    out = {}
    for n in nodes:
        if n.running:
            s = partition_states(n, topic)[partition]
            out[n.broker_id] = (s["log_end_offset"], s["high_watermark"], s["leader_epoch"])
    return out


def at_cut_everywhere(nodes: list[NodeProcess], topic: str, cut: int, epoch: int, partition: int = 0) -> bool:
    """Every replica at the cut: log end, high watermark and epoch, and all live ones in the ISR.

    The truncation verb returns once the *leader* is at the cut with every live replica in its ISR;
    a follower learns its high watermark from its next fetch, so callers wait for this briefly."""
    ends = replica_ends(nodes, topic, partition)
    states = [partition_states(n, topic)[partition] for n in nodes if n.running]
    live = sorted(n.broker_id for n in nodes if n.running)
    return all(end == cut and hw == cut and e == epoch for end, hw, e in ends.values()) and all(
        sorted(s["isr"]) == live for s in states
    )


# -- fencing ---------------------------------------------------------------------------------------------


def test_a_fenced_topic_refuses_produce_with_its_text_and_keeps_everything_else(site: Site) -> None:
    nodes = site(3)
    servers = bootstrap(nodes)
    create_topic(nodes, "orders", rf=3, **{"min.insync.replicas": "2"})
    leader = leader_of(nodes, "orders")
    end = produce_batches(leader, "orders", 0, 3)
    alter(servers, "orders", {FENCED: FENCE})
    wait_for("every node to see the fence", lambda: all(described(n, "orders", FENCED) == FENCE for n in nodes))

    # librdkafka: non-retriable, and the text is the broker's (Produce v8 error_message).
    err, _ = confluent_produce(servers, "orders", b"refused")
    assert err is not None and err.code() == KafkaError.POLICY_VIOLATION and not err.retriable()
    print(f"confluent-kafka delivery error: {err.str()!r}")
    # The raw answer carries the fence's text; older Produce versions just the code.
    raw = produce_raw(leader.bootstrap, "orders", 0, [b"raw"])
    assert (raw.error_code, raw.error_message) == (ErrorCode.POLICY_VIOLATION, f"topic 'orders' is fenced: {FENCE}")
    old = produce_raw(leader.bootstrap, "orders", 0, [b"old"], version=3)
    assert old.error_code == ErrorCode.POLICY_VIOLATION
    kcat = shutil.which("kcat")
    if kcat is not None:
        done = subprocess.run(
            [kcat, "-P", "-b", servers, "-t", "orders", "-p", "0", "-X", "acks=all"],
            input=b"by kcat\n",
            capture_output=True,
            timeout=60,
            check=False,
        )
        print(f"kcat: exit {done.returncode}, stderr {done.stderr.decode().strip()!r}")
        assert done.returncode != 0 and "Policy violation" in done.stderr.decode()
    from kafka import KafkaProducer
    from kafka.errors import PolicyViolationError

    kp = KafkaProducer(bootstrap_servers=servers, acks="all", retries=0)
    try:
        with pytest.raises(PolicyViolationError) as refused:
            kp.send("orders", b"by kafka-python", partition=0).get(timeout=30)
        print(f"kafka-python: {refused.value!r}")
    finally:
        kp.close(timeout=10)

    # Nothing was appended; reads, group commits and DeleteRecords still work.
    assert {e for e, _, _ in replica_ends(nodes, "orders").values()} == {end}
    rows = read_all(servers, "orders", group="g-fenced")
    assert [o for o, _ in rows] == list(range(end))
    with connect(leader.bootstrap) as sock:
        body = {
            "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "offset": 10}]}],
            "timeout_ms": 5000,
        }
        deleted = request(sock, ApiKey.DELETE_RECORDS, 1, body)
    assert deleted.topics[0].partitions[0].error_code == 0
    assert deleted.topics[0].partitions[0].low_watermark == 10

    # Removing the key un-fences; the log continues where it ended.
    alter(servers, "orders", delete=[FENCED])
    wait_for("every node to drop the fence", lambda: all(described(n, "orders", FENCED) is None for n in nodes))
    assert confluent_produce(servers, "orders", b"after") == (None, end)


def test_how_fast_a_fence_takes_effect_on_every_node(site: Site) -> None:
    """From IncrementalAlterConfigs answered to each node's view (DescribeConfigs from that node) and
    to the leader refusing Produce; printed (run with -s), bounded generously here."""
    nodes = site(3)
    servers = bootstrap(nodes)
    create_topic(nodes, "orders", rf=3)
    leader = leader_of(nodes, "orders")
    everywhere: list[float] = []
    refused: list[float] = []
    for round_ in range(5):
        alter(servers, "orders", {FENCED: f"{FENCE} #{round_}"})
        t0 = time.monotonic()
        first_refusal = None
        seen: dict[int, float] = {}
        while len(seen) < len(nodes) or first_refusal is None:
            assert time.monotonic() - t0 < 10, f"fence not everywhere after 10 s: {seen}"
            for n in nodes:
                if n.broker_id not in seen and described(n, "orders", FENCED) is not None:
                    seen[n.broker_id] = time.monotonic() - t0
            if first_refusal is None:
                answer = produce_raw(leader.bootstrap, "orders", 0, [b"probe"])
                if answer.error_code == ErrorCode.POLICY_VIOLATION:
                    first_refusal = time.monotonic() - t0
        everywhere.append(max(seen.values()))
        refused.append(first_refusal)
        alter(servers, "orders", delete=[FENCED])
        wait_for("the fence to be gone", lambda: all(described(n, "orders", FENCED) is None for n in nodes))
    print(
        f"fence visible on every node after the alter answered: median {statistics.median(everywhere) * 1000:.0f} ms, "
        f"max {max(everywhere) * 1000:.0f} ms; leader refusing produce: median "
        f"{statistics.median(refused) * 1000:.0f} ms, max {max(refused) * 1000:.0f} ms"
    )
    assert max(everywhere) < 2.0 and max(refused) < 2.0


def test_produce_in_flight_during_a_fence_is_either_acknowledged_and_kept_or_refused(site: Site) -> None:
    """A producer keeps writing while the fence is set: every acknowledged record is in the log,
    nothing refused is, and nothing is appended once the leader saw the fence."""
    nodes = site(3)
    servers = bootstrap(nodes)
    create_topic(nodes, "orders", rf=3, **{"min.insync.replicas": "2"})
    acked: list[tuple[int, bytes]] = []
    errors: list[int] = []
    stop = threading.Event()

    def write() -> None:
        producer = Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 2, "enable.idempotence": True})

        def report(err: Any, msg: Any) -> None:
            if err is None:
                acked.append((msg.offset(), msg.value()))
            else:
                errors.append(err.code())

        i = 0
        while not stop.is_set():
            producer.produce("orders", f"w{i}".encode(), partition=0, on_delivery=report)
            producer.poll(0.002)
            i += 1
        producer.flush(30)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        wait_for("some acknowledged records", lambda: len(acked) > 200)
        alter(servers, "orders", {FENCED: FENCE})
        wait_for("produce to be refused", lambda: errors)
    finally:
        stop.set()
        writer.join(60)
    assert set(errors) == {KafkaError.POLICY_VIOLATION}
    rows = read_all(servers, "orders")
    assert sorted(acked) == rows  # exactly the acknowledged records, at their offsets
    ends = replica_ends(nodes, "orders")
    wait_for(
        "every replica to hold them", lambda: {e for e, _, _ in replica_ends(nodes, "orders").values()} == {len(rows)}
    )
    print(f"{len(acked)} acknowledged before the fence, {len(errors)} refused after; replicas {ends}")


def test_the_mirror_link_key_can_be_set_on_a_written_topic_and_removed(site: Site) -> None:
    """Failback turns a writable topic back into a mirror; promote removes the key again."""
    nodes = site(3)
    servers = bootstrap(nodes)
    create_topic(nodes, "orders", rf=3)
    leader = leader_of(nodes, "orders")
    end = produce_batches(leader, "orders", 0, 2)
    alter(servers, "orders", {LINK_KEY: "west-to-east"})
    wait_for("every node to see the link", lambda: all(described(n, "orders", LINK_KEY) for n in nodes))
    err, _ = confluent_produce(servers, "orders", b"refused")
    assert err is not None and err.code() == KafkaError.POLICY_VIOLATION

    async def append(expected: int) -> int:
        async with await NodeConnection.open(leader.bootstrap, client_id="test-mirror") as conn:
            batch = build_batch([(int(time.time() * 1000), None, b"mirrored")], base_offset=expected)
            result = await mirror_append(conn, "west-to-east", "orders", 0, expected, batch)
            assert result.error_code == 0, result.error_message
            return result.log_end_offset

    assert trio.run(append, end) == end + 1
    alter(servers, "orders", delete=[LINK_KEY])
    wait_for("every node to drop the link", lambda: all(described(n, "orders", LINK_KEY) is None for n in nodes))
    assert confluent_produce(servers, "orders", b"writable") == (None, end + 1)


# -- truncation ------------------------------------------------------------------------------------------


def test_truncation_to_a_cut_below_the_high_watermark_on_every_replica(site: Site) -> None:
    nodes = site(3)
    servers = bootstrap(nodes)
    create_topic(nodes, "orders", partitions=2, rf=3, **{"min.insync.replicas": "2"})
    leaders = {p: leader_of(nodes, "orders", p) for p in (0, 1)}
    ends = {p: produce_batches(leaders[p], "orders", p, 10, tag=f"p{p}-") for p in (0, 1)}
    assert ends == {0: 100, 1: 100}
    wait_for("the high watermark at 100 everywhere", lambda: all(
        (e, hw) == (100, 100) for p in (0, 1) for e, hw, _ in replica_ends(nodes, "orders", p).values()
    ))  # fmt: skip
    before = {p: partition_states(leaders[p], "orders")[p]["leader_epoch"] for p in (0, 1)}
    rows_before = {p: read_all(servers, "orders", p) for p in (0, 1)}

    # Not fenced yet: refused, nothing changes.
    refused = truncate(servers, {("orders", 0): 40})
    assert refused["orders", 0].error_code == ErrorCode.POLICY_VIOLATION
    assert "fence topic 'orders' first" in (refused["orders", 0].error_message or "")
    assert partition_states(leaders[0], "orders")[0]["leader_epoch"] == before[0]

    alter(servers, "orders", {FENCED: FENCE})
    started = time.monotonic()
    results = truncate(servers, {("orders", 0): 40, ("orders", 1): 70}, site=True)
    took = time.monotonic() - started
    for p, cut in ((0, 40), (1, 70)):
        r = results["orders", p]
        assert (r.error_code, r.truncated, r.leader_epoch, r.log_end_before) == (0, True, before[p] + 1, 100), r
        # Every replica, from its admin API and from its files: log end and high watermark at the cut.
        wait_for(
            "every replica at the cut",
            lambda cut=cut, p=p: at_cut_everywhere(nodes, "orders", cut, before[p] + 1, p),  # type: ignore[misc]
            10,
        )
        for n in nodes:
            batches = stored_batches(n, "orders", p)
            assert batches and batches[-1][1] == cut - 1, (n.name, batches[-3:])
        # Consumers read exactly [0, cut), the records they read before.
        assert read_all(servers, "orders", p) == rows_before[p][:cut]
    print(f"truncate_partitions of 2 partitions, from the call to every replica at the cut: {took * 1000:.0f} ms")

    # The same cut again: success, no second epoch bump.
    again = truncate(servers, {("orders", 0): 40})["orders", 0]
    assert (again.error_code, again.truncated, again.leader_epoch) == (0, False, before[0] + 1)
    assert partition_states(leaders[0], "orders")[0]["leader_epoch"] == before[0] + 1

    # Un-fenced, the log continues at the cut with no gap, in the new epoch, on every replica.
    alter(servers, "orders", delete=[FENCED])
    wait_for("the fence to be gone", lambda: all(described(n, "orders", FENCED) is None for n in nodes))
    assert confluent_produce(servers, "orders", b"after the cut") == (None, 40)
    wait_for(
        "the new record on every replica", lambda: {e for e, _, _ in replica_ends(nodes, "orders").values()} == {41}
    )
    assert [o for o, _ in read_all(servers, "orders", 0)] == list(range(41))
    for n in nodes:
        assert stored_batches(n, "orders", 0)[-1][:3] == (40, 40, before[0] + 1)


def test_a_mirror_topic_truncated_takes_mirror_appends_at_the_cut(site: Site) -> None:
    nodes = site(3)
    create_topic(nodes, "m", rf=3, **{"min.insync.replicas": "2", LINK_KEY: "west-to-east"})
    leader = leader_of(nodes, "m")

    async def append(expected: int, count: int) -> tuple[int, int]:
        async with await NodeConnection.open(leader.bootstrap, client_id="test-mirror") as conn:
            batch = build_batch([(1_700_000_000_000, None, b"x%d" % i) for i in range(count)], base_offset=expected)
            result = await mirror_append(conn, "west-to-east", "m", 0, expected, batch)
            return result.error_code, result.log_end_offset

    end = 0
    for _ in range(5):
        code, end = trio.run(append, end, BATCH)
        assert code == 0
    before = partition_states(leader, "m")[0]["leader_epoch"]
    result = truncate(leader.bootstrap, {("m", 0): 20})["m", 0]  # a mirror takes no client writes: no fence needed
    assert (result.error_code, result.truncated, result.leader_epoch) == (0, True, before + 1), result
    wait_for("every replica at the cut", lambda: at_cut_everywhere(nodes, "m", 20, before + 1), 10)
    assert trio.run(append, 50, 1) == (ErrorCode.OFFSET_OUT_OF_RANGE, 20)  # the mirror resumes at the cut
    assert trio.run(append, 20, 3) == (0, 23)
    wait_for("every replica at 23", lambda: {e for e, _, _ in replica_ends(nodes, "m").values()} == {23})


def test_a_follower_down_during_the_truncation_truncates_when_it_returns(site: Site) -> None:
    nodes = site(3)
    servers = bootstrap(nodes)
    create_topic(nodes, "orders", rf=3, **{"min.insync.replicas": "2"})
    leader = leader_of(nodes, "orders")
    produce_batches(leader, "orders", 0, 6)
    wait_for("60 on every replica", lambda: {e for e, _, _ in replica_ends(nodes, "orders").values()} == {60})
    down = next(n for n in nodes if n is not leader)
    down.stop()
    alter(bootstrap(nodes), "orders", {FENCED: FENCE})
    before = partition_states(leader, "orders")[0]["leader_epoch"]
    result = truncate(bootstrap(nodes), {("orders", 0): 30})["orders", 0]
    assert (result.error_code, result.truncated) == (0, True), result
    wait_for("every replica at the cut", lambda: at_cut_everywhere(nodes, "orders", 30, before + 1), 10)
    assert stored_batches(down, "orders")[-1][1] == 59  # the stopped replica still holds the old tail

    down.start()
    wait_for(
        "the returning replica at the cut and back in the ISR",
        lambda: at_cut_everywhere(nodes, "orders", 30, partition_states(leader, "orders")[0]["leader_epoch"]),
    )
    assert stored_batches(down, "orders")[-1][1] == 29
    # Asked again now that it is back: already there, no bump; the verb's wait covers the returned replica.
    again = truncate(servers, {("orders", 0): 30})["orders", 0]
    assert (again.error_code, again.truncated) == (0, False), again


def test_truncation_refusals_name_the_problem(site: Site) -> None:
    nodes = site(3)
    servers = bootstrap(nodes)
    create_topic(nodes, "orders", rf=3)
    leader = leader_of(nodes, "orders")
    produce_batches(leader, "orders", 0, 3)
    alter(servers, "orders", {FENCED: FENCE})
    results = truncate(servers, {("orders", 0): 31, ("orders", 5): 0, ("nope", 0): 0}, timeout=10)
    above = results["orders", 0]
    assert above.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert "offset 31" in (above.error_message or "") and "starts at 0 and ends at 30" in (above.error_message or "")
    assert results["orders", 5].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results["nope", 0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    inside = truncate(servers, {("orders", 0): 15})["orders", 0]
    assert inside.error_code == ErrorCode.INVALID_REQUEST
    assert "offset 15 is not between two batches (the batch at offsets 10..19)" in (inside.error_message or "")
    with connect(leader.bootstrap) as sock:
        body = {
            "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "offset": 20}]}],
            "timeout_ms": 5000,
        }
        assert request(sock, ApiKey.DELETE_RECORDS, 1, body).topics[0].partitions[0].error_code == 0
    below = truncate(servers, {("orders", 0): 10})["orders", 0]
    assert below.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert "offset 10: it is outside the log, which starts at 20 and ends at 30" in (below.error_message or "")
    # Nothing of this moved the epoch or the log.
    assert {e for e, _, _ in replica_ends(nodes, "orders").values()} == {30}
