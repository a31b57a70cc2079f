"""The broker's config: :class:`NodeConfig`, whose fields are the ``server.properties`` key table.

Each typed attribute of :class:`NodeConfig` is declared once, with the Kafka key(s) it is read
from (:func:`~node.config._keys.setting`): name, type, default, valid values, docs group and
text, the topic-level key it is the default for, and lower-precedence synonyms. Adding a key
is adding one such field (or, for a key accepted with no effect, one line in
:data:`_ACCEPTED_WITHOUT_EFFECT`). :data:`BROKER_KEYS`, parsing and validation
(:meth:`NodeConfig.from_properties`), ``DescribeConfigs`` for a broker and the reference in
``docs/configuration.md`` are all derived from these declarations.

Flow: :func:`load_config` reads a file, :func:`~node.config.parse_properties` turns Java
``.properties`` text into a dict, :meth:`NodeConfig.from_properties` validates every key
against the table (``listener.name.<listener>.*`` overrides against the keys they override, in
``_listener_security``), resolves each listener's TLS and SASL settings, applies the rules that
span keys, and builds one typed, frozen :class:`NodeConfig` (attribute names carry their units).

Every error is a :class:`~node.config.ConfigError` naming the file, the key and the bad value.
The table is about 460 of this module's 970 lines; it stays whole so that every broker key is
read in one place, beside the attribute it sets.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from node.ids import NodeId
from node.replica_selector import RACK_AWARE, SELECTORS
from node.security._jaas import parse_jaas_config
from node.security._principal import parse_principal_rules
from node.security._sasl import MECHANISMS
from node.zkkit import ZkDigest, read_digest_file
from storage import LogConfig

from ._errors import ConfigError
from ._keys import (
    COMPRESSION_TYPES,
    HIDDEN,
    LONG_MAX,
    ConfigKey,
    ConfigType,
    Value,
    check_non_empty_list,
    check_ratio,
    index_keys,
    looks_secret,
    setting,
    settings_of,
)
from ._listener_security import (
    OVERRIDE_PREFIX,
    ListenerOverride,
    ListenerSecurity,
    override_key,
    parse_overrides,
    resolve_listener_security,
)
from ._listeners import (
    DEFAULT_PROTOCOL_MAP,
    Listener,
    check_advertised,
    check_listener_keys,
    check_listeners,
    check_protocol_map,
    parse_host_port,
    parse_listener_list,
    parse_protocol_map,
)
from ._properties import parse_properties

__all__ = [
    "BROKER_KEYS",
    "BROKER_KEY_INDEX",
    "HOUR_MS",
    "MINUTE_MS",
    "NO_EFFECT_KEYS",
    "NodeConfig",
    "load_config",
]

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS

# -- validators and converters of single keys (a check raises ValueError(reason)) -----------------


def _split_dirs(value: str) -> list[str]:
    return [d.strip() for d in value.split(",") if d.strip()]


def _check_log_dirs(value: Value) -> None:
    dirs = _split_dirs(str(value))
    if not dirs:
        raise ValueError("needs at least one directory")
    seen: set[str] = set()
    for d in dirs:
        norm = str(Path(d))
        if norm in seen:
            raise ValueError(f"directory {d!r} is listed twice")
        seen.add(norm)


def _check_zookeeper_connect(value: Value) -> None:
    text = str(value)
    hosts, slash, chroot = text.partition("/")
    if not hosts:
        raise ValueError("needs host:port[,host:port...][/chroot]")
    for item in hosts.split(","):
        parse_host_port(item, what=f"server {item.strip()!r}")
    path = slash + chroot
    if len(path) > 1 and (path.endswith("/") or "//" in path):
        raise ValueError(f"chroot {path!r} must not end with '/' or contain '//'")


def _check_replica_selector(value: Value) -> None:
    if str(value) not in SELECTORS:
        raise ValueError(f"strait has only Kafka's {RACK_AWARE}")


def _check_admin_listener(value: Value) -> None:
    host, _ = _admin_address(str(value))
    if not host:
        raise ValueError("give a host (127.0.0.1 for loopback only, 0.0.0.0 for every interface)")


def _check_retention(value: Value) -> None:
    if value == 0 or (isinstance(value, int) and value < -1):
        raise ValueError("retention must be -1 (unlimited) or at least 1")


def _listeners(text: str) -> tuple[Listener, ...]:
    return parse_listener_list(text, "listeners")


def _advertised(text: str) -> tuple[Listener, ...]:
    return parse_listener_list(text, "advertised.listeners")


def _advertise_every_listener(given: tuple[Listener, ...] | None, earlier: Mapping[str, Any]) -> tuple[Listener, ...]:
    """One advertised listener per listener, in the order of ``listeners``: the one advertised.listeners
    names, else the listener itself with an unspecified host replaced by 127.0.0.1 (port 0 stays 0
    until the node knows the port it bound, see :meth:`NodeConfig.advertised_for`)."""
    named = {adv.name: adv for adv in given or ()}
    listeners: tuple[Listener, ...] = earlier["listeners"]
    return tuple(
        named.get(x.name) or (Listener(x.name, "127.0.0.1", x.port) if x.is_wildcard else x) for x in listeners
    )


def _protocol_pairs(text: str) -> tuple[tuple[str, str], ...]:
    return tuple(parse_protocol_map(text).items())


def _first_listener_name(earlier: Mapping[str, Any]) -> str:
    listeners: tuple[Listener, ...] = earlier["listeners"]
    return listeners[0].name


#: Kafka's class names of its ACL authorizer (ZooKeeper-era, KRaft, and the old one); each turns ACLs on.
AUTHORIZER_CLASSES = (
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
)


def _super_users(text: str) -> tuple[str, ...]:
    return tuple(u.strip() for u in text.split(";") if u.strip())


def _check_super_users(value: Value) -> None:
    for user in _super_users(str(value)):
        kind, sep, name = user.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"{user!r} is not a principal (Type:name, e.g. User:admin)")


def check_jaas_config(value: Value) -> None:
    """``sasl.jaas.config``'s validator; ValueError(reason, never quoting a password)."""
    parse_jaas_config(str(value))


def check_principal_rules(value: Value) -> None:
    """``ssl.principal.mapping.rules``' validator; ValueError(reason naming the rule)."""
    parse_principal_rules(str(value))


def _paths(text: str) -> tuple[Path, ...]:
    return tuple(Path(d) for d in _split_dirs(text))


def _admin_address(text: str) -> tuple[str, int]:
    return parse_host_port(text, what="admin listener")


