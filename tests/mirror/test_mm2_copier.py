"""The mm2 copier between two real sites: east's ``T`` into west's ``east.T``, with offset syncs on east.

Records are produced on east with confluent-kafka (every codec, keys, headers, timestamps).
strait's nodes have no transactions (they refuse transactional produces and keep no aborted
transaction index), so the committed and the aborted transaction are written into an east
topic as hand-built batches (transactional data batches and COMMIT/ABORT markers, as a Kafka
log holds them) through MirrorAppend, and the copier's fetch is told the aborted transaction
the way a Kafka broker's read_committed answer would (``aborted_transactions``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from mirror._mm2 import (
    Checkpoint,
    Heartbeat,
    MM2PartitionCopier,
    OffsetSync,
    OffsetSyncStore,
    SourceOffset,
    TargetOffset,
    decode_checkpoint,
    decode_heartbeat,
    decode_offset_sync,
    emit_heartbeat,
    offset_syncs_topic,
    sync_for,
    write_checkpoints,
)
from node.client import FetchedPartition, SiteClient, mirror_append
from storage import TopicPartition as StoredPartition
from storage import list_batches, segment_files
from storage.records import BatchBuilder, Compression, build_batch, build_control_batch
from tests.mirror.conftest import Site
from tests.node.harness import NodeProcess, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SYNCS = offset_syncs_topic("west")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
Row = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]], int]  # offset, key, value, headers, ts


def create(site: Site, name: str, partitions: int = 1, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": site.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3, config=configs)])[name].result(30)


def produce(site: Site, topic: str, rounds: list[tuple[str, int]], *, first: int = 0) -> None:
    """``rounds`` of (codec, records), each flushed on its own so it becomes its own batch(es)."""
    n = first
    for codec, count in rounds:
        producer = Producer({"bootstrap.servers": site.bootstrap, "acks": "all", "compression.type": codec})
        for _ in range(count):
            producer.produce(
                topic,
                key=None if n % 4 == 0 else f"k{n % 7}".encode(),
                value=f"{codec}-{n}".encode(),
                headers=[("n", str(n).encode()), ("empty", None)] if n % 3 else [],
                timestamp=1_700_000_000_000 + n,
            )
            n += 1
        assert producer.flush(30) == 0


def read(site: Site, topic: str, start: int = 0) -> list[Row]:
    """Every record of partition 0 from ``start`` to the end offset."""
    consumer = Consumer({"bootstrap.servers": site.bootstrap, "group.id": f"r-{time.monotonic_ns()}"})
    try:
        end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        consumer.assign([TopicPartition(topic, 0, start)])
        out: list[Row] = []
        deadline = time.monotonic() + 30
        while (not out or out[-1][0] < end - 1) and start < end and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            headers = [(k, v) for k, v in (msg.headers() or [])]
            out.append((msg.offset(), msg.key(), msg.value(), headers, msg.timestamp()[1]))
        return out
    finally:
        consumer.close()


def contents(rows: list[Row]) -> list[tuple[Any, ...]]:
    return [row[1:] for row in rows]


def read_syncs(east: Site) -> list[OffsetSync]:
    return [decode_offset_sync(row[1], row[2]) for row in read(east, SYNCS)]


def stored_codecs_and_flags(node: NodeProcess, topic: str) -> list[tuple[int, bool, bool, int]]:
    """(codec, transactional, control, producer id) of each batch of ``node``'s replica, from its files."""
    tp = StoredPartition(topic, 0)
    for d in node.log_dirs:
        directory = d / tp.dir_name
        if directory.exists():
            return [
                (b.header.compression, b.header.is_transactional, b.header.is_control, b.header.producer_id)
                for seg in segment_files(directory)
                for b in list_batches(seg)
            ]
    return []


