"""Mirror topics on a real node: read-only to clients, written by MirrorAppend at the source's offsets.

Batches are built here as the source site's leader stored them (``build_batch`` at their base
offsets, under some source leader epoch) and handed to the node with ``node.client.mirror_append``;
real confluent-kafka clients then produce (refused) and consume (same offsets, keys, values,
headers, timestamps). On a three-node site the batches reach every replica unchanged but for
the target leader's epoch.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
import trio
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from node.client import MirrorAppendResult, NodeConnection, mirror_append
from node.protocol import ApiKey, ErrorCode
from storage import TopicPartition, segment_files
from storage.records import Compression, build_batch, check_batch, set_partition_leader_epoch
from tests.node.harness import NodeProcess, stored_batches, wait_for
from tests.node.raw import connect, produce_raw, request
from tests.node.test_replication import bootstrap, create_topic, leader_of, partition_states

pytestmark = pytest.mark.integration

LINK = "l1"
MIRROR = "m"
LINK_KEY = "strait.mirror.link"
T0 = 1_700_000_000_000
SOURCE_EPOCH = 41  # the source leader's epoch: never the target's
Site = Callable[..., list[NodeProcess]]
Row = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes], ...], int]  # offset, key, value, headers, ts


def source_batch(base: int, count: int, *, codec: Compression = Compression.NONE) -> bytes:
    """A batch as the source leader stores it: offsets base.., keys, values, a header, CreateTimes."""
    records = [
        (T0 + o, f"k{o}".encode(), f"v{o}".encode() * 20, [("h", f"{o}".encode())]) for o in range(base, base + count)
    ]
    buf = bytearray(build_batch(records, compression=codec, base_offset=base))
    set_partition_leader_epoch(buf, SOURCE_EPOCH)
    return bytes(buf)


def expected_rows(*batches: bytes) -> list[Row]:
    rows: list[Row] = []
    for data in batches:
        header = check_batch(data)
        for o in range(header.base_offset, header.next_offset):
            rows.append((o, f"k{o}".encode(), f"v{o}".encode() * 20, (("h", f"{o}".encode()),), T0 + o))
    return rows


def append(
    address: str,
    records: bytes | None,
    expected_end: int,
    *,
    link: str = LINK,
    topic: str = MIRROR,
    start_offset: int = -1,
    timeout: float = 10,
) -> MirrorAppendResult:
    async def run() -> MirrorAppendResult:
        async with await NodeConnection.open(address, client_id="test-mirror") as conn:
            return await mirror_append(
                conn, link, topic, 0, expected_end, records, start_offset=start_offset, timeout=timeout
            )

    return trio.run(run)


def offsets(result: MirrorAppendResult) -> tuple[int, int, int, int]:
    return result.error_code, result.log_end_offset, result.high_watermark, result.log_start_offset


def consume(servers: str, topic: str, count: int) -> list[Row]:
    """``count`` records of partition 0 from its beginning (then a short wait to catch extras)."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "mirror-reader", "enable.auto.commit": False})
    rows: list[Row] = []
    try:
        consumer.assign([KafkaPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2 if len(rows) < count else 0.5)
            if msg is None:
                if len(rows) >= count:
                    break
                continue
            assert msg.error() is None, msg.error()
            headers = tuple((k, v) for k, v in (msg.headers() or []))
            rows.append((msg.offset(), msg.key(), msg.value(), headers, msg.timestamp()[1]))
    finally:
        consumer.close()
    return rows


def produce_one(servers: str, topic: str, value: bytes) -> tuple[int | None, int]:
    """(error code or None, offset) of one confluent-kafka produce."""
    outcome: list[tuple[int | None, int]] = []
    producer = Producer({"bootstrap.servers": servers, "acks": "all", "message.timeout.ms": 15000})

    def report(err: Any, msg: Any) -> None:
        outcome.append((err.code() if err is not None else None, msg.offset() if err is None else -1))

    producer.produce(topic, value, partition=0, on_delivery=report)
    assert producer.flush(30) == 0
    (result,) = outcome
    return result


def alter_link(servers: str, topic: str, value: str | None) -> None:
    """Set (or, with None, delete) the link key with IncrementalAlterConfigs."""
    admin = AdminClient({"bootstrap.servers": servers})
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    entry = ConfigEntry(LINK_KEY, value, incremental_operation=op)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)