_I, _L, _S, _B, _STR, _LIST, _PASSWORD = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.SHORT,
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.LIST,
    ConfigType.PASSWORD,
)
_RETENTION_VALID = "-1 (forever) or >= 1"
_NO_EFFECT = "Accepted for compatibility; strait runs on trio tasks, so this has no effect."
# The sections of docs/configuration.md, in the order keys are first declared in them.
_NODE, _NET, _TOPICS, _LOG = "Node and ZooKeeper", "Listeners and connections", "Topics", "Log directories and segments"
_RETENTION, _FLUSH, _REPLICATION = "Retention", "Flush", "Replication"
_GROUPS, _TXN, _STRAIT = "Groups and offsets", "Transactions", "strait"
_SECURITY = "Security"
_JAVA_STORES = tuple(
    (store, f"strait reads PEM files; convert the {store} store to PEM (keytool, then openssl pkcs12)")
    for store in ("JKS", "PKCS12")
)


# -- the node's config: one field per setting, declaring the key(s) it is read from ----------------


@dataclass(frozen=True, kw_only=True)
class NodeConfig:
    """The validated configuration of one node, built by :meth:`from_properties` or :func:`load_config`.

    Each field is declared with the key(s) it is read from, in Kafka's precedence order: the
    first key set in the file wins, else the first with a default (``log_retention_ms`` from
    ``log.retention.ms``, ``.minutes``, ``.hours``, converted to ms). A plain key name after
    the first key refers to a key another field declares. ``explicit_values`` holds the
    canonical text of every key set in the file, so DescribeConfigs can tell a
    server.properties setting (STATIC_BROKER_CONFIG) from a default.

    To add a key: add a field here, ``name: type = setting(ConfigKey(name=..., ...))``, with a
    ``convert`` when the attribute is not the key's parsed value (int, bool, str, tuple of str).
    """

    # fmt: off
    # identity and ZooKeeper
    broker_id: NodeId = setting(ConfigKey(  # noqa: RUF009 -- a NodeId is an int, immutable
        name="broker.id", type=_I, default=None, required=True, minimum=0, group=_NODE,
        doc="This node's id, unique in the cluster. Required in strait (no automatic generation).",
    ))
    broker_rack: str | None = setting(ConfigKey(
        name="broker.rack", type=_STR, default=None, group=_NODE,
        doc="Rack (or availability zone) of this node, published in its ZooKeeper registration.",
    ))
    zookeeper_connect: str = setting(ConfigKey(
        name="zookeeper.connect", type=_STR, default=None, required=True, check=_check_zookeeper_connect,
        valid="host:port[,host:port...][/chroot]", group=_NODE,
        doc="ZooKeeper servers as host:port[,host:port...][/chroot]. A chroot isolates one cluster.",
    ))
    zookeeper_session_timeout_ms: int = setting(ConfigKey(
        name="zookeeper.session.timeout.ms", type=_I, default="18000", minimum=1, group=_NODE,
        doc="ZooKeeper session timeout; a node whose session expires loses its registration.",
    ))
    zookeeper_connection_timeout_ms: int = setting(ConfigKey(
        name="zookeeper.connection.timeout.ms", type=_I, default=None, minimum=1, group=_NODE,
        doc="How long to wait for the ZooKeeper connection; unset means zookeeper.session.timeout.ms.",
    ), "zookeeper.session.timeout.ms")
    # listeners and sockets
    listeners: tuple[Listener, ...] = setting(ConfigKey(
        name="listeners", type=_STR, default="PLAINTEXT://127.0.0.1:9092", check=check_listeners,
        valid="NAME://host:port,...; names and ports unique (port 0 may repeat)", group=_NET,
        doc="Where the Kafka protocol listens: a comma list of NAME://host:port, each bound by the node. "
            "strait's default is loopback (Kafka's is every interface). Port 0 binds any free port. "
            "The first listener's advertised address is the node's bootstrap address.",
    ), convert=_listeners)
    advertised_listeners: tuple[Listener, ...] = setting(ConfigKey(
        name="advertised.listeners", type=_STR, default=None, check=check_advertised,
        valid="NAME://host:port,...; port > 0", group=_NET,
        doc="What clients of each listener are told to connect to (Metadata, FindCoordinator, the "
            "ZooKeeper registration). A listener it does not name (all of them when unset) is advertised "
            "as it is bound, with an unspecified host (empty, 0.0.0.0, ::) replaced by 127.0.0.1 and port 0 "
            "by the bound port. May not use 0.0.0.0, an empty host or port 0; names must appear in listeners.",
    ), convert=_advertised, complete=_advertise_every_listener)
    listener_security_protocol_map: tuple[tuple[str, str], ...] = setting(ConfigKey(
        name="listener.security.protocol.map", type=_STR, default=DEFAULT_PROTOCOL_MAP, check=check_protocol_map,
        valid="NAME:PROTOCOL,...", group=_NET,
        doc="The security protocol of each listener name. A name that is a protocol name maps to itself "
            "unless listed; any other listener name must be listed. PLAINTEXT and SSL are supported.",
    ), convert=_protocol_pairs)
    inter_broker_listener_name: str = setting(ConfigKey(
        name="inter.broker.listener.name", type=_STR, default=None, group=_NET,
        doc="The listener other nodes connect to: replica fetchers, the controller, controlled shutdown. "
            "Its advertised address is the registration's host/port. Unset: the first listener.",
    ), convert=str.upper, otherwise=_first_listener_name)
    socket_request_max_bytes: int = setting(ConfigKey(
        name="socket.request.max.bytes", type=_I, default="104857600", minimum=1, group=_NET,
        doc="Largest request accepted; a bigger size prefix closes the connection.",
    ))
    socket_send_buffer_bytes: int = setting(ConfigKey(
        name="socket.send.buffer.bytes", type=_I, default="102400", minimum=-1, group=_NET,
        doc="SO_SNDBUF for client connections; -1 keeps the OS default.",
    ))
    socket_receive_buffer_bytes: int = setting(ConfigKey(
        name="socket.receive.buffer.bytes", type=_I, default="102400", minimum=-1, group=_NET,
        doc="SO_RCVBUF for client connections; -1 keeps the OS default.",
    ))
    queued_max_requests: int = setting(ConfigKey(
        name="queued.max.requests", type=_I, default="500", minimum=1, group=_NET, effect=False,
        doc="Kafka: the shared request queue size. strait handles one request per connection at a "
            "time (as Kafka mutes a connection; only acks=all Produce answers may wait, 5 at most) and "
            "holds at most one request plus a 256 KiB read buffer per connection, so there is no queue "
            "to bound.",
    ))
    connections_max_idle_ms: int = setting(ConfigKey(
        name="connections.max.idle.ms", type=_L, default="600000", minimum=1, group=_NET,
        doc="Close a connection idle for this long.",
    ))
    quota_window_num: int = setting(ConfigKey(
        name="quota.window.num", type=_I, default="11", minimum=1, group=_NET,
        doc="Client quotas (docs/quotas.md): how many windows a client's byte and request rates are "
            "sampled over.",
    ))
    quota_window_size_seconds: int = setting(ConfigKey(
        name="quota.window.size.seconds", type=_I, default="1", minimum=1, group=_NET,
        doc="Client quotas: the length of each sampled window. A rate is averaged over quota.window.num "
            "such windows; a request quota's throttle is at most one window.",
    ))
    # TLS (listeners whose protocol is SSL or SASL_SSL; see docs/security.md)
    ssl_keystore_type: str = setting(ConfigKey(
        name="ssl.keystore.type", type=_STR, default="PEM", choices=("PEM",), unsupported=_JAVA_STORES,
        group=_SECURITY, doc="The format of ssl.keystore.location: PEM.",
    ))
    ssl_keystore_location: str | None = setting(ConfigKey(
        name="ssl.keystore.location", type=_STR, default=None, group=_SECURITY,
        doc="A PEM file with this node's private key and its certificate chain (leaf first). Required by "
            "SSL and SASL_SSL listeners. Re-read when it changes: new connections get the new certificate.",
    ))
    ssl_key_password: str | None = setting(ConfigKey(
        name="ssl.key.password", type=_PASSWORD, default=None, group=_SECURITY,
        doc="The password of an encrypted private key in ssl.keystore.location. Never shown by DescribeConfigs.",
    ))
    ssl_truststore_type: str = setting(ConfigKey(
        name="ssl.truststore.type", type=_STR, default="PEM", choices=("PEM",), unsupported=_JAVA_STORES,
        group=_SECURITY, doc="The format of ssl.truststore.location: PEM.",
    ))
    ssl_truststore_location: str | None = setting(ConfigKey(
        name="ssl.truststore.location", type=_STR, default=None, group=_SECURITY,
        doc="A PEM file of the CA certificates client certificates (ssl.client.auth) and other nodes' "
            "certificates are checked against. Re-read when it changes.",
    ))
    ssl_client_auth: str = setting(ConfigKey(
        name="ssl.client.auth", type=_STR, default="none", choices=("none", "requested", "required"),
        group=_SECURITY,
        doc="Client certificates on SSL listeners: none (not asked for), requested (checked if sent) or "
            "required (a client without a valid one is refused). A client certificate's subject, mapped by "
            "ssl.principal.mapping.rules, is the connection's principal. As in Kafka, a SASL_SSL listener asks "
            "for certificates only with its own listener.name.<listener>.ssl.client.auth.",
    ))
    ssl_enabled_protocols: tuple[str, ...] = setting(ConfigKey(
        name="ssl.enabled.protocols", type=_LIST, default="TLSv1.2,TLSv1.3", choices=("TLSv1.2", "TLSv1.3"),
        unsupported=(("TLSv1", "TLS 1.0 is insecure; strait accepts TLSv1.2 and TLSv1.3"),
                     ("TLSv1.1", "TLS 1.1 is insecure; strait accepts TLSv1.2 and TLSv1.3")),
        check=check_non_empty_list, group=_SECURITY,
        doc="The TLS versions listeners accept.",
    ))
    # authorization (ACLs)
    authorizer_class_name: str = setting(ConfigKey(
        name="authorizer.class.name", type=_STR, default="", choices=("", *AUTHORIZER_CLASSES),
        unsupported=(("org.apache.ranger.authorization.kafka.authorizer.RangerKafkaAuthorizer",
                      "Ranger is not supported; use kafka.security.authorizer.AclAuthorizer"),),
        group=_SECURITY,
        doc="Turns ACLs on. Kafka's names of its ACL authorizer are accepted as they are; empty (the "
            "default) authorizes everything, as Kafka without an authorizer.",
    ))
    super_users: tuple[str, ...] = setting(ConfigKey(
        name="super.users", type=_STR, default="", check=_check_super_users, valid="User:name;User:name;...",
        group=_SECURITY, doc="Principals every ACL check allows, separated by ';' as in Kafka.",
    ), convert=_super_users)
    allow_everyone_if_no_acl_found: bool = setting(ConfigKey(
        name="allow.everyone.if.no.acl.found", type=_B, default="false", group=_SECURITY,
        doc="With an authorizer: allow a request on a resource no ACL names (false: deny it, as Kafka's default).",
    ))
    # SASL (listeners whose protocol is SASL_PLAINTEXT or SASL_SSL)
    sasl_enabled_mechanisms: tuple[str, ...] = setting(ConfigKey(
        name="sasl.enabled.mechanisms", type=_LIST, default="SCRAM-SHA-256,SCRAM-SHA-512", choices=MECHANISMS,
        unsupported=(("GSSAPI", "Kerberos (GSSAPI) is not supported; use SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN"),
                     ("OAUTHBEARER", "OAUTHBEARER is not supported; use SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN")),
        check=check_non_empty_list, group=_SECURITY,
        doc="The mechanisms SASL listeners offer. SCRAM credentials are the site's, in ZooKeeper (strait users "
            "add-scram, or AlterUserScramCredentials); PLAIN users come from sasl.jaas.config's user_<name> "
            "entries and strait.sasl.plain.users.file. Kafka's default, GSSAPI, is not supported.",
    ))
    sasl_mechanism_inter_broker_protocol: str = setting(ConfigKey(
        name="sasl.mechanism.inter.broker.protocol", type=_STR, default="SCRAM-SHA-512", choices=MECHANISMS,
        unsupported=(("GSSAPI", "Kerberos (GSSAPI) is not supported; use SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN"),),
        group=_SECURITY,
        doc="The mechanism a node authenticates with to other nodes when inter.broker.listener.name is a SASL "
            "listener, as sasl.jaas.config's username and password (a SCRAM user must exist in ZooKeeper "
            "before replication can start; Kafka's default, GSSAPI, is not supported).",
    ))
    sasl_jaas_config: str | None = setting(ConfigKey(
        name="sasl.jaas.config", type=_PASSWORD, default=None, check=check_jaas_config, group=_SECURITY,
        valid="one JAAS login module entry ending with ';'",
        doc="Kafka's JAAS entry: with org.apache.kafka.common.security.plain.PlainLoginModule, its "
            "user_<name>=\"<password>\" options are PLAIN users. Used by every SASL listener and mechanism "
            "without its own listener.name.<listener>.<mechanism>.sasl.jaas.config. Never shown by DescribeConfigs.",
    ))
    sasl_plain_users_file: str | None = setting(ConfigKey(
        name="strait.sasl.plain.users.file", type=_STR, default=None, group=_SECURITY,
        doc="A file of PLAIN users, one name=password per line (# comments), read at start. For tests and "
            "small sites: SCRAM keeps only salted keys, PLAIN needs the passwords.",
    ))
    sasl_server_max_receive_size: int = setting(ConfigKey(
        name="sasl.server.max.receive.size", type=_I, default="524288", minimum=1, group=_SECURITY,
        doc="The largest request accepted before a SASL connection has authenticated; a bigger size prefix "
            "closes the connection unread.",
    ))
    connection_failed_authentication_delay_ms: int = setting(ConfigKey(
        name="connection.failed.authentication.delay.ms", type=_I, default="100", minimum=0, group=_SECURITY,
        doc="How long a connection that failed to authenticate is held open (answering nothing) before it is "
            "closed, which slows down password guessing.",
    ))
    connections_max_reauth_ms: int = setting(ConfigKey(
        name="connections.max.reauth.ms", type=_L, default="0", minimum=0, group=_SECURITY,
        doc="KIP-368: when positive, a SASL session lasts this long; the client re-authenticates on the same "
            "connection before then (SaslAuthenticate v1 tells it when), or the connection is closed at its "
            "next request. 0: sessions do not expire.",
    ))
    ssl_endpoint_identification_algorithm: str = setting(ConfigKey(
        name="ssl.endpoint.identification.algorithm", type=_STR, default="https", choices=("https", ""),
        group=_SECURITY,
        doc="https: a node connecting to another over SSL (the inter-broker listener) checks that the other's "
            "certificate names the host it connected to; empty: it checks only the certificate's chain.",
    ))
    ssl_principal_mapping_rules: str = setting(ConfigKey(
        name="ssl.principal.mapping.rules", type=_STR, default="DEFAULT", check=check_principal_rules,
        valid="DEFAULT or RULE:pattern/replacement/[LU], comma-separated", group=_SECURITY,
        doc="How a client certificate's distinguished name (RFC 2253, as Kafka writes it: CN=alice,OU=eng,O=Acme) "
            "becomes the principal's name, as in Kafka: the first rule whose pattern matches the whole name "
            "rewrites it ($1.. are groups; /L lower-cases, /U upper-cases); DEFAULT keeps the name as it is.",
    ))
    # ZooKeeper: digest authentication and znode ACLs (docs/security.md#zookeeper)
    zookeeper_set_acl: bool = setting(ConfigKey(
        name="zookeeper.set.acl", type=_B, default="false", group=_SECURITY,
        doc="Create znodes with secure ACLs, as Kafka: the strait.zookeeper.digest.file credential may do "
            "everything, the world may only read, and may not read the SCRAM credentials (/config/users) or "
            "/config/brokers. Needs strait.zookeeper.digest.file. Znodes that exist keep their ACLs.",
    ))
    zookeeper_digest_file: str | None = setting(ConfigKey(
        name="strait.zookeeper.digest.file", type=_STR, default=None, group=_SECURITY,
        doc="A file holding one line user:password, read at start: the node authenticates to ZooKeeper with "
            "it (digest scheme). Give the site's nodes (and tools that change its state) the same one.",
    ))
    # topics
    num_partitions: int = setting(ConfigKey(
        name="num.partitions", type=_I, default="1", minimum=1, group=_TOPICS,
        doc="Partitions of an auto-created topic, or of CreateTopics asking for -1.",
    ))
    default_replication_factor: int = setting(ConfigKey(
        name="default.replication.factor", type=_I, default="1", minimum=1, group=_TOPICS,
        doc="Replication factor of an auto-created topic, or of CreateTopics asking for -1.",
    ))
    auto_create_topics_enable: bool = setting(ConfigKey(
        name="auto.create.topics.enable", type=_B, default="true", group=_TOPICS,
        doc="Create a topic when a client asks Metadata for one that does not exist.",
    ))
    delete_topic_enable: bool = setting(ConfigKey(
        name="delete.topic.enable", type=_B, default="true", group=_TOPICS,
        doc="Allow DeleteTopics; when false it fails with TOPIC_DELETION_DISABLED.",
    ))
    compression_type: str = setting(ConfigKey(
        name="compression.type", type=_STR, default="producer", choices=COMPRESSION_TYPES,
        topic_key="compression.type", group=_TOPICS,
        doc="Codec of stored batches: producer stores them as produced; a codec recompresses every batch "
            "produced with another (a slower path).",
    ))
    # log dirs and segments
    log_dirs: tuple[Path, ...] = setting(ConfigKey(
        name="log.dirs", type=_STR, default=None, check=_check_log_dirs, valid="comma list of paths", group=_LOG,
        doc="Comma list of log directories (JBOD); wins over log.dir.",
    ), ConfigKey(
        name="log.dir", type=_STR, default="/tmp/kafka-logs", check=_check_log_dirs, valid="comma list of paths",
        group=_LOG, doc="Log directories when log.dirs is not set.",
    ), convert=_paths)
    message_max_bytes: int = setting(ConfigKey(
        name="message.max.bytes", type=_I, default="1048588", minimum=0, topic_key="max.message.bytes", group=_LOG,
        doc="Largest record batch accepted (after compression).",
    ))
    log_segment_bytes: int = setting(ConfigKey(
        name="log.segment.bytes", type=_I, default="1073741824", minimum=14, topic_key="segment.bytes", group=_LOG,
        doc="Roll to a new segment before the active one passes this.",
    ))
    log_roll_ms: int = setting(ConfigKey(
        name="log.roll.ms", type=_L, default=None, minimum=1, topic_key="segment.ms", group=_LOG,
        doc="Roll a segment whose first batch is this old; wins over log.roll.hours.",
    ), ConfigKey(
        name="log.roll.hours", type=_I, default="168", minimum=1, topic_key="segment.ms", scale=HOUR_MS, group=_LOG,
        doc="log.roll.ms in hours, used when log.roll.ms is not set.",
    ))
    log_index_size_max_bytes: int = setting(ConfigKey(
        name="log.index.size.max.bytes", type=_I, default="10485760", minimum=12, topic_key="segment.index.bytes",
        group=_LOG, doc="Largest offset/time index file; a full index rolls the segment.",
    ))
    log_index_interval_bytes: int = setting(ConfigKey(
        name="log.index.interval.bytes", type=_I, default="4096", minimum=0, topic_key="index.interval.bytes",
        group=_LOG, doc="Log bytes between two offset index entries.",
    ))
    log_message_timestamp_type: str = setting(ConfigKey(
        name="log.message.timestamp.type", type=_STR, default="CreateTime", choices=("CreateTime", "LogAppendTime"),
        topic_key="message.timestamp.type", group=_LOG,
        doc="CreateTime keeps the producer's timestamps; LogAppendTime stamps the append time.",
    ))
    log_message_timestamp_before_max_ms: int = setting(ConfigKey(
        name="log.message.timestamp.before.max.ms", type=_L, default=str(LONG_MAX), minimum=0,
        topic_key="message.timestamp.before.max.ms", group=_LOG,
        doc="Reject (INVALID_TIMESTAMP) a CreateTime batch whose timestamp is further in the past.",
    ), "log.message.timestamp.difference.max.ms")
    log_message_timestamp_after_max_ms: int = setting(ConfigKey(
        name="log.message.timestamp.after.max.ms", type=_L, default=str(LONG_MAX), minimum=0,
        topic_key="message.timestamp.after.max.ms", group=_LOG,
        doc="Reject (INVALID_TIMESTAMP) a CreateTime batch whose timestamp is further in the future.",
    ), ConfigKey(
        name="log.message.timestamp.difference.max.ms", type=_L, default=str(LONG_MAX), minimum=0,
        topic_key="message.timestamp.difference.max.ms", group=_LOG,
        doc="Older name for both bounds (deprecated in Kafka 3.6): used for before/after wherever "
            "the newer key is not set.",
    ))
    # retention
    log_cleanup_policy: tuple[str, ...] = setting(ConfigKey(
        name="log.cleanup.policy", type=_LIST, default="delete", choices=("delete", "compact"),
        check=check_non_empty_list, topic_key="cleanup.policy", group=_RETENTION,
        doc="What happens to old segments: delete (retention), compact (keep the latest record per key), "
            "or both.",
    ))
    log_cleaner_delete_retention_ms: int = setting(ConfigKey(
        name="log.cleaner.delete.retention.ms", type=_L, default="86400000", minimum=0, topic_key="delete.retention.ms",
        group=_RETENTION, doc="How long a compacted log keeps a tombstone (null value) after the clean that kept it.",
    ))
    log_cleaner_min_cleanable_ratio: float = setting(ConfigKey(
        name="log.cleaner.min.cleanable.ratio", type=ConfigType.DOUBLE, default="0.5", check=check_ratio,
        valid="0.0..1.0", topic_key="min.cleanable.dirty.ratio", group=_RETENTION,
        doc="Clean a compacted log once this share of its cleanable bytes is dirty (not yet cleaned).",
    ), convert=float)
    log_cleaner_min_compaction_lag_ms: int = setting(ConfigKey(
        name="log.cleaner.min.compaction.lag.ms", type=_L, default="0", minimum=0, topic_key="min.compaction.lag.ms",
        group=_RETENTION, doc="A record stays uncompacted for at least this long.",
    ))
    log_cleaner_backoff_ms: int = setting(ConfigKey(
        name="log.cleaner.backoff.ms", type=_L, default="15000", minimum=1, group=_RETENTION,
        doc="How often the node looks for compacted logs to clean.",
    ))
    log_retention_ms: int = setting(ConfigKey(
        name="log.retention.ms", type=_L, default=None, check=_check_retention, valid=_RETENTION_VALID,
        topic_key="retention.ms", group=_RETENTION,
        doc="Delete segments older than this; -1 keeps forever. Wins over minutes and hours.",
    ), ConfigKey(
        name="log.retention.minutes", type=_I, default=None, check=_check_retention, valid=_RETENTION_VALID,
        topic_key="retention.ms", scale=MINUTE_MS, group=_RETENTION,
        doc="Retention in minutes; wins over log.retention.hours.",
    ), ConfigKey(
        name="log.retention.hours", type=_I, default="168", check=_check_retention, valid=_RETENTION_VALID,
        topic_key="retention.ms", scale=HOUR_MS, group=_RETENTION,
        doc="Retention in hours, used when neither ms nor minutes is set.",
    ))
    log_retention_bytes: int = setting(ConfigKey(
        name="log.retention.bytes", type=_L, default="-1", minimum=-1, topic_key="retention.bytes", group=_RETENTION,
        doc="Per-partition size limit; oldest segments go first. -1: no limit.",
    ))
    log_retention_check_interval_ms: int = setting(ConfigKey(
        name="log.retention.check.interval.ms", type=_L, default="300000", minimum=1, group=_RETENTION,
        doc="How often retention runs.",
    ))
    log_segment_delete_delay_ms: int = setting(ConfigKey(
        name="log.segment.delete.delay.ms", type=_L, default="60000", minimum=0, topic_key="file.delete.delay.ms",
        group=_RETENTION, doc="Delay between renaming a deleted segment to .deleted and unlinking it.",
    ))
    # flush
    log_flush_interval_messages: int = setting(ConfigKey(
        name="log.flush.interval.messages", type=_L, default=str(LONG_MAX), minimum=1, topic_key="flush.messages",
        group=_FLUSH, doc="fsync after this many records; 1 fsyncs every append. Default: rely on replication.",
    ))
    log_flush_interval_ms: int = setting(ConfigKey(
        name="log.flush.interval.ms", type=_L, default=None, minimum=0, topic_key="flush.ms", group=_FLUSH,
        doc="fsync when the oldest unflushed write is this old; unset means log.flush.scheduler.interval.ms.",
    ), "log.flush.scheduler.interval.ms")
    log_flush_scheduler_interval_ms: int = setting(ConfigKey(
        name="log.flush.scheduler.interval.ms", type=_L, default=str(LONG_MAX), minimum=0, topic_key="flush.ms",
        group=_FLUSH, doc="How often the flusher checks logs; also the default of log.flush.interval.ms.",
    ))
    log_flush_offset_checkpoint_interval_ms: int = setting(ConfigKey(
        name="log.flush.offset.checkpoint.interval.ms", type=_I, default="60000", minimum=0, group=_FLUSH,
        doc="How often recovery points are checkpointed.",
    ))
    # replication
    min_insync_replicas: int = setting(ConfigKey(
        name="min.insync.replicas", type=_I, default="1", minimum=1, topic_key="min.insync.replicas",
        group=_REPLICATION, doc="acks=all produce fails with NOT_ENOUGH_REPLICAS when the ISR is smaller than this.",
    ))
    unclean_leader_election_enable: bool = setting(ConfigKey(
        name="unclean.leader.election.enable", type=_B, default="false", topic_key="unclean.leader.election.enable",
        group=_REPLICATION,
        doc="Allow an out-of-sync replica to become leader (loses committed data). Off, as in Kafka.",
    ))
    replica_lag_time_max_ms: int = setting(ConfigKey(
        name="replica.lag.time.max.ms", type=_L, default="30000", minimum=1, group=_REPLICATION,
        doc="A follower that has not caught up for this long leaves the ISR.",
    ))
    replica_alter_log_dirs_io_max_bytes_per_second: int = setting(ConfigKey(
        name="replica.alter.log.dirs.io.max.bytes.per.second", type=_L, default="9223372036854775807", minimum=1,
        group=_REPLICATION,
        doc="How many bytes per second a replica's move to another log dir (AlterReplicaLogDirs) copies at most, "
            "so that the move leaves the disks to the produce and fetch traffic.",
    ))
    controlled_shutdown_enable: bool = setting(ConfigKey(
        name="controlled.shutdown.enable", type=_B, default="true", group=_REPLICATION,
        doc="On a clean stop, hand leadership to other ISR members before exiting.",
    ))
    controlled_shutdown_max_retries: int = setting(ConfigKey(
        name="controlled.shutdown.max.retries", type=_I, default="3", minimum=0, group=_REPLICATION,
        doc="How many times a stopping node asks the controller to move its leaderships away.",
    ))
    controlled_shutdown_retry_backoff_ms: int = setting(ConfigKey(
        name="controlled.shutdown.retry.backoff.ms", type=_L, default="5000", minimum=0, group=_REPLICATION,
        doc="Pause between controlled shutdown attempts.",
    ))
    replica_fetch_wait_max_ms: int = setting(ConfigKey(
        name="replica.fetch.wait.max.ms", type=_I, default="500", minimum=0, group=_REPLICATION,
        doc="How long a follower's fetch waits at the leader for new data (must stay below "
            "replica.lag.time.max.ms).",
    ))
    replica_fetch_min_bytes: int = setting(ConfigKey(
        name="replica.fetch.min.bytes", type=_I, default="1", minimum=1, group=_REPLICATION,
        doc="Bytes a follower's fetch waits for before the leader answers.",
    ))
    replica_fetch_max_bytes: int = setting(ConfigKey(
        name="replica.fetch.max.bytes", type=_I, default="1048576", minimum=0, group=_REPLICATION,
        doc="Bytes a follower asks per partition in one fetch (the first batch is always returned).",
    ))
    replica_fetch_response_max_bytes: int = setting(ConfigKey(
        name="replica.fetch.response.max.bytes", type=_I, default="10485760", minimum=0, group=_REPLICATION,
        doc="Bytes a follower asks in one fetch response across partitions.",
    ))
    max_incremental_fetch_session_cache_slots: int = setting(ConfigKey(
        name="max.incremental.fetch.session.cache.slots", type=_I, default="1000", minimum=0, group=_REPLICATION,
        doc="Incremental fetch sessions (KIP-227) this node keeps for consumers and followers; 0 turns "
            "sessions off (every fetch is a full fetch). See docs/fetch-sessions.md.",
    ))
    replica_selector_class: str | None = setting(ConfigKey(
        name="replica.selector.class", type=_STR, default=None, check=_check_replica_selector,
        valid="org.apache.kafka.common.replica.RackAwareReplicaSelector", group=_REPLICATION,
        doc="Fetch from follower (KIP-392): with Kafka's rack-aware selector a leader sends a consumer "
            "whose client.rack differs from its own broker.rack to an in-sync replica in the consumer's "
            "rack. Unset (Kafka's default): consumers always read from the leader.",
    ))
    replica_fetch_backoff_ms: int = setting(ConfigKey(
        name="replica.fetch.backoff.ms", type=_I, default="1000", minimum=0, group=_REPLICATION,
        doc="Pause after a follower's fetch failed (leader unreachable, error).",
    ))
    replica_socket_timeout_ms: int = setting(ConfigKey(
        name="replica.socket.timeout.ms", type=_I, default="30000", minimum=1, group=_REPLICATION,
        doc="A follower gives up on a leader connection after this long without an answer.",
    ))
    auto_leader_rebalance_enable: bool = setting(ConfigKey(
        name="auto.leader.rebalance.enable", type=_B, default="true", group=_REPLICATION,
        doc="The controller moves leadership back to each partition's preferred replica (the first "
            "in its assignment) when it is alive and in the ISR.",
    ))
    leader_imbalance_check_interval_seconds: int = setting(ConfigKey(
        name="leader.imbalance.check.interval.seconds", type=_L, default="300", minimum=1, group=_REPLICATION,
        doc="How often the controller checks for preferred leader imbalance.",
    ))
    leader_imbalance_per_broker_percentage: int = setting(ConfigKey(
        name="leader.imbalance.per.broker.percentage", type=_I, default="10", minimum=0, maximum=100,
        group=_REPLICATION,
        doc="A broker's partitions are rebalanced when more than this percentage of them are not led by "
            "their preferred replica.",
    ))
    # groups and offsets
    offsets_topic_num_partitions: int = setting(ConfigKey(
        name="offsets.topic.num.partitions", type=_I, default="50", minimum=1, group=_GROUPS,
        doc="Partitions of __consumer_offsets (fixed once created).",
    ))
    offsets_topic_replication_factor: int = setting(ConfigKey(
        name="offsets.topic.replication.factor", type=_S, default="3", minimum=1, group=_GROUPS,
        doc="Replication factor of __consumer_offsets. As in Kafka, creating it fails while fewer "
            "nodes are alive; set 1 for a single-node cluster.",
    ))
    offsets_topic_segment_bytes: int = setting(ConfigKey(
        name="offsets.topic.segment.bytes", type=_I, default="104857600", minimum=14, group=_GROUPS,
        doc="segment.bytes of __consumer_offsets (small segments let the cleaner compact it sooner).",
    ))
    offsets_retention_minutes: int = setting(ConfigKey(
        name="offsets.retention.minutes", type=_I, default="10080", minimum=1, group=_GROUPS,
        doc="Committed offsets of an empty group are dropped after this long.",
    ))
    group_initial_rebalance_delay_ms: int = setting(ConfigKey(
        name="group.initial.rebalance.delay.ms", type=_I, default="3000", minimum=0, group=_GROUPS,
        doc="Wait this long for more members before the first rebalance.",
    ))
    group_min_session_timeout_ms: int = setting(ConfigKey(
        name="group.min.session.timeout.ms", type=_I, default="6000", minimum=0, group=_GROUPS,
        doc="Smallest session timeout a member may ask for.",
    ))
    group_max_session_timeout_ms: int = setting(ConfigKey(
        name="group.max.session.timeout.ms", type=_I, default="1800000", minimum=0, group=_GROUPS,
        doc="Largest session timeout a member may ask for; at least group.min.session.timeout.ms.",
    ))
    # transactions
    transaction_state_log_replication_factor: int = setting(ConfigKey(
        name="transaction.state.log.replication.factor", type=_S, default="3", minimum=1, group=_TXN,
        doc="Replication factor of __transaction_state.",
    ))
    transaction_state_log_min_isr: int = setting(ConfigKey(
        name="transaction.state.log.min.isr", type=_I, default="2", minimum=1, group=_TXN,
        doc="min.insync.replicas of __transaction_state.",
    ))
    transaction_state_log_num_partitions: int = setting(ConfigKey(
        name="transaction.state.log.num.partitions", type=_I, default="50", minimum=1, group=_TXN,
        doc="Partitions of __transaction_state (fixed once created): a transactional id's coordinator is "
            "the leader of its partition.",
    ))
    transaction_state_log_segment_bytes: int = setting(ConfigKey(
        name="transaction.state.log.segment.bytes", type=_I, default="104857600", minimum=14, group=_TXN,
        doc="segment.bytes of __transaction_state (small segments let the cleaner compact it sooner).",
    ))
    transaction_max_timeout_ms: int = setting(ConfigKey(
        name="transaction.max.timeout.ms", type=_I, default="900000", minimum=1, group=_TXN,
        doc="Largest transaction timeout a producer may ask for (else INVALID_TRANSACTION_TIMEOUT).",
    ))
    transactional_id_expiration_ms: int = setting(ConfigKey(
        name="transactional.id.expiration.ms", type=_I, default="604800000", minimum=1, group=_TXN,
        doc="A transactional id with no transaction open is forgotten after this long without use.",
    ))
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = setting(ConfigKey(
        name="transaction.abort.timed.out.transaction.cleanup.interval.ms", type=_I, default="10000", minimum=1,
        group=_TXN,
        doc="How often the coordinator aborts transactions open longer than their timeout.",
    ))
    transaction_remove_expired_transaction_cleanup_interval_ms: int = setting(ConfigKey(
        name="transaction.remove.expired.transaction.cleanup.interval.ms", type=_I, default="3600000", minimum=1,
        group=_TXN,
        doc="How often the coordinator forgets expired transactional ids.",
    ))
    # strait's own
    admin_listener: tuple[str, int] = setting(ConfigKey(
        name="strait.admin.listener", type=_STR, default="127.0.0.1:0", check=_check_admin_listener, valid="host:port",
        group=_STRAIT, doc="host:port of the admin HTTP API (/health, /metrics). Default: loopback, any free port.",
    ), convert=_admin_address)
    admin_ssl_enabled: bool = setting(ConfigKey(
        name="strait.admin.ssl.enabled", type=_B, default="false", group=_STRAIT,
        doc="Serve the admin HTTP API over HTTPS with the node's certificate (ssl.keystore.location, "
            "ssl.key.password), re-read when the node restarts.",
    ))
    producer_state_max_ids: int = setting(ConfigKey(
        name="strait.producer.state.max.ids", type=_I, default="10000", minimum=1, group=_STRAIT,
        doc="Most idempotent producer ids remembered per partition; the least recently used is forgotten.",
    ))

    # fmt: on
    explicit_values: Mapping[str, str] = field(default_factory=dict, hash=False, repr=False)  # passwords too
    #: The ``listener.name.*`` keys set in the file, in file order (docs/configuration.md#per-listener-security-keys).
    listener_overrides: tuple[ListenerOverride, ...] = ()
    #: What each listener's TLS and SASL use (its overrides, else the node-wide keys), in the order of listeners.
    listener_security: tuple[ListenerSecurity, ...] = field(default=(), repr=False)
    source: str = "<properties>"

    @property
    def explicit_keys(self) -> frozenset[str]:
        """The keys set in server.properties (everything else is a default)."""
        return frozenset(self.explicit_values)

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * MINUTE_MS

    def value_of(self, name: str) -> str | None:
        """Canonical text of broker key ``name``: as set in the file, else its default (None if it has none).

        Raises KeyError for a key that is not in :data:`BROKER_KEYS`.
        """
        key = BROKER_KEY_INDEX[name]
        return self.explicit_values.get(name, key.default)

    def security_protocol(self, listener_name: str) -> str:
        """The security protocol of listener ``listener_name`` (validated at load: always supported).

        Raises KeyError for a name the map does not know.
        """
        return dict(self.listener_security_protocol_map)[listener_name]

    def security_of(self, listener_name: str) -> ListenerSecurity:
        """The TLS and SASL settings of listener ``listener_name`` (its overrides, else the node-wide keys).

        Raises KeyError for a name that is not in ``listeners``.
        """
        for security in self.listener_security:
            if security.listener == listener_name:
                return security
        raise KeyError(listener_name)

    def advertised_for(self, bound_ports: Mapping[str, int]) -> tuple[Listener, ...]:
        """The advertised listeners with port 0 replaced by the port each named listener actually bound.

        Raises ConfigError when a port-0 listener's name is missing from ``bound_ports``.
        """
        out = []
        for adv in self.advertised_listeners:
            if adv.port == 0 and adv.name not in bound_ports:
                raise ConfigError(f"no bound port known for listener {adv.name}", key="advertised.listeners")
            out.append(Listener(adv.name, adv.host, bound_ports[adv.name]) if adv.port == 0 else adv)
        return tuple(out)

    def read_zookeeper_digest(self) -> ZkDigest | None:
        """The ZooKeeper credential in strait.zookeeper.digest.file, read now; None when it is not set.

        Raises ConfigError naming the key and the file (never its content) when the file cannot be
        read or is not one line ``user:password``.
        """
        path = self.zookeeper_digest_file
        if path is None:
            return None
        try:
            return read_digest_file(path)
        except OSError as exc:
            reason = f"cannot read: {exc.strerror or exc}"
        except ValueError as exc:
            reason = str(exc)
        raise ConfigError(reason, key="strait.zookeeper.digest.file", value=path, source=self.source)

    def log_config(self) -> LogConfig:
        """The broker-wide defaults as topic-level storage settings (a topic without overrides)."""
        return LogConfig(
            segment_bytes=self.log_segment_bytes,
            segment_ms=self.log_roll_ms,
            segment_index_bytes=self.log_index_size_max_bytes,
            index_interval_bytes=self.log_index_interval_bytes,
            retention_ms=self.log_retention_ms,
            retention_bytes=self.log_retention_bytes,
            flush_messages=self.log_flush_interval_messages,
            flush_ms=self.log_flush_interval_ms,
            max_message_bytes=self.message_max_bytes,
            file_delete_delay_ms=self.log_segment_delete_delay_ms,
            message_timestamp_type=self.log_message_timestamp_type,
            cleanup_policy=",".join(self.log_cleanup_policy),
            delete_retention_ms=self.log_cleaner_delete_retention_ms,
            min_cleanable_dirty_ratio=self.log_cleaner_min_cleanable_ratio,
            min_compaction_lag_ms=self.log_cleaner_min_compaction_lag_ms,
        )

    @classmethod
    def from_properties(cls, props: Mapping[str, str], *, source: str = "<properties>") -> NodeConfig:
        """Validate ``props`` (key -> raw text) against :data:`BROKER_KEYS` and build the config.

        Raises ConfigError naming ``source``, the key and the value for: an unknown key (with the
        closest known key suggested), a missing required key, a value of the wrong type, out of
        range or not among the valid values, a ``listener.name.*`` override strait cannot take
        (see ``_listener_security``), and for keys that contradict each other. A password's value
        is shown as ``[hidden]``.
        """
        for name, raw in props.items():
            if name not in BROKER_KEY_INDEX and not name.startswith(OVERRIDE_PREFIX):
                close = difflib.get_close_matches(name, BROKER_KEY_INDEX.keys(), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                secret = looks_secret(name) or bool(close and BROKER_KEY_INDEX[close[0]].type == ConfigType.PASSWORD)
                raise ConfigError(
                    f"unknown key{hint}; see docs/configuration.md",
                    key=name,
                    value=HIDDEN if secret else raw,
                    source=source,
                )
        values: dict[str, Value] = {}
        explicit: dict[str, str] = {}
        for key in BROKER_KEYS:
            given = props.get(key.name)
            if given is None and key.required:
                raise ConfigError("is required", key=key.name, source=source)
            text = given if given is not None else key.default
            if text is None:
                continue
            try:
                values[key.name] = key.parse(text)
            except ValueError as exc:
                shown = HIDDEN if key.type == ConfigType.PASSWORD else text
                raise ConfigError(str(exc), key=key.name, value=shown, source=source) from None
            if given is not None:
                explicit[key.name] = key.render(values[key.name])
        check_listener_keys(values, explicit.keys(), source)
        listeners = parse_listener_list(str(values["listeners"]), "listeners")
        protocols = parse_protocol_map(str(values["listener.security.protocol.map"]))
        overrides = parse_overrides(props, BROKER_KEY_INDEX, listeners, protocols, values, source=source)
        security = tuple(resolve_listener_security(x, protocols[x.name], values, overrides) for x in listeners)
        _check_together(values, listeners, security, source)
        attributes: dict[str, Any] = {}
        for attribute, how in _SETTINGS:
            attributes[attribute] = how.resolve(values, explicit.keys(), BROKER_KEY_INDEX, attributes)
        return cls(
            **attributes,
            explicit_values=MappingProxyType(explicit),
            listener_overrides=overrides,
            listener_security=security,
            source=source,
        )


_ACCEPTED_WITHOUT_EFFECT: tuple[ConfigKey, ...] = (
    ConfigKey(name="num.network.threads", type=_I, default="3", minimum=1, effect=False, group="", doc=_NO_EFFECT),
    ConfigKey(name="num.io.threads", type=_I, default="8", minimum=1, effect=False, group="", doc=_NO_EFFECT),
    ConfigKey(name="num.recovery.threads.per.data.dir", type=_I, default="1", minimum=1, effect=False, group="",
              doc=_NO_EFFECT),
)  # fmt: skip

_SETTINGS = settings_of(NodeConfig)
BROKER_KEYS: tuple[ConfigKey, ...] = (*(k for _, s in _SETTINGS for k in s.declared), *_ACCEPTED_WITHOUT_EFFECT)
BROKER_KEY_INDEX: Mapping[str, ConfigKey] = MappingProxyType(
    dict(index_keys(BROKER_KEYS, (n for _, s in _SETTINGS for n in s.names)))
)
NO_EFFECT_KEYS: frozenset[str] = frozenset(k.name for k in BROKER_KEYS if not k.effect)


def _check_together(
    values: Mapping[str, Value], listeners: Sequence[Listener], security: Sequence[ListenerSecurity], source: str
) -> None:
    """The rules that span keys, on the parsed ``values`` and each listener's resolved ``security``
    (in the order of ``listeners``, which are checked before); raises ConfigError naming the key
    that breaks one."""
    _check_sasl_keys(values, security, source)
    _check_tls_keys(values, listeners, security, source)
    if values["zookeeper.set.acl"] and "strait.zookeeper.digest.file" not in values:
        raise ConfigError(
            "needs strait.zookeeper.digest.file: the credential the node's znodes are created for",
            key="zookeeper.set.acl",
            value="true",
            source=source,
        )
    low, high = values["group.min.session.timeout.ms"], values["group.max.session.timeout.ms"]
    assert isinstance(low, int) and isinstance(high, int)
    if low > high:
        raise ConfigError(
            f"must be at least group.min.session.timeout.ms ({low})",
            key="group.max.session.timeout.ms",
            value=str(high),
            source=source,
        )


def _check_sasl_keys(values: Mapping[str, Value], security: Sequence[ListenerSecurity], source: str) -> None:
    """A SASL inter-broker listener needs the node's own credentials for a mechanism it enables; a SASL
    listener that enables PLAIN needs PLAIN users."""
    inter_broker = str(values.get("inter.broker.listener.name", security[0].listener)).upper()
    own = next(s for s in security if s.listener == inter_broker)
    if own.uses_sasl:
        mechanism = str(values["sasl.mechanism.inter.broker.protocol"])
        if mechanism not in own.sasl_mechanisms:
            where = own.key_of("sasl.enabled.mechanisms")
            raise ConfigError(
                f"{mechanism} is not in {where} ({','.join(own.sasl_mechanisms)}) of the inter-broker listener "
                f"{inter_broker}: the other nodes would refuse it",
                key="sasl.mechanism.inter.broker.protocol",
                value=mechanism,
                source=source,
            )
        jaas = own.jaas_config(mechanism)
        entry = parse_jaas_config(jaas) if jaas else None
        if entry is None or entry.username is None or entry.password is None:
            raise ConfigError(
                f"is a {own.protocol} listener: the node authenticates to other nodes with {mechanism} as "
                "sasl.jaas.config's username and password, which are not set (the listener's own entry: "
                f"{override_key(inter_broker, 'sasl.jaas.config', mechanism)})",
                key="inter.broker.listener.name",
                value=inter_broker,
                source=source,
            )
    for listener in security:
        if not listener.uses_sasl or "PLAIN" not in listener.sasl_mechanisms:
            continue
        jaas = listener.jaas_config("PLAIN")
        if "strait.sasl.plain.users.file" not in values and not (jaas and parse_jaas_config(jaas).plain_users()):
            where = listener.key_of("sasl.enabled.mechanisms")
            raise ConfigError(
                f"enables PLAIN on listener {listener.listener}, but there are no PLAIN users: set "
                "strait.sasl.plain.users.file, or user_<name> options of a PlainLoginModule entry in "
                f"{override_key(listener.listener, 'sasl.jaas.config', 'PLAIN')} or sasl.jaas.config",
                key=where,
                value=",".join(listener.sasl_mechanisms),
                source=source,
            )


def _check_tls_keys(
    values: Mapping[str, Value], listeners: Sequence[Listener], security: Sequence[ListenerSecurity], source: str
) -> None:
    """A listener on TLS needs its key and certificate; client certificates need the CAs; the admin API
    over HTTPS needs the node-wide keystore."""
    if values["strait.admin.ssl.enabled"] and "ssl.keystore.location" not in values:
        raise ConfigError(
            "is required by strait.admin.ssl.enabled (the admin API's certificate)",
            key="ssl.keystore.location",
            source=source,
        )
    for bound, listener in zip(listeners, security, strict=True):
        if not listener.uses_tls:
            continue
        if listener.keystore_location is None:
            raise ConfigError(
                f"is required by the {listener.protocol} listener {bound} (a PEM file with the node's "
                f"private key and certificate chain; or {override_key(listener.listener, 'ssl.keystore.location')})",
                key="ssl.keystore.location",
                source=source,
            )
        if listener.client_auth != "none" and listener.truststore_location is None:
            auth_key = listener.key_of("ssl.client.auth")
            at_fault = (
                "ssl.truststore.location"
                if auth_key == "ssl.client.auth"
                else override_key(listener.listener, "ssl.truststore.location")
            )
            raise ConfigError(
                f"is required by {auth_key}={listener.client_auth} (the CA certificates client certificates are "
                f"checked against, on listener {listener.listener})",
                key=at_fault,
                source=source,
            )


def load_config(path: Path) -> NodeConfig:
    """Read ``path`` (UTF-8 ``server.properties``) and build the node's config.

    Raises ConfigError naming the file when it cannot be read or decoded, and as
    :func:`~node.config.parse_properties` and :meth:`NodeConfig.from_properties` do.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", source=source) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", source=source) from None
    return NodeConfig.from_properties(parse_properties(text, source=source), source=source)
