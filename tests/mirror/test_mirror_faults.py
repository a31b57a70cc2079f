"""A link under faults on the source site: every acknowledged record reaches the target at its
acknowledged offset, once."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from chaos.ledger import Ledger, check
from chaos.nemesis import Kill
from chaos.workload import ProducerWorkload, read_back
from mirror import LinkRunner
from tests.mirror.conftest import Site
from tests.mirror.test_link import RunningLink, create, ends, link_config
from tests.mirror.test_service import MirrorProcess
from tests.node.harness import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.slow]

FAST = "sync_interval_s = 0.5\n"


def leader_of(site: Site, topic: str, partition: int) -> int:
    client = AdminClient({"bootstrap.servers": site.bootstrap})
    return int(client.list_topics(timeout=10).topics[topic].partitions[partition].leader)


def assert_mirrored_exactly(ledger: Ledger, east: Site, west: Site, topic: str) -> None:
    wait_for(f"{topic} on west to reach east's end offsets", lambda: ends(west, topic) == ends(east, topic), 60)
    on_west = read_back(west.bootstrap, topic)
    result = check(ledger, on_west)
    assert result.acknowledged > 0
    assert (result.lost, result.moved, result.duplicates, result.conflicts) == ([], [], [], []), result
    assert sorted(on_west) == sorted(read_back(east.bootstrap, topic))


def test_the_link_follows_a_new_source_leader_when_the_old_one_is_killed(
    two_sites: tuple[Site, Site], tmp_path: Path
) -> None:
    east, west = two_sites
    topic = "orders"
    create(east, topic, 1, **{"min.insync.replicas": "2"})
    ledger = Ledger()
    with (
        RunningLink(LinkRunner(link_config(east, west, tmp_path, FAST))) as link,
        ProducerWorkload(east.bootstrap, topic, ledger, rate=300) as workload,
    ):
        workload.wait_for_acks(300, timeout=30)
        wait_for("some records on west", lambda: ends(west, topic).get(0, 0) > 100, 30)
        old = leader_of(east, topic, 0)
        outage = Kill([next(n for n in east.nodes if n.broker_id == old)])
        outage.start()
        wait_for("a new leader on east", lambda: leader_of(east, topic, 0) not in (-1, old), 30)
        acked = workload.acked
        workload.wait_for_acks(acked + 600, timeout=60)
        outage.heal()
        workload.wait_for_acks(workload.acked + 300, timeout=60)
        workload.stop()
        assert_mirrored_exactly(ledger, east, west, topic)
        status = link.status()
        (partition,) = status["topics"][topic]["partitions"]
        assert partition["gaps"] == [] and partition["state"] == "copying"
        assert partition["errors"] >= 1  # it did see the leader go


def test_a_mirror_killed_mid_stream_resumes_without_gap_or_duplicate(
    two_sites: tuple[Site, Site], tmp_path: Path
) -> None:
    east, west = two_sites
    topic = "orders"
    create(east, topic, 3)
    config = tmp_path / "links.toml"
    config.write_text(
        f"""
[[link]]
name = "east-to-west"
sync_interval_s = 0.5
source = {{ name = "east", bootstrap = "{east.bootstrap}" }}
target = {{ name = "west", bootstrap = "{west.bootstrap}" }}
"""
    )
    ledger = Ledger()
    mirror = MirrorProcess(tmp_path / "mirror", config)
    try:
        with ProducerWorkload(east.bootstrap, topic, ledger, rate=500) as workload:
            mirror.start()
            workload.wait_for_acks(500, timeout=30)
            wait_for("records on west", lambda: sum(ends(west, topic).values()) > 200, 30)
            for _ in range(2):  # twice, mid-stream
                crash = Kill([mirror])
                crash.start()
                workload.wait_for_acks(workload.acked + 500, timeout=30)
                crash.heal()
                wait_for(
                    "the restarted mirror copying", lambda: sum(ends(west, topic).values()) > workload.acked // 2, 30
                )
            workload.wait_for_acks(workload.acked + 300, timeout=30)
            workload.stop()
        assert_mirrored_exactly(ledger, east, west, topic)
    finally:
        mirror.stop()


# Small fetches and a deep queue: a backlog goes over in many pipelined fetches and appends, so a
# leader killed mid-copy meets fetches and appends in flight and chunks queued.
PIPELINED = FAST + "fetch_max_bytes = 65536\npipeline_fetches = 4\n"


@pytest.mark.parametrize("side", ["source", "target"])
def test_a_pipelined_catch_up_survives_a_leader_killed_mid_copy_without_gap_or_duplicate(
    two_sites: tuple[Site, Site], tmp_path: Path, side: str
) -> None:
    east, west = two_sites
    topic = "orders"
    create(east, topic, 1, **{"min.insync.replicas": "2"})
    ledger = Ledger()
    with ProducerWorkload(east.bootstrap, topic, ledger, rate=1000) as workload:
        workload.wait_for_acks(3000, timeout=60)  # a backlog before the link starts
        with RunningLink(LinkRunner(link_config(east, west, tmp_path, PIPELINED))) as link:
            wait_for("a part of the backlog on west", lambda: ends(west, topic).get(0, 0) > 300, 60)
            site = east if side == "source" else west
            old = leader_of(site, topic, 0)
            # The producer goes on at 1000 records/s: the copier is copying (fetches and appends in
            # flight) whether or not it has caught up with the backlog by now.
            outage = Kill([next(n for n in site.nodes if n.broker_id == old)])
            outage.start()
            wait_for(f"a new leader on {site.name}", lambda: leader_of(site, topic, 0) not in (-1, old), 30)
            workload.wait_for_acks(workload.acked + 500, timeout=60)
            outage.heal()
            workload.wait_for_acks(workload.acked + 300, timeout=60)
            workload.stop()
            assert_mirrored_exactly(ledger, east, west, topic)
            (partition,) = link.status()["topics"][topic]["partitions"]
            assert partition["gaps"] == [] and partition["state"] == "copying"
            assert partition["errors"] >= 1  # it did see the leader go
