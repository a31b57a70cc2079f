"""Per-listener security keys (``listener.name.<listener>.<key>``): what each listener ends up with,
Kafka's precedence, DescribeConfigs, and every refusal naming the full key without showing a password."""

from __future__ import annotations

import pytest

from node.config import (
    HIDDEN,
    ConfigError,
    ConfigSource,
    NodeConfig,
    describe_broker_config,
    render_listener_reference,
)

pytestmark = pytest.mark.unit

BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/t-1"}
SOURCE = "server.properties"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
ALICE = f'{PLAIN} required user_alice="alice-secret";'
NODE = f'{SCRAM} required username="node" password="node-secret";'
# The brief's node: mTLS between nodes from an internal CA, SASL_SSL with a public certificate for clients.
THREE = {
    "listeners": "INTERNAL://127.0.0.1:0,CLIENTS://127.0.0.1:0,LOCAL://127.0.0.1:0",
    "listener.security.protocol.map": "INTERNAL:SSL,CLIENTS:SASL_SSL,LOCAL:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
    "ssl.keystore.location": "/etc/kafka/node.pem",
    "listener.name.internal.ssl.keystore.location": "/etc/kafka/internal.pem",
    "listener.name.internal.ssl.truststore.location": "/etc/kafka/internal-ca.pem",
    "listener.name.internal.ssl.client.auth": "required",
    "listener.name.clients.ssl.keystore.location": "/etc/kafka/public.pem",
    "listener.name.clients.ssl.key.password": "pem-secret",
    "listener.name.clients.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
    "listener.name.clients.plain.sasl.jaas.config": ALICE,
    "listener.name.clients.scram-sha-512.connections.max.reauth.ms": "60000",
}


def config(props: dict[str, str]) -> NodeConfig:
    return NodeConfig.from_properties(BASE | props, source=SOURCE)


def refused(props: dict[str, str], key: str, reason: str) -> ConfigError:
    """The ConfigError ``props`` raise: it names the file and the full ``key``, says ``reason``, and
    shows the key's value, or [hidden] for a password (never the password itself)."""
    with pytest.raises(ConfigError) as err:
        config(props)
    assert (err.value.key, err.value.source) == (key, SOURCE), str(err.value)
    assert reason in str(err.value), str(err.value)
    secret = any(word in key for word in ("password", "jaas"))
    assert err.value.value == ((HIDDEN if secret else props[key]) if key in props else None)
    for value in props.values():
        if "secret" in value:
            assert value not in str(err.value)
    return err.value


# -- what each listener uses --------------------------------------------------------------------------


def test_each_listener_uses_its_overrides_and_else_the_node_wide_keys() -> None:
    cfg = config(THREE)
    internal, clients, local = (cfg.security_of(n) for n in ("INTERNAL", "CLIENTS", "LOCAL"))
    assert (internal.keystore_location, internal.truststore_location, internal.client_auth) == (
        "/etc/kafka/internal.pem",
        "/etc/kafka/internal-ca.pem",
        "required",
    )
    assert internal.key_of("ssl.keystore.location") == "listener.name.internal.ssl.keystore.location"
    assert (clients.keystore_location, clients.key_password, clients.truststore_location) == (
        "/etc/kafka/public.pem",
        "pem-secret",
        None,
    )
    assert clients.sasl_mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert clients.jaas_config("PLAIN") == ALICE and clients.jaas_config("SCRAM-SHA-512") is None
    assert (clients.reauth_ms_for("PLAIN"), clients.reauth_ms_for("SCRAM-SHA-512")) == (0, 60000)
    # LOCAL has no overrides: the node-wide keys (and their defaults).
    assert (local.keystore_location, local.client_auth, local.sasl_mechanisms) == (
        "/etc/kafka/node.pem",
        "none",
        ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    )
    assert local.key_of("ssl.keystore.location") == "ssl.keystore.location"
    # The node-wide attributes stay what the node-wide keys say.
    assert (cfg.ssl_keystore_location, cfg.ssl_client_auth) == ("/etc/kafka/node.pem", "none")
    assert [o.key for o in cfg.listener_overrides] == [k for k in THREE if k.startswith("listener.name.")]
    assert not any(k.startswith("listener.name.") for k in cfg.explicit_keys)
    with pytest.raises(KeyError):
        cfg.security_of("WAN")


