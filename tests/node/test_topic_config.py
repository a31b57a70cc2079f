"""Topic-level configs: validation, effective values, DescribeConfigs sources and synonyms, incremental alters."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.config import (
    BROKER_KEY_INDEX,
    BROKER_KEYS,
    FENCED,
    LONG_MAX,
    MIRROR_LINK,
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    TOPIC_KEY_INDEX,
    TOPIC_KEYS,
    ConfigEntry,
    ConfigError,
    ConfigSource,
    ConfigType,
    NodeConfig,
    TopicPolicy,
    apply_incremental,
    describe_broker_config,
    describe_topic_config,
    effective_log_config,
    effective_policy,
    update_docs,
    validate_topic_config,
)
from storage import LogConfig

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}
DYN, STATIC, DEFAULT = ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG
HOUR_MS = 3_600_000


def node(**props: str) -> NodeConfig:
    return NodeConfig.from_properties(BASE | {k.replace("_", "."): v for k, v in props.items()})


def entry(entries: list[ConfigEntry], name: str) -> ConfigEntry:
    (found,) = [e for e in entries if e.name == name]
    return found


# -- the table -------------------------------------------------------------------------------------------


def test_supported_keys_cover_storage_and_the_broker_enforced_ones() -> None:
    storage_keys = set(LogConfig().to_topic_configs())
    extra = {
        "cleanup.policy",
        "compression.type",
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms",
        "message.timestamp.difference.max.ms",
        MIRROR_LINK,
        FENCED,
    }
    accepted_without_effect = {
        "message.format.version",
        "message.downconversion.enable",
        "preallocate",
        "segment.jitter.ms",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        "remote.storage.enable",
        "local.retention.ms",
        "local.retention.bytes",
    }
    assert set(TOPIC_KEY_INDEX) == storage_keys | extra | accepted_without_effect
    assert {k.name for k in TOPIC_KEYS if not k.effect} == accepted_without_effect


def test_every_topic_key_defaults_from_a_broker_key_and_back() -> None:
    for key in TOPIC_KEYS:
        if key.name in (MIRROR_LINK, FENCED):  # strait's own keys: unset on every topic unless set on it
            assert (key.broker_keys, key.default) == ((), "")
            continue
        if not key.effect:  # accepted for compatibility: Kafka's default, no broker key of strait's
            assert key.broker_keys == (), key.name
            continue
        assert key.broker_keys, f"{key.name} has no broker default"
    for broker_key in BROKER_KEYS:
        if broker_key.topic_key is not None:
            assert broker_key.topic_key in TOPIC_KEY_INDEX, broker_key.name


def test_kafka_topic_defaults_match_the_broker_defaults() -> None:
    cfg = node()
    for key in TOPIC_KEYS:
        assert entry(describe_topic_config(cfg, {}), key.name).value == key.default, key.name


# -- validation ---------------------------------------------------------------------------------------------

GOOD = {
    "cleanup.policy": (" delete ", "delete"),
    "delete.retention.ms": ("0", "0"),
    "min.cleanable.dirty.ratio": ("0.25", "0.25"),
    "min.compaction.lag.ms": ("10", "10"),
    "compression.type": (" lz4", "lz4"),
    "file.delete.delay.ms": ("0", "0"),
    "flush.messages": ("1", "1"),
    "flush.ms": ("+1000", "1000"),
    "index.interval.bytes": ("100", "100"),
    "max.message.bytes": ("65536", "65536"),
    "message.timestamp.after.max.ms": ("3600000", "3600000"),
    "message.timestamp.before.max.ms": ("0", "0"),
    "message.timestamp.difference.max.ms": ("1000", "1000"),
    "message.timestamp.type": ("LogAppendTime", "LogAppendTime"),
    "min.insync.replicas": ("2", "2"),
    "retention.bytes": ("-1", "-1"),
    "retention.ms": ("0", "0"),
    "segment.bytes": ("2147483647", "2147483647"),
    "segment.index.bytes": ("12", "12"),
    "segment.ms": ("1", "1"),
    "unclean.leader.election.enable": (" TRUE", "true"),
    "message.format.version": ("2.8", "2.8"),
    "message.downconversion.enable": ("false", "false"),
    "preallocate": ("true", "true"),
    "segment.jitter.ms": ("1000", "1000"),
    "leader.replication.throttled.replicas": ("0:1, 1:2", "0:1,1:2"),
    "follower.replication.throttled.replicas": ("*", "*"),
    "remote.storage.enable": ("false", "false"),
    "local.retention.ms": ("-2", "-2"),
    "local.retention.bytes": ("1048576", "1048576"),
    MIRROR_LINK: (" east-to-west ", "east-to-west"),
    FENCED: (" failed over to west: produce to 127.0.0.1:9092 ", "failed over to west: produce to 127.0.0.1:9092"),
}
BAD = {
    "cleanup.policy": ["", "nothing"],
    "delete.retention.ms": ["-1"],
    "min.cleanable.dirty.ratio": ["2", "x"],
    "min.compaction.lag.ms": ["-1"],
    "compression.type": ["brotli", "LZ4", "none", ""],
    "file.delete.delay.ms": ["-1", "soon"],
    "flush.messages": ["0"],
    "flush.ms": ["-1", "9223372036854775808"],
    "index.interval.bytes": ["-1", "2147483648"],
    "max.message.bytes": ["-1"],
    "message.timestamp.after.max.ms": ["-1"],
    "message.timestamp.before.max.ms": ["-1", "1e3"],
    "message.timestamp.difference.max.ms": ["-5"],
    "message.timestamp.type": ["createtime", "Now"],
    "min.insync.replicas": ["0"],
    "retention.bytes": ["-2"],
    "retention.ms": ["-2", "1h"],
    "segment.bytes": ["13", "2147483648"],
    "segment.index.bytes": ["11"],
    "segment.ms": ["0"],
    "unclean.leader.election.enable": ["yes"],
    "message.format.version": ["latest", "3", "3.0-IV"],
    "message.downconversion.enable": ["yes"],
    "preallocate": ["1"],
    "segment.jitter.ms": ["-1"],
    "leader.replication.throttled.replicas": ["0-1", "*,0:1", "a:b"],
    "follower.replication.throttled.replicas": ["0:", ":1"],
    "remote.storage.enable": ["true", "no"],
    "local.retention.ms": ["-3"],
    "local.retention.bytes": ["-3", "1k"],
    MIRROR_LINK: ["", "  ", "east to west", "east/west", "l" * 250, "ost-nach-wëst"],
    FENCED: ["", "   ", "x" * 1025, "two\nlines", "tab\there", "escape \x1b[31m", "del\x7f", "c1\x85c2"],
}


def test_mirror_link_accepts_the_longest_name() -> None:
    name = "a.B_0-" * 41 + "abc"  # 249 characters
    assert validate_topic_config({MIRROR_LINK: name}) == {MIRROR_LINK: name}


def test_cases_cover_every_topic_key() -> None:
    assert set(GOOD) == set(BAD) == set(TOPIC_KEY_INDEX)


@pytest.mark.parametrize("name", sorted(GOOD))
def test_good_topic_value_is_canonicalised(name: str) -> None:
    raw, canonical = GOOD[name]
    assert validate_topic_config({name: raw}) == {name: canonical}


@pytest.mark.parametrize(("name", "bad"), [(k, b) for k, values in sorted(BAD.items()) for b in values])
def test_bad_topic_value_names_key_and_value(name: str, bad: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate_topic_config({"retention.ms": "1000", name: bad})
    assert (err.value.key, err.value.value) == (name, bad)
    assert str(err.value).startswith(f"{name}={bad!r}: ")


def test_unsupported_values_say_why() -> None:
    assert validate_topic_config({"cleanup.policy": "delete, compact"}) == {"cleanup.policy": "delete,compact"}
    for codec in ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"):  # a codec recompresses (Kafka's)
        assert validate_topic_config({"compression.type": codec}) == {"compression.type": codec}
    with pytest.raises(ConfigError, match="tiered storage is not supported by strait"):
        validate_topic_config({"remote.storage.enable": "true"})


def test_unknown_topic_keys() -> None:
    with pytest.raises(
        ConfigError, match=r"^retention\.m='1': unknown topic config \(did you mean 'retention\.ms'\?\)"
    ):
        validate_topic_config({"retention.m": "1"})
    with pytest.raises(
        ConfigError, match=r"^max\.compaction\.lag\.ms='1': is a Kafka topic config that strait does not support"
    ):
        validate_topic_config({"max.compaction.lag.ms": "1"})
    with pytest.raises(ConfigError, match=r"^log\.retention\.ms='1': unknown topic config"):
        validate_topic_config({"log.retention.ms": "1"})  # a broker key is not a topic key


# -- effective values ------------------------------------------------------------------------------------------


def test_effective_log_config_applies_overrides_over_broker_defaults() -> None:
    cfg = node(log_retention_hours="2", log_segment_bytes="1048576")
    assert effective_log_config(cfg, {}) == cfg.log_config()
    got = effective_log_config(cfg, {"retention.ms": "1000", "message.timestamp.type": "LogAppendTime"})
    assert got == LogConfig(segment_bytes=1048576, retention_ms=1000, message_timestamp_type="LogAppendTime")
    assert effective_log_config(cfg, {"segment.ms": "60000"}).segment_ms == 60000


def test_effective_log_config_rejects_bad_overrides() -> None:
    with pytest.raises(ConfigError, match=r"^segment\.bytes='1': must be at least 14$"):
        effective_log_config(node(), {"segment.bytes": "1"})


# A valid non-default value for each broker key that feeds storage, as a strategy.
BROKER_STORAGE_VALUES = {
    "log.segment.bytes": st.integers(14, 2**31 - 1),
    "log.roll.ms": st.integers(1, 10**12),
    "log.roll.hours": st.integers(1, 10**5),
    "log.index.size.max.bytes": st.integers(12, 10**8),
    "log.index.interval.bytes": st.integers(0, 10**6),
    "log.retention.ms": st.one_of(st.just(-1), st.integers(1, 10**12)),
    "log.retention.minutes": st.one_of(st.just(-1), st.integers(1, 10**6)),
    "log.retention.hours": st.one_of(st.just(-1), st.integers(1, 10**5)),
    "log.retention.bytes": st.integers(-1, 10**12),
    "log.flush.interval.messages": st.integers(1, LONG_MAX),
    "log.flush.interval.ms": st.integers(0, LONG_MAX),
    "log.flush.scheduler.interval.ms": st.integers(0, LONG_MAX),
    "message.max.bytes": st.integers(0, 2**31 - 1),
    "log.segment.delete.delay.ms": st.integers(0, 10**9),
    "log.message.timestamp.type": st.sampled_from(["CreateTime", "LogAppendTime"]),
}


@settings(max_examples=200, deadline=None)
@given(
    broker=st.dictionaries(st.sampled_from(sorted(BROKER_STORAGE_VALUES)), st.just(None)).flatmap(
        lambda keys: st.fixed_dictionaries({k: BROKER_STORAGE_VALUES[k] for k in keys})
    )
)
def test_topic_without_overrides_gets_exactly_the_broker_log_config(broker: dict[str, object]) -> None:
    cfg = NodeConfig.from_properties(BASE | {k: str(v) for k, v in broker.items()})
    assert effective_log_config(cfg, {}) == cfg.log_config()


def test_effective_policy() -> None:
    assert effective_policy(node(), {}) == TopicPolicy(1, False, LONG_MAX, LONG_MAX)
    cfg = node(min_insync_replicas="2", unclean_leader_election_enable="true")
    assert effective_policy(cfg, {}) == TopicPolicy(2, True, LONG_MAX, LONG_MAX)
    overrides = {"min.insync.replicas": "3", "unclean.leader.election.enable": "false"}
    assert effective_policy(cfg, overrides) == TopicPolicy(3, False, LONG_MAX, LONG_MAX)
    assert effective_policy(cfg, {MIRROR_LINK: "east-to-west"}).mirror_link == "east-to-west"


def test_fence_is_part_of_the_policy_and_decides_whether_clients_may_write() -> None:
    assert effective_policy(node(), {}).fence is None
    assert effective_policy(node(), {}).client_writable
    fenced = effective_policy(node(), {FENCED: " moved to west "})
    assert (fenced.fence, fenced.client_writable) == ("moved to west", False)
    assert not effective_policy(node(), {MIRROR_LINK: "l1"}).client_writable
    assert apply_incremental({FENCED: "x"}, [(FENCED, OP_DELETE, None)]) == {}
    assert apply_incremental({}, [(FENCED, OP_SET, "to west")]) == {FENCED: "to west"}


def test_fence_text_limits_are_named() -> None:
    longest = "é" * 1024  # characters, not bytes
    assert validate_topic_config({FENCED: longest}) == {FENCED: longest}
    with pytest.raises(ConfigError, match="1025 characters long, the limit is 1024"):
        validate_topic_config({FENCED: "x" * 1025})
    with pytest.raises(ConfigError, match=r"control character \(U\+000A\) at position 3"):
        validate_topic_config({FENCED: "one\ntwo"})


def test_mirror_link_is_described_empty_when_unset() -> None:
    unset = entry(describe_topic_config(node(), {}), MIRROR_LINK)
    assert (unset.value, unset.source, unset.is_default, unset.synonyms) == ("", DEFAULT, True, [])
    assert unset.config_type == ConfigType.STRING
    got = entry(describe_topic_config(node(), {MIRROR_LINK: "l1"}), MIRROR_LINK)
    assert (got.value, got.source, got.synonyms) == ("l1", DYN, [(MIRROR_LINK, "l1", DYN)])
    assert apply_incremental({MIRROR_LINK: "l1"}, [(MIRROR_LINK, OP_DELETE, None)]) == {}


@pytest.mark.parametrize(
    ("broker", "overrides", "before", "after"),
    [
        ({"log.message.timestamp.difference.max.ms": "50"}, {}, 50, 50),
        ({"log.message.timestamp.difference.max.ms": "50", "log.message.timestamp.before.max.ms": "7"}, {}, 7, 50),
        ({"log.message.timestamp.before.max.ms": "7"}, {"message.timestamp.difference.max.ms": "9"}, 9, 9),
        ({}, {"message.timestamp.difference.max.ms": "9", "message.timestamp.after.max.ms": "3"}, 9, 3),
        ({"log.message.timestamp.after.max.ms": "4"}, {"message.timestamp.before.max.ms": "8"}, 8, 4),
    ],
)
def test_timestamp_bounds_combine_topic_and_broker_and_older_names(
    broker: dict[str, str], overrides: dict[str, str], before: int, after: int
) -> None:
    policy = effective_policy(NodeConfig.from_properties(BASE | broker), overrides)
    assert (policy.timestamp_before_max_ms, policy.timestamp_after_max_ms) == (before, after)


# -- DescribeConfigs ------------------------------------------------------------------------------------------


def test_describe_topic_sources_and_synonyms() -> None:
    cfg = node(log_retention_hours="24", log_segment_bytes="1048576")
    entries = describe_topic_config(cfg, {"retention.ms": "1000"})
    assert [e.name for e in entries] == sorted(TOPIC_KEY_INDEX)

    retention = entry(entries, "retention.ms")
    assert (retention.value, retention.source, retention.is_default) == ("1000", DYN, False)
    assert retention.synonyms == [
        ("retention.ms", "1000", DYN),
        ("log.retention.hours", "24", STATIC),
        ("log.retention.hours", "168", DEFAULT),
    ]
    segment = entry(entries, "segment.bytes")
    assert (segment.value, segment.source, segment.is_default) == ("1048576", STATIC, False)
    assert segment.synonyms == [("log.segment.bytes", "1048576", STATIC), ("log.segment.bytes", "1073741824", DEFAULT)]
    roll = entry(entries, "segment.ms")
    assert (roll.value, roll.source, roll.is_default) == (str(168 * HOUR_MS), DEFAULT, True)
    assert roll.synonyms == [("log.roll.hours", "168", DEFAULT)]
    assert all(not e.read_only and not e.is_sensitive for e in entries)
    assert entry(entries, "cleanup.policy").config_type == ConfigType.LIST
    assert entry(entries, "segment.ms").config_type == ConfigType.LONG


def test_describe_topic_converts_broker_units_and_follows_precedence() -> None:
    cfg = node(log_retention_minutes="30", log_retention_hours="5", log_roll_ms="1234")
    entries = describe_topic_config(cfg, {})
    retention = entry(entries, "retention.ms")
    assert (retention.value, retention.source) == (str(30 * 60_000), STATIC)
    assert [s[0] for s in retention.synonyms] == ["log.retention.minutes", "log.retention.hours", "log.retention.hours"]
    assert [s[2] for s in retention.synonyms] == [STATIC, STATIC, DEFAULT]
    assert entry(entries, "segment.ms").synonyms[0] == ("log.roll.ms", "1234", STATIC)
    forever = entry(describe_topic_config(node(log_retention_hours="-1"), {}), "retention.ms")
    assert forever.value == "-1"


def test_describe_topic_timestamp_synonyms_include_the_older_name() -> None:
    cfg = node(log_message_timestamp_difference_max_ms="5000")
    before = entry(
        describe_topic_config(cfg, {"message.timestamp.difference.max.ms": "7"}), "message.timestamp.before.max.ms"
    )
    assert (before.value, before.source) == ("7", DYN)
    assert before.synonyms == [
        ("message.timestamp.difference.max.ms", "7", DYN),
        ("log.message.timestamp.difference.max.ms", "5000", STATIC),
        ("log.message.timestamp.before.max.ms", str(LONG_MAX), DEFAULT),
        ("log.message.timestamp.difference.max.ms", str(LONG_MAX), DEFAULT),
    ]


def test_describe_topic_shows_canonical_override_values_and_rejects_bad_ones() -> None:
    entries = describe_topic_config(node(), {"unclean.leader.election.enable": "TRUE"})
    assert entry(entries, "unclean.leader.election.enable").value == "true"
    with pytest.raises(ConfigError, match=r"^retention\.ms='soon': not an integer$"):
        describe_topic_config(node(), {"retention.ms": "soon"})


def test_describe_broker() -> None:
    cfg = node(log_retention_ms="1000", num_partitions=" 3 ")
    entries = describe_broker_config(cfg)
    assert [e.name for e in entries] == sorted(BROKER_KEY_INDEX)
    assert all(e.read_only for e in entries)
    assert [e.name for e in entries if e.is_sensitive] == ["sasl.jaas.config", "ssl.key.password"]

    partitions = entry(entries, "num.partitions")
    assert (partitions.value, partitions.source, partitions.is_default) == ("3", STATIC, False)
    assert partitions.synonyms == [("num.partitions", "3", STATIC), ("num.partitions", "1", DEFAULT)]
    assert partitions.config_type == ConfigType.INT

    ms = entry(entries, "log.retention.ms")
    assert (ms.value, ms.source) == ("1000", STATIC)
    assert ms.synonyms == [("log.retention.ms", "1000", STATIC), ("log.retention.hours", "168", DEFAULT)]
    hours = entry(entries, "log.retention.hours")  # Kafka drops the synonyms ranked above the described key
    assert (hours.value, hours.source, hours.is_default) == ("168", DEFAULT, True)
    assert hours.synonyms == [("log.retention.hours", "168", DEFAULT)]
    minutes = entry(entries, "log.retention.minutes")
    assert (minutes.value, minutes.source, minutes.synonyms) == (None, DEFAULT, [])

    rack = entry(entries, "broker.rack")
    assert (rack.value, rack.source, rack.synonyms) == (None, DEFAULT, [])
    broker_id = entry(entries, "broker.id")
    assert (broker_id.value, broker_id.source) == ("1", STATIC)


def test_describe_broker_never_shows_a_password() -> None:
    entries = describe_broker_config(node(ssl_key_password="s3cret"))
    password = entry(entries, "ssl.key.password")
    assert (password.value, password.is_sensitive, password.source) == (None, True, STATIC)
    assert password.synonyms == [("ssl.key.password", None, STATIC)]
    assert "s3cret" not in repr(entries)


def test_describe_broker_flush_synonyms_follow_kafka() -> None:
    entries = describe_broker_config(node(log_flush_scheduler_interval_ms="500"))
    interval = entry(entries, "log.flush.interval.ms")
    assert (interval.value, interval.synonyms) == (None, [])
    scheduler = entry(entries, "log.flush.scheduler.interval.ms")
    assert scheduler.synonyms == [
        ("log.flush.scheduler.interval.ms", "500", STATIC),
        ("log.flush.scheduler.interval.ms", str(LONG_MAX), DEFAULT),
    ]


# -- IncrementalAlterConfigs ---------------------------------------------------------------------------------------


def test_set_and_delete() -> None:
    current = {"retention.ms": "1000", "segment.ms": "5000"}
    ops = [("retention.ms", OP_SET, " 2000 "), ("segment.ms", OP_DELETE, None), ("flush.ms", OP_DELETE, None)]
    assert apply_incremental(current, ops) == {"retention.ms": "2000"}
    assert current == {"retention.ms": "1000", "segment.ms": "5000"}  # not modified


def test_append_and_subtract_on_the_list_key() -> None:
    assert apply_incremental({}, [("cleanup.policy", OP_APPEND, "delete")]) == {"cleanup.policy": "delete"}
    assert apply_incremental({"cleanup.policy": "delete"}, [("cleanup.policy", OP_APPEND, " delete ")]) == {
        "cleanup.policy": "delete"
    }
    assert apply_incremental({}, [("cleanup.policy", OP_APPEND, "compact")]) == {"cleanup.policy": "delete,compact"}
    with pytest.raises(ConfigError, match=r"cleanup\.policy='': needs at least one item"):
        apply_incremental({"cleanup.policy": "delete"}, [("cleanup.policy", OP_SUBTRACT, "delete")])
    # Both start from the current override, else Kafka's default ("delete"), so nothing to remove is a no-op.
    assert apply_incremental({}, [("cleanup.policy", OP_SUBTRACT, "compact")]) == {"cleanup.policy": "delete"}


@pytest.mark.parametrize("op", [OP_APPEND, OP_SUBTRACT])
def test_append_and_subtract_refuse_non_list_keys(op: int) -> None:
    with pytest.raises(ConfigError) as err:
        apply_incremental({}, [("retention.ms", op, "5")])
    assert err.value.key == "retention.ms"
    assert "only applies to list configs (cleanup.policy, " in str(err.value)


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([("retention.ms", 4, "1")], r"^retention\.ms='1': unknown operation 4"),
        ([("retention.ms", OP_SET, None)], r"^retention\.ms: SET needs a value"),
        ([("cleanup.policy", OP_APPEND, None)], r"^cleanup\.policy: APPEND needs a value"),
        ([("retention.ms", OP_SET, "1"), ("retention.ms", OP_DELETE, None)], r"^retention\.ms: appears twice"),
        ([("retention.ms", OP_SET, "soon")], r"^retention\.ms='soon': not an integer"),
        ([("retention.mss", OP_DELETE, None)], r"^retention\.mss: unknown topic config \(did you mean"),
    ],
)
def test_incremental_errors_name_the_key(ops: list[tuple[str, int, str | None]], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        apply_incremental({}, ops)


# -- docs ---------------------------------------------------------------------------------------------------------


def test_docs_reference_is_generated_from_the_tables() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert update_docs(text) == text, f"docs/configuration.md is stale: run .venv/bin/python -m node.config {DOCS}"
    assert all(f"| `{k.name}` |" in text for k in TOPIC_KEYS)


def test_update_docs_needs_the_markers() -> None:
    with pytest.raises(ValueError, match="no generated section 'broker-keys'"):
        update_docs("# nothing here\n")
