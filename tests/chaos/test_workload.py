"""The producer workload and read-back: against a real strait node, and against nothing at all."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from chaos.errors import WorkloadError
from chaos.ledger import Ledger, check
from chaos.workload import ProducerWorkload, read_back
from tests.node.harness import NodeProcess


@pytest.fixture
def broker(tmp_path: Path, zk_connect: str) -> Iterator[NodeProcess]:
    node = NodeProcess(1, tmp_path / "node1", zk_connect)
    try:
        yield node.start()
    finally:
        node.stop()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(30)


@pytest.mark.integration
def test_acknowledged_writes_are_all_read_back(broker: NodeProcess, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "ledgered", 3)
    path = tmp_path / "ledger.jsonl"
    with Ledger(path) as ledger:
        # Without sticky partitioning librdkafka spreads keyless records over every partition,
        # so the read-back below must find all three (sticky batches might fill only two).
        with ProducerWorkload(
            broker.bootstrap,
            "ledgered",
            ledger,
            max_in_flight=50,
            run_id="run1",
            config={"sticky.partitioning.linger.ms": 0},
        ) as workload:
            try:
                workload.wait_for_acks(300, timeout=30)
            except WorkloadError as exc:
                raise AssertionError(f"{exc}\nbroker log:\n{broker.log_tail()}") from exc
        assert workload.errors == []
        assert workload.acked + workload.failed == workload.produced >= 300
        assert workload.in_flight == 0 and ledger.pending == 0
        records = read_back(broker.bootstrap, "ledgered", timeout=60)
        result = check(ledger, records)
        assert result.ok, result.summary()
        assert result.acknowledged == workload.acked == len(records)
        assert {r.partition for r in records} == {0, 1, 2}
        assert all(r.value.startswith(b"run1-") for r in records)

    reloaded = check(Ledger.load(path), records)
    assert reloaded.ok and reloaded.acknowledged == result.acknowledged


@pytest.mark.integration
def test_read_back_names_a_topic_it_cannot_find(broker: NodeProcess) -> None:
    with pytest.raises(WorkloadError, match="'absent'"):
        read_back(broker.bootstrap, "absent", timeout=10, config={"allow.auto.create.topics": False})


def test_without_a_broker_writes_stay_unacknowledged_and_are_purged_on_stop() -> None:
    ledger = Ledger()
    workload = ProducerWorkload(
        "127.0.0.1:1", "t", ledger, rate=40, config={"reconnect.backoff.max.ms": 100, "log_level": 0}
    ).start()
    try:
        with pytest.raises(WorkloadError, match=r"timed out.*0 acked"):
            workload.wait_for_acks(1, timeout=0.5)
        time.sleep(0.2)
    finally:
        workload.stop(timeout=0.2)
    assert not workload.running
    assert 1 <= workload.produced <= 40, workload.produced  # paced at 40/s for well under a second
    assert workload.acked == 0 and workload.failed == workload.produced == ledger.failed
    assert all("_PURGE" in f.error for f in ledger.failures())
    assert ledger.pending == 0 and workload.errors == []


def test_bad_configuration_fails_at_start() -> None:
    with pytest.raises(WorkloadError, match="cannot create the producer"):
        ProducerWorkload("127.0.0.1:1", "t", Ledger(), config={"no.such.setting": 1}).start()
    with pytest.raises(ValueError, match="rate"):
        ProducerWorkload("127.0.0.1:1", "t", Ledger(), rate=0)
