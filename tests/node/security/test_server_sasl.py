"""node.sasl.ServerSasl: one per SASL listener, with that listener's mechanisms, PLAIN users and limits."""

from __future__ import annotations

import pytest

from node.config import NodeConfig
from node.sasl import ServerSasl
from node.security._sasl import SaslFailure

pytestmark = pytest.mark.unit

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def config(**props: str) -> NodeConfig:
    base = {
        "broker.id": "1",
        "zookeeper.connect": "127.0.0.1:2181/t",
        "listeners": "A://127.0.0.1:0,B://127.0.0.1:0,LOCAL://127.0.0.1:0",
        "listener.security.protocol.map": "A:SASL_PLAINTEXT,B:SASL_PLAINTEXT,LOCAL:PLAINTEXT",
        "inter.broker.listener.name": "LOCAL",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": f'{PLAIN} required user_carol="carol-pw";',
    }
    return NodeConfig.from_properties(base | props)


def login(sasl: ServerSasl, user: str, password: str) -> bool:
    exchange = sasl.exchange("PLAIN")
    assert exchange is not None
    try:
        exchange.step(b"\0" + user.encode() + b"\0" + password.encode())
    except SaslFailure:
        return False
    return exchange.complete


def test_each_listener_has_its_own_mechanisms_users_and_limits() -> None:
    cfg = config(
        **{
            "listener.name.a.plain.sasl.jaas.config": f'{PLAIN} required user_alice="alice-pw";',
            "listener.name.b.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.b.sasl.server.max.receive.size": "4096",
            "listener.name.a.plain.connections.max.reauth.ms": "5000",
            "connection.failed.authentication.delay.ms": "7",
        }
    )
    a, b = ServerSasl(cfg, "A", scram_lookup=None), ServerSasl(cfg, "B", scram_lookup=lambda _m, _u: None)
    assert (a.mechanisms, b.mechanisms) == (("PLAIN",), ("SCRAM-SHA-512",))
    assert login(a, "alice", "alice-pw")
    assert not login(a, "carol", "carol-pw")  # A's own entry replaces the node-wide one
    assert b.exchange("PLAIN") is None and b.exchange("SCRAM-SHA-512") is not None
    assert (a.max_receive_size, b.max_receive_size) == (524288, 4096)
    assert (a.reauth_ms("PLAIN"), b.reauth_ms("SCRAM-SHA-512")) == (5000, 0)
    assert a.failure_delay_s == b.failure_delay_s == 0.007


def test_a_listener_without_overrides_uses_the_node_wide_keys() -> None:
    cfg = config()
    a = ServerSasl(cfg, "A", scram_lookup=None)
    assert a.mechanisms == ("PLAIN",) and login(a, "carol", "carol-pw") and not login(a, "alice", "alice-pw")
    with pytest.raises(KeyError):
        ServerSasl(cfg, "WAN", scram_lookup=None)
