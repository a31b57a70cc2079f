"""The partition copier between two real sites: same batches, same offsets, nothing twice."""

from __future__ import annotations

import time

import pytest
import trio
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from mirror._copier import PartitionCopier
from node.client import SiteClient
from tests.mirror.conftest import Site
from tests.node.harness import stored_batches, wait_for

pytestmark = pytest.mark.integration

LINK = "east-to-west"


def create(site: Site, name: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": site.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3, config=configs)])[name].result(30)


def produce(site: Site, topic: str, n: int, codec: str) -> None:
    producer = Producer({"bootstrap.servers": site.bootstrap, "acks": "all", "compression.type": codec, "linger.ms": 5})
    for i in range(n):
        producer.produce(
            topic,
            key=None if i % 5 == 0 else f"k{i % 7}".encode(),
            value=f"{codec}-{i}".encode(),
            headers=[("h", f"{i}".encode())],
            timestamp=1_700_000_000_000 + i,
        )
        if i % 200 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def read(site: Site, topic: str, partitions: int) -> list[tuple[int, int, bytes | None, bytes | None, object, int]]:
    consumer = Consumer({"bootstrap.servers": site.bootstrap, "group.id": f"r-{time.monotonic_ns()}"})
    try:
        # The topic's metadata first: without it librdkafka answers watermarks with UNKNOWN_PARTITION
        # at once (seen on a loaded machine) instead of asking for it.
        consumer.list_topics(topic, timeout=10)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out = []
        deadline = time.monotonic() + 60
        while sum(1 for r in out) < sum(ends.values()) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers(), msg.timestamp()[1]))
        return sorted(out)
    finally:
        consumer.close()


async def copy_until(east: Site, west: Site, topic: str, partitions: int, done: trio.Event) -> list[PartitionCopier]:
    source = SiteClient("east", east.bootstrap, client_id="mirror-test")
    target = SiteClient("west", west.bootstrap, client_id="mirror-test")
    copiers = [PartitionCopier(LINK, source, target, topic, p, fetch_max_wait_ms=100) for p in range(partitions)]
    async with trio.open_nursery() as nursery:
        for c in copiers:
            nursery.start_soon(c.run)
        await done.wait()
        nursery.cancel_scope.cancel()
    return copiers


