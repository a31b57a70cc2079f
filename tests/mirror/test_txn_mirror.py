"""Transactions across two real sites, with confluent-kafka's transactional producer on east.

Offset-preserving: the mirror copies data and control batches byte for byte, and west replays
them into its own producer state and aborted-transaction index, so a read_committed consumer on
west sees exactly the committed records, and west's last stable offset and aborted-transaction
lists are east's, also while a transaction is open. MirrorMaker-2 mode: the copier reads
read_committed and drops aborted records and markers, so the remote topic holds only committed
records (a transaction whose records were in east's log before it was aborted included).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, Producer, TopicPartition

from mirror import LinkRunner, load_links
from node.client import READ_COMMITTED, READ_UNCOMMITTED, SiteClient, complete_batches, fetch_partition
from storage.records import Offset
from tests.mirror.conftest import Site
from tests.mirror.test_link import RunningLink, create, link_config
from tests.mirror.test_mm2_link import mm2_link
from tests.node.harness import wait_for
from tests.node.test_transactions_e2e import read_all, txn_producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TIMEOUT_S = 30.0
PARTITIONS = 3


def write_rounds(producer: Producer, topic: str, rounds: range, *, tag: str = "r") -> list[bytes]:
    """One transaction per round over every partition: even rounds commit, odd ones abort after
    their records are in the log (flushed first: librdkafka purges unsent records on abort).
    Returns the committed values."""
    committed: list[bytes] = []
    for round_ in rounds:
        producer.begin_transaction()
        values = [f"{tag}{round_}-{p}-{i}".encode() for p in range(PARTITIONS) for i in range(5)]
        for value in values:
            producer.produce(topic, value, partition=int(value.split(b"-")[1]))
        if round_ % 2:
            assert producer.flush(TIMEOUT_S) == 0
            producer.abort_transaction(TIMEOUT_S)
        else:
            producer.commit_transaction(TIMEOUT_S)
            committed += values
    return committed


def offsets(bootstrap: str, topic: str, isolation: str) -> dict[int, int]:
    """Each partition's end as a consumer of ``isolation`` sees it (read_committed: the LSO)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"ends-{time.monotonic_ns()}", "isolation.level": isolation}
    )
    try:
        consumer.list_topics(topic, timeout=10)
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), TIMEOUT_S)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def ends(site: Site, topic: str) -> dict[int, int]:
    return offsets(site.bootstrap, topic, "read_uncommitted")


def fetched(site: Site, topic: str) -> dict[int, dict[str, Any]]:
    """Per partition, a read_committed fetch from offset 0 (LSO, aborted transactions) and every
    batch of a read_uncommitted one (base offset, control or not, producer id and epoch)."""

    async def main() -> dict[int, dict[str, Any]]:
        client = SiteClient(site.name, site.bootstrap, client_id="txn-mirror-test", timeout=10)
        out: dict[int, dict[str, Any]] = {}
        try:
            for p in range(PARTITIONS):
                conn = await client.open_leader(topic, p)
                try:
                    committed = await fetch_partition(
                        conn, topic, p, Offset(0), isolation_level=READ_COMMITTED, max_wait_ms=0
                    )
                    everything = await fetch_partition(
                        conn, topic, p, Offset(0), isolation_level=READ_UNCOMMITTED, max_wait_ms=0
                    )
                finally:
                    await conn.aclose()
                batches = [
                    (h.base_offset, h.is_control, h.is_transactional, h.producer_id, h.producer_epoch, h.crc)
                    for _, h in complete_batches(everything.records)
                ]
                out[p] = {
                    "lso": committed.last_stable_offset,
                    "aborted": sorted(committed.aborted),
                    "high_watermark": everything.high_watermark,
                    "batches": batches,
                }
        finally:
            await client.aclose()
        return out

    return trio.run(main)


