"""MirrorMaker-2-compatible links between two real sites: remote topics, heartbeats, checkpoints,
group offsets translated so a consumer resumes without skipping, and no loop between two links."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from chaos.errors import WorkloadError
from chaos.workload import read_back
from mirror import LinkRunner, load_links
from mirror._mm2 import decode_checkpoint, decode_heartbeat
from tests.mirror.conftest import Site
from tests.mirror.test_link import RunningLink, create
from tests.mirror.test_mm2_copier import read as read_rows
from tests.node.harness import wait_for

pytestmark = pytest.mark.integration


def mm2_link(tmp_path: Path, name: str, source: tuple[str, Site], target: tuple[str, Site]) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(
        f"""
[[link]]
name = "{name}"
mode = "mm2"
sync_interval_s = 0.5
group_sync_interval_s = 0.5
source = {{ name = "{source[0]}", bootstrap = "{source[1].bootstrap}" }}
target = {{ name = "{target[0]}", bootstrap = "{target[1].bootstrap}" }}
"""
    )
    return path


def produce(site: Site, topic: str, values: list[str], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": site.bootstrap, "acks": "all", "linger.ms": 5})
    for value in values:
        producer.produce(topic, key=value.encode(), value=value.encode(), partition=partition)
    assert producer.flush(30) == 0


def values(site: Site, topic: str) -> list[bytes]:
    try:
        return [r.value for r in sorted(read_back(site.bootstrap, topic, timeout=10))]
    except WorkloadError:
        return []


def topics(site: Site) -> set[str]:
    return set(AdminClient({"bootstrap.servers": site.bootstrap}).list_topics(timeout=10).topics)


def committed(site: Site, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": site.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return int(tp.offset)
    finally:
        consumer.close()


def test_an_mm2_link_translates_group_offsets_so_a_consumer_resumes_without_skipping(
    two_sites: tuple[Site, Site], tmp_path: Path
) -> None:
    east, west = two_sites
    create(east, "orders", 1)
    # A delete-free history: the committed/aborted transaction handling is in test_mm2_copier.
    produce(east, "orders", [f"a{i}" for i in range(120)])
    group = "billing"
    consumer = Consumer({"bootstrap.servers": east.bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("orders", 0, 77)], asynchronous=False)
    consumer.close()

    (link,) = load_links(mm2_link(tmp_path, "east-to-west", ("east", east), ("west", west)))
    with RunningLink(LinkRunner(link)) as running:
        wait_for("east.orders on west", lambda: len(values(west, "east.orders")) == 120, 60)
        wait_for("the translated offset on west", lambda: committed(west, group, "east.orders") >= 0, 30)
        status = running.status()
        assert status["topics"]["orders"]["target_topic"] == "east.orders"
        assert status["group_sync"]["groups"][0]["state"] == "synced"
        wait_for("heartbeats on west", lambda: len(values(west, "heartbeats")) >= 2, 20)
        # More records while the link runs, and a later commit: both follow.
        produce(east, "orders", [f"b{i}" for i in range(30)])
        consumer = Consumer({"bootstrap.servers": east.bootstrap, "group.id": group, "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition("orders", 0, 131)], asynchronous=False)
        consumer.close()
        wait_for("east.orders caught up", lambda: len(values(west, "east.orders")) == 150, 60)
        wait_for("the new translated offset", lambda: committed(west, group, "east.orders") >= 120, 30)

    assert values(west, "east.orders") == values(east, "orders")
    # The consumer on west resumes at or before the record after the one committed on east
    # (east's offset 131 is "b11"): never past it.
    translated = committed(west, group, "east.orders")
    assert 120 <= translated <= 131
    resumed = [v for v in values(west, "east.orders")][translated:]
    assert b"b11" in resumed and resumed[0] in {f"b{i}".encode() for i in range(12)}

    # MirrorMaker 2's own record formats, readable by its tools.
    heartbeats = [decode_heartbeat(r[1], r[2]) for r in read_rows(west, "heartbeats")]
    assert {(h.source_alias, h.target_alias) for h in heartbeats} == {("east", "west")}
    assert all(abs(h.timestamp_ms - time.time() * 1000) < 300_000 for h in heartbeats)
    checkpoints = [decode_checkpoint(r[1], r[2]) for r in read_rows(west, "east.checkpoints.internal")]
    latest = [c for c in checkpoints if c.group == group][-1]
    assert (latest.topic, latest.partition, latest.upstream, latest.downstream) == ("east.orders", 0, 131, translated)
    # The offset-syncs topic lives on the source, as MirrorMaker 2 keeps it by default.
    assert "mm2-offset-syncs.west.internal" in topics(east)


def test_two_mm2_links_east_and_west_do_not_loop(two_sites: tuple[Site, Site], tmp_path: Path) -> None:
    east, west = two_sites
    create(east, "a", 1)
    create(west, "b", 1)
    produce(east, "a", ["from-east"])
    produce(west, "b", ["from-west"])
    (forward,) = load_links(mm2_link(tmp_path, "east-to-west", ("east", east), ("west", west)))
    (backward,) = load_links(mm2_link(tmp_path, "west-to-east", ("west", west), ("east", east)))
    with RunningLink(LinkRunner(forward)) as one, RunningLink(LinkRunner(backward)) as other:
        wait_for("east.a on west", lambda: values(west, "east.a") == [b"from-east"], 30)
        wait_for("west.b on east", lambda: values(east, "west.b") == [b"from-west"], 30)
        # Each side's heartbeats reach the other, once renamed.
        wait_for("east.heartbeats on west", lambda: "east.heartbeats" in topics(west), 30)
        wait_for("west.heartbeats on east", lambda: "west.heartbeats" in topics(east), 30)
        # Several more sync passes on both links: nothing comes back.
        passes = (one.status()["syncs"], other.status()["syncs"])
        wait_for("five more passes", lambda: one.status()["syncs"] >= passes[0] + 5, 30)
        wait_for("five more passes", lambda: other.status()["syncs"] >= passes[1] + 5, 30)
        for site in (east, west):
            looped = {t for t in topics(site) if t.startswith(("east.west.", "west.east.", "east.east.", "west.west."))}
            assert looped == set(), looped
        assert "a" not in {t for t in other.status()["topics"]}  # west's copy of a is never sent back
        assert set(one.status()["topics"]) == {"a", "heartbeats"}
        assert set(other.status()["topics"]) == {"b", "heartbeats"}
    assert values(east, "a") == [b"from-east"] and values(west, "b") == [b"from-west"]
