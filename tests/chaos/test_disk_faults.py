"""The disk faults of the catalog on an appliance whose source nodes keep a log dir on XFS: real, and healed."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from chaos.appliance import ChaosAppliance
from chaos.faults import FAULTS
from chaos.nemesis._disk import disk_faults_unavailable
from chaos.proxy import run_in_thread

pytestmark = [
    pytest.mark.integration,
    pytest.mark.chaos,
    pytest.mark.skipif(disk_faults_unavailable() is not None, reason=str(disk_faults_unavailable())),
]

TOPIC = "chaos-disks"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosAppliance]:
    directory: Path = tmp_path_factory.mktemp("disks")
    with run_in_thread(api=None, seed=1) as proxy, ChaosAppliance(directory, proxy, mirror=False, disks=True) as app:
        admin = AdminClient({"bootstrap.servers": app.source.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 6, replication_factor=3)])[TOPIC].result(30)
        produce(app.source.bootstrap, 200)
        yield app
    assert not any(image.mounted for image in app.images.values())


def produce(bootstrap: str, count: int, timeout: float = 40.0) -> None:
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": int(timeout * 1000)})
    for i in range(count):
        producer.produce(TOPIC, f"v{i}".encode(), on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(timeout + 5)
    assert errors == [None] * count


def test_every_source_node_has_its_second_log_dir_on_a_mounted_xfs_image(app: ChaosAppliance) -> None:
    assert sorted(app.images) == sorted(n.name for n in app.source.nodes)
    for node in app.source.nodes:
        image = app.images[node.name]
        assert image.mounted and Path(image.mountpoint) == node.log_dirs[1].resolve()


@pytest.mark.parametrize("name", ["disk-full", "disk-failing", "disk-readonly", "torn-tail"])
def test_a_disk_fault_hits_one_node_and_the_site_serves_after_heal(app: ChaosAppliance, name: str) -> None:
    fault = FAULTS[name].make(app, TOPIC)
    target = fault.start(random.Random(7))
    try:
        assert any(node.name in target for node in app.source.nodes) or ".log" in target, target
        if name == "torn-tail":
            assert ("cut bytes" in target or "garbled bytes" in target) and not all(n.running for n in app.source.nodes)
    finally:
        fault.heal()
    assert all(n.running for n in app.source.nodes)
    produce(app.source.bootstrap, 50)
