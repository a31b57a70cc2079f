"""``site.yml`` for real: two sites and a mirror, provisioned on this machine.

The module's fixture makes two sparse 320 MB images on loop devices for each broker "host" and
an inventory shaped like the example two-site one (``ansible/inventories/example``), whose
``group_vars`` it uses as they are (each group's site, the link east-to-west, the advertised
host): site east has brokers b1, b2, b3 and ZooKeeper zk1; site west has broker w1, which also
runs the mirror, and ZooKeeper zk2. Every host is ``ansible_connection: local`` with its own
``common_prefix`` under one tmp dir, ports from free ports, ``common_service_manager:
supervisor`` (PID 1 is not systemd here: each host gets its own supervisord). Then
``ansible-playbook site.yml`` formats and mounts the disks, installs the checkout's wheel (from a
wheelhouse, no index), starts everything, and the tests check:

- a confluent-kafka producer writes to a new replication-factor-3 topic (acks=all) and a
  consumer reads every record back; the partitions live on the XFS disks;
- ``site.yml`` a second time reports ``changed=0`` for every host;
- a disk that holds an ext4 filesystem with a file on it is refused (the play stops, naming the
  device and the opt-in, and the file is still there) until it is listed in ``xfs_disks_wipe``;
- the rolling restart under the ledger producer, and its gate; doctor.yml; upgrade.yml with a
  rebuilt wheel; records flowing east to west and failover.yml's confirmation.

Teardown, also after a failure: every supervisord the run started is shut down (its programs
first, within their stop timeouts; then its process group is killed), everything mounted under
the tmp dir is unmounted (``umount -l`` after a bounded wait), every loop device the fixture made
is detached and the images are removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import secrets
import shutil
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.ansible.harness import (
    ANSIBLE_DIR,
    PLAY_TIMES,
    PLAYBOOKS,
    LoopDisk,
    PlaybookRun,
    build_wheelhouse,
    free_ports,
    run,
    run_playbook,
    stop_supervisords,
    traversable_tmpdir,
    unmount_all,
    write_inventory,
)

pytestmark = [pytest.mark.ansible, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

BROKERS = ("b1", "b2", "b3")  # site east
WEST = "w1"  # site west: one broker, the mirror (east -> west) and ZooKeeper zk2
LINK = "east-to-west"  # the example inventory's link (inventories/example/group_vars/west.yml)
RECORDS = 600
EXAMPLE_INVENTORY = ANSIBLE_DIR / "inventories/example"
#: Seconds one site.yml run may take before it is killed.
PLAY_TIMEOUT_S = 420


def unavailable() -> str | None:
    """Why this machine cannot run the module (None: it can)."""
    if os.geteuid() != 0:
        return "provisioning needs root (loop devices, mkfs, mount, users)"
    for tool in ("losetup", "mkfs.xfs", "mkfs.ext4", "blkid", "supervisord", "supervisorctl", "java"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make setup installs it: .ci/ensure-*)"
    if not Path("/usr/share/java/zookeeper.jar").exists():
        return "Debian's zookeeper package is not installed (.ci/ensure-zookeeper)"
    return None


@dataclass
class Site:
    root: Path
    inventory: Path
    hosts: dict[str, dict[str, object]]
    first_run: PlaybookRun
    disks: list[LoopDisk] = field(default_factory=list)

    def prefix(self, host: str) -> Path:
        return Path(str(self.hosts[host]["common_prefix"]))

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.hosts[b]['broker_port']}" for b in BROKERS)

    def play(
        self,
        playbook: str | Path,
        *,
        timeout: float = PLAY_TIMEOUT_S,
        extra_vars: dict[str, object] | None = None,
        args: tuple[str, ...] = (),
    ) -> PlaybookRun:
        home = self.root / "ansible-home"
        return run_playbook(playbook, self.inventory, home=home, timeout=timeout, extra_vars=extra_vars, args=args)


def site_inventory(root: Path, disks: dict[str, list[str]], wheelhouse: Path) -> dict[str, dict[str, object]]:
    """The hosts of the site (name -> variables)."""
    ports = iter(free_ports(2 * 3 + 2 * (len(BROKERS) + 1) + 1))
    hosts: dict[str, dict[str, object]] = {
        zk: {
            "zookeeper_id": 1,
            "zookeeper_client_port": next(ports),
            "zookeeper_peer_port": next(ports),
            "zookeeper_election_port": next(ports),
            "zookeeper_client_port_address": "127.0.0.1",
            "zookeeper_heap_mb": 128,
        }
        for zk in ("zk1", "zk2")
    }
    for broker_id, name in [*enumerate(BROKERS, start=1), (1, WEST)]:
        hosts[name] = {
            "broker_id": broker_id,
            "broker_port": next(ports),
            "broker_admin_port": next(ports),
            "broker_bind_host": "127.0.0.1",
            "broker_health_delay": 1,
            "xfs_disks_devices": disks[name],
        }
    # West has one broker: its topics (the mirror's too) have one replica.
    for key in ("default_replication_factor", "min_insync_replicas", "offsets_topic_replication_factor"):
        hosts[WEST][f"broker_{key}"] = 1
    hosts[WEST].update(broker_transaction_state_log_replication_factor=1, broker_transaction_state_log_min_isr=1)
    # The link east-to-west and each group's site come from the example's group_vars.
    hosts[WEST].update(mirror_admin_port=next(ports), mirror_health_delay=1)
    hosts[WEST]["mirror_admin_token"] = secrets.token_urlsafe(32)  # the example's comes from the environment
    _, hard_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    for name, variables in hosts.items():
        variables.update(
            ansible_connection="local",
            ansible_host="127.0.0.1",
            ansible_become=False,  # root already; there is no sudo
            common_prefix=str(root / name),
            common_service_manager="supervisor",
            common_sysctl_apply=False,  # one kernel for four "hosts": the file only
            common_apt_update_cache=False,  # the packages are there (make setup)
            common_wheelhouse=str(wheelhouse),
            # A container may forbid raising the hard limit (supervisord's minfds would fail).
            common_nofile_limit=min(100_000, hard_nofile) if hard_nofile != resource.RLIM_INFINITY else 100_000,
        )
    return hosts


@pytest.fixture(scope="module")
def site(wheelhouse: Path) -> Iterator[Site]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with contextlib.ExitStack() as cleanup:
        root = traversable_tmpdir("strait-site-")
        cleanup.callback(shutil.rmtree, root, ignore_errors=True)
        disks: dict[str, list[str]] = {}
        made: list[LoopDisk] = []

        def detach_all() -> None:
            for disk in made:
                disk.detach()

        cleanup.callback(detach_all)  # last: after the unmounts below
        cleanup.callback(unmount_all, root)
        for name in (*BROKERS, WEST):
            for n in (1, 2):
                made.append(LoopDisk.create(root / "images" / f"{name}-{n}.img"))
            disks[name] = [d.device for d in made[-2:]]
        hosts = site_inventory(root, disks, wheelhouse)
        # Stop ZooKeeper last (callbacks run in reverse): brokers stopping cleanly still talk to it.
        cleanup.callback(stop_supervisords, [root / "zk1", root / "zk2"])
        cleanup.callback(stop_supervisords, [root / name for name in (*BROKERS, WEST)])
        inventory = {
            "all": {
                "children": {
                    "east": {
                        "hosts": {h: v for h, v in hosts.items() if h not in (WEST, "zk2")},
                    },
                    "west": {"hosts": {h: hosts[h] for h in (WEST, "zk2")}},
                    "zookeeper": {"hosts": {"zk1": None, "zk2": None}},
                    "brokers": {"hosts": dict.fromkeys((*BROKERS, WEST))},
                    "mirror": {"hosts": {WEST: None}},
                },
            }
        }
        # The example two-site inventory's group_vars (sites, the mirror link, advertised hosts),
        # beside this inventory so that Ansible reads them; the hosts' own variables adapt them to
        # this machine (supervisor, the wheelhouse, loop devices, ports, prefixes).
        shutil.copytree(EXAMPLE_INVENTORY / "group_vars", root / "group_vars")
        site = Site(root, write_inventory(root / "hosts.json", inventory), hosts, PlaybookRun(-1, "", 0.0), made)
        site.first_run = site.play("site.yml")
        yield site


def test_site_yml_provisions_a_working_site(site: Site) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    PLAY_TIMES["site.yml, first run"] = site.first_run.seconds
    assert site.first_run.returncode == 0, site.first_run.output
    recap = site.first_run.recap()
    assert set(recap) == {"zk1", "zk2", *BROKERS, WEST}
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in recap.values()), recap
    # The broker role ran strait doctor on every broker host once its node was healthy.
    doctor_runs = site.first_run.output.count("TASK [broker : Run strait doctor]")
    assert doctor_runs == len(BROKERS) + 1, site.first_run.output  # serial: one task header per broker

    # The log dirs are the XFS disks, mounted with noatime, by UUID in each host's fstab.
    for name in BROKERS:
        for n in (1, 2):
            mount = site.prefix(name) / f"data/d{n}"
            found = run(["findmnt", "--noheadings", "--output", "FSTYPE,OPTIONS", str(mount)]).stdout.split()
            assert found[0] == "xfs" and "noatime" in found[1].split(","), (mount, found)
        fstab = (site.prefix(name) / "etc/fstab").read_text()
        assert fstab.count("UUID=") == 2, fstab

    topic = "provisioned"
    admin = AdminClient({"bootstrap.servers": site.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": site.bootstrap, "acks": "all", "enable.idempotence": True})
    sent = {f"record-{i}".encode() for i in range(RECORDS)}
    errors: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for value in sorted(sent):
        producer.produce(topic, value=value, on_delivery=delivered)
    assert producer.flush(60) == 0 and not errors, errors

    consumer = Consumer(
        {"bootstrap.servers": site.bootstrap, "group.id": "provisioned-check", "auto.offset.reset": "earliest"}
    )
    received: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(received) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            received.append(message.value())
    finally:
        consumer.close()
    assert len(received) == RECORDS and set(received) == sent

    # Every partition has a replica on every broker (RF 3), in a log dir on one of its disks.
    for name in BROKERS:
        log_dirs = [site.prefix(name) / f"data/d{n}/strait-logs" for n in (1, 2)]
        on_disks = sorted(p.name for log_dir in log_dirs for p in log_dir.glob(f"{topic}-*"))
        assert on_disks == [f"{topic}-{p}" for p in range(3)], (name, on_disks)

    # The mirror serves its admin API with the token the inventory gave it (mode 0600).
    token_file = site.prefix(WEST) / "etc/strait/mirror-admin.token"
    assert token_file.stat().st_mode & 0o777 == 0o600
    with urllib.request.urlopen(f"http://127.0.0.1:{site.hosts[WEST]['mirror_admin_port']}/health", timeout=10) as r:
        assert r.status == 200


def test_second_run_changes_nothing(site: Site) -> None:
    assert site.first_run.returncode == 0, "the first run failed (see the test before)"
    second = site.play("site.yml")
    PLAY_TIMES["site.yml, second run"] = second.seconds
    assert second.returncode == 0, second.output
    recap = second.recap()
    assert set(recap) == {"zk1", "zk2", *BROKERS, WEST}
    changed = {host: r["changed"] for host, r in recap.items() if r["changed"] or r["failed"]}
    what_changed = [line for line in second.output.splitlines() if line.startswith("changed:")]
    assert not changed, "\n".join(what_changed) or second.output


def test_disk_holding_data_is_refused_until_marked_for_wiping(site: Site) -> None:
    extra = LoopDisk.create(site.root / "images" / "b1-extra.img")
    site.disks.append(extra)  # the fixture's teardown detaches it
    run(["mkfs.ext4", "-q", "-F", extra.device])
    look = site.root / "look"
    look.mkdir()
    run(["mount", extra.device, str(look)])
    (look / "precious.txt").write_text("still here\n")
    run(["umount", str(look)])
    variables = {
        "xfs_disks_devices": [extra.device],
        "xfs_disks_mount_root": str(site.prefix("b1") / "extra-data"),
        "xfs_disks_fstab": str(site.prefix("b1") / "etc/fstab.extra"),
    }

    def disks_play(**more: object) -> PlaybookRun:
        return site.play(PLAYBOOKS / "disks.yml", timeout=180, extra_vars={**variables, **more}, args=("--limit", "b1"))

    refused = disks_play()
    assert refused.returncode != 0, refused.output
    assert f"Refusing to format {extra.device}" in refused.output, refused.output
    assert "holds a filesystem of type ext4" in refused.output and "xfs_disks_wipe" in refused.output, refused.output
    run(["mount", "-o", "ro", extra.device, str(look)])
    try:
        assert (look / "precious.txt").read_text() == "still here\n"
    finally:
        run(["umount", str(look)])

    wiped = disks_play(xfs_disks_wipe=[extra.device])
    assert wiped.returncode == 0, wiped.output
    probe = run(["blkid", "-p", "-o", "export", extra.device]).stdout
    assert "TYPE=xfs" in probe.splitlines(), probe
    mount = site.prefix("b1") / "extra-data/d1"
    assert run(["findmnt", "--noheadings", "--output", "SOURCE", str(mount)]).stdout.strip() == extra.device
    assert (mount / "strait-logs").is_dir()

    # Formatted once: still listed for wiping, the next run keeps it (it is this host's disk now).
    again = disks_play(xfs_disks_wipe=[extra.device])
    assert again.returncode == 0, again.output
    assert again.recap()["b1"]["changed"] == 0, again.output
    assert json.dumps(probe) == json.dumps(run(["blkid", "-p", "-o", "export", extra.device]).stdout)


def _broker_pids(site: Site, hosts: tuple[str, ...] = BROKERS, program: str = "strait-broker") -> dict[str, int]:
    """The hosts whose ``program`` runs: its pid as each host's supervisord reports it."""
    pids = {}
    for name in hosts:
        conf = site.prefix(name) / "etc/strait/supervisord.conf"
        out = run(["supervisorctl", "-c", str(conf), "pid", program], check=False).stdout.strip()
        if out.isdigit() and int(out) > 0:  # a stopped program reports 0
            pids[name] = int(out)
    return pids


