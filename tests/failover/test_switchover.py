"""A planned switchover east -> west and back, on a real appliance, under a continuous
idempotent acks=all producer: nothing lost, nothing duplicated, RPO 0, groups follow."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from chaos.ledger import Ledger, check
from chaos.workload import ProducerWorkload, read_back
from tests.failover.appliance import LINK, committed, create_topic, failover, records, start_appliance, wait_mirrored
from tests.node.harness import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "orders"
PARTITIONS = 3
GROUP = "billing"


def consume_and_commit(bootstrap: str, count: int) -> dict[int, int]:
    """Read ``count`` records of TOPIC as GROUP and commit; returns the committed offsets."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([TOPIC])
        seen = 0
        while seen < count:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen += 1
        consumer.commit(asynchronous=False)
        found = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


def positions(bootstrap: str) -> list[tuple[int, int, bytes]]:
    return sorted((r.partition, r.offset, r.value) for r in read_back(bootstrap, TOPIC, timeout=60))


def test_a_planned_switchover_and_failback_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    app = start_appliance(tmp_path)
    try:
        east, west = app.bootstrap("east"), app.bootstrap("west")
        create_topic(east, TOPIC, PARTITIONS)
        with Ledger(tmp_path / "ledger.jsonl") as ledger:
            with ProducerWorkload(east, TOPIC, ledger, rate=200) as on_east:
                on_east.wait_for_acks(300, timeout=60)
                wait_mirrored(app, TOPIC, 100)
                on_east_group = consume_and_commit(east, 150)

                code, answer, stderr = failover(app, "promote", LINK, "--planned", "--timeout", "120")
                assert code == 0, stderr
                assert answer["ok"] and answer["primary"] == "west" and answer["state"] == "promoted"
                assert answer["rpo"]["records"] == 0 and answer["rpo"]["exact"]
                # The producer still pointed at east is refused: the fence names the new primary.
                wait_for("east's producer to be fenced", lambda: ledger.failed > 0, 30)
            assert not on_east.errors, on_east.errors[:3]
            assert all("olicy" in f.error or "POLICY" in f.error for f in ledger.failures()), ledger.failures()[:3]

            # The group's last commit on east reached west before the promote.
            assert committed(west, GROUP, TOPIC, PARTITIONS) == on_east_group
            acked_on_east = ledger.acked
            with ProducerWorkload(west, TOPIC, ledger, rate=200) as on_west:
                on_west.wait_for_acks(acked_on_east + 300, timeout=60)
            result = check(ledger, read_back(west, TOPIC, timeout=60))
            assert result.ok, result.summary()

            code, status, stderr = failover(app, "status", LINK)
            assert code == 0, stderr
            (link_status,) = status["links"]
            assert link_status["dr"]["state"] == "promoted" and link_status["link_state"] == "stopped"

            # Reverse: nothing diverged (planned), and east becomes a mirror of west.
            code, answer, stderr = failover(app, "reverse", LINK, "--export", str(tmp_path / "export"))
            assert code == 0, stderr
            assert answer["divergence"]["records"] == 0
            on_west_now = positions(west)
            wait_for("east to mirror west", lambda: len(records(east, TOPIC)) == len(on_west_now), 60, interval=0.5)
            on_west_group = consume_and_commit(west, 200)

            code, answer, stderr = failover(app, "failback", LINK, "--timeout", "120")
            assert code == 0, stderr
            assert answer["primary"] == "east" and answer["state"] == "mirroring"
            # Identical records at identical offsets on both sites; the group resumes on east.
            assert positions(east) == positions(west)
            assert committed(east, GROUP, TOPIC, PARTITIONS) == on_west_group

            # East takes writes again and the original link copies them to west.
            before = len(records(west, TOPIC))
            with ProducerWorkload(east, TOPIC, ledger, rate=200) as again:
                again.wait_for_acks(ledger.acked + 100, timeout=60)
            wait_for("west to mirror east again", lambda: len(records(west, TOPIC)) >= before + 100, 60, interval=0.5)
            result = check(ledger, read_back(east, TOPIC, timeout=60))
            assert result.ok, result.summary()
            assert positions(east) == positions(west)

            # Wrong state: a second failback is refused with the state named (exit 3).
            code, answer, stderr = failover(app, "failback", LINK)
            assert code == 3 and "mirroring" in stderr and not answer["ok"]
    finally:
        app.stop()