def test_records_appear_on_the_target_at_identical_offsets(two_sites: tuple[Site, Site]) -> None:
    east, west = two_sites
    create(east, "orders", 3)
    create(west, "orders", 3, **{"strait.mirror.link": LINK})
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        produce(east, "orders", 300, codec)
    expected = read(east, "orders", 3)
    assert len(expected) == 1500

    async def main() -> list[PartitionCopier]:
        done = trio.Event()
        async with trio.open_nursery() as nursery:
            result: list[PartitionCopier] = []

            async def run() -> None:
                result.extend(await copy_until(east, west, "orders", 3, done))

            nursery.start_soon(run)
            with trio.fail_after(90):
                while True:
                    got = await trio.to_thread.run_sync(read, west, "orders", 3)
                    if len(got) >= len(expected):
                        break
                    await trio.sleep(0.5)
            done.set()
        return result

    copiers = trio.run(main)
    assert read(west, "orders", 3) == expected
    for p in range(3):
        assert [(b[0], b[3]) for b in stored_batches(west.nodes[0], "orders", p)] == [
            (b[0], b[3]) for b in stored_batches(east.nodes[0], "orders", p)
        ]
    assert all(c.progress.gaps == [] for c in copiers)
    # A produce to the mirror on west is refused: it is read-only.
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": west.bootstrap, "acks": "all", "message.timeout.ms": 5000})
    producer.produce("orders", b"not allowed", partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert errors and errors[0] is not None and "POLICY_VIOLATION" in errors[0].name()


def test_a_restarted_copier_resumes_from_the_target_without_gap_or_duplicate(two_sites: tuple[Site, Site]) -> None:
    east, west = two_sites
    create(east, "resume", 1)
    create(west, "resume", 1, **{"strait.mirror.link": LINK})
    produce(east, "resume", 500, "lz4")

    async def copy_some(target_count: int) -> None:
        done = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(copy_until, east, west, "resume", 1, done)
            with trio.fail_after(60):
                while len(await trio.to_thread.run_sync(read, west, "resume", 1)) < target_count:
                    await trio.sleep(0.3)
            done.set()

    trio.run(copy_some, 500)
    produce(east, "resume", 500, "zstd")
    trio.run(copy_some, 1000)  # a fresh copier: it learns where to resume from the target alone
    got = read(west, "resume", 1)
    assert got == read(east, "resume", 1)
    assert [r[1] for r in got] == list(range(1000))
    wait_for("nothing more to copy", lambda: len(read(west, "resume", 1)) == 1000)


def make_mirror_of_other_records(east: Site, west: Site, topic: str, target: int, source: int, linger_ms: int) -> None:
    """West's ``topic`` holds ``target`` records of its own (one per batch) and becomes the link's
    mirror; east's holds ``source`` records, produced with ``linger_ms`` (large: one batch)."""
    create(east, topic, 1)
    create(west, topic, 1)
    producer = Producer({"bootstrap.servers": west.bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(target):
        producer.produce(topic, f"west-{i}".encode())
        producer.flush(30)
    admin = AdminClient({"bootstrap.servers": west.bootstrap})
    entry = ConfigEntry("strait.mirror.link", LINK, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)
    producer = Producer({"bootstrap.servers": east.bootstrap, "acks": "all", "linger.ms": linger_ms})
    for i in range(source):
        producer.produce(topic, f"east-{i}".encode())
    assert producer.flush(30) == 0


@pytest.mark.parametrize(
    ("topic", "source", "linger_ms", "says"),
    [
        ("ahead", 20, 5, "the mirror ends at 50, past the source's high watermark 20"),
        ("across", 80, 1000, "the source's batch at offset 0 runs across the mirror's end 50"),
    ],
)
def test_a_target_the_source_does_not_continue_is_held_diverged_and_left_as_it_is(
    two_sites: tuple[Site, Site], caplog: pytest.LogCaptureFixture, topic: str, source: int, linger_ms: int, says: str
) -> None:
    # What an unclean election on the source leaves: the mirror holds records the source lost,
    # and the source either ends before the mirror's end or goes on in batches across it.
    east, west = two_sites
    make_mirror_of_other_records(east, west, topic, 50, source, linger_ms)
    if topic == "across":
        assert [b[:2] for b in stored_batches(east.nodes[0], topic)] == [(0, 79)]
    before = read(west, topic, 1)

    async def main() -> tuple[list[str], PartitionCopier]:
        east_client = SiteClient("east", east.bootstrap, client_id="mirror-test")
        west_client = SiteClient("west", west.bootstrap, client_id="mirror-test")
        copier = PartitionCopier(LINK, east_client, west_client, topic, 0, fetch_max_wait_ms=100, backoff_s=0.25)
        held: list[str] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(copier.run)
            with trio.fail_after(60):
                while copier.progress.state != "diverged":
                    await trio.sleep(0.01)
            for _ in range(300):  # 3 s, three of the copier's retries: its state must not flicker
                held.append(copier.progress.state)
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
        return held, copier

    held, copier = trio.run(main)
    assert set(held) == {"diverged"}
    assert copier.progress.records_copied == 0
    said = [r for r in caplog.records if says in r.getMessage()]
    assert len(said) == 1  # once, not at every retry
    assert copier.progress.last_error == says
    assert read(west, topic, 1) == before  # the target's records are left as they are


def test_an_error_the_copier_got_past_is_counted_and_no_longer_reported_as_its_last(
    two_sites: tuple[Site, Site],
) -> None:
    # The target topic does not exist yet: every append fails until it is created (as just after
    # a link creates a topic, before the target's nodes host it). Then the copier copies, and its
    # status must not keep reporting an error it is past.
    east, west = two_sites
    topic = "late-target"
    create(east, topic, 1)
    produce(east, topic, 50, "none")

    async def main() -> PartitionCopier:
        source = SiteClient("east", east.bootstrap, client_id="mirror-test")
        target = SiteClient("west", west.bootstrap, client_id="mirror-test")
        copier = PartitionCopier(LINK, source, target, topic, 0, fetch_max_wait_ms=100, backoff_s=0.1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(copier.run)
            with trio.fail_after(30):
                while copier.progress.errors == 0:
                    await trio.sleep(0.01)
            failing = copier.progress.last_error
            assert failing is not None and "late-target" in failing, failing
            await trio.to_thread.run_sync(lambda: create(west, topic, 1, **{"strait.mirror.link": LINK}))
            with trio.fail_after(60):
                while copier.progress.records_copied < 50:
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
        return copier

    copier = trio.run(main)
    assert copier.progress.state == "copying" and copier.progress.errors > 0
    assert copier.progress.last_error is None
    assert read(west, topic, 1) == read(east, topic, 1)