def described_link(servers: str, topic: str) -> str | None:
    admin = AdminClient({"bootstrap.servers": servers})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    value: str | None = configs[LINK_KEY].value
    return value


# -- one node ----------------------------------------------------------------------------------------


def test_clients_cannot_write_a_mirror_topic(node: NodeProcess) -> None:
    create_topic([node], MIRROR, rf=1, **{LINK_KEY: LINK})
    assert described_link(node.bootstrap, MIRROR) == LINK

    code, _ = produce_one(node.bootstrap, MIRROR, b"nope")
    assert code == KafkaError.POLICY_VIOLATION
    raw = produce_raw(node.bootstrap, MIRROR, 0, [b"nope"])
    assert raw.error_code == ErrorCode.POLICY_VIOLATION
    assert raw.error_message == f"topic '{MIRROR}' is a read-only mirror owned by link '{LINK}'"

    with connect(node.bootstrap) as sock:
        body = {"topics": [{"name": MIRROR, "partitions": [{"partition_index": 0, "offset": -1}]}], "timeout_ms": 5000}
        deleted = request(sock, ApiKey.DELETE_RECORDS, 1, body)
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.POLICY_VIOLATION

    # Nothing was written: a probe finds the log empty.
    assert offsets(append(node.bootstrap, None, 0)) == (0, 0, 0, 0)


def test_mirror_append_keeps_offsets_keys_values_headers_and_timestamps(node: NodeProcess) -> None:
    create_topic([node], MIRROR, rf=1, **{LINK_KEY: LINK})
    first, second, third = source_batch(0, 3), source_batch(3, 2), source_batch(5, 4)
    assert offsets(append(node.bootstrap, first + second, 0)) == (0, 5, 5, 0)
    assert offsets(append(node.bootstrap, third, 5)) == (0, 9, 9, 0)
    assert offsets(append(node.bootstrap, b"", 9)) == (0, 9, 9, 0)  # an empty probe

    assert consume(node.bootstrap, MIRROR, 9) == expected_rows(first, second, third)
    # Stored as the source wrote them but for the epoch: the target leader's, not the source's.
    epoch = partition_states(node, MIRROR)[0]["leader_epoch"]
    assert epoch != SOURCE_EPOCH
    assert stored_batches(node, MIRROR) == [
        (h.base_offset, h.last_offset, epoch, h.crc) for h in map(check_batch, (first, second, third))
    ]


def test_mirror_append_refuses_wrong_offsets_links_and_topics(node: NodeProcess) -> None:
    create_topic([node], MIRROR, rf=1, **{LINK_KEY: LINK})
    create_topic([node], "plain", rf=1)
    assert offsets(append(node.bootstrap, source_batch(0, 4), 0)) == (0, 4, 4, 0)

    stale = append(node.bootstrap, source_batch(2, 2), 2)  # a retry of what the target already has
    assert offsets(stale) == (ErrorCode.OFFSET_OUT_OF_RANGE, 4, 4, 0)
    assert "expected the log to end at 2, it ends at 4" in (stale.error_message or "")
    ahead = append(node.bootstrap, source_batch(6, 1), 6)
    assert offsets(ahead) == (ErrorCode.OFFSET_OUT_OF_RANGE, 4, 4, 0)
    probe = append(node.bootstrap, None, -1)  # how a mirror that knows nothing learns the end
    assert offsets(probe) == (ErrorCode.OFFSET_OUT_OF_RANGE, 4, 4, 0)

    misplaced = append(node.bootstrap, source_batch(3, 2), 4)  # claims 4 but carries offsets 3..4
    assert misplaced.error_code == ErrorCode.INVALID_RECORD
    assert "starts at offset 3, below 4" in (misplaced.error_message or "")
    backwards = append(node.bootstrap, source_batch(4, 2) + source_batch(5, 1), 4)
    assert backwards.error_code == ErrorCode.INVALID_RECORD
    corrupt = bytearray(source_batch(4, 2))
    corrupt[-1] ^= 0xFF
    assert append(node.bootstrap, bytes(corrupt), 4).error_code == ErrorCode.CORRUPT_MESSAGE
    cut = source_batch(4, 2)
    assert append(node.bootstrap, cut + cut[:30], 4).error_code == ErrorCode.CORRUPT_MESSAGE

    other = append(node.bootstrap, source_batch(4, 1), 4, link="l2")
    assert other.error_code == ErrorCode.POLICY_VIOLATION
    assert other.error_message == f"topic '{MIRROR}' is a mirror owned by link '{LINK}', not by link 'l2'"
    plain = append(node.bootstrap, source_batch(0, 1), 0, topic="plain")
    assert plain.error_code == ErrorCode.POLICY_VIOLATION
    assert "'plain' is not a mirror topic" in (plain.error_message or "")
    unknown = append(node.bootstrap, source_batch(0, 1), 0, topic="nowhere")
    assert (unknown.error_code, unknown.log_end_offset) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)

    # None of the refused requests wrote anything.
    assert offsets(append(node.bootstrap, None, 4)) == (0, 4, 4, 0)
    assert [b[:2] for b in stored_batches(node, MIRROR)] == [(0, 3)]


