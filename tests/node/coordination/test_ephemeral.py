"""The ephemeral-znode helper and the kept ephemerals over an in-memory kazoo stand-in (no ZooKeeper).

The registration's timestamp comes from the injected clock, so a test can tell a re-created
registration from the original one.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from node.coordination import BrokerIdInUse, BrokerRegistration, CoordinationError
from node.coordination._brokers import register
from node.coordination._ephemeral import KeptEphemerals, put, remove
from node.coordination._offline import publish
from tests.node.coordination.fake_kazoo import FakeClient, FakeZooKeeper

REG = BrokerRegistration(1, "127.0.0.1", 9092, ("PLAINTEXT://127.0.0.1:9092",), None)


def in_use(owner: int) -> CoordinationError:
    return BrokerIdInUse(1, owner)


def clock(*readings: int) -> Callable[[], int]:
    """A wall clock that returns ``readings`` one after another."""
    it = iter(readings)
    return lambda: next(it)


def clients(n: int) -> tuple[FakeZooKeeper, list[FakeClient]]:
    """A server with Kafka's ``/brokers/ids`` and ``n`` sessions on it."""
    server = FakeZooKeeper()
    sessions = [FakeClient(server) for _ in range(n)]
    sessions[0].ensure_path("/brokers/ids")
    return server, sessions


def timestamp(client: FakeClient, path: str) -> str:
    data, _ = client.get(path)
    return str(json.loads(data)["timestamp"])


def test_put_creates_updates_in_its_own_session_and_never_takes_another_sessions_znode() -> None:
    _, (a, b) = clients(2)
    assert put(a, "/e", b"1", in_use, "write /e") == a.session
    assert put(a, "/e", b"2", in_use, "write /e") == a.session  # ours: updated in place
    assert a.get("/e")[0] == b"2" and a.get("/e")[1].version == 1
    with pytest.raises(BrokerIdInUse, match=f"ZooKeeper session {a.session:#x}"):
        put(b, "/e", b"3", in_use, "write /e")
    assert a.get("/e")[0] == b"2"


def test_remove_deletes_only_this_sessions_znode() -> None:
    _, (a, b) = clients(2)
    put(a, "/e", b"x", in_use, "write /e")
    assert remove(b, "/e", None, "delete /e") is False  # someone else's: left alone
    with pytest.raises(BrokerIdInUse):
        remove(b, "/e", in_use, "delete /e")
    assert remove(a, "/e", None, "delete /e", only_if=lambda data: data == b"y") is False
    assert remove(a, "/e", in_use, "delete /e") is True
    assert remove(a, "/e", in_use, "delete /e") is False  # gone already


def test_a_registration_is_stamped_by_the_injected_clock_and_re_created_after_an_expiry() -> None:
    server, (client,) = clients(1)
    kept = KeptEphemerals()
    register(client, kept, clock(1_700_000_000_000, 1_700_000_060_000), REG)
    assert timestamp(client, "/brokers/ids/1") == "1700000000000"

    kept.restore(client)  # the same session: nothing to do (the clock is not read)
    client.expire()
    assert not server.exists("/brokers/ids/1")
    kept.restore(client)
    assert timestamp(client, "/brokers/ids/1") == "1700000060000"  # re-created, stamped anew
    assert client.get("/brokers/ids/1")[1].ephemeralOwner == client.session


def test_a_session_registers_one_broker_id() -> None:
    server, (client,) = clients(1)
    kept = KeptEphemerals()
    register(client, kept, lambda: 5, REG)
    other = BrokerRegistration(3, "127.0.0.1", 9093, ("PLAINTEXT://127.0.0.1:9093",), None)
    with pytest.raises(ValueError, match="already registered broker 1; cannot also register 3"):
        register(client, kept, lambda: 5, other)
    assert not server.exists("/brokers/ids/3")


def test_an_id_taken_while_the_session_was_gone_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    _, (ours, thief) = clients(2)
    kept = KeptEphemerals()
    register(ours, kept, lambda: 5, REG)
    ours.expire()
    register(thief, KeptEphemerals(), lambda: 6, REG)
    kept.restore(ours)
    assert thief.get("/brokers/ids/1")[1].ephemeralOwner == thief.session
    assert "lost /brokers/ids/1 with the expired session" in caplog.text


def test_offline_replicas_are_kept_then_dropped() -> None:
    server, (client,) = clients(1)
    kept = KeptEphemerals()
    publish(client, kept, 2, [("t", 1), ("t", 0), ("t", 1)])
    assert json.loads(client.get("/strait/offline_replicas/2")[0])["partitions"] == [["t", 0], ["t", 1]]
    publish(client, kept, 2, [])
    client.expire()
    kept.restore(client)
    assert not server.exists("/strait/offline_replicas/2")  # dropped: not restored


def test_close_deletes_the_kept_znodes_this_session_holds_and_refuses_more() -> None:
    server, (client,) = clients(1)
    kept = KeptEphemerals()
    register(client, kept, lambda: 5, REG)
    publish(client, kept, 1, [("t", 0)])
    kept.close(client)
    assert not server.exists("/brokers/ids/1") and not server.exists("/strait/offline_replicas/1")
    with pytest.raises(CoordinationError, match="cannot register broker 1: closing"):
        register(client, kept, lambda: 5, REG)
