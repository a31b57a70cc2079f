"""Several named listeners: listeners, advertised.listeners, listener.security.protocol.map and
inter.broker.listener.name, each alone and together, and every error naming the value at fault."""

from __future__ import annotations

import re

import pytest

from node.config import ConfigError, Listener, NodeConfig, parse_listeners

pytestmark = pytest.mark.unit

BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/t-1"}
SOURCE = "server.properties"
TWO = {
    "listeners": "LOCAL://127.0.0.1:9092,WAN://0.0.0.0:9093",
    "listener.security.protocol.map": "LOCAL:PLAINTEXT,WAN:PLAINTEXT",
}


def config(props: dict[str, str]) -> NodeConfig:
    return NodeConfig.from_properties(BASE | props, source=SOURCE)


def refused(props: dict[str, str], key: str) -> ConfigError:
    """The ConfigError ``props`` raise, checked to name the file, ``key`` and the value set for it."""
    with pytest.raises(ConfigError) as err:
        config(props)
    assert (err.value.key, err.value.source) == (key, SOURCE)
    assert err.value.value == props[key]
    assert str(err.value).startswith(f"{SOURCE}: {key}={props[key]!r}: ")
    return err.value


# -- what a good configuration gives -----------------------------------------------------------------


def test_two_listeners_are_both_bound_and_advertised_in_listeners_order() -> None:
    cfg = config(TWO)
    assert cfg.listeners == (Listener("LOCAL", "127.0.0.1", 9092), Listener("WAN", "0.0.0.0", 9093))
    assert cfg.advertised_listeners == (Listener("LOCAL", "127.0.0.1", 9092), Listener("WAN", "127.0.0.1", 9093))
    assert cfg.inter_broker_listener_name == "LOCAL"  # unset: the first listener
    assert (cfg.security_protocol("LOCAL"), cfg.security_protocol("WAN")) == ("PLAINTEXT", "PLAINTEXT")


def test_names_are_case_insensitive_everywhere() -> None:
    cfg = config(
        {
            "listeners": "local://127.0.0.1:0,wan://127.0.0.1:0",
            "listener.security.protocol.map": "Local:plaintext,WAN:PlainText",
            "advertised.listeners": "Wan://proxy:19093",
            "inter.broker.listener.name": "wan",
        }
    )
    assert [x.name for x in cfg.listeners] == ["LOCAL", "WAN"]
    assert cfg.advertised_listeners == (Listener("LOCAL", "127.0.0.1", 0), Listener("WAN", "proxy", 19093))
    assert cfg.inter_broker_listener_name == "WAN"


def test_advertised_names_some_listeners_and_the_others_are_advertised_as_bound() -> None:
    cfg = config(
        TWO | {"listeners": "LOCAL://0.0.0.0:0,WAN://127.0.0.1:0", "advertised.listeners": "WAN://proxy:19093"}
    )
    assert cfg.advertised_listeners == (Listener("LOCAL", "127.0.0.1", 0), Listener("WAN", "proxy", 19093))
    # Port 0 is the port each listener got; an advertised port stays as it is.
    assert cfg.advertised_for({"LOCAL": 40001, "WAN": 40002}) == (
        Listener("LOCAL", "127.0.0.1", 40001),
        Listener("WAN", "proxy", 19093),
    )


def test_advertised_order_follows_listeners_not_the_advertised_value() -> None:
    cfg = config(TWO | {"advertised.listeners": "WAN://b:2,LOCAL://a:1"})
    assert cfg.advertised_listeners == (Listener("LOCAL", "a", 1), Listener("WAN", "b", 2))


def test_port_zero_may_repeat_and_advertised_ports_may_repeat() -> None:
    cfg = config(TWO | {"listeners": "LOCAL://127.0.0.1:0,WAN://127.0.0.1:0"})
    assert [x.port for x in cfg.listeners] == [0, 0]
    # One listener may advertise the address of another (a load balancer, a proxy), as Kafka allows.
    cfg = config(TWO | {"advertised.listeners": "LOCAL://lb:9092,WAN://lb:9092"})
    assert {x.port for x in cfg.advertised_listeners} == {9092}