def topic_config(site: Site, topic: str, key: str) -> str:
    admin = AdminClient({"bootstrap.servers": site.bootstrap})
    (result,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
    return str(result.result(30)[key].value)


async def copy_until(
    copiers: list[MM2PartitionCopier], done: Callable[[], bool], *, timeout: float = 60, poll_s: float = 0.05
) -> None:
    """Run the copiers until ``done()``, then cancel them."""
    async with trio.open_nursery() as nursery:
        for c in copiers:
            nursery.start_soon(c.run)
        with trio.fail_after(timeout):
            while not done():
                await trio.sleep(poll_s)
        nursery.cancel_scope.cancel()


def caught_up(copier: MM2PartitionCopier, source_end: int) -> bool:
    return copier.progress.mirrored_offset >= source_end and not copier.sync_pending


def sites(east: Site, west: Site) -> tuple[SiteClient, SiteClient]:
    return SiteClient("east", east.bootstrap, client_id="mm2-test"), SiteClient(
        "west", west.bootstrap, client_id="mm2-test"
    )


# -- the transaction topic: batches as a Kafka log holds them ------------------------------------

COMMITTED_PID, ABORTED_PID = 1000, 2000
ABORTED = ((ABORTED_PID, 5),)  # what Kafka's read_committed fetch answers for this log
ABORTED_LAST = 8  # the ABORT marker: fetches from past it no longer overlap the transaction


def transaction_log() -> bytes:
    def txn(base: int, pid: int, values: list[bytes], codec: Compression) -> bytes:
        builder = BatchBuilder(
            compression=codec, base_offset=base, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True
        )
        for i, v in enumerate(values):
            builder.append(1_700_000_100_000 + base + i, b"txn", v, [("tx", str(pid).encode())])
        return builder.build()

    def marker(base: int, pid: int, commit: bool) -> bytes:
        return build_control_batch(
            commit=commit, timestamp=1_700_000_100_000, producer_id=pid, producer_epoch=0, base_offset=base
        )

    return b"".join(
        [
            build_batch(
                [(1_700_000_100_000, b"k", b"p0"), (1_700_000_100_001, None, b"p1")], compression=Compression.LZ4
            ),
            txn(2, COMMITTED_PID, [b"c2", b"c3", b"c4"], Compression.GZIP),
            txn(5, ABORTED_PID, [b"a5", b"a6"], Compression.SNAPPY),
            marker(7, COMMITTED_PID, True),
            marker(8, ABORTED_PID, False),
            build_batch(
                [(1_700_000_100_009, b"k", b"p9"), (1_700_000_100_010, b"k", b"p10")],
                compression=Compression.ZSTD,
                base_offset=9,
            ),
        ]
    )


KEPT = {0: b"p0", 1: b"p1", 2: b"c2", 3: b"c3", 4: b"c4", 9: b"p9", 10: b"p10"}  # source offset -> value


async def inject(east: Site, topic: str, records: bytes) -> None:
    client = SiteClient("east", east.bootstrap, client_id="mm2-test-inject")
    try:
        await client.refresh([topic])
        _, conn = await client.leader_connection(topic, 0)
        result = await mirror_append(conn, "inject", topic, 0, 0, records)
        assert result.error_code == 0, result
    finally:
        await client.aclose()


class KafkaLikeSource(MM2PartitionCopier):
    """Answers the fetches of ``payments`` with the aborted transaction a Kafka broker would report."""

    async def _fetch(self, offset: int) -> FetchedPartition:
        part = await super()._fetch(offset)
        if self.progress.topic == "payments" and offset <= ABORTED_LAST:
            return dataclasses.replace(part, aborted=ABORTED)
        return part


def test_records_transactions_and_syncs_reach_the_remote_topic(two_sites: tuple[Site, Site]) -> None:
    east, west = two_sites
    create(east, "orders")
    create(west, "east.orders")
    produce(east, "orders", [(codec, 40) for codec in CODECS])
    create(east, "payments", **{"strait.mirror.link": "inject"})
    create(west, "east.payments")
    trio.run(inject, east, "payments", transaction_log())
    source_orders = read(east, "orders")
    assert len(source_orders) == 200

    async def main() -> OffsetSyncStore:
        source, target = sites(east, west)
        try:
            copiers = [
                KafkaLikeSource(source, target, "east", "west", topic, 0, fetch_max_wait_ms=100)
                for topic in ("orders", "payments")
            ]
            await copy_until(copiers, lambda: caught_up(copiers[0], 200) and caught_up(copiers[1], 11))
            assert all(c.progress.gaps == [] and c.progress.state == "copying" for c in copiers)
            assert copiers[0].progress.records_copied == 200 and copiers[1].progress.records_copied == 7
            store = OffsetSyncStore(source, SYNCS)
            await store.load()
            return store
        finally:
            await source.aclose()
            await target.aclose()

    store = trio.run(main)

    # Every record, in order, with its key, value, headers and timestamp; the codecs preserved.
    assert contents(read(west, "east.orders")) == contents(source_orders)
    east_codecs = [c for c, *_ in stored_codecs_and_flags(east.nodes[0], "orders")]
    assert [c for c, *_ in stored_codecs_and_flags(west.nodes[0], "east.orders")] == east_codecs
    assert sorted(set(east_codecs)) == [0, 1, 2, 3, 4]

    # The transactions: the committed one is there, the aborted one and the markers are not.
    payments = read(west, "east.payments")
    assert [(r[0], r[2]) for r in payments] == list(enumerate(KEPT.values()))
    assert payments[2][1:] == (b"txn", b"c2", [("tx", b"1000")], 1_700_000_100_002)
    assert payments[5][1:] == (b"k", b"p9", [], 1_700_000_100_009)
    assert [flags[1:] for flags in stored_codecs_and_flags(west.nodes[0], "east.payments")] == [(False, False, -1)] * 3

    # The offset syncs on east decode, and each names a source record and its copy.
    syncs = read_syncs(east)
    by_partition: dict[str, list[tuple[int, int]]] = {}
    for s in syncs:
        assert s.partition == 0
        pairs = by_partition.setdefault(s.topic, [])
        if not pairs or pairs[-1] != (s.upstream, s.downstream):  # a retried write may repeat one
            pairs.append((s.upstream, s.downstream))
    assert by_partition["payments"] == [(-1, -1), (1, 1), (4, 4), (10, 6)]
    assert by_partition["orders"][0] == (-1, -1) and by_partition["orders"][-1] == (199, 199)
    west_orders = {r[0]: r[2] for r in read(west, "east.orders")}
    for upstream, downstream in by_partition["orders"][1:]:
        assert west_orders[downstream] == source_orders[upstream][2]
    assert topic_config(east, SYNCS, "cleanup.policy") == "compact"

    # Translation never skips: from the translated offset a consumer reads every record the
    # group had not consumed yet (and maybe a few it had).
    kept = sorted(KEPT)
    expected = {0: 0, 1: 1, 2: 2, 3: 2, 4: 4, 5: 5, 8: 5, 9: 5, 10: 6, 11: 7}
    assert {c: store.translate("payments", 0, c) for c in expected} == expected
    for committed in (0, 3, 5, 10, 11):
        d = store.translate("payments", 0, committed)
        assert d is not None
        want = [KEPT[u] for u in kept if u >= committed]
        got = [r[2] for r in read(west, "east.payments", d)]
        assert got[len(got) - len(want) :] == want and len(got) - len(want) <= 3, (committed, d, got)
    for committed in (0, 1, 57, 120, 199, 200):
        d = store.translate("orders", 0, committed)
        assert d is not None and d <= committed
        got = [r[2] for r in read(west, "east.orders", d)]
        assert got[len(got) - (200 - committed) :] == [r[2] for r in source_orders[committed:]]


class Crash(Exception):
    """The copier process dies here."""


class CrashBeforeSync(MM2PartitionCopier):
    """Dies after its ``crash_after``-th produce, before writing that produce's offset sync."""

    crash_after = 3

    async def _write_sync(self, sync: OffsetSync | None) -> None:
        if sync is not None and sync.upstream >= 0:  # not the anchor
            self.crash_after -= 1
            if self.crash_after == 0:
                raise Crash
        await super()._write_sync(sync)


class SlowProduce(MM2PartitionCopier):
    async def _produce(self, out: Any) -> None:
        await trio.sleep(0.1)
        await super()._produce(out)


def test_a_new_copier_resumes_without_gap_or_duplicate(two_sites: tuple[Site, Site]) -> None:
    east, west = two_sites
    create(east, "resume")
    create(west, "east.resume")
    produce(east, "resume", [("lz4", 15)] * 20)  # 20 batches of 15
    source = read(east, "resume")
    assert len(source) == 300

    async def cancel_mid_stream() -> int:
        src, tgt = sites(east, west)
        try:
            copier = SlowProduce(src, tgt, "east", "west", "resume", 0, fetch_max_wait_ms=100)
            await copy_until([copier], lambda: copier.progress.records_copied >= 60, poll_s=0.01)
            return copier.progress.records_copied
        finally:
            await src.aclose()
            await tgt.aclose()

    copied = trio.run(cancel_mid_stream)
    assert 60 <= copied < 300
    assert 60 <= len(read(west, "east.resume")) < 300

    async def crash_between_produce_and_sync() -> None:
        src, tgt = sites(east, west)
        try:
            await CrashBeforeSync(src, tgt, "east", "west", "resume", 0, fetch_max_wait_ms=100).run()
        finally:
            await src.aclose()
            await tgt.aclose()

    with pytest.raises(Crash):
        trio.run(crash_between_produce_and_sync)
    latest = read_syncs(east)[-1]
    on_target = len(read(west, "east.resume"))
    assert on_target == latest.downstream + 1 + 15, "the third batch is on the target, its sync is not"

    async def finish() -> MM2PartitionCopier:
        src, tgt = sites(east, west)
        try:
            copier = MM2PartitionCopier(src, tgt, "east", "west", "resume", 0, fetch_max_wait_ms=100)
            await copy_until([copier], lambda: caught_up(copier, 300))
            return copier
        finally:
            await src.aclose()
            await tgt.aclose()

    copier = trio.run(finish)
    assert copier.progress.records_copied == 300 - on_target
    assert copier.progress.gaps == [] and copier.progress.state == "copying"
    assert contents(read(west, "east.resume")) == contents(source)
    assert read_syncs(east)[-1] == sync_for("resume", 0, 299, 299)


def test_unknown_position_heartbeats_and_checkpoints(two_sites: tuple[Site, Site]) -> None:
    east, west = two_sites
    create(east, "orphan")
    create(west, "east.orphan")
    produce(east, "orphan", [("none", 5)])
    produce(west, "east.orphan", [("none", 2)])  # written by someone else: no sync says what it is

    async def main() -> None:
        src, tgt = sites(east, west)
        try:
            copier = MM2PartitionCopier(src, tgt, "east", "west", "orphan", 0, fetch_max_wait_ms=100, backoff_s=0.1)
            await copy_until([copier], lambda: copier.progress.state == "unknown-position")
            assert "no offset sync for orphan-0" in (copier.progress.last_error or "")
            assert copier.progress.records_copied == 0

            await emit_heartbeat(tgt, "east", "west", now_ms=1_700_000_000_000)
            await emit_heartbeat(tgt, "east", "west")
            written = await write_checkpoints(
                tgt,
                "east",
                [
                    ("g1", "east.orders", 0, 42, 40, None),
                    Checkpoint("g2", "east.orders", 1, SourceOffset(7), TargetOffset(3), "m"),
                ],
            )
            assert written == 2
        finally:
            await src.aclose()
            await tgt.aclose()

    trio.run(main)
    assert [r[2] for r in read(west, "east.orphan")] == [b"none-0", b"none-1"]

    beats = read(west, "heartbeats")
    assert len(beats) == 2
    first, second = (decode_heartbeat(r[1], r[2]) for r in beats)
    assert first == Heartbeat("east", "west", 1_700_000_000_000) and beats[0][4] == 1_700_000_000_000
    assert second.source_alias == "east" and abs(second.timestamp_ms - time.time() * 1000) < 60_000
    assert topic_config(west, "heartbeats", "cleanup.policy") == "compact"

    checkpoints = [decode_checkpoint(r[1], r[2]) for r in read(west, "east.checkpoints.internal")]
    assert [(c.group, c.topic, c.partition, c.upstream, c.downstream, c.metadata) for c in checkpoints] == [
        ("g1", "east.orders", 0, 42, 40, ""),
        ("g2", "east.orders", 1, 7, 3, "m"),
    ]
    assert topic_config(west, "east.checkpoints.internal", "cleanup.policy") == "compact"
    wait_for(
        "one partition each",
        lambda: _partitions(west, "heartbeats") == _partitions(west, "east.checkpoints.internal") == 1,
    )


def _partitions(site: Site, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": site.bootstrap})
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