def test_passwords_stay_out_of_every_repr() -> None:
    cfg = config(THREE | {"ssl.key.password": "node-key-secret", "sasl.jaas.config": NODE})
    text = repr(cfg) + repr(cfg.listener_overrides) + repr(cfg.listener_security)
    for secret in ("pem-secret", "alice-secret", "node-key-secret", "node-secret"):
        assert secret not in text


def test_on_sasl_ssl_only_the_listeners_own_client_auth_asks_for_certificates() -> None:
    props = {
        "listeners": "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.location": "/k.pem",
        "ssl.truststore.location": "/ca.pem",
        "ssl.client.auth": "required",
    }
    cfg = config(props)
    assert (cfg.security_of("SSL").client_auth, cfg.security_of("SASL_SSL").client_auth) == ("required", "none")
    cfg = config(props | {"listener.name.sasl_ssl.ssl.client.auth": "requested"})
    assert cfg.security_of("SASL_SSL").client_auth == "requested"


def test_a_mechanisms_key_wins_over_the_listeners_which_wins_over_the_node_wide_one() -> None:
    props = {
        "listeners": "A://127.0.0.1:0,B://127.0.0.1:0",
        "listener.security.protocol.map": "A:SASL_PLAINTEXT,B:SASL_PLAINTEXT",
        "connections.max.reauth.ms": "1000",
        "listener.name.a.connections.max.reauth.ms": "2000",
        "listener.name.a.scram-sha-256.connections.max.reauth.ms": "3000",
        "sasl.jaas.config": NODE,
        "listener.name.b.scram-sha-256.sasl.jaas.config": f'{SCRAM} required username="b" password="b-secret";',
    }
    a, b = (config(props).security_of(n) for n in ("A", "B"))
    assert (a.reauth_ms_for("SCRAM-SHA-256"), a.reauth_ms_for("SCRAM-SHA-512")) == (3000, 2000)
    assert a.key_of("connections.max.reauth.ms", "SCRAM-SHA-512") == "listener.name.a.connections.max.reauth.ms"
    assert (b.reauth_ms_for("SCRAM-SHA-256"), b.reauth_ms_for("SCRAM-SHA-512")) == (1000, 1000)
    assert b.jaas_config("SCRAM-SHA-256") != NODE and b.jaas_config("SCRAM-SHA-512") == NODE  # node-wide for the rest
    assert a.jaas_config("SCRAM-SHA-256") == NODE


def test_the_rules_that_span_keys_read_each_listeners_own_settings() -> None:
    # The node-wide keystore is not needed when every TLS listener has its own.
    only_overrides = {k: v for k, v in THREE.items() if k != "ssl.keystore.location"}
    only_overrides["listener.name.clients.ssl.keystore.location"] = "/etc/kafka/public.pem"
    assert config(only_overrides).ssl_keystore_location is None
    # A listener asking for client certificates needs its CAs: the key to set is the listener's.
    no_ca = {k: v for k, v in THREE.items() if k != "listener.name.internal.ssl.truststore.location"}
    error = refused(no_ca, "listener.name.internal.ssl.truststore.location", "listener.name.internal.ssl.client.auth")
    assert "listener INTERNAL" in str(error)
    # A listener enabling PLAIN needs PLAIN users of its own or from the node-wide entry or file.
    no_users = {k: v for k, v in THREE.items() if k != "listener.name.clients.plain.sasl.jaas.config"}
    refused(no_users, "listener.name.clients.sasl.enabled.mechanisms", "no PLAIN users")
    assert config(no_users | {"sasl.jaas.config": ALICE}).security_of("CLIENTS").jaas_config("PLAIN") == ALICE
    # The keystore is still required for a TLS listener that has none at all.
    refused(
        {"listeners": "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0", "listener.name.ssl.ssl.keystore.location": "/k"},
        "ssl.keystore.location",
        "listener.name.sasl_ssl.ssl.keystore.location",
    )


