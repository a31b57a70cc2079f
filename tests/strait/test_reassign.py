"""``strait topics reassign`` end to end: a partition moves from brokers [1, 2] to [2, 3] on a
real three-node site, with and without a throttle; nothing is lost and broker 1 lets go of it.
On a site whose nodes secure their ZooKeeper, it starts one only with the site's credential."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.exceptions import NoNodeError  # type: ignore[import-untyped]
from kazoo.security import ACL, ANYONE_ID_UNSAFE, Permissions  # type: ignore[import-untyped]

from node.zkkit import ZkDigest, kazoo_client, stop_quietly
from tests.node.harness import NodeProcess, wait_for
from tests.strait.kafka_io import produce, read_all

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECORDS = 2000
MOVE_DEADLINE_S = 90.0


def _strait(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strait.cli", *args], capture_output=True, text=True, timeout=60, check=False
    )


def _topic(admin_url: str, name: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{admin_url}/v1/topics/{name}", timeout=10) as response:
        body: dict[str, Any] = json.loads(response.read())
        return body


def _partition_dirs(node: NodeProcess, topic: str) -> list[Path]:
    """The partition's dir in any of the node's log dirs, also one renamed for deletion."""
    return [p for d in node.log_dirs if d.is_dir() for p in d.iterdir() if p.name.startswith(f"{topic}-0")]


def _wait_until(what: str, check: Callable[[], bool], nodes: list[NodeProcess], deadline_s: float) -> None:
    try:
        wait_for(what, check, deadline_s, interval=0.25)
    except AssertionError as exc:
        logs = "\n".join(f"--- node {n.broker_id} ({n.log_path})\n{n.log_tail(25)}" for n in nodes)
        pytest.fail(f"{exc}\n{logs}")


def _move_and_check(
    site: Callable[..., list[NodeProcess]], zk_connect: str, tmp_path: Path, topic: str, *extra: str
) -> None:
    nodes = site(3)
    one, two, three = nodes
    bootstrap = ",".join(n.bootstrap for n in nodes)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2]])])[topic].result(30)
    del admin  # librdkafka handles live on; this one has nothing left to do
    values = [f"{topic}-{i:05d}".encode() * 4 for i in range(RECORDS)]
    produce(bootstrap, topic, values)
    assert _partition_dirs(one, topic) and not _partition_dirs(three, topic)

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2, 3]}]}))
    started = _strait("topics", "reassign", "--zookeeper", zk_connect, "--plan", str(plan), *extra)
    assert started.returncode == 0, started.stderr
    limit = f"throttled to {extra[-1]} bytes/s" if "--throttle" in extra else "not throttled"
    assert limit in started.stdout, started.stdout
    assert json.loads(started.stdout.splitlines()[1])["partitions"] == [
        {"topic": topic, "partition": 0, "replicas": [1, 2]}
    ], started.stdout

    def complete() -> bool:
        verify = _strait("topics", "reassign", "--zookeeper", zk_connect, "--plan", str(plan), "--verify")
        assert verify.returncode in (0, 1), verify.stderr
        return verify.returncode == 0 and f"{topic}-0: complete" in verify.stdout

    _wait_until(f"{topic}-0 reassigned to [2, 3]", complete, nodes, MOVE_DEADLINE_S)

    for node in nodes:
        (partition,) = _topic(node.admin_url, topic)["partitions"]
        assert partition["replicas"] == [2, 3], (node.broker_id, partition)
    _wait_until(
        "node 3 holding every record, in sync",
        lambda: (
            (p := _topic(three.admin_url, topic)["partitions"][0])["log_end_offset"] == RECORDS
            and p["high_watermark"] == RECORDS
            and sorted(p["isr"]) == [2, 3]
        ),
        nodes,
        30,
    )
    _wait_until(f"node 1's {topic}-0 dir removed", lambda: not _partition_dirs(one, topic), nodes, 30)

    # Read it back from node 3 alone: with node 2 stopped, node 3 leads.
    assert two.stop() == 0
    marks, got = read_all(three.bootstrap, topic)
    assert marks == {0: (0, RECORDS)}
    assert got == values


def test_reassign_moves_a_partition_to_other_brokers(
    site: Callable[..., list[NodeProcess]], zk_connect: str, tmp_path: Path
) -> None:
    _move_and_check(site, zk_connect, tmp_path, "moving")


def test_reassign_with_a_throttle_completes(
    site: Callable[..., list[NodeProcess]], zk_connect: str, tmp_path: Path
) -> None:
    # ~200 KB at 100 KB/s: throttled for about two seconds, and done.
    _move_and_check(site, zk_connect, tmp_path, "throttled", "--throttle", "100000")


ZK_PASSWORD = "reassign-zk-s3cret"


def _reassignment_acl(zk_connect: str) -> list[Any] | None:
    """The ACL of /admin/reassign_partitions read with the site's credential; None when it is absent."""
    client = kazoo_client(zk_connect, 10.0, digest=ZkDigest("strait", ZK_PASSWORD))
    client.start(timeout=15)
    try:
        return sorted(client.get_acls("/admin/reassign_partitions")[0])
    except NoNodeError:
        return None
    finally:
        stop_quietly(client)


