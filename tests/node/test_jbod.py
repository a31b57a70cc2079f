"""A JBOD log dir failure on one node: its partitions' leadership moves away, its other dir keeps serving.

Node 1's second log dir is a small tmpfs (a real filesystem that runs out of space: ENOSPC is
an I/O error like a dying disk's). Once it fills, the node takes that dir offline, publishes
the replicas on it as offline, and the controller elects leaders elsewhere; acknowledged
records are all still readable and node 1 still leads partitions on its healthy dir.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chaos.ledger import Ledger, check
from chaos.workload import ProducerWorkload, read_back
from tests.node.harness import NodeProcess
from tests.node.raw import produce_raw
from tests.node.test_replication import bootstrap, create_topic, partition_states, wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.chaos,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs log dir needs root"),
]

TOPIC = "jbod"
PARTITIONS = 6
Site = Callable[..., list[NodeProcess]]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """Node 1's second log dir on an 8 MiB tmpfs, unmounted after the nodes stopped."""
    mount_point = tmp_path / "node1" / "d2"
    mount_point.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_full_log_dir_moves_leadership_away_and_the_other_dir_keeps_serving(
    small_disk: Path, site: Site, tmp_path: Path
) -> None:
    nodes = site(3, log_segment_bytes="1048576")
    node1 = nodes[0]
    create_topic(nodes, TOPIC, partitions=PARTITIONS, rf=3, **{"min.insync.replicas": "2"})
    states = partition_states(node1, TOPIC)
    on_small = {p for p, s in states.items() if s["log_dir"] == str(small_disk)}
    on_healthy = {p for p, s in states.items() if s["log_dir"] == str(tmp_path / "node1" / "d1")}
    assert on_small and on_healthy, states
    # Leave 256 KiB free on the small disk; the workload fills it (at its rate, in a few seconds).
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    (small_disk / "filler").write_bytes(b"\0" * (free - 256 * 1024))
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        with ProducerWorkload(
            bootstrap(nodes), TOPIC, ledger, rate=2000, config={"batch.size": 16384, "linger.ms": 5}
        ) as workload:
            workload.wait_for_acks(500, timeout=60)

            def failed() -> bool:
                health = partition_states(node1, TOPIC)
                return all(not health[p]["online"] for p in on_small)

            wait_for("node 1's small log dir to fail", failed, timeout=60)

            def moved() -> bool:
                for n in nodes[1:]:
                    seen = partition_states(n, TOPIC)
                    for p in on_small:
                        if seen[p]["leader"] in (node1.broker_id, -1) or node1.broker_id in seen[p]["isr"]:
                            return False
                return True

            wait_for("leadership of the failed dir's partitions to move to other nodes", moved, timeout=30)
            workload.wait_for_acks(workload.acked + 500, timeout=60)
        assert not workload.errors, workload.errors[:3]
        result = check(ledger, read_back(bootstrap(nodes), TOPIC, timeout=60))
    assert result.ok, result.summary()
    assert node1.running
    # Node 1 still serves its healthy dir: it leads (or follows in sync) those partitions.
    healthy = partition_states(node1, TOPIC)
    for p in on_healthy:
        assert healthy[p]["online"], healthy[p]
        assert node1.broker_id in healthy[p]["isr"]
    led = [p for p in on_healthy if healthy[p]["leader"] == node1.broker_id]
    if led:
        assert produce_raw(node1.bootstrap, TOPIC, led[0], [b"still serving"]).error_code == 0
    assert "log dir" in node1.log_path.read_text()