def test_protocol_names_map_to_themselves_even_when_the_map_is_set() -> None:
    cfg = config(
        {
            "listeners": "PLAINTEXT://127.0.0.1:9092,LOCAL://127.0.0.1:9093",
            "listener.security.protocol.map": "LOCAL:PLAINTEXT",
        }
    )
    assert cfg.security_protocol("PLAINTEXT") == cfg.security_protocol("LOCAL") == "PLAINTEXT"
    # ... unless the map says otherwise: SSL is only a name here.
    cfg = config({"listeners": "SSL://127.0.0.1:9093", "listener.security.protocol.map": "SSL:PLAINTEXT"})
    assert cfg.security_protocol("SSL") == "PLAINTEXT"


def test_the_default_configuration_is_one_plaintext_listener_used_for_everything() -> None:
    cfg = config({})
    assert cfg.listeners == cfg.advertised_listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    assert cfg.inter_broker_listener_name == "PLAINTEXT"
    assert cfg.value_of("listener.security.protocol.map") == (
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
    )
    assert "inter.broker.listener.name" not in cfg.explicit_keys


def test_parse_listeners_checks_names_against_a_given_map() -> None:
    protocols = {"LOCAL": "PLAINTEXT", "PLAINTEXT": "PLAINTEXT"}
    assert parse_listeners("LOCAL://h:1", "listeners", protocols) == (Listener("LOCAL", "h", 1),)
    with pytest.raises(ConfigError, match=r"listener 'WAN://h:2': listener name WAN has no security protocol"):
        parse_listeners("LOCAL://h:1,WAN://h:2", "listeners", protocols)


# -- what is refused, naming the value -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("LOCAL://h:1,local://h:2", r"listener 'local://h:2': listener name LOCAL is used twice"),
        ("LOCAL://h:9092,WAN://h:9092", r"listener 'WAN://h:9092': port 9092 is already the port of listener "),
        ("LOCAL://a:9092,WAN://b:9092", r"port 9092 is already the port of listener LOCAL://a:9092"),
        ("LO-CAL://h:1", r"listener 'LO-CAL://h:1': a listener name is letters, digits and '_' only"),
    ],
)
def test_listener_names_and_ports_are_unique(value: str, reason: str) -> None:
    error = refused(TWO | {"listeners": value}, "listeners")
    assert re.search(reason, error.reason), error.reason


def test_a_listener_name_missing_from_the_map_is_refused_naming_it() -> None:
    error = refused(
        {"listeners": "LOCAL://h:1,WAN://h:2", "listener.security.protocol.map": "LOCAL:PLAINTEXT"}, "listeners"
    )
    assert error.reason == (
        "listener 'WAN://h:2': listener name WAN has no security protocol in listener.security.protocol.map; "
        "add WAN:PLAINTEXT to it"
    )