def _started(pid: int) -> int:
    """When a process started, in clock ticks since boot (/proc/PID/stat's 22nd field)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rpartition(")")[2].split()[19])


def _cluster(site: Site, host: str) -> dict[str, Any]:
    """What the host's node answers on /v1/cluster (its view of the site)."""
    url = f"http://127.0.0.1:{site.hosts[host]['broker_admin_port']}/v1/cluster"
    with urllib.request.urlopen(url, timeout=10) as answer:
        found: dict[str, Any] = json.load(answer)
        return found


def test_rolling_restart_under_an_idempotent_producer_loses_and_duplicates_nothing(site: Site, tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from chaos.ledger import Ledger, check
    from chaos.workload import ProducerWorkload, read_back

    assert site.first_run.returncode == 0, "the first run failed (see the first test)"
    topic = "rolling"
    admin = AdminClient({"bootstrap.servers": site.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=6, replication_factor=3)])[topic].result(timeout=30)
    controller = next(h for h in BROKERS if _cluster(site, h)["is_controller"])
    before = _broker_pids(site)
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        with ProducerWorkload(site.bootstrap, topic, ledger, rate=200) as workload:
            workload.wait_for_acks(200, timeout=60)
            restart = site.play("rolling_restart.yml", args=("--limit", "east"))
            workload.wait_for_acks(workload.acked + 200, timeout=60)
        result = check(ledger, read_back(site.bootstrap, topic, timeout=60))
    PLAY_TIMES["rolling_restart.yml (3 brokers)"] = restart.seconds
    assert restart.returncode == 0, restart.output
    after = _broker_pids(site)
    assert set(after) == set(BROKERS) and all(after[h] != before[h] for h in BROKERS), (before, after)
    restarted = sorted(BROKERS, key=lambda h: _started(after[h]))
    assert restarted[-1] == controller, (controller, restarted)  # the controller last
    assert result.ok, result.summary()
    assert result.acknowledged >= 400


