"""Fetch on the wire at every size rule Kafka applies, the flexible versions (v12 names, v13+ topic
ids), and incremental fetch sessions (KIP-227) with their errors and metrics; ListOffsets v7-v10,
Produce v9-v11, OffsetForLeaderEpoch v4 and DeleteRecords v2 on one node."""

from __future__ import annotations

import re
import socket
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from node.protocol import ApiKey, ErrorCode, Struct
from storage.records import build_batch, iter_batches
from tests.node.harness import NodeProcess
from tests.node.raw import connect, produce_raw, request

pytestmark = pytest.mark.integration

BIG = b"x" * 3000  # one record: a batch of ~3 KB


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, zookeeper: str) -> Iterator[NodeProcess]:
    node = NodeProcess(1, tmp_path_factory.mktemp("rules") / "node1", f"{zookeeper}/t-rules-{time.time_ns()}")
    node.start()
    yield node
    node.stop()


def create(node: NodeProcess, topic: str, partitions: int = 1) -> uuid.UUID:
    """Create ``topic`` and return its id (from Metadata v12)."""
    with connect(node.bootstrap) as sock:
        made = request(
            sock,
            ApiKey.CREATE_TOPICS,
            4,
            {
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": partitions,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 10_000,
                "validate_only": False,
            },
        )
        assert made.topics[0].error_code == 0, made.topics[0]
        meta = request(
            sock,
            ApiKey.METADATA,
            12,
            {"topics": [{"topic_id": uuid.UUID(int=0), "name": topic}], "allow_auto_topic_creation": False},
        )
    (found,) = meta.topics
    assert found.error_code == 0 and len(found.partitions) == partitions
    return found.topic_id


def part(index: int, offset: int = 0, max_bytes: int = 2**20, **extra: Any) -> dict[str, Any]:
    return {"partition": index, "fetch_offset": offset, "partition_max_bytes": max_bytes, **extra}


def fetch(
    sock: socket.socket,
    version: int,
    topics: list[dict[str, Any]],
    *,
    max_bytes: int = 50 * 2**20,
    min_bytes: int = 0,
    max_wait_ms: int = 0,
    session_id: int = 0,
    session_epoch: int = -1,
    forgotten: list[dict[str, Any]] | None = None,
) -> Struct:
    body = {
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "session_id": session_id,
        "session_epoch": session_epoch,
        "topics": topics,
        "forgotten_topics_data": forgotten or [],
    }
    return request(sock, ApiKey.FETCH, version, body)


def batches(records: Any) -> list[tuple[int, int]]:
    return [(h.base_offset, h.records_count) for _, h in iter_batches(bytes(records or b""))]


def answered(response: Struct) -> dict[int, list[tuple[int, int]]]:
    """partition -> batches, over the answer's topics."""
    return {p.partition_index: batches(p.records) for t in response.responses for p in t.partitions}


def fill(node: NodeProcess, topic: str, partition: int, count: int, value: bytes = BIG) -> None:
    for _ in range(count):
        assert produce_raw(node.bootstrap, topic, partition, [value]).error_code == 0


def first_batch_size(sock: socket.socket, topic: str) -> int:
    """The size of partition 0's first batch (the one batch a fetch of 1 byte returns)."""
    response = fetch(sock, 11, [{"topic": topic, "partitions": [part(0, max_bytes=1)]}])
    return len(bytes(response.responses[0].partitions[0].records))


# -- sizes (Kafka's ReplicaManager.readFromLog) -------------------------------------------------------------------