def test_replication_over_sasl_uses_the_inter_broker_listeners_own_jaas_entry_and_mechanisms() -> None:
    props = {
        "listeners": "BROKER://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "BROKER:SASL_SSL,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name": "BROKER",
        "listener.name.broker.ssl.keystore.location": "/k.pem",
        "listener.name.broker.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.broker.scram-sha-512.sasl.jaas.config": NODE,
    }
    assert config(props).security_of("BROKER").jaas_config("SCRAM-SHA-512") == NODE
    no_entry = {k: v for k, v in props.items() if "jaas" not in k}
    refused(no_entry, "inter.broker.listener.name", "listener.name.broker.scram-sha-512.sasl.jaas.config")
    error = refused(
        props | {"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
        "sasl.mechanism.inter.broker.protocol",
        "is not in listener.name.broker.sasl.enabled.mechanisms",
    )
    assert "(SCRAM-SHA-512)" in str(error)


# -- refusals --------------------------------------------------------------------------------------------

SASL_CLIENTS = {
    "listeners": "CLIENTS://127.0.0.1:0,LOCAL://127.0.0.1:0",
    "listener.security.protocol.map": "CLIENTS:SASL_SSL,LOCAL:PLAINTEXT",
    "inter.broker.listener.name": "LOCAL",
    "ssl.keystore.location": "/k.pem",
}


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("listener.name.wan.ssl.keystore.location", "/k.pem", "listener name WAN is not in listeners (CLIENTS://"),
        ("listener.name.wan.plain.sasl.jaas.config", ALICE, "listener name WAN is not in listeners"),
        (
            "listener.name.CLIENTS.ssl.keystore.location",
            "/k.pem",
            "in lower case, as Kafka reads it: listener.name.clients.",
        ),
        ("listener.name.clients", "x", "is not listener.name.<listener>.<key>"),
        ("listener.name..ssl.keystore.location", "/k.pem", "is not listener.name.<listener>.<key>"),
        ("listener.name.clients.num.partitions", "3", "num.partitions cannot be set per listener"),
        ("listener.name.clients.sasl.mechanism.inter.broker.protocol", "PLAIN", "cannot be set per listener"),
        ("listener.name.clients.strait.sasl.plain.users.file", "/u", "cannot be set per listener"),
        ("listener.name.clients.connection.failed.authentication.delay.ms", "5", "cannot be set per listener"),
        ("listener.name.clients.ssl.cipher.suites", "X", "unknown key 'ssl.cipher.suites'"),
        ("listener.name.clients.ssl.keystore.locaton", "/k", "(did you mean 'ssl.keystore.location'?)"),
        ("listener.name.clients.ssl.truststore.password", "hunter2-secret", "unknown key"),
        ("listener.name.clients.sasl.jaas.config", ALICE, "per mechanism: <mechanism>.sasl.jaas.config"),
        ("listener.name.clients.gssapi.sasl.jaas.config", ALICE, "GSSAPI is not supported"),
        ("listener.name.clients.md5.sasl.jaas.config", ALICE, "'md5' is not a SASL mechanism"),
        ("listener.name.clients.SCRAM-SHA-256.connections.max.reauth.ms", "5", "in lower case"),
        ("listener.name.clients.plain.sasl.jaas.config", ALICE, "PLAIN is not enabled on listener CLIENTS"),
        ("listener.name.local.ssl.keystore.location", "/k.pem", "listener LOCAL is PLAINTEXT: ssl.* keys apply"),
        ("listener.name.local.ssl.key.password", "pem-secret", "listener LOCAL is PLAINTEXT"),
        ("listener.name.local.sasl.enabled.mechanisms", "PLAIN", "SASL keys apply to SASL_PLAINTEXT and SASL_SSL"),
        ("listener.name.clients.ssl.client.auth", "yes", "must be one of none, requested, required"),
        ("listener.name.clients.ssl.keystore.type", "JKS", "convert the JKS store to PEM"),
        ("listener.name.clients.sasl.enabled.mechanisms", "GSSAPI", "Kerberos (GSSAPI) is not supported"),
        ("listener.name.clients.sasl.enabled.mechanisms", "", "needs at least one item"),
        ("listener.name.clients.connections.max.reauth.ms", "-1", "must be at least 0"),
        ("listener.name.clients.sasl.server.max.receive.size", "big", "not an integer"),
        ("listener.name.clients.ssl.principal.mapping.rules", "RULE:x/y", "RULE:x/y"),
        ("listener.name.clients.scram-sha-512.sasl.jaas.config", 'X required password="a-secret"', "no ';'"),
        ("listener.name.clients.scram-sha-256.sasl.jaas.config", 'X maybe password="a-secret";', "flag 'maybe'"),
    ],
)
def test_an_override_strait_cannot_take_is_refused_naming_the_full_key(key: str, value: str, reason: str) -> None:
    refused(SASL_CLIENTS | {key: value}, key, reason)


