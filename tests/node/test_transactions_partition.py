"""Transactions on real nodes, the partition side: transactional batches by raw Produce, markers by
WriteTxnMarkers (``node.client.write_txn_markers``, as the coordinator sends them), read back by
real clients. confluent-kafka's and kcat's read_committed consumers see committed records only
and stop at the last stable offset; read_uncommitted ones see everything; the LSO is what
ListOffsets (``get_watermark_offsets``) answers a read_committed consumer. A follower that
becomes leader, and a node killed with SIGKILL and restarted, still know the open transaction and
the aborted ones.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable

import pytest
import trio
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from chaos.nemesis import kill_9
from node.client import NodeConnection, TxnMarker, write_txn_markers
from node.protocol import ApiKey, ErrorCode
from storage.records import BatchBuilder, build_batch
from tests.node.harness import NodeProcess, wait_for
from tests.node.raw import auto_create, connect, produce_body, request
from tests.node.test_replication import create_topic, leader_of

pytestmark = pytest.mark.integration

Site = Callable[..., list[NodeProcess]]
TXN_ID = "txn-test"


def produce(bootstrap: str, topic: str, values: list[bytes], *, pid: int = -1, seq: int = 0, epoch: int = 0) -> int:
    """One batch with acks=all, transactional when ``pid`` is given; returns its base offset."""
    now = int(time.time() * 1000)
    if pid < 0:
        batch = build_batch([(now, None, v) for v in values])
    else:
        builder = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)
        for v in values:
            builder.append(now, None, v)
        batch = builder.build()
    body = produce_body(topic, 0, batch) | {"transactional_id": TXN_ID if pid >= 0 else None}
    with connect(bootstrap) as sock:
        answer = request(sock, ApiKey.PRODUCE, 8, body).responses[0].partition_responses[0]
    assert answer.error_code == 0, answer
    return int(answer.base_offset)


def end_txn(bootstrap: str, topic: str, pid: int, *, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
    """WriteTxnMarkers for partition 0 of ``topic`` as a coordinator sends it; returns the error code."""

    async def send() -> int:
        async with await NodeConnection.open(bootstrap, client_id="test-coordinator") as conn:
            marker = TxnMarker(pid, epoch, commit, coordinator_epoch, [(topic, 0)])
            codes = await write_txn_markers(conn, [marker], timeout=20)
        return codes[pid, topic, 0]

    return trio.run(send)


def consume(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every value a confluent-kafka consumer with ``isolation.level=isolation`` reads up to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return values
                raise AssertionError(f"consumer error: {error}")
            values.append(msg.value())
        raise AssertionError(f"no end of partition within 60 s; read {values}")
    finally:
        consumer.close()


def high_watermark(bootstrap: str, topic: str, isolation: str) -> int:
    """The end a consumer with ``isolation.level=isolation`` is told (ListOffsets LATEST)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends", "isolation.level": isolation})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=20, cached=False)
        return int(high)
    finally:
        consumer.close()


def served(bootstrap: str, topic: str) -> int:
    """The read_uncommitted end, or -1 while the leader cannot answer it yet (just elected or started)."""
    try:
        return high_watermark(bootstrap, topic, "read_uncommitted")
    except KafkaException:
        return -1


