"""Several named listeners on real nodes: three nodes, each on ``LOCAL`` and ``WAN``.

A client gets the addresses of the listener it bootstrapped on (Metadata, FindCoordinator), and
real clients (confluent-kafka, Debian's kcat on librdkafka 2.0.2) work unchanged on either one.
Nodes reach each other only through ``inter.broker.listener.name``: with the other listener
advertised at a closed port, replication (acks=all with min.insync.replicas=3), the controller
and the clients of the inter-broker listener carry on.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from node.protocol import ApiKey
from tests.node.harness import NodeProcess, stored_batches, wait_for
from tests.node.raw import connect, request
from tests.node.test_replication import consume_all, partition_states, produce

pytestmark = pytest.mark.integration

Site = Callable[..., list[NodeProcess]]
TWO_LISTENERS = {
    "listeners": "LOCAL://127.0.0.1:0,WAN://127.0.0.1:0",
    "listener.security.protocol.map": "LOCAL:PLAINTEXT,WAN:PLAINTEXT",
}


def listeners_of(node: NodeProcess) -> dict[str, str]:
    """Each listener's advertised host:port, from the node's ready file."""
    info = json.loads(node.ready_path.read_text(encoding="utf-8"))
    assert info["bootstrap"] == node.bootstrap == next(iter(info["listeners"].values()))
    listeners: dict[str, str] = info["listeners"]
    return listeners


def on(nodes: list[NodeProcess], listener: str) -> str:
    return ",".join(listeners_of(n)[listener] for n in nodes)


def create_topic(bootstrap: str, name: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3, config=configs)])[name].result(30)


def metadata_brokers(address: str) -> dict[int, str]:
    with connect(address) as sock:
        meta = request(sock, ApiKey.METADATA, 8, {"topics": None})
    return {b.node_id: f"{b.host}:{b.port}" for b in meta.brokers}


def coordinator(address: str, group: str) -> tuple[int, str]:
    def ask() -> tuple[int, str] | None:
        with connect(address) as sock:
            body = request(sock, ApiKey.FIND_COORDINATOR, 2, {"key": group, "key_type": 0})
        return (body.node_id, f"{body.host}:{body.port}") if body.error_code == 0 else None

    found: tuple[int, str] = wait_for(f"the coordinator of {group} through {address}", ask)
    return found


def consume_in_group(bootstrap: str, topic: str, group: str, count: int) -> list[bytes]:
    """Read ``count`` records as a member of ``group`` (subscribe, poll, commit): FindCoordinator,
    JoinGroup, SyncGroup, OffsetCommit and Fetch all go where this bootstrap's listener says."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                values.append(msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values


def kcat(*args: str, stdin: bytes = b"") -> str:
    path = shutil.which("kcat")
    assert path is not None, "kcat is not installed: `apt-get install kcat`"
    done = subprocess.run([path, *args], input=stdin, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port bound by this test and never listened on: every connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def test_clients_get_their_listeners_addresses_and_work_on_either(site: Site) -> None:
    nodes = site(3, **{k.replace(".", "_"): v for k, v in TWO_LISTENERS.items()})
    local, wan = (
        {n.broker_id: listeners_of(n)["LOCAL"] for n in nodes},
        {n.broker_id: listeners_of(n)["WAN"] for n in nodes},
    )
    assert set(local.values()).isdisjoint(wan.values())
    for n in nodes:
        assert metadata_brokers(listeners_of(n)["WAN"]) == wan
        assert metadata_brokers(listeners_of(n)["LOCAL"]) == local
    # The coordinator is the same broker, named by the address of the listener asked.
    node_id, address = coordinator(wan[1], "wan-group")
    assert address == wan[node_id]
    assert coordinator(local[2], "wan-group") == (node_id, local[node_id])

    create_topic(on(nodes, "WAN"), "both", 2, **{"min.insync.replicas": "2"})
    on_local = produce(on(nodes, "LOCAL"), "both", [f"local-{i}".encode() for i in range(200)])
    on_wan = produce(on(nodes, "WAN"), "both", [f"wan-{i}".encode() for i in range(200)])
    assert sorted(consume_all(on(nodes, "WAN"), "both", 2)) == sorted(on_local + on_wan)
    assert sorted(consume_all(on(nodes, "LOCAL"), "both", 2)) == sorted(on_local + on_wan)
    got = consume_in_group(on(nodes, "WAN"), "both", "wan-group", 400)
    assert sorted(got) == sorted(v for _, _, v in on_local + on_wan)

    # kcat: its metadata lists the WAN addresses only, and it produces and reads back through WAN.
    listed = json.loads(kcat("-L", "-J", "-b", wan[3]))
    assert {b["id"]: b["name"] for b in listed["brokers"]} == wan
    kcat("-P", "-b", wan[3], "-t", "both", "-p", "0", "-X", "acks=all", stdin=b"kcat-1\nkcat-2\n")
    read = kcat("-C", "-b", wan[2], "-t", "both", "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%s\n")
    assert read.splitlines()[-2:] == ["kcat-1", "kcat-2"]


@pytest.mark.parametrize(
    ("inter_broker", "dead"),
    [("LOCAL", "WAN"), ("WAN", "LOCAL")],
    ids=["inter-broker-LOCAL-WAN-dead", "inter-broker-WAN-LOCAL-dead"],
)
def test_nodes_reach_each_other_only_through_the_inter_broker_listener(
    site: Site, closed_port: int, inter_broker: str, dead: str
) -> None:
    props = TWO_LISTENERS | {
        "inter.broker.listener.name": inter_broker,
        "advertised.listeners": f"{dead}://127.0.0.1:{closed_port}",
    }
    nodes = site(3, **{k.replace(".", "_"): v for k, v in props.items()})
    for n in nodes:
        assert listeners_of(n)[dead] == f"127.0.0.1:{closed_port}"
    clients = on(nodes, inter_broker)
    # A node learns of the others' registrations through a ZooKeeper watch: eventually, as in Kafka.
    wait_for(
        "node 1's metadata to list all three",
        lambda: set(metadata_brokers(listeners_of(nodes[0])[inter_broker])) == {1, 2, 3},
        20,
    )

    # acks=all with min.insync.replicas=3 is acknowledged only once both followers fetched.
    create_topic(clients, "ledger", 3, **{"min.insync.replicas": "3"})
    acked = produce(clients, "ledger", [f"v{i}".encode() for i in range(600)])
    ends = {p: max((o + 1 for q, o, _ in acked if q == p), default=0) for p in range(3)}

    def replicated() -> bool:
        return all(
            state["log_end_offset"] == ends[p] and sorted(state["isr"]) == [1, 2, 3]
            for n in nodes
            for p, state in partition_states(n, "ledger").items()
        )

    wait_for("every replica to hold every record with all three in the ISR", replicated)
    for p in range(3):
        copies = {n.broker_id: stored_batches(n, "ledger", p) for n in nodes}
        assert copies[1] == copies[2] == copies[3], f"partition {p} differs between replicas"
    assert sorted(consume_all(clients, "ledger", 3)) == sorted(acked)
    assert sorted(consume_in_group(clients, "ledger", "readers", 600)) == sorted(v for _, _, v in acked)