def test_read_committed_on_the_target_sees_exactly_the_committed_transactions(
    two_sites: tuple[Site, Site], tmp_path: Path
) -> None:
    east, west = two_sites
    topic = "orders.txn"
    create(east, topic, PARTITIONS)
    # Its last transaction stays open while the mirror copies and both sites are read: a timeout
    # longer than that (the test's default of 20 s is not, on a loaded machine) keeps the
    # coordinator from aborting it, and fencing this producer, before the test commits it.
    producer = txn_producer(east.bootstrap, "east-writer", **{"transaction.timeout.ms": 180_000})
    committed = write_rounds(producer, topic, range(6))
    # A transaction left open (its records in the log): it holds the LSO on both sites.
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, f"open-{p}".encode(), partition=p)
    assert producer.flush(TIMEOUT_S) == 0

    with RunningLink(LinkRunner(link_config(east, west, tmp_path, "sync_interval_s = 0.5"))):
        wait_for(
            "the mirror to copy east",
            lambda: (
                offsets(west.bootstrap, topic, "read_uncommitted") == offsets(east.bootstrap, topic, "read_uncommitted")
            ),
            60,
        )
        on_east, on_west = fetched(east, topic), fetched(west, topic)
        # The same batches, markers included, at the same offsets (the CRC says: byte for byte).
        assert on_west == on_east
        for p in range(PARTITIONS):
            assert sum(1 for b in on_east[p]["batches"] if b[1]) == 6  # three COMMIT and three ABORT markers
            assert len(on_east[p]["aborted"]) == 3
            assert on_east[p]["lso"] < on_east[p]["high_watermark"]  # the open transaction
        assert offsets(west.bootstrap, topic, "read_committed") == offsets(east.bootstrap, topic, "read_committed")
        readable = read_all(west.bootstrap, topic, PARTITIONS, "read_committed", open_transaction=True)
        assert sorted(readable) == sorted(committed)

        # The open transaction commits on east: west's LSO follows once the markers are copied.
        producer.commit_transaction(TIMEOUT_S)
        committed += [f"open-{p}".encode() for p in range(PARTITIONS)]
        wait_for(
            "west's LSO to pass the committed transaction",
            lambda: (
                offsets(west.bootstrap, topic, "read_committed") == offsets(east.bootstrap, topic, "read_uncommitted")
            ),
            60,
        )
        assert fetched(west, topic) == fetched(east, topic)
        assert sorted(read_all(west.bootstrap, topic, PARTITIONS, "read_committed")) == sorted(committed)
        assert len(read_all(west.bootstrap, topic, PARTITIONS, "read_uncommitted")) == 6 * 15 + 3


def test_an_mm2_link_never_copies_an_aborted_transaction(two_sites: tuple[Site, Site], tmp_path: Path) -> None:
    east, west = two_sites
    topic = "orders"
    create(east, topic, PARTITIONS)
    producer = txn_producer(east.bootstrap, "east-mm2-writer")
    committed = write_rounds(producer, topic, range(4), tag="a")
    (link,) = load_links(mm2_link(tmp_path, "east-to-west", ("east", east), ("west", west)))
    remote = f"east.{topic}"
    with RunningLink(LinkRunner(link)):
        wait_for(
            "the committed records on west",
            lambda: len(read_all(west.bootstrap, remote, PARTITIONS, "read_uncommitted")) >= len(committed),
            60,
        )
        # More while the link runs: an aborted transaction whose records the copier may see
        # before its marker, then a committed one.
        committed += write_rounds(producer, topic, range(4, 8), tag="b")
        wait_for(
            "the later commits on west",
            lambda: len(read_all(west.bootstrap, remote, PARTITIONS, "read_uncommitted")) >= len(committed),
            60,
        )
        # An aborted transaction larger than one of the copier's fetches (4 MiB), with a plain
        # producer's records in between: a fetch starts inside the transaction, whose first
        # offset is before it.
        plain = Producer({"bootstrap.servers": east.bootstrap, "enable.idempotence": True, "linger.ms": 0})
        producer.begin_transaction()
        for chunk in range(6):
            for i in range(50):
                producer.produce(topic, b"x" * 20_000, key=f"big-{chunk}-{i}".encode(), partition=0)
            assert producer.flush(TIMEOUT_S) == 0
            plain.produce(topic, f"plain-{chunk}".encode(), partition=0)
            assert plain.flush(TIMEOUT_S) == 0
            committed.append(f"plain-{chunk}".encode())
        producer.abort_transaction(TIMEOUT_S)
        committed += write_rounds(producer, topic, range(8, 9), tag="c")
        wait_for(
            "the plain records and the last commit on west",
            lambda: len(read_all(west.bootstrap, remote, PARTITIONS, "read_uncommitted")) >= len(committed),
            60,
        )
        time.sleep(2)  # a copier that would copy more has had the time to
        # read_uncommitted on west: whatever the copier produced, aborted or not.
        copied = read_all(west.bootstrap, remote, PARTITIONS, "read_uncommitted")
    assert sorted(copied) == sorted(committed)
    assert (
        len(read_all(east.bootstrap, topic, PARTITIONS, "read_uncommitted"))
        == 2 * (len(committed) - 6 - 15) + 300 + 6 + 15
    )