def test_reassign_on_a_secured_site_needs_the_sites_credential(
    site: Callable[..., list[NodeProcess]], zk_connect: str, tmp_path: Path
) -> None:
    digest_file = tmp_path / "zk.digest"
    digest_file.write_text(f"strait:{ZK_PASSWORD}\n")
    nodes = site(
        2,
        default_replication_factor="2",
        offsets_topic_replication_factor="2",
        zookeeper_set_acl="true",
        strait_zookeeper_digest_file=str(digest_file),
    )
    one, two = nodes
    topic = "secured"
    admin = AdminClient({"bootstrap.servers": one.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1]])])[topic].result(30)
    del admin
    values = [f"{topic}-{i:04d}".encode() * 16 for i in range(300)]  # ~60 KB
    produce(one.bootstrap, topic, values)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2]}]}))

    refused = _strait("topics", "reassign", "--zookeeper", zk_connect, "--plan", str(plan))
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.splitlines() == [
        f"Error: ZooKeeper {zk_connect} is secured (the site's nodes set zookeeper.set.acl) and refused the change "
        "(NoAuth): give the site's credential with --zookeeper-digest-file FILE (one line user:password, as the "
        "nodes' strait.zookeeper.digest.file)"
    ]
    assert _reassignment_acl(zk_connect) is None  # nothing was started

    # Throttled (60 KB at 10 KB/s: seconds), so the znode is still there to be looked at when the command returns.
    with_digest = ("--zookeeper-digest-file", str(digest_file))
    started = _strait("topics", "reassign", "-z", zk_connect, *with_digest, "--plan", str(plan), "--throttle", "10000")
    assert started.returncode == 0, started.stderr
    assert _reassignment_acl(zk_connect) == sorted(
        [ZkDigest("strait", ZK_PASSWORD).all_acl(), ACL(Permissions.READ, ANYONE_ID_UNSAFE)]
    ), "the reassignment znode must be secured like the nodes' (the world may only read it)"

    def complete() -> bool:  # reading needs no credential
        verify = _strait("topics", "reassign", "--zookeeper", zk_connect, "--plan", str(plan), "--verify")
        assert verify.returncode in (0, 1), verify.stderr
        return verify.returncode == 0 and f"{topic}-0: complete" in verify.stdout

    _wait_until(f"{topic}-0 reassigned to [2]", complete, nodes, MOVE_DEADLINE_S)
    _wait_until(
        "node 2 holding every record, in sync, alone",
        lambda: (
            (p := _topic(two.admin_url, topic)["partitions"][0])["replicas"] == [2]
            and p["log_end_offset"] == len(values)
            and p["isr"] == [2]
        ),
        nodes,
        30,
    )
