"""server.properties: the Java properties reader, every key's validation, precedence rules, listeners, docs."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.config import (
    BROKER_KEY_INDEX,
    BROKER_KEYS,
    LONG_MAX,
    NO_EFFECT_KEYS,
    ConfigError,
    ConfigType,
    Listener,
    NodeConfig,
    load_config,
    parse_listeners,
    parse_properties,
    render_broker_reference,
)
from storage import LogConfig

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181/t-1"}
SOURCE = "server.properties"


def config(**extra: str) -> NodeConfig:
    """A config from BASE plus ``extra`` (keyword names use _ for ., as in log_retention_ms)."""
    props = BASE | {k.replace("_", "."): v for k, v in extra.items()}
    return NodeConfig.from_properties(props, source=SOURCE)


def typed_fields(cfg: NodeConfig) -> dict[str, Any]:
    return {
        f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in ("explicit_values", "source")
    }


# -- the properties reader ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "key", "value"),
    [
        ("a=b", "a", "b"),
        ("a:b", "a", "b"),
        ("a b", "a", "b"),
        ("a = b", "a", "b"),
        ("a\t:\tb", "a", "b"),
        ("   a=b", "a", "b"),
        ("a=b  ", "a", "b  "),  # trailing blanks of a value are kept
        ("a=", "a", ""),
        ("a", "a", ""),
        ("a:=b", "a", "=b"),  # only one separator is consumed
        ("a  =  = b", "a", "= b"),
        (r"a\=b=c", "a=b", "c"),
        (r"a\:b:c", "a:b", "c"),
        (r"a\ b c", "a b", "c"),
        (r"a=\ b", "a", " b"),
        (r"a=x\ty\nz\rw\fv", "a", "x\ty\nz\rw\fv"),
        (r"a=\u0041\u00e9", "a", "Aé"),
        (r"a=\ud83d\ude00", "a", "\U0001f600"),  # a surrogate pair becomes one character
        (r"a=\q\\", "a", "q\\"),  # an unknown escape stands for the character itself
        (r"\#a=b", "#a", "b"),
        ("a=b#c", "a", "b#c"),  # # is a comment only at the start of a line
    ],
)
def test_properties_line(line: str, key: str, value: str) -> None:
    assert parse_properties(line) == {key: value}


def test_properties_comments_blank_lines_and_line_endings() -> None:
    text = "# comment\n! also a comment\n   # indented comment \\\nx=1\r\n\r\ny=2\rz=3\n\t\f\n"
    assert parse_properties(text) == {"x": "1", "y": "2", "z": "3"}


def test_properties_continuations() -> None:
    text = "a=one, \\\n    two, \\\n\tthree\nb=even\\\\\nc=odd\\\\\\\n  more\nd=end\\"
    assert parse_properties(text) == {"a": "one, two, three", "b": "even\\", "c": "odd\\more", "d": "end"}


def test_properties_continuation_line_may_start_like_a_comment() -> None:
    assert parse_properties("a=x\\\n  #not a comment") == {"a": "x#not a comment"}


def test_properties_duplicate_key_names_both_lines() -> None:
    with pytest.raises(ConfigError) as err:
        parse_properties("a=1\n# c\nb=2\na = 3\n", source="s.properties")
    assert err.value.key == "a"
    assert str(err.value) == "s.properties: a: duplicate key on lines 1 and 4"


def test_properties_duplicate_key_found_after_unescaping() -> None:
    with pytest.raises(ConfigError, match="lines 1 and 2"):
        parse_properties("ab=1\n\\u0061b=2")


@pytest.mark.parametrize("bad", [r"a=\u12", r"a=\u12zz", r"a=\ud83d", r"\uXYZW=1"])
def test_properties_bad_unicode_escape(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"^f\.properties: line 2: "):
        parse_properties("ok=1\n" + bad, source="f.properties")


def _escape(text: str, *, key: bool, all_spaces: bool) -> list[str]:
    """Tokens of ``text`` escaped for a properties file (a continuation may go between tokens)."""
    tokens = []
    for i, char in enumerate(text):
        if char == "\\" or char in "=:#!":
            tokens.append("\\" + char)
        elif char == " ":
            tokens.append("\\ " if key or all_spaces or i == 0 else " ")
        elif char in "\t\n\r\f":
            tokens.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[char])
        elif " " < char <= "~":
            tokens.append(char)
        else:
            units = char.encode("utf-16-be")
            tokens.append("".join(f"\\u{units[j]:02x}{units[j + 1]:02x}" for j in range(0, len(units), 2)))
    return tokens


def write_properties(props: dict[str, str], separators: list[str], breaks: list[int]) -> str:
    """A properties writer (the inverse of the reader), with varied separators and line continuations."""
    lines = []
    for n, (key, value) in enumerate(props.items()):
        value_tokens = _escape(value, key=False, all_spaces=True)
        cut = breaks[n % len(breaks)] % (len(value_tokens) + 1)
        value_text = "".join(value_tokens[:cut]) + ("\\\n   " if cut else "") + "".join(value_tokens[cut:])
        separator = separators[n % len(separators)] if key else "="  # a blank separator alone is a blank line
        lines.append("".join(_escape(key, key=True, all_spaces=True)) + separator + value_text)
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None)
@given(
    props=st.dictionaries(st.text(max_size=12), st.text(max_size=20), max_size=6),
    separators=st.lists(st.sampled_from(["=", ":", " ", " = ", "\t: ", " \f"]), min_size=1),
    breaks=st.lists(st.integers(0, 30), min_size=1),
)
def test_properties_round_trip(props: dict[str, str], separators: list[str], breaks: list[int]) -> None:
    assert parse_properties(write_properties(props, separators, breaks)) == props


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab=: \t\\#!u0d8\n\r")), max_size=40))
def test_properties_reader_only_raises_config_error(text: str) -> None:
    try:
        result = parse_properties(text)
    except ConfigError:
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in result.items())


# -- every key: good and bad values --------------------------------------------------------------------

# key: (a valid non-default value, its canonical text, whether it changes the typed config, bad values)
CASES: dict[str, tuple[str, str, bool, list[str]]] = {
    "broker.id": (" 7 ", "7", True, ["-1", "x", "1.5", "2147483648", "", "1_0", "٣"]),
    "broker.rack": ("rack-a", "rack-a", True, []),
    "zookeeper.connect": (
        "zk1:2181,[::1]:2182/strait",
        "zk1:2181,[::1]:2182/strait",
        True,
        ["", "zk1", "zk1:abc", "zk1:99999", "/chroot", "zk1:2181/a/", "zk1:2181//a", "zk 1:2181"],
    ),
    "zookeeper.session.timeout.ms": ("6000", "6000", True, ["0", "abc"]),
    "zookeeper.connection.timeout.ms": ("9000", "9000", True, ["0", "-5"]),
    "listeners": (
        "plaintext://0.0.0.0:0",
        "plaintext://0.0.0.0:0",
        True,
        [
            "",
            "TLS://h:9093",
            "INTERNAL://h:9093",
            "h:9092",
            "PLAINTEXT://h",
            "PLAINTEXT://h:70000",
            "PLAINTEXT://h:-1",
            "PLAINTEXT://h:1,PLAINTEXT://h:2",
            "PLAINTEXT://bad host:1",
            "PLAINTEXT://[zz]:1",
            "PLAINTEXT://300.1.1.1:1",
            "PLAINTEXT://::1:9092",
        ],
    ),
    "advertised.listeners": (
        "PLAINTEXT://broker1.example.com:19092",
        "PLAINTEXT://broker1.example.com:19092",
        True,
        ["PLAINTEXT://0.0.0.0:9092", "PLAINTEXT://:9092", "PLAINTEXT://[::]:9092", "PLAINTEXT://h:0", "SASL_SSL://h:1"],
    ),
    "listener.security.protocol.map": (
        "local:plaintext, PLAINTEXT:PLAINTEXT",
        "local:plaintext, PLAINTEXT:PLAINTEXT",
        True,
        ["LOCAL", "LOCAL:", ":PLAINTEXT", "LOCAL:TLS", "LOCAL:PLAINTEXT,local:PLAINTEXT", "BAD NAME:PLAINTEXT"],
    ),
    "inter.broker.listener.name": ("plaintext", "plaintext", False, ["LOCAL", "", "PLAINTEXT,LOCAL"]),
    "socket.request.max.bytes": ("1024", "1024", True, ["0", "2147483648"]),
    "socket.send.buffer.bytes": ("-1", "-1", True, ["-2"]),
    "socket.receive.buffer.bytes": ("65536", "65536", True, ["-2", "x"]),
    "queued.max.requests": ("16", "16", True, ["0"]),
    "connections.max.idle.ms": ("1000", "1000", True, ["0", "9223372036854775808"]),
    "quota.window.num": ("3", "3", True, ["0", "x"]),
    "quota.window.size.seconds": ("2", "2", True, ["0", "1.5"]),
    "ssl.keystore.type": ("PEM", "PEM", False, ["JKS", "PKCS12", "pem", ""]),
    "ssl.keystore.location": ("/etc/strait/node.pem", "/etc/strait/node.pem", True, []),
    "ssl.key.password": ("s3cret", "s3cret", True, []),
    "ssl.truststore.type": ("PEM", "PEM", False, ["JKS"]),
    "ssl.truststore.location": ("/etc/strait/ca.pem", "/etc/strait/ca.pem", True, []),
    "ssl.client.auth": ("required", "required", True, ["REQUIRED", "yes", ""]),
    "ssl.enabled.protocols": ("TLSv1.3", "TLSv1.3", True, ["TLSv1.1", "TLSv1", "SSLv3", "", "TLSv1.2,"]),
    "authorizer.class.name": (
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.authorizer.AclAuthorizer",
        True,
        ["AclAuthorizer", "org.apache.ranger.authorization.kafka.authorizer.RangerKafkaAuthorizer"],
    ),
    "super.users": ("User:admin;User:ops", "User:admin;User:ops", True, ["admin", "User:", ":x;User:a"]),
    "allow.everyone.if.no.acl.found": ("true", "true", True, ["yes"]),
    "ssl.endpoint.identification.algorithm": ("", "", True, ["HTTPS", "ldap"]),
    "sasl.enabled.mechanisms": (
        "PLAIN, SCRAM-SHA-512",
        "PLAIN,SCRAM-SHA-512",
        True,
        ["GSSAPI", "OAUTHBEARER", "", "plain"],
    ),
    "sasl.mechanism.inter.broker.protocol": ("PLAIN", "PLAIN", True, ["GSSAPI", "scram-sha-512"]),
    "sasl.jaas.config": (
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a";',
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a";',
        True,
        ["PlainLoginModule", 'X maybe a="b";', 'X required a="b"'],
    ),
    "strait.sasl.plain.users.file": ("/etc/strait/plain-users", "/etc/strait/plain-users", True, []),
    "sasl.server.max.receive.size": ("65536", "65536", True, ["0", "x"]),
    "connection.failed.authentication.delay.ms": ("0", "0", True, ["-1"]),
    "connections.max.reauth.ms": ("3600000", "3600000", True, ["-1"]),
    "ssl.principal.mapping.rules": (
        "RULE:^CN=(.*?),OU=ops.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=ops.*$/$1/L, DEFAULT",
        True,
        ["", "NONE", "RULE:^CN=(.*$/$1/", "RULE:^CN=.*$/$1/", "DEFAULT,", "RULE:x/y"],
    ),
    "zookeeper.set.acl": ("FALSE", "false", False, ["yes", ""]),  # true needs a digest file: see below
    "strait.zookeeper.digest.file": ("/etc/strait/zk-digest", "/etc/strait/zk-digest", True, []),
    "num.partitions": ("3", "3", True, ["0", "-1"]),
    "default.replication.factor": ("3", "3", True, ["0"]),
    "auto.create.topics.enable": ("FALSE", "false", True, ["yes", "1", ""]),
    "delete.topic.enable": (" false ", "false", True, ["no"]),
    "compression.type": (" producer ", "producer", False, ["brotli", "LZ4", "none"]),
    "log.dirs": ("/data/a, /data/b", "/data/a, /data/b", True, ["", " , ", "/a,/a", "/a,/a/"]),
    "log.dir": ("/data/x", "/data/x", True, ["", ","]),
    "message.max.bytes": ("2000000", "2000000", True, ["-1"]),
    "log.segment.bytes": ("1048576", "1048576", True, ["13", "2147483648"]),
    "log.roll.ms": ("3600000", "3600000", True, ["0"]),
    "log.roll.hours": ("1", "1", True, ["0"]),
    "log.index.size.max.bytes": ("4096", "4096", True, ["11"]),
    "log.index.interval.bytes": ("8192", "8192", True, ["-1"]),
    "log.message.timestamp.type": ("LogAppendTime", "LogAppendTime", True, ["logappendtime", "Other"]),
    "log.message.timestamp.before.max.ms": ("3600000", "3600000", True, ["-1"]),
    "log.message.timestamp.after.max.ms": ("3600000", "3600000", True, ["-1"]),
    "log.message.timestamp.difference.max.ms": ("60000", "60000", True, ["-1"]),
    "log.cleanup.policy": (" delete ", "delete", False, ["", "delete,,delete", "remove"]),
    "log.cleaner.delete.retention.ms": ("1000", "1000", True, ["-1", "x"]),
    "log.cleaner.min.cleanable.ratio": ("0.1", "0.1", True, ["1.5", "-0.1", "x", "nan"]),
    "log.cleaner.min.compaction.lag.ms": ("5", "5", True, ["-1"]),
    "log.cleaner.backoff.ms": ("100", "100", True, ["0"]),
    "offsets.topic.segment.bytes": ("1048576", "1048576", True, ["13", "x"]),
    "log.retention.ms": ("-1", "-1", True, ["0", "-2", "x"]),
    "log.retention.minutes": ("30", "30", True, ["0", "-5"]),
    "log.retention.hours": ("24", "24", True, ["0", "-2"]),
    "log.retention.bytes": ("1073741824", "1073741824", True, ["-2"]),
    "log.retention.check.interval.ms": ("1000", "1000", True, ["0"]),
    "log.segment.delete.delay.ms": ("0", "0", True, ["-1"]),
    "log.flush.interval.messages": ("1", "1", True, ["0"]),
    "log.flush.interval.ms": ("1000", "1000", True, ["-1"]),
    "log.flush.scheduler.interval.ms": ("500", "500", True, ["-1"]),
    "log.flush.offset.checkpoint.interval.ms": ("1000", "1000", True, ["-1"]),
    "min.insync.replicas": ("2", "2", True, ["0"]),
    "unclean.leader.election.enable": ("True", "true", True, ["on"]),
    "replica.lag.time.max.ms": ("10000", "10000", True, ["0"]),
    "replica.alter.log.dirs.io.max.bytes.per.second": ("1048576", "1048576", True, ["0", "x"]),
    "controlled.shutdown.enable": ("false", "false", True, ["off"]),
    "controlled.shutdown.max.retries": ("5", "5", True, ["-1", "x"]),
    "controlled.shutdown.retry.backoff.ms": ("100", "100", True, ["-1"]),
    "replica.fetch.wait.max.ms": ("100", "100", True, ["-1", "x"]),
    "replica.fetch.min.bytes": ("10", "10", True, ["0"]),
    "replica.fetch.max.bytes": ("2048", "2048", True, ["-1"]),
    "replica.fetch.response.max.bytes": ("4096", "4096", True, ["-1"]),
    "replica.fetch.backoff.ms": ("50", "50", True, ["-1"]),
    "max.incremental.fetch.session.cache.slots": ("0", "0", True, ["-1", "x"]),
    "replica.selector.class": (
        "org.apache.kafka.common.replica.RackAwareReplicaSelector",
        "org.apache.kafka.common.replica.RackAwareReplicaSelector",
        True,
        ["com.example.MySelector", "RackAware"],
    ),
    "replica.socket.timeout.ms": ("5000", "5000", True, ["0"]),
    "auto.leader.rebalance.enable": ("false", "false", True, ["no"]),
    "leader.imbalance.check.interval.seconds": ("5", "5", True, ["0"]),
    "leader.imbalance.per.broker.percentage": ("0", "0", True, ["101", "-1"]),
    "offsets.topic.num.partitions": ("1", "1", True, ["0"]),
    "offsets.topic.replication.factor": ("1", "1", True, ["0", "32768"]),
    "offsets.retention.minutes": ("60", "60", True, ["0"]),
    "group.initial.rebalance.delay.ms": ("0", "0", True, ["-1"]),
    "group.min.session.timeout.ms": ("1000", "1000", True, ["-1"]),
    "group.max.session.timeout.ms": ("60000", "60000", True, ["-1"]),
    "transaction.state.log.replication.factor": ("1", "1", True, ["0"]),
    "transaction.state.log.min.isr": ("1", "1", True, ["0"]),
    "transaction.state.log.num.partitions": ("1", "1", True, ["0", "x"]),
    "transaction.state.log.segment.bytes": ("1048576", "1048576", True, ["13"]),
    "transaction.max.timeout.ms": ("60000", "60000", True, ["0"]),
    "transactional.id.expiration.ms": ("3600000", "3600000", True, ["0"]),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ("1000", "1000", True, ["0"]),
    "transaction.remove.expired.transaction.cleanup.interval.ms": ("60000", "60000", True, ["0"]),
    "strait.admin.listener": ("0.0.0.0:8080", "0.0.0.0:8080", True, [":8080", "localhost", "h:x", "h:65536", ""]),
    "strait.admin.ssl.enabled": ("false", "false", False, ["yes"]),
    "strait.producer.state.max.ids": ("100", "100", True, ["0"]),
    "num.network.threads": ("6", "6", False, ["0"]),
    "num.io.threads": ("16", "16", False, ["0"]),
    "num.recovery.threads.per.data.dir": ("4", "4", False, ["0"]),
}


def test_cases_cover_every_key() -> None:
    assert set(CASES) == set(BROKER_KEY_INDEX)


def test_no_effect_keys_are_exactly_the_thread_counts_and_the_request_queue() -> None:
    # queued.max.requests bounds Kafka's shared queue; strait handles one request per connection at a time.
    no_effect = {"num.network.threads", "num.io.threads", "num.recovery.threads.per.data.dir", "queued.max.requests"}
    assert no_effect == NO_EFFECT_KEYS
    assert {k.name for k in BROKER_KEYS if not k.effect} == NO_EFFECT_KEYS


@pytest.mark.parametrize("key", sorted(CASES))
def test_good_value(key: str) -> None:
    good, canonical, changes, _ = CASES[key]
    base = NodeConfig.from_properties(BASE, source=SOURCE)
    cfg = NodeConfig.from_properties(BASE | {key: good}, source=SOURCE)
    assert key in cfg.explicit_keys
    assert cfg.value_of(key) == canonical
    assert (typed_fields(cfg) != typed_fields(base)) == changes


@pytest.mark.parametrize(("key", "bad"), [(k, b) for k, case in sorted(CASES.items()) for b in case[3]])
def test_bad_value_names_file_key_and_value(key: str, bad: str) -> None:
    with pytest.raises(ConfigError) as err:
        NodeConfig.from_properties(BASE | {key: bad}, source=SOURCE)
    shown = "[hidden]" if BROKER_KEY_INDEX[key].type == ConfigType.PASSWORD else bad  # a password is never echoed
    assert (err.value.key, err.value.value, err.value.source) == (key, shown, SOURCE)
    assert str(err.value).startswith(f"{SOURCE}: {key}={shown!r}: ")


def test_defaults_are_kafkas_except_loopback() -> None:
    cfg = NodeConfig.from_properties(BASE)
    assert cfg.explicit_keys == frozenset(BASE)
    assert cfg.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    assert cfg.advertised_listeners == cfg.listeners
    assert cfg.admin_listener == ("127.0.0.1", 0)
    assert cfg.log_dirs == (Path("/tmp/kafka-logs"),)
    assert cfg.log_retention_ms == 168 * 3600 * 1000
    assert cfg.log_roll_ms == 168 * 3600 * 1000
    assert cfg.log_flush_interval_ms == LONG_MAX
    assert (cfg.num_partitions, cfg.default_replication_factor, cfg.min_insync_replicas) == (1, 1, 1)
    assert (cfg.message_max_bytes, cfg.socket_request_max_bytes) == (1048588, 104857600)
    assert (cfg.zookeeper_session_timeout_ms, cfg.zookeeper_connection_timeout_ms) == (18000, 18000)
    assert (cfg.queued_max_requests, cfg.connections_max_idle_ms, cfg.replica_lag_time_max_ms) == (500, 600000, 30000)
    assert (cfg.offsets_topic_num_partitions, cfg.offsets_topic_replication_factor) == (50, 3)
    assert cfg.group_initial_rebalance_delay_ms == 3000
    assert cfg.producer_state_max_ids == 10000
    assert cfg.auto_create_topics_enable and cfg.delete_topic_enable and not cfg.unclean_leader_election_enable
    assert cfg.offsets_retention_ms == 7 * 24 * 3600 * 1000


@pytest.mark.parametrize(("typo", "suggestion"), [("num.partition", "num.partitions"), ("log.dri", "log.dir")])
def test_unknown_key_suggests_the_closest(typo: str, suggestion: str) -> None:
    with pytest.raises(ConfigError) as err:
        NodeConfig.from_properties(BASE | {typo: "3"}, source=SOURCE)
    assert err.value.key == typo
    assert f"{typo}='3': unknown key (did you mean {suggestion!r}?)" in str(err.value)


def test_unknown_key_without_a_close_match() -> None:
    with pytest.raises(ConfigError, match=r"sasl\.kerberos\.service\.name='kafka': unknown key; see"):
        NodeConfig.from_properties(BASE | {"sasl.kerberos.service.name": "kafka"})


@pytest.mark.parametrize("missing", ["broker.id", "zookeeper.connect"])
def test_required_keys(missing: str) -> None:
    props = {k: v for k, v in BASE.items() if k != missing}
    with pytest.raises(ConfigError, match=rf"^{SOURCE}: {missing}: is required$"):
        NodeConfig.from_properties(props, source=SOURCE)


def test_group_session_timeouts_must_be_ordered() -> None:
    with pytest.raises(ConfigError, match=r"group\.max\.session\.timeout\.ms='5000': must be at least .*6000"):
        config(group_max_session_timeout_ms="5000")
    assert config(group_min_session_timeout_ms="5000", group_max_session_timeout_ms="5000").group_max_session_timeout_ms


# -- keys that combine -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "retention_ms"),
    [
        ({}, 168 * 3_600_000),
        ({"log.retention.hours": "2"}, 2 * 3_600_000),
        ({"log.retention.minutes": "5", "log.retention.hours": "2"}, 5 * 60_000),
        ({"log.retention.hours": "2", "log.retention.minutes": "5", "log.retention.ms": "1234"}, 1234),
        ({"log.retention.ms": "1234", "log.retention.hours": "2"}, 1234),
        ({"log.retention.hours": "-1"}, -1),
        ({"log.retention.minutes": "-1", "log.retention.hours": "5"}, -1),
        ({"log.retention.ms": "-1", "log.retention.minutes": "5"}, -1),
    ],
)
def test_retention_precedence_ms_minutes_hours(props: dict[str, str], retention_ms: int) -> None:
    cfg = NodeConfig.from_properties(BASE | props)
    assert cfg.log_retention_ms == retention_ms
    assert cfg.log_config().retention_ms == retention_ms


def test_roll_flush_zookeeper_and_dirs_precedence() -> None:
    assert config(log_roll_hours="2").log_roll_ms == 2 * 3_600_000
    assert config(log_roll_hours="2", log_roll_ms="1000").log_roll_ms == 1000
    assert config(log_flush_scheduler_interval_ms="700").log_flush_interval_ms == 700
    assert config(log_flush_scheduler_interval_ms="700", log_flush_interval_ms="900").log_flush_interval_ms == 900
    assert config(zookeeper_session_timeout_ms="4000").zookeeper_connection_timeout_ms == 4000
    both = config(zookeeper_session_timeout_ms="4000", zookeeper_connection_timeout_ms="9000")
    assert (both.zookeeper_session_timeout_ms, both.zookeeper_connection_timeout_ms) == (4000, 9000)
    assert config(log_dir="/a").log_dirs == (Path("/a"),)
    assert config(log_dir="/a", log_dirs="/b, /c,").log_dirs == (Path("/b"), Path("/c"))


def test_timestamp_difference_fills_in_for_unset_before_and_after() -> None:
    cfg = config(log_message_timestamp_difference_max_ms="5000")
    assert (cfg.log_message_timestamp_before_max_ms, cfg.log_message_timestamp_after_max_ms) == (5000, 5000)
    cfg = config(log_message_timestamp_difference_max_ms="5000", log_message_timestamp_after_max_ms="100")
    assert (cfg.log_message_timestamp_before_max_ms, cfg.log_message_timestamp_after_max_ms) == (5000, 100)
    cfg = config(log_message_timestamp_before_max_ms="7")
    assert (cfg.log_message_timestamp_before_max_ms, cfg.log_message_timestamp_after_max_ms) == (7, LONG_MAX)


def test_log_config_maps_every_storage_setting() -> None:
    cfg = config(
        log_segment_bytes="1048576",
        log_roll_hours="3",
        log_index_size_max_bytes="4096",
        log_index_interval_bytes="100",
        log_retention_minutes="10",
        log_retention_bytes="5000000",
        log_flush_interval_messages="1",
        log_flush_interval_ms="250",
        message_max_bytes="65536",
        log_segment_delete_delay_ms="0",
        log_message_timestamp_type="LogAppendTime",
    )
    assert cfg.log_config() == LogConfig(
        segment_bytes=1048576,
        segment_ms=3 * 3_600_000,
        segment_index_bytes=4096,
        index_interval_bytes=100,
        retention_ms=600_000,
        retention_bytes=5000000,
        flush_messages=1,
        flush_ms=250,
        max_message_bytes=65536,
        file_delete_delay_ms=0,
        message_timestamp_type="LogAppendTime",
    )
    assert NodeConfig.from_properties(BASE).log_config() == LogConfig()  # Kafka's defaults are storage's


# -- listeners ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("PLAINTEXT://127.0.0.1:9092", Listener("PLAINTEXT", "127.0.0.1", 9092)),
        ("plaintext://host-1.example.com:1", Listener("PLAINTEXT", "host-1.example.com", 1)),
        (" PLAINTEXT://:0 ,", Listener("PLAINTEXT", "", 0)),
        ("PLAINTEXT://0.0.0.0:65535", Listener("PLAINTEXT", "0.0.0.0", 65535)),
        ("PLAINTEXT://[::1]:9092", Listener("PLAINTEXT", "::1", 9092)),
        ("PLAINTEXT://[::]:9092", Listener("PLAINTEXT", "::", 9092)),
    ],
)
def test_parse_listeners(value: str, expected: Listener) -> None:
    assert parse_listeners(value, "listeners") == (expected,)


def test_listener_str_round_trips() -> None:
    for listener in (Listener("PLAINTEXT", "::1", 9092), Listener("PLAINTEXT", "h", 1), Listener("PLAINTEXT", "", 0)):
        assert parse_listeners(str(listener), "listeners") == (listener,)


def test_listener_errors_name_the_listener() -> None:
    with pytest.raises(ConfigError) as err:
        parse_listeners("BROKER://broker:9093", "listeners")
    assert err.value.key == "listeners"
    assert "listener 'BROKER://broker:9093': listener name BROKER has no security protocol" in str(err.value)
    with pytest.raises(ConfigError, match=r"listener 'CLIENT://h:1'.*listener\.security\.protocol\.map"):
        parse_listeners("CLIENT://h:1", "listeners")


@pytest.mark.parametrize("value", ["PLAINTEXT://0.0.0.0:9092", "PLAINTEXT://:9092", "PLAINTEXT://h:0"])
def test_wildcards_and_port_zero_are_for_listeners_only(value: str) -> None:
    assert parse_listeners(value, "listeners")
    with pytest.raises(ConfigError, match=r"^advertised\.listeners="):
        parse_listeners(value, "advertised.listeners")


def test_advertised_defaults_to_listeners_on_loopback() -> None:
    cfg = config(listeners="PLAINTEXT://0.0.0.0:0")
    assert cfg.listeners == (Listener("PLAINTEXT", "0.0.0.0", 0),)
    assert cfg.advertised_listeners == (Listener("PLAINTEXT", "127.0.0.1", 0),)
    assert cfg.advertised_for({"PLAINTEXT": 41234}) == (Listener("PLAINTEXT", "127.0.0.1", 41234),)
    with pytest.raises(ConfigError, match="no bound port known for listener PLAINTEXT"):
        cfg.advertised_for({})
    named = config(listeners="PLAINTEXT://10.0.0.5:9092")
    assert named.advertised_listeners == named.listeners
    assert named.advertised_for({}) == named.listeners


def test_explicit_advertised_listeners() -> None:
    cfg = config(listeners="PLAINTEXT://0.0.0.0:9092", advertised_listeners="PLAINTEXT://kafka.example:19092")
    assert cfg.advertised_listeners == (Listener("PLAINTEXT", "kafka.example", 19092),)


# -- files and errors -------------------------------------------------------------------------------------


def test_load_config(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# node 3\nbroker.id = 3\nzookeeper.connect: zk:2181/east\nlog.dirs=/d1,\\\n   /d2\nlog.retention.hours 1\n",
        encoding="utf-8",
    )
    cfg = load_config(path)
    assert (cfg.broker_id, cfg.zookeeper_connect, cfg.log_dirs) == (3, "zk:2181/east", (Path("/d1"), Path("/d2")))
    assert cfg.log_retention_ms == 3_600_000
    assert cfg.source == str(path)


def test_load_config_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("broker.id=1\nzookeeper.connect=zk:2181\nnum.partitions=many\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{path}: num\.partitions='many': not an integer$"):
        load_config(path)
    path.write_bytes(b"broker.id=1\nbroker.rack=\xff\n")
    with pytest.raises(ConfigError, match=rf"^{path}: not UTF-8"):
        load_config(path)
    with pytest.raises(ConfigError, match=rf"^{tmp_path / 'absent.properties'}: cannot read"):
        load_config(tmp_path / "absent.properties")


def test_config_error_message_shapes() -> None:
    assert str(ConfigError("bad", key="k", value="v", source="f")) == "f: k='v': bad"
    assert str(ConfigError("bad", key="k")) == "k: bad"
    assert str(ConfigError("bad")) == "bad"
    assert isinstance(ConfigError("x"), ValueError)


# -- docs ---------------------------------------------------------------------------------------------------


def test_docs_list_every_broker_key() -> None:
    text = DOCS.read_text(encoding="utf-8")
    missing = [k.name for k in BROKER_KEYS if f"| `{k.name}` |" not in text]
    assert not missing, f"docs/configuration.md lacks {missing}: run python -m node.config {DOCS}"


def test_broker_reference_has_a_row_per_key_and_separates_no_effect_keys() -> None:
    reference = render_broker_reference()
    rows = [line for line in reference.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [k.name for k in BROKER_KEYS if k.effect] + [
        k.name for k in BROKER_KEYS if not k.effect
    ]
    no_effect_part = reference.split("### Accepted, no effect")[1]
    assert all(f"`{k.name}`" in no_effect_part for k in BROKER_KEYS if not k.effect)
    assert all(f"`{k.name}`" not in no_effect_part for k in BROKER_KEYS if k.effect)