def test_a_start_offset_past_the_end_jumps_and_leaves_a_logged_gap(node: NodeProcess) -> None:
    create_topic([node], MIRROR, rf=1, **{LINK_KEY: LINK})
    assert offsets(append(node.bootstrap, source_batch(0, 3), 0)) == (0, 3, 3, 0)

    # The source's retention deleted [0, 100) and the mirror had copied only [0, 3).
    after = source_batch(100, 3)
    assert offsets(append(node.bootstrap, after, 3, start_offset=100)) == (0, 103, 103, 100)
    assert consume(node.bootstrap, MIRROR, 3) == expected_rows(after)
    assert re.search(r"WARNING .*link 'l1': m-0 jumps from offset 3 .* offsets \[3, 100\)", node.log_path.read_text())

    # A start offset not past the end is no jump; a jump alone (no records) is allowed too.
    assert offsets(append(node.bootstrap, source_batch(103, 1), 103, start_offset=50)) == (0, 104, 104, 100)
    assert offsets(append(node.bootstrap, None, 104, start_offset=200)) == (0, 200, 200, 200)
    assert "offsets [104, 200)" in node.log_path.read_text()
    last = source_batch(200, 2)
    assert offsets(append(node.bootstrap, last, 200)) == (0, 202, 202, 200)
    assert consume(node.bootstrap, MIRROR, 2) == expected_rows(last)


def test_holes_of_a_compacted_source_are_kept_without_a_jump(node: NodeProcess) -> None:
    create_topic([node], MIRROR, rf=1, **{LINK_KEY: LINK})
    # The source compacted offsets 2..4 away: its next batch after offset 1 starts at 5.
    first, after_hole = source_batch(0, 2), source_batch(5, 2)
    assert offsets(append(node.bootstrap, first + after_hole, 0)) == (0, 7, 7, 0)
    assert consume(node.bootstrap, MIRROR, 4) == expected_rows(first) + expected_rows(after_hole)
    assert "jumps" not in node.log_path.read_text()  # a hole is not a gap: nothing was lost