def test_rolling_restart_stops_before_touching_a_node_when_the_site_is_under_replicated(site: Site) -> None:
    assert site.first_run.returncode == 0, "the first run failed (see the first test)"
    # b3's node stops: every partition it holds a replica of is under-replicated until it is back.
    victim = "b3"
    conf = site.prefix(victim) / "etc/strait/supervisord.conf"
    run(["supervisorctl", "-c", str(conf), "stop", "strait-broker"], timeout=240)
    try:
        deadline = time.monotonic() + 60
        while _cluster(site, "b1")["under_replicated"] == 0 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _cluster(site, "b1")["under_replicated"] > 0
        before = _broker_pids(site)
        assert set(before) == {"b1", "b2"}, before
        refused = site.play(
            "rolling_restart.yml", extra_vars={"rolling_restart_gate_retries": 1}, args=("--limit", "east")
        )
        assert refused.returncode != 0, refused.output
        assert "is not healthy, so the rolling restart stops here" in refused.output, refused.output
        assert "under-replicated" in refused.output, refused.output
        assert _broker_pids(site) == before  # no node was touched
        assert "Restart the supervisor program" not in refused.output, refused.output  # no restart was tried
    finally:
        run(["supervisorctl", "-c", str(conf), "start", "strait-broker"], timeout=120)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                if _cluster(site, "b1")["under_replicated"] == 0 and _cluster(site, victim)["controller"]:
                    break
            time.sleep(1)