def test_plains_jaas_entry_must_be_a_plain_login_module() -> None:
    props = SASL_CLIENTS | {"listener.name.clients.sasl.enabled.mechanisms": "PLAIN"}
    key = "listener.name.clients.plain.sasl.jaas.config"
    refused(props | {key: NODE}, key, f"PLAIN's users come from a {PLAIN} entry")
    assert config(props | {key: ALICE}).security_of("CLIENTS").sasl_mechanisms == ("PLAIN",)


# -- DescribeConfigs -------------------------------------------------------------------------------------


def test_describe_configs_lists_each_override_under_its_full_name_and_hides_passwords() -> None:
    cfg = config(THREE | {"ssl.client.auth": "requested", "ssl.truststore.location": "/ca.pem"})
    entries = {e.name: e for e in describe_broker_config(cfg)}
    assert [n for n in entries if n.startswith("listener.name.")] == sorted(
        k for k in THREE if k.startswith("listener.name.")
    )
    static, default = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG
    auth = entries["listener.name.internal.ssl.client.auth"]
    assert (auth.value, auth.source, auth.read_only, auth.is_default, auth.is_sensitive) == (
        "required",
        static,
        True,
        False,
        False,
    )
    assert auth.synonyms == [
        ("listener.name.internal.ssl.client.auth", "required", static),
        ("ssl.client.auth", "requested", static),
        ("ssl.client.auth", "none", default),
    ]
    reauth = entries["listener.name.clients.scram-sha-512.connections.max.reauth.ms"]
    assert reauth.synonyms[0] == ("listener.name.clients.scram-sha-512.connections.max.reauth.ms", "60000", static)
    assert reauth.synonyms[1:] == [("connections.max.reauth.ms", "0", default)]
    for name in ("listener.name.clients.ssl.key.password", "listener.name.clients.plain.sasl.jaas.config"):
        entry = entries[name]
        assert (entry.value, entry.is_sensitive) == (None, True)
        assert all(value is None for _, value, _ in entry.synonyms)
    assert "secret" not in repr(list(entries.values()))
    assert entries["ssl.keystore.location"].value == "/etc/kafka/node.pem"  # the node-wide key is listed as before


def test_the_generated_reference_lists_every_key_a_listener_may_override() -> None:
    reference = render_listener_reference()
    for key in ("ssl.keystore.location", "ssl.client.auth", "sasl.enabled.mechanisms", "<mechanism>.sasl.jaas.config"):
        assert f"| `{key}` |" in reference
