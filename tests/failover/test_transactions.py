"""Transactions at failover, on a real two-site appliance with confluent-kafka's transactional
producer on east and the ``strait failover`` CLI.

Unplanned: a transaction open on east when east is lost is shown by ``status`` (count, oldest
first offset, age), aborted by the promote (its coordinator died with east), and read_committed
consumers on west then pass it and never see its records. Planned: the drain waits for a
transaction open on the fenced source to end; once its producer commits it (the fence takes
markers), the switchover completes with RPO 0 and west shows it committed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.failover.appliance import LINK, Appliance, create_topic, failover, kill_site, start_appliance
from tests.node.harness import wait_for
from tests.node.test_transactions_e2e import read_all, txn_producer

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "orders"
PARTITIONS = 2
TIMEOUT_S = 30.0


def ends(bootstrap: str, isolation: str = "read_uncommitted") -> dict[int, int]:
    """Each partition's end for a consumer of ``isolation`` (read_committed: the last stable offset)."""
    group = f"ends-{time.monotonic_ns()}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": isolation})
    try:
        consumer.list_topics(TOPIC, timeout=10)
        return {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), TIMEOUT_S)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def mirrored(east: str, west: str) -> bool:
    """West holds all of east's records (False while west does not know the topic yet)."""
    try:
        return ends(west) == ends(east)
    except KafkaException:
        return False


@dataclass
class History:
    """What east's transactional producer did, mirrored to west: a committed and an aborted
    transaction on every partition, then one left open (its records in the log)."""

    producer: Producer
    committed: list[bytes]
    opened: list[bytes]
    open_at: dict[int, int]  # where the open transaction starts in each partition


def write_history(app: Appliance) -> History:
    east, west = app.bootstrap("east"), app.bootstrap("west")
    create_topic(east, TOPIC, PARTITIONS)
    producer = txn_producer(east, "east-app", **{"transaction.timeout.ms": 300_000})
    committed: list[bytes] = []
    for round_, commit in ((0, True), (1, False), (2, None)):
        producer.begin_transaction()
        values = [
            f"r{round_}-{p}-{i}".encode() for p in range(PARTITIONS) for i in range(10 if commit is not None else 3)
        ]
        for value in values:
            producer.produce(TOPIC, value, partition=int(value.split(b"-")[1]))
        assert producer.flush(TIMEOUT_S) == 0
        if commit:
            producer.commit_transaction(TIMEOUT_S)
            committed += values
        elif commit is not None:
            producer.abort_transaction(TIMEOUT_S)
    wait_for("west to hold all of east's records", lambda: mirrored(east, west), 60, interval=0.5)
    open_at = {p: 10 + 1 + 10 + 1 for p in range(PARTITIONS)}  # 10 records and a marker, twice
    return History(producer, committed, values, open_at)


def test_a_transaction_open_when_east_is_lost_is_shown_then_aborted_by_the_promote(tmp_path: Path) -> None:
    app = start_appliance(tmp_path)
    try:
        east, west = app.bootstrap("east"), app.bootstrap("west")
        done = write_history(app)
        committed, opened, open_at = done.committed, done.opened, done.open_at
        # The open transaction holds west's last stable offset where it started, as on east.
        assert ends(west, "read_committed") == ends(east, "read_committed") == open_at

        code, status, stderr = failover(app, "status", LINK)
        assert code == 0, stderr
        (link_status,) = status["links"]
        txns = link_status["open_transactions"]
        assert txns["error"] is None and txns["total"] == PARTITIONS
        info = txns["topics"][TOPIC]
        assert info["count"] == PARTITIONS and info["partitions"] == list(range(PARTITIONS))
        assert info["oldest"]["first_offset"] == open_at[info["oldest"]["partition"]]
        assert 0 <= info["oldest"]["age_s"] < 120
        assert f"open transactions on west: {PARTITIONS}" in stderr
        assert f"{TOPIC}: {PARTITIONS} open; oldest at partition" in stderr

        kill_site(app, "east")
        code, promoted, stderr = failover(app, "promote", LINK, "--unplanned")
        assert code == 0, stderr
        assert promoted["state"] == "promoted" and promoted["transactions_aborted"] == PARTITIONS
        # The last stable offset is past the open transaction and its ABORT marker ...
        assert ends(west, "read_committed") == ends(west) == {p: open_at[p] + 3 + 1 for p in range(PARTITIONS)}
        # ... and read_committed readers see every committed record and none of it.
        seen = read_all(west, TOPIC, PARTITIONS, "read_committed")
        assert sorted(seen) == sorted(committed)
        assert not set(opened) & set(seen)
        assert len(read_all(west, TOPIC, PARTITIONS, "read_uncommitted")) == 40 + len(opened)

        # The application moves to west: its transactional id starts afresh there.
        on_west = txn_producer(west, "east-app")
        on_west.begin_transaction()
        on_west.produce(TOPIC, b"on-west", partition=0)
        on_west.commit_transaction(TIMEOUT_S)
        assert sorted(read_all(west, TOPIC, PARTITIONS, "read_committed")) == sorted([*committed, b"on-west"])

        # Run again, the promote is done and changes nothing (the state says so).
        code, _, stderr = failover(app, "promote", LINK, "--unplanned")
        assert code == 3, stderr
    finally:
        app.stop()


def test_a_planned_switchover_waits_for_the_sources_open_transaction_to_end(tmp_path: Path) -> None:
    app = start_appliance(tmp_path)
    try:
        east, west = app.bootstrap("east"), app.bootstrap("west")
        done = write_history(app)

        code, answer, stderr = failover(app, "promote", LINK, "--planned", "--timeout", "5")
        assert code == 1, stderr
        assert "transactions open on site east in 2 partitions" in stderr, stderr
        # East is fenced: new records are refused, but the open transaction may still end.
        done.producer.commit_transaction(TIMEOUT_S)
        code, answer, stderr = failover(app, "promote", LINK, "--planned", "--timeout", "60")
        assert code == 0, stderr
        assert answer["rpo"]["records"] == 0 and answer["transactions_aborted"] == 0
        assert ends(west, "read_committed") == ends(west) == ends(east)
        assert sorted(read_all(west, TOPIC, PARTITIONS, "read_committed")) == sorted([*done.committed, *done.opened])
    finally:
        app.stop()