def test_doctor_yml_passes_the_provisioned_hosts_and_fails_one_below_the_bar(site: Site) -> None:
    assert site.first_run.returncode == 0, "the first run failed (see the first test)"
    # The bar is common_nofile_limit, what the supervisor programs give the nodes (the inventory's).
    passed = site.play("doctor.yml", timeout=180)
    PLAY_TIMES["doctor.yml (4 brokers)"] = passed.seconds
    assert passed.returncode == 0, passed.output
    assert set(passed.recap()) == {*BROKERS, WEST} and all(r["failed"] == 0 for r in passed.recap().values())

    # The nodes' own limit is below a bar set higher: every host fails, naming the check.
    failed = site.play("doctor.yml", extra_vars={"broker_doctor_args": ["--min-open-files", "1000000"]}, timeout=180)
    assert failed.returncode != 0, failed.output
    assert all(failed.recap()[h]["failed"] == 1 for h in (*BROKERS, WEST)), failed.output
    assert "strait doctor found 1 failed check(s) on b1: open-files of pid " in failed.output, failed.output


def test_upgrade_yml_rolls_a_new_wheel_through_every_node_and_mirror_and_loses_nothing(
    site: Site, wheelhouse: Path, tmp_path: Path
) -> None:
    import hashlib

    from confluent_kafka.admin import AdminClient, NewTopic

    from chaos.ledger import Ledger, check
    from chaos.workload import ProducerWorkload, read_back

    assert site.first_run.returncode == 0, "the first run failed (see the first test)"
    version = "0.1.0+upgrade1"
    new = build_wheelhouse(tmp_path / "wheels", tmp_path / "scratch", version=version, dependencies=wheelhouse)
    (wheel,) = new.glob("strait-*.whl")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    hosts = (*BROKERS, WEST)
    topic = "upgrading"
    admin = AdminClient({"bootstrap.servers": site.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(timeout=30)
    brokers_before = _broker_pids(site, hosts)
    mirror_before = _broker_pids(site, (WEST,), "strait-mirror")
    assert set(brokers_before) == set(hosts) and mirror_before, (brokers_before, mirror_before)
    with Ledger(tmp_path / "ledger.jsonl") as ledger:
        with ProducerWorkload(site.bootstrap, topic, ledger, rate=200) as workload:
            workload.wait_for_acks(200, timeout=60)
            upgrade = site.play("upgrade.yml", extra_vars={"common_wheelhouse": str(new)})
            workload.wait_for_acks(workload.acked + 200, timeout=60)
        result = check(ledger, read_back(site.bootstrap, topic, timeout=60))
    PLAY_TIMES["upgrade.yml (4 brokers in 2 sites, 1 mirror)"] = upgrade.seconds
    assert upgrade.returncode == 0, upgrade.output

    # Every node and the mirror run again, restarted, from the new wheel (the marker names its sha).
    brokers_after = _broker_pids(site, hosts)
    mirror_after = _broker_pids(site, (WEST,), "strait-mirror")
    assert set(brokers_after) == set(hosts), brokers_after
    assert all(brokers_after[h] != brokers_before[h] for h in hosts), (brokers_before, brokers_after)
    assert mirror_after and mirror_after[WEST] != mirror_before[WEST], (mirror_before, mirror_after)
    for name in hosts:
        venv = site.prefix(name) / "opt/strait/venv"
        assert [p.name for p in venv.glob("strait-wheel-*.installed")] == [f"strait-wheel-{sha}.installed"], name
        # -I: not the current directory's metadata (a checkout installed with pip -e has strait.egg-info).
        ask = "import importlib.metadata as m; print(m.version('strait'))"
        installed = run([str(venv / "bin/python"), "-I", "-c", ask])
        assert installed.stdout.strip() == version, (name, installed.stdout)
        running = Path(f"/proc/{brokers_after[name]}/cmdline").read_bytes().split(b"\0")
        assert any(part.startswith(str(venv).encode()) for part in running), (name, running)
    # The site is healthy and no acknowledged record was lost or duplicated.
    for name in hosts:
        cluster = _cluster(site, name)
        assert cluster["controller"] and cluster["under_replicated"] == 0 and cluster["offline"] == 0, (name, cluster)
    assert result.ok, result.summary()
    assert result.acknowledged >= 400


def test_two_sites_mirror_and_failover_yml_promotes_west_only_when_confirmed(site: Site) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    assert site.first_run.returncode == 0, "the first run failed (see the first test)"
    west = f"127.0.0.1:{site.hosts[WEST]['broker_port']}"
    topic = "flow.orders"
    admin = AdminClient({"bootstrap.servers": site.bootstrap})  # kept: a dropped client cancels its futures
    admin.create_topics([NewTopic(topic, 2, 3)])[topic].result(30)
    producer = Producer({"bootstrap.servers": site.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(200):
        producer.produce(topic, value=f"east-{i}".encode(), partition=i % 2)
    assert producer.flush(60) == 0

    # The link the mirror role set up copies the topic to west, at the same offsets.
    consumer = Consumer({"bootstrap.servers": west, "group.id": "flow-check", "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + 90
        ends: dict[int, int] = {}
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in (0, 1)}
            if sum(ends.values()) == 200:
                break
            time.sleep(1)
        assert ends == {0: 100, 1: 100}, ends
    finally:
        consumer.close()

    status = site.play("failover.yml", extra_vars={"failover_link": LINK}, timeout=120)
    assert status.returncode == 0, status.output
    refused = site.play(
        "failover.yml",
        extra_vars={"failover_link": LINK, "failover_action": "promote", "failover_confirm": "west-to-east"},
        timeout=120,
    )
    assert refused.returncode != 0 and "Not confirmed" in refused.output, refused.output
    assert "TASK [Run strait failover promote]" not in refused.output, refused.output  # stopped before it

    # Still a mirror: west refuses writes to it.
    writer = Producer({"bootstrap.servers": west, "acks": "all", "message.timeout.ms": 5000})
    outcome: list[object] = []
    writer.produce(topic, value=b"too-early", partition=0, on_delivery=lambda err, _m: outcome.append(err))
    writer.flush(15)
    assert outcome and outcome[0] is not None, outcome

    promoted = site.play(
        "failover.yml",
        extra_vars={"failover_link": LINK, "failover_action": "promote", "failover_confirm": LINK},
        timeout=400,
    )
    PLAY_TIMES["failover.yml promote (planned)"] = promoted.seconds
    assert promoted.returncode == 0, promoted.output
    outcome.clear()
    writer.produce(topic, value=b"west-now", partition=0, on_delivery=lambda err, _m: outcome.append(err))
    assert writer.flush(30) == 0 and outcome == [None], outcome