def test_partition_max_bytes_takes_whole_batches_that_fit(node: NodeProcess) -> None:
    create(node, "r-part")
    fill(node, "r-part", 0, 4)
    with connect(node.bootstrap) as sock:
        one = first_batch_size(sock, "r-part")
        response = fetch(sock, 11, [{"topic": "r-part", "partitions": [part(0, max_bytes=2 * one + one // 2)]}])
    assert answered(response) == {0: [(0, 1), (1, 1)]}


def test_max_bytes_is_shared_in_request_order(node: NodeProcess) -> None:
    create(node, "r-shared", 3)
    for p in range(3):
        fill(node, "r-shared", p, 3)
    with connect(node.bootstrap) as sock:
        one = first_batch_size(sock, "r-shared")
        parts = [part(2), part(0), part(1)]
        response = fetch(sock, 11, [{"topic": "r-shared", "partitions": parts}], max_bytes=4 * one + one // 2)
    # partition 2 first takes its three batches, partition 0 what is left (one), partition 1 nothing
    assert answered(response) == {2: [(0, 1), (1, 1), (2, 1)], 0: [(0, 1)], 1: []}
    assert [p.partition_index for p in response.responses[0].partitions] == [2, 0, 1]


def test_only_the_first_non_empty_partition_may_go_past_the_limits(node: NodeProcess) -> None:
    create(node, "r-first", 3)
    fill(node, "r-first", 1, 2)
    fill(node, "r-first", 2, 2)
    with connect(node.bootstrap) as sock:
        # partition 0 is empty: partition 1 is the first with data and returns one batch above both
        # limits; partition 2's first batch is above its limit and returns nothing
        parts = [part(0, max_bytes=10), part(1, max_bytes=10), part(2, max_bytes=10)]
        response = fetch(sock, 11, [{"topic": "r-first", "partitions": parts}], max_bytes=2**20)
        assert answered(response) == {0: [], 1: [(0, 1)], 2: []}
        # max_bytes 0 too: the first batch still comes
        response = fetch(sock, 11, [{"topic": "r-first", "partitions": [part(1)]}], max_bytes=0)
        assert answered(response) == {1: [(0, 1)]}


def test_before_v3_the_limits_are_hard_and_a_large_first_batch_is_cut(node: NodeProcess) -> None:
    create(node, "r-hard")
    fill(node, "r-hard", 0, 2)
    with connect(node.bootstrap) as sock:
        response = fetch(sock, 2, [{"topic": "r-hard", "partitions": [part(0, max_bytes=100)]}])
        records = bytes(response.responses[0].partitions[0].records)
        assert len(records) == 100 and records[:8] == (0).to_bytes(8, "big")  # the start of batch 0
        response = fetch(sock, 3, [{"topic": "r-hard", "partitions": [part(0, max_bytes=100)]}])
        assert answered(response) == {0: [(0, 1)]}


def test_min_bytes_counts_at_most_max_bytes(node: NodeProcess) -> None:
    create(node, "r-min")
    fill(node, "r-min", 0, 2)
    with connect(node.bootstrap) as sock:
        # one batch (~3 KB) is all max_bytes allows: the fetch answers it at once rather than
        # waiting 60 s for min_bytes (the socket times out after 10 s)
        topics = [{"topic": "r-min", "partitions": [part(0)]}]
        response = fetch(sock, 11, topics, max_bytes=100, min_bytes=100_000, max_wait_ms=60_000)
    assert answered(response) == {0: [(0, 1)]}


# -- flexible versions and topic ids -----------------------------------------------------------------------------


def test_fetch_v12_by_name_and_v13_to_v17_by_topic_id(node: NodeProcess) -> None:
    topic_id = create(node, "r-ids")
    fill(node, "r-ids", 0, 2, b"v")
    stranger = uuid.uuid4()
    with connect(node.bootstrap) as sock:
        response = fetch(sock, 12, [{"topic": "r-ids", "partitions": [part(0)]}])
        assert (response.responses[0].topic, answered(response)) == ("r-ids", {0: [(0, 1), (1, 1)]})
        for version in range(13, 18):
            topics = [
                {"topic_id": topic_id, "partitions": [part(0, 1)]},
                {"topic_id": stranger, "partitions": [part(0)]},
            ]
            response = fetch(sock, version, topics)
            known, unknown = response.responses
            assert (known.topic_id, batches(known.partitions[0].records)) == (topic_id, [(1, 1)]), version
            assert unknown.topic_id == stranger
            assert unknown.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_a_diverging_last_fetched_epoch_answers_where_the_epoch_ended(node: NodeProcess) -> None:
    create(node, "r-diverge")
    fill(node, "r-diverge", 0, 3, b"v")
    with connect(node.bootstrap) as sock:
        meta = request(
            sock, ApiKey.METADATA, 12, {"topics": [{"name": "r-diverge"}], "allow_auto_topic_creation": False}
        )
        epoch = meta.topics[0].partitions[0].leader_epoch
        topics = [{"topic": "r-diverge", "partitions": [part(0, 1, last_fetched_epoch=epoch)]}]
        entry = fetch(sock, 12, topics).responses[0].partitions[0]
        assert entry.diverging_epoch is None and batches(entry.records) == [(1, 1), (2, 1)]  # consistent
        # a fetcher whose log holds more of this epoch than the leader's: it must truncate to 3
        topics = [{"topic": "r-diverge", "partitions": [part(0, 5, last_fetched_epoch=epoch)]}]
        entry = fetch(sock, 12, topics).responses[0].partitions[0]
        assert entry.error_code == 0 and bytes(entry.records or b"") == b""
        assert (entry.diverging_epoch.epoch, entry.diverging_epoch.end_offset) == (epoch, 3)
        # an epoch the leader never had (later than its own): OFFSET_OUT_OF_RANGE, as Kafka answers
        topics = [{"topic": "r-diverge", "partitions": [part(0, 3, last_fetched_epoch=epoch + 5)]}]
        assert fetch(sock, 12, topics).responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


# -- sessions (KIP-227) ------------------------------------------------------------------------------------------


def metric(node: NodeProcess, name: str) -> float:
    with urllib.request.urlopen(f"{node.admin_url}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")]
    assert values, f"{name} not in /metrics"
    return values[0]


def test_an_incremental_fetch_session_answers_only_what_changed(node: NodeProcess) -> None:
    create(node, "r-session", 2)
    fill(node, "r-session", 0, 1, b"a")
    fill(node, "r-session", 1, 1, b"b")
    with connect(node.bootstrap) as sock:
        full = fetch(sock, 12, [{"topic": "r-session", "partitions": [part(0), part(1)]}], session_epoch=0)
        assert full.error_code == 0 and full.session_id != 0
        assert answered(full) == {0: [(0, 1)], 1: [(0, 1)]}
        assert metric(node, "strait_fetch_sessions") >= 1
        session = full.session_id
        # both partitions move on; nothing new: an empty answer
        topics = [{"topic": "r-session", "partitions": [part(0, 1), part(1, 1)]}]
        quiet = fetch(sock, 12, topics, session_id=session, session_epoch=1)
        assert (quiet.error_code, quiet.session_id, quiet.responses) == (0, session, [])
        fill(node, "r-session", 1, 1, b"c")
        news = fetch(sock, 12, [], session_id=session, session_epoch=2)
        assert answered(news) == {1: [(1, 1)]}
        # forget partition 0; produce to it: nothing comes back for it
        fill(node, "r-session", 0, 1, b"d")
        forgot = [{"topic": "r-session", "partitions": [0]}]
        after = fetch(
            sock,
            12,
            [{"topic": "r-session", "partitions": [part(1, 2)]}],
            session_id=session,
            session_epoch=3,
            forgotten=forgot,
        )
        assert after.error_code == 0 and answered(after) == {}
        stale = fetch(sock, 12, [], session_id=session, session_epoch=3)
        assert (stale.error_code, stale.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, [])
        gone = fetch(sock, 12, [], session_id=session + 1 if session < 2**31 - 1 else 1, session_epoch=1)
        assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        by_id = fetch(sock, 13, [], session_id=session, session_epoch=4)
        assert by_id.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        # a sessionless fetch naming the session closes it
        closed = fetch(sock, 12, [], session_id=session, session_epoch=-1)
        assert (closed.error_code, closed.session_id) == (0, 0)
        assert (
            fetch(sock, 12, [], session_id=session, session_epoch=4).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        )


# -- ListOffsets v7-v10, Produce v9-v11, OffsetForLeaderEpoch v4, DeleteRecords v2 --------------------------------


def list_offsets(sock: socket.socket, version: int, topic: str, timestamp: int) -> Struct:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
        "timeout_ms": 1000,
    }
    return request(sock, ApiKey.LIST_OFFSETS, version, body).topics[0].partitions[0]


def test_list_offsets_max_timestamp_earliest_local_and_latest_tiered(node: NodeProcess) -> None:
    create(node, "r-times")
    now = int(time.time() * 1000)
    # a batch whose second record has the largest timestamp, then a later batch with smaller ones
    batch = build_batch([(now - 5000, None, b"a"), (now + 60_000, None, b"b"), (now, None, b"c")])
    assert produce_raw(node.bootstrap, "r-times", 0, [], batch=batch).error_code == 0
    fill(node, "r-times", 0, 1, b"d")
    with connect(node.bootstrap) as sock:
        for version in (7, 8, 9, 10):
            found = list_offsets(sock, version, "r-times", -3)
            assert (found.error_code, found.offset, found.timestamp) == (0, 1, now + 60_000), version
            assert found.leader_epoch >= 0
        assert list_offsets(sock, 6, "r-times", -3).error_code == ErrorCode.INVALID_REQUEST
        assert list_offsets(sock, 7, "r-times", -4).error_code == ErrorCode.INVALID_REQUEST
        local = list_offsets(sock, 8, "r-times", -4)
        assert (local.error_code, local.offset) == (0, 0)
        tiered = list_offsets(sock, 9, "r-times", -5)
        assert (tiered.error_code, tiered.offset, tiered.timestamp) == (0, -1, -1)
        assert list_offsets(sock, 10, "r-times", -6).error_code == ErrorCode.INVALID_REQUEST
        assert list_offsets(sock, 10, "r-times", -1).offset == 4


def test_flexible_produce_epochs_and_delete_records(node: NodeProcess) -> None:
    create(node, "r-flex")
    for version in (9, 10, 11):
        assert produce_raw(node.bootstrap, "r-flex", 0, [b"v%d" % version], version=version).error_code == 0
    with connect(node.bootstrap) as sock:
        epochs = request(
            sock,
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            4,
            {"replica_id": -1, "topics": [{"topic": "r-flex", "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
        )
        assert (epochs.topics[0].partitions[0].error_code, epochs.topics[0].partitions[0].end_offset) == (0, 3)
        deleted = request(
            sock,
            ApiKey.DELETE_RECORDS,
            2,
            {"topics": [{"name": "r-flex", "partitions": [{"partition_index": 0, "offset": 2}]}], "timeout_ms": 5000},
        )
        assert (deleted.topics[0].partitions[0].error_code, deleted.topics[0].partitions[0].low_watermark) == (0, 2)


def test_librdkafka_fetches_at_v16_by_topic_id_without_sessions(node: NodeProcess) -> None:
    """librdkafka 2.16 (confluent-kafka) does not implement KIP-227: every fetch is sessionless."""
    create(node, "r-rdkafka", 3)
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
    for i in range(30):
        producer.produce("r-rdkafka", value=b"%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    sessions_before = [total(node, "strait_fetch_requests_total", session=s) for s in ("full", "incremental")]
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "r-rdkafka", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("r-rdkafka", p, 0) for p in range(3)])
        got = 0
        deadline = time.monotonic() + 30
        while got < 30 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got += 1
        assert got == 30
    finally:
        consumer.close()
    rdkafka = {"client": "confluent-kafka-python"}
    assert total(node, "strait_client_requests_total", api="Produce", version="10", **rdkafka) > 0
    assert total(node, "strait_client_requests_total", api="Fetch", version="16", **rdkafka) > 0
    assert [total(node, "strait_fetch_requests_total", session=s) for s in ("full", "incremental")] == sessions_before


def total(node: NodeProcess, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples in the node's /metrics whose labels include ``labels``."""
    with urllib.request.urlopen(f"{node.admin_url}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        sample_labels = dict(re.findall(r'(\w+)="([^"]*)"', line[: line.index("}")]))
        if all(sample_labels.get(k) == v for k, v in labels.items()):
            found += float(line.rsplit(" ", 1)[1])
    return found