def test_sasl_listeners_need_plain_users_when_plain_is_on_and_replication_needs_credentials() -> None:
    sasl = {
        "listeners": "LOCAL://127.0.0.1:0,WAN://h:9093",
        "listener.security.protocol.map": "LOCAL:PLAINTEXT,WAN:SASL_PLAINTEXT",
    }
    assert config(sasl).security_protocol("WAN") == "SASL_PLAINTEXT"  # SCRAM only, the default
    with pytest.raises(ConfigError) as err:
        config(sasl | {"sasl.enabled.mechanisms": "PLAIN"})
    assert err.value.key == "sasl.enabled.mechanisms" and "there are no PLAIN users" in str(err.value)
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a";'
    assert config(sasl | {"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": jaas}).sasl_jaas_config == jaas
    assert config(sasl | {"sasl.enabled.mechanisms": "PLAIN", "strait.sasl.plain.users.file": "/u"})
    with pytest.raises(ConfigError) as err:  # replication over SASL needs the node's own credentials
        config(sasl | {"inter.broker.listener.name": "WAN"})
    assert err.value.key == "inter.broker.listener.name"
    assert "sasl.jaas.config's username and password, which are not set" in str(err.value)
    own = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="node" password="pw";'
    with pytest.raises(ConfigError) as err:
        config(sasl | {"inter.broker.listener.name": "WAN", "sasl.jaas.config": own, "sasl.enabled.mechanisms": "PLAIN",
                       "strait.sasl.plain.users.file": "/u"})  # fmt: skip
    assert err.value.key == "sasl.mechanism.inter.broker.protocol" and "not in sasl.enabled.mechanisms" in str(
        err.value
    )
    cfg = config(sasl | {"inter.broker.listener.name": "WAN", "sasl.jaas.config": own})
    assert cfg.sasl_mechanism_inter_broker_protocol == "SCRAM-SHA-512"


def test_an_ssl_listener_needs_a_keystore_and_client_certificates_need_a_truststore() -> None:
    two = {"listeners": "LOCAL://127.0.0.1:0,WAN://h:9093", "listener.security.protocol.map": "LOCAL:PLAINTEXT,WAN:SSL"}
    with pytest.raises(ConfigError) as err:
        config(two)
    assert (err.value.key, err.value.source) == ("ssl.keystore.location", SOURCE)
    assert "is required by the SSL listener WAN://h:9093" in str(err.value)
    keystore = {"listeners": "SSL://h:9093", "ssl.keystore.location": "/etc/node.pem"}  # replication over SSL too
    with pytest.raises(ConfigError) as err:
        config(keystore | {"ssl.client.auth": "required"})
    assert err.value.key == "ssl.truststore.location"
    assert "is required by ssl.client.auth=required" in str(err.value)
    cfg = config(keystore | {"ssl.client.auth": "requested", "ssl.truststore.location": "/etc/ca.pem"})
    assert cfg.security_protocol("SSL") == "SSL" and cfg.ssl_client_auth == "requested"
    assert config(keystore).ssl_truststore_location is None  # a server certificate only


def test_a_map_may_name_unused_listeners_with_any_protocol() -> None:
    # An operator's Kafka map often lists every protocol; only the listeners in use must be PLAINTEXT.
    cfg = config(TWO | {"listener.security.protocol.map": "LOCAL:PLAINTEXT,WAN:PLAINTEXT,EXTERNAL:SASL_SSL"})
    assert len(cfg.listeners) == 2


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("LOCAL", "'LOCAL' is not LISTENER_NAME:SECURITY_PROTOCOL"),
        ("LOCAL:TLS", "'LOCAL:TLS': TLS is not a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"),
        ("LOCAL:PLAINTEXT,local:SSL", "'local:SSL': listener name LOCAL is mapped twice"),
    ],
)
def test_a_malformed_map_is_refused_naming_the_item(value: str, reason: str) -> None:
    assert refused(TWO | {"listener.security.protocol.map": value}, "listener.security.protocol.map").reason == reason


def test_an_advertised_name_that_is_not_a_listener_is_refused() -> None:
    error = refused(TWO | {"advertised.listeners": "LOCAL://a:1,EXTERNAL://b:2"}, "advertised.listeners")
    assert error.reason == "listener name EXTERNAL is not in listeners (LOCAL://127.0.0.1:9092,WAN://0.0.0.0:9093)"


def test_an_unknown_inter_broker_listener_name_is_refused() -> None:
    error = refused(TWO | {"inter.broker.listener.name": "replication"}, "inter.broker.listener.name")
    assert error.reason == "listener name REPLICATION is not in listeners (LOCAL://127.0.0.1:9092,WAN://0.0.0.0:9093)"