@pytest.mark.parametrize("codec", [Compression.ZSTD, Compression.LZ4, Compression.GZIP])
def test_compressed_batches_stay_byte_identical(node: NodeProcess, codec: Compression) -> None:
    create_topic([node], MIRROR, rf=1, **{LINK_KEY: LINK})
    batches = [source_batch(0, 10, codec=codec), source_batch(10, 25, codec=codec)]
    assert offsets(append(node.bootstrap, b"".join(batches), 0)) == (0, 35, 35, 0)
    assert [(b[0], b[1], b[3]) for b in stored_batches(node, MIRROR)] == [
        (h.base_offset, h.last_offset, h.crc) for h in map(check_batch, batches)
    ]
    tp = TopicPartition(MIRROR, 0)
    (directory,) = [d / tp.dir_name for d in node.log_dirs if (d / tp.dir_name).exists()]
    stored = b"".join(seg.read_bytes() for seg in segment_files(directory))
    # Byte for byte but for partitionLeaderEpoch (bytes 12..16 of each batch, outside the CRC).
    pos = 0
    for source in batches:
        copy = stored[pos : pos + len(source)]
        assert copy[:12] == source[:12] and copy[16:] == source[16:]
        pos += len(source)
    assert pos == len(stored)
    assert consume(node.bootstrap, MIRROR, 35) == expected_rows(*batches)


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_removing_the_link_makes_the_mirror_writable(node: NodeProcess) -> None:
    create_topic([node], MIRROR, rf=1, **{LINK_KEY: LINK})
    assert offsets(append(node.bootstrap, source_batch(0, 5), 0))[:2] == (0, 5)

    # Failover: AlterConfigs replaces the whole override set, and the set is now empty.
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, MIRROR, set_config={})
    admin.alter_configs([resource])[resource].result(30)
    assert described_link(node.bootstrap, MIRROR) == ""
    assert produce_one(node.bootstrap, MIRROR, b"after failover") == (None, 5)
    assert append(node.bootstrap, source_batch(6, 1), 6).error_code == ErrorCode.POLICY_VIOLATION

    # Failback: the link owns it again (IncrementalAlterConfigs), and appends where the log ends.
    alter_link(node.bootstrap, MIRROR, LINK)
    assert produce_one(node.bootstrap, MIRROR, b"refused")[0] == KafkaError.POLICY_VIOLATION
    assert offsets(append(node.bootstrap, source_batch(6, 2), 6))[:2] == (0, 8)
    alter_link(node.bootstrap, MIRROR, None)
    assert produce_one(node.bootstrap, MIRROR, b"writable again") == (None, 8)
    assert [r[0] for r in consume(node.bootstrap, MIRROR, 9)] == list(range(9))


# -- a site ----------------------------------------------------------------------------------------------


def test_mirrored_batches_reach_every_replica_with_the_same_offsets(site: Site) -> None:
    nodes = site(3)
    create_topic(nodes, MIRROR, rf=3, **{"min.insync.replicas": "2", LINK_KEY: LINK})
    leader = leader_of(nodes, MIRROR)
    follower = next(n for n in nodes if n is not leader)
    refused = append(follower.bootstrap, source_batch(0, 1), 0)
    assert (refused.error_code, refused.log_end_offset) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)

    wait_for("a full ISR", lambda: sorted(partition_states(leader, MIRROR)[0]["isr"]) == [1, 2, 3])
    batches = [source_batch(0, 5), source_batch(5, 20, codec=Compression.ZSTD), source_batch(25, 7)]
    # The answer comes once the batches are committed: the high watermark is at the end.
    assert offsets(append(leader.bootstrap, b"".join(batches[:2]), 0)) == (0, 25, 25, 0)
    assert offsets(append(leader.bootstrap, batches[2], 25)) == (0, 32, 32, 0)
    wait_for(
        "every replica at offset 32",
        lambda: all(partition_states(n, MIRROR)[0]["log_end_offset"] == 32 for n in nodes),
    )
    epoch = partition_states(leader, MIRROR)[0]["leader_epoch"]
    expected = [(h.base_offset, h.last_offset, epoch, h.crc) for h in map(check_batch, batches)]
    for n in nodes:
        assert stored_batches(n, MIRROR) == expected, f"node {n.broker_id}"
    assert consume(bootstrap(nodes), MIRROR, 32) == expected_rows(*batches)

    # A jump on the leader: the followers restart their logs at the new start too.
    later = source_batch(500, 3)
    assert offsets(append(leader.bootstrap, later, 32, start_offset=500)) == (0, 503, 503, 500)

    def jumped() -> bool:
        return all(
            (s["log_start_offset"], s["log_end_offset"]) == (500, 503)
            for s in (partition_states(n, MIRROR)[0] for n in nodes)
        )

    wait_for("every replica restarted at 500", jumped)
    for n in nodes:
        assert stored_batches(n, MIRROR) == [(500, 502, epoch, check_batch(later).crc)], f"node {n.broker_id}"
    assert consume(bootstrap(nodes), MIRROR, 3) == expected_rows(later)
