"""Every fault of the catalog on a real appliance: it takes effect where it says, and heal undoes it."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from chaos.appliance import ChaosAppliance
from chaos.faults import FAULTS, find_controller, find_leader, find_txn_coordinator
from chaos.proxy import ProxyHandle, run_in_thread
from chaos.workloads import output_topic, transactional_id

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

TOPIC = "chaos-faults"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosAppliance]:
    directory: Path = tmp_path_factory.mktemp("faults")
    with run_in_thread(api=None, seed=1) as proxy, ChaosAppliance(directory, proxy, mirror=False) as appliance:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": appliance.east.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 3, replication_factor=3)])[TOPIC].result(30)
        yield appliance


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _produce_one(bootstrap: str, timeout: float = 30.0) -> None:
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": int(timeout * 1000)})
    producer.produce(TOPIC, b"x", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(timeout + 5)
    assert errors == [None]


def test_the_nodes_advertise_their_proxies_not_their_own_ports(app: ChaosAppliance) -> None:
    from confluent_kafka.admin import AdminClient

    brokers = AdminClient({"bootstrap.servers": app.source.bootstrap}).list_topics(timeout=10).brokers
    advertised = {f"{b.host}:{b.port}" for b in brokers.values()}
    assert advertised == {n.address for n in app.source.nodes}
    assert not advertised & {f"127.0.0.1:{n.port}" for n in app.source.nodes}
    wan = AdminClient({"bootstrap.servers": app.source.wan_bootstrap}).list_topics(timeout=10).brokers
    assert {f"{b.host}:{b.port}" for b in wan.values()} == {n.wan_address for n in app.source.nodes}


@pytest.mark.parametrize("name", ["kill-leader", "kill-follower", "kill-controller", "kill-random"])
def test_a_kill_takes_the_chosen_node_down_and_heal_brings_it_back(app: ChaosAppliance, name: str) -> None:
    fault = FAULTS[name].make(app, TOPIC)
    rng = random.Random(3)
    if name == "kill-leader":
        expected, _ = find_leader(app.source, TOPIC, random.Random(3))
    elif name == "kill-controller":
        expected = find_controller(app.source)
    target = fault.start(rng)
    try:
        down = [n for n in app.source.nodes if not n.running]
        assert len(down) == 1 and down[0].name in target
        if name in ("kill-leader", "kill-controller"):
            assert down[0] is expected
    finally:
        fault.heal()
    assert all(n.running for n in app.source.nodes)
    _produce_one(app.source.bootstrap)


def test_the_transactional_kills_take_down_the_coordinator_of_the_id_and_an_output_leader(app: ChaosAppliance) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    output = output_topic(TOPIC)
    admin = AdminClient({"bootstrap.servers": app.source.bootstrap})
    admin.create_topics([NewTopic(output, 3, 3)])[output].result(30)
    config = {"bootstrap.servers": app.source.bootstrap, "transactional.id": transactional_id(TOPIC)}
    producer = Producer(config)
    producer.init_transactions(60)  # the id gets its coordinator
    partition = -1
    for name in ("kill-txn-coordinator", "kill-output-leader"):
        # Looked up just before each fault: the first kill may move the output's leaderships.
        if name == "kill-txn-coordinator":
            expected = find_txn_coordinator(app.source, transactional_id(TOPIC))
        else:
            expected, partition = find_leader(app.source, output, random.Random(4))
        fault = FAULTS[name].make(app, TOPIC)
        target = fault.start(random.Random(4))
        try:
            assert [n for n in app.source.nodes if not n.running] == [expected], (name, target)
            assert expected.name in target
        finally:
            fault.heal()
        assert all(n.running for n in app.source.nodes)
    assert f"{output}[{partition}]" in target
    producer.begin_transaction()  # the producer finds the coordinator again and commits
    producer.produce(output, b"after the kills")
    producer.commit_transaction(60)


def test_pause_site_stops_every_node_and_heal_continues_them(app: ChaosAppliance) -> None:
    fault = FAULTS["pause-site"].make(app, TOPIC)
    fault.start(random.Random(1))
    try:
        assert {_state(n.pid) for n in app.source.nodes if n.pid} == {"T"}
    finally:
        fault.heal()
    assert {_state(n.pid) for n in app.source.nodes if n.pid} <= {"S", "R"}


def test_isolate_node_black_holes_its_listener(app: ChaosAppliance) -> None:
    fault = FAULTS["isolate-node"].make(app, TOPIC)
    target = fault.start(random.Random(5))
    try:
        node = next(n for n in app.source.nodes if n.name in target)
        with socket.create_connection(("127.0.0.1", node.advertised_port), timeout=2) as sock:
            sock.sendall(b"\x00\x00\x00\x0a" + b"\x00" * 10)  # a request the node would answer
            sock.settimeout(1.0)
            with pytest.raises(TimeoutError):
                sock.recv(1)
    finally:
        fault.heal()
    _produce_one(app.source.bootstrap)


def test_zookeeper_loss_kills_zookeeper_and_heal_restarts_it_on_the_same_port(app: ChaosAppliance) -> None:
    fault = FAULTS["zk-loss"].make(app, TOPIC)
    port = app.source.zookeeper.port
    fault.start(random.Random(1))
    try:
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    finally:
        fault.heal()
    assert app.source.zookeeper.port == port and app.source.zookeeper.poll() is None
    _produce_one(app.source.bootstrap)


def test_wan_faults_put_their_toxics_on_every_east_proxy_and_heal_removes_them(app: ChaosAppliance) -> None:
    proxy: ProxyHandle = app.proxy
    for name in ("wan-latency", "wan-bandwidth", "wan-blackhole", "wan-reset", "wan-packet-loss", "wan-slicer"):
        fault = FAULTS[name].make(app, TOPIC)
        fault.start(random.Random(1))
        try:
            assert all(proxy.toxics(n.wan_proxy_name) for n in app.source.nodes), name
            assert not any(proxy.toxics(n.proxy_name) for n in app.nodes()), name  # LOCAL: untouched
            assert not any(proxy.toxics(n.wan_proxy_name) for n in app.target.nodes), name
        finally:
            fault.heal()
        assert not any(proxy.toxics(n.wan_proxy_name) for n in app.source.nodes), name