def kcat_values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    kcat = shutil.which("kcat")
    if kcat is None:
        raise RuntimeError("kcat is not installed: `apt-get install kcat` (make setup does it as root)")
    args = [kcat, "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%s\n"]
    done = subprocess.run([*args, "-X", f"isolation.level={isolation}"], capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.splitlines()


def write_transactions(bootstrap: str, topic: str) -> tuple[int, list[bytes], list[bytes]]:
    """Plain records, a committed transaction, an aborted one, an open one, then plain records;
    returns (the open transaction's first offset, committed values before it, every value)."""
    produce(bootstrap, topic, [b"a", b"b"])
    produce(bootstrap, topic, [b"c1", b"c2"], pid=1001)
    produce(bootstrap, topic, [b"x1", b"x2"], pid=1002)
    produce(bootstrap, topic, [b"c3"], pid=1001, seq=2)
    produce(bootstrap, topic, [b"x3"], pid=1002, seq=2)
    assert end_txn(bootstrap, topic, 1001, commit=True) == 0
    assert end_txn(bootstrap, topic, 1002, commit=False) == 0
    open_first = produce(bootstrap, topic, [b"o1"], pid=1003)
    produce(bootstrap, topic, [b"d"])
    committed = [b"a", b"b", b"c1", b"c2", b"c3"]
    everything = [b"a", b"b", b"c1", b"c2", b"x1", b"x2", b"c3", b"x3", b"o1", b"d"]
    return open_first, committed, everything


def check_reads(bootstrap: str, topic: str, open_first: int, committed: list[bytes], everything: list[bytes]) -> None:
    assert consume(bootstrap, topic, "read_committed") == committed
    assert consume(bootstrap, topic, "read_uncommitted") == everything
    assert high_watermark(bootstrap, topic, "read_committed") == open_first
    # Every record and the two markers: 10 records, 2 markers.
    assert high_watermark(bootstrap, topic, "read_uncommitted") == 12
    assert kcat_values(bootstrap, topic, "read_committed") == committed
    assert kcat_values(bootstrap, topic, "read_uncommitted") == everything


def test_read_committed_clients_see_committed_records_only_and_stop_at_the_lso(node: NodeProcess) -> None:
    auto_create(node.bootstrap, "txn")
    open_first, committed, everything = write_transactions(node.bootstrap, "txn")
    check_reads(node.bootstrap, "txn", open_first, committed, everything)

    # The coordinator's errors come back per partition.
    assert end_txn(node.bootstrap, "txn", 1003, commit=True, coordinator_epoch=2) == 0
    assert end_txn(node.bootstrap, "txn", 1003, commit=True, coordinator_epoch=1) == (
        ErrorCode.TRANSACTION_COORDINATOR_FENCED
    )
    # Once committed, the open transaction and what followed it are visible.
    assert consume(node.bootstrap, "txn", "read_committed") == [*committed, b"o1", b"d"]
    assert high_watermark(node.bootstrap, "txn", "read_committed") == 13
    assert kcat_values(node.bootstrap, "txn", "read_committed") == [*committed, b"o1", b"d"]


def test_a_marker_with_a_bumped_epoch_fences_the_old_producer(node: NodeProcess) -> None:
    auto_create(node.bootstrap, "fenced")
    produce(node.bootstrap, "fenced", [b"zombie"], pid=2001, epoch=3)
    assert end_txn(node.bootstrap, "fenced", 2001, commit=False, epoch=2) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert end_txn(node.bootstrap, "fenced", 2001, commit=False, epoch=4) == 0
    now = int(time.time() * 1000)
    builder = BatchBuilder(producer_id=2001, producer_epoch=3, base_sequence=1, transactional=True)
    builder.append(now, None, b"late")
    body = produce_body("fenced", 0, builder.build()) | {"transactional_id": TXN_ID}
    with connect(node.bootstrap) as sock:
        answer = request(sock, ApiKey.PRODUCE, 8, body).responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert consume(node.bootstrap, "fenced", "read_committed") == []


def test_a_node_killed_and_restarted_rebuilds_its_transactions_and_aborted_index(node: NodeProcess) -> None:
    auto_create(node.bootstrap, "crash")
    open_first, committed, everything = write_transactions(node.bootstrap, "crash")
    assert node.child is not None
    kill_9(node.child)
    # Whatever the kill left of the aborted-transaction index, recovery must rebuild it: remove it.
    removed = [p for d in node.log_dirs for p in d.glob("crash-0/*.txnindex")]
    assert removed, "the aborted transaction was indexed"
    for path in removed:
        path.unlink()
    node.start()
    wait_for("the restarted node to serve crash-0", lambda: served(node.bootstrap, "crash") == len(everything) + 2)
    check_reads(node.bootstrap, "crash", open_first, committed, everything)
    assert all(p.exists() for p in removed), "recovery wrote the index again"


def test_a_follower_that_becomes_leader_knows_the_open_and_aborted_transactions(site: Site) -> None:
    nodes = site(3)
    create_topic(nodes, "moved", rf=3)
    leader = leader_of(nodes, "moved")
    open_first, committed, everything = write_transactions(leader.bootstrap, "moved")
    others = [n for n in nodes if n is not leader]
    leader.stop()  # every batch and marker was answered with acks=all: both followers have them
    new_leader = leader_of(others, "moved")
    bootstrap = ",".join(n.bootstrap for n in others)
    wait_for("the new leader to serve the whole log", lambda: served(bootstrap, "moved") == len(everything) + 2)
    check_reads(bootstrap, "moved", open_first, committed, everything)
    # The new leader ends the open transaction, as the coordinator would after the move.
    assert end_txn(new_leader.bootstrap, "moved", 1003, commit=False) == 0
    assert consume(bootstrap, "moved", "read_committed") == [*committed, b"d"]
    assert kcat_values(bootstrap, "moved", "read_committed") == [*committed, b"d"]
