"""Topic-level config keys, beside the broker's: validation, effective values, incremental alters.

A topic's config is a set of *overrides* (``{"retention.ms": "3600000"}``, stored in
ZooKeeper); every key not overridden takes the broker's default from ``server.properties``
through the broker key(s) it maps to (``retention.ms`` <- ``log.retention.ms`` /
``.minutes`` / ``.hours``). :data:`TOPIC_KEYS` is the table of supported keys. The one
strait-specific keys have no broker key: ``strait.mirror.link`` unset, a topic is not a mirror;
``strait.fenced`` unset, a topic is not fenced (see :class:`TopicPolicy`).

Resolution of one topic key, first match wins: the topic override under its own name, then
under an older name (``message.timestamp.difference.max.ms`` for the before/after bounds),
then each broker key set in server.properties in precedence order, then the first broker
key with a default. DescribeConfigs (``_describe.py``) reports exactly this chain as the synonyms.

Every error is a :class:`~node.config.ConfigError` naming the key and the value; the broker
answers it with INVALID_CONFIG (40).
"""

from __future__ import annotations

import difflib
import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from storage import LogConfig

from ._broker import BROKER_KEY_INDEX, BROKER_KEYS, NodeConfig
from ._errors import ConfigError
from ._keys import (
    COMPRESSION_TYPES,
    INT_MAX,
    LONG_MAX,
    ConfigKey,
    ConfigType,
    Value,
    ValueSpec,
    check_non_empty_list,
    check_ratio,
)

__all__ = [
    "KAFKA_ONLY_TOPIC_KEYS",
    "LIST_KEYS",
    "MIRROR_LINK",
    "OP_APPEND",
    "OP_DELETE",
    "OP_SET",
    "OP_SUBTRACT",
    "TOPIC_KEYS",
    "TOPIC_KEY_INDEX",
    "FENCED",
    "ConfigSource",
    "Synonym",
    "TopicKey",
    "TopicPolicy",
    "apply_incremental",
    "check_fence_text",
    "check_link_name",
    "effective_log_config",
    "effective_policy",
    "resolve_topic_key",
    "validate_topic_config",
]


class ConfigSource(enum.IntEnum):
    """Where a value comes from, numbered as Kafka's DescribeConfigs ``ConfigSource``."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


Synonym = tuple[str, str | None, ConfigSource]


@dataclass(frozen=True, kw_only=True)
class TopicKey(ValueSpec):
    """One supported topic-level key. ``older_names`` also set it, with lower precedence than ``name``.

    ``default`` is Kafka's own default, used only where no broker key supplies one (and as the
    starting list of an APPEND).
    """

    name: str
    default: str
    doc: str
    older_names: tuple[str, ...] = ()
    effect: bool = True  # False: accepted, stored and described for Kafka compatibility, but ignored

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.older_names)

    @property
    def broker_keys(self) -> tuple[ConfigKey, ...]:
        """The broker keys this key defaults from, in precedence order."""
        return tuple(b for n in self.names for b in BROKER_KEYS if b.topic_key == n)


_I, _L, _B, _STR, _LIST = ConfigType.INT, ConfigType.LONG, ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.LIST
MIRROR_LINK = "strait.mirror.link"
FENCED = "strait.fenced"
_LINK_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
FENCE_TEXT_MAX = 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def check_link_name(value: Value) -> None:
    """A mirror link name: 1-249 characters of ``[A-Za-z0-9._-]`` (as a topic name); ValueError(reason)."""
    if not isinstance(value, str) or not _LINK_NAME.fullmatch(value):
        raise ValueError("must be a link name: 1-249 characters of A-Z, a-z, 0-9, '.', '_' and '-'")


def check_fence_text(value: Value) -> None:
    """A fence reason: 1-1024 characters, none of them a control character; ValueError(reason).

    The text reaches producers in Produce error messages and operators in logs, where a line
    break or an escape sequence would forge or hide lines.
    """
    if not isinstance(value, str) or not value:
        raise ValueError("must be a reason of 1-1024 characters (where to produce instead)")
    if len(value) > FENCE_TEXT_MAX:
        raise ValueError(f"is {len(value)} characters long, the limit is {FENCE_TEXT_MAX}")
    bad = _CONTROL.search(value)
    if bad is not None:
        raise ValueError(f"has a control character (U+{ord(bad.group()):04X}) at position {bad.start()}")


_THROTTLED = re.compile(r"[0-9]+:[0-9]+")


def check_throttled_replicas(value: Value) -> None:
    """Kafka's throttled-replicas list: ``*`` alone, or ``partition:broker`` items; ValueError(reason)."""
    items = value if isinstance(value, tuple) else ()
    if items == ("*",):
        return
    for item in items:
        if not _THROTTLED.fullmatch(item):
            raise ValueError(f"item {item!r} is not partition:broker (or the whole list '*')")


_KAFKA_VERSION = re.compile(r"[0-9]+\.[0-9]+(\.[0-9]+)?(-IV[0-9]+)?")


def check_kafka_version(value: Value) -> None:
    if not isinstance(value, str) or not _KAFKA_VERSION.fullmatch(value):
        raise ValueError("is not a Kafka version such as 2.8 or 3.0-IV1")


def check_no_tiered_storage(value: Value) -> None:
    if value is True:
        raise ValueError("tiered storage is not supported by strait")


_WEEK_MS = str(7 * 24 * 3600 * 1000)
_TS_DIFF = "message.timestamp.difference.max.ms"

TOPIC_KEYS: tuple[TopicKey, ...] = (
    TopicKey(name="cleanup.policy", type=_LIST, default="delete", choices=("delete", "compact"),
             check=check_non_empty_list,
             doc="delete: old segments are deleted by retention; compact: only the latest record per key is kept "
                 "(tombstones for delete.retention.ms); both: compacted and retention applies."),
    TopicKey(name="delete.retention.ms", type=_L, default="86400000", minimum=0,
             doc="How long a compacted topic keeps a tombstone after the clean that kept it."),
    TopicKey(name="min.cleanable.dirty.ratio", type=ConfigType.DOUBLE, default="0.5", check=check_ratio,
             valid="0.0..1.0", doc="Clean once this share of the cleanable bytes is dirty."),
    TopicKey(name="min.compaction.lag.ms", type=_L, default="0", minimum=0,
             doc="A record stays uncompacted for at least this long."),
    TopicKey(name="compression.type", type=_STR, default="producer", choices=COMPRESSION_TYPES,
             doc="producer: batches are stored exactly as the producer compressed them (the fast path). A codec "
                 "(uncompressed, gzip, snappy, lz4, zstd): a batch produced with another codec is recompressed "
                 "with this one before it is stored, as Kafka does (a slower path, per batch)."),
    TopicKey(name="file.delete.delay.ms", type=_L, default="60000", minimum=0,
             doc="Delay before a deleted segment's files are unlinked."),
    TopicKey(name="flush.messages", type=_L, default=str(LONG_MAX), minimum=1,
             doc="fsync after this many records; 1 fsyncs every append."),
    TopicKey(name="flush.ms", type=_L, default=str(LONG_MAX), minimum=0,
             doc="fsync when the oldest unflushed write is this old."),
    TopicKey(name="index.interval.bytes", type=_I, default="4096", minimum=0,
             doc="Log bytes between two offset index entries."),
    TopicKey(name="max.message.bytes", type=_I, default="1048588", minimum=0,
             doc="Largest record batch accepted (MESSAGE_TOO_LARGE above it)."),
    TopicKey(name="message.timestamp.after.max.ms", type=_L, default=str(LONG_MAX), minimum=0,
             older_names=(_TS_DIFF,),
             doc="CreateTime batches further in the future are rejected with INVALID_TIMESTAMP."),
    TopicKey(name="message.timestamp.before.max.ms", type=_L, default=str(LONG_MAX), minimum=0,
             older_names=(_TS_DIFF,),
             doc="CreateTime batches further in the past are rejected with INVALID_TIMESTAMP."),
    TopicKey(name=_TS_DIFF, type=_L, default=str(LONG_MAX), minimum=0,
             doc="Older name for both bounds, used where the before/after key is not set."),
    TopicKey(name="message.timestamp.type", type=_STR, default="CreateTime", choices=("CreateTime", "LogAppendTime"),
             doc="CreateTime keeps the producer's timestamps; LogAppendTime stamps the append time."),
    TopicKey(name="min.insync.replicas", type=_I, default="1", minimum=1,
             doc="acks=all produce needs at least this many in-sync replicas."),
    TopicKey(name="retention.bytes", type=_L, default="-1", minimum=-1,
             doc="Per-partition size limit; -1: none."),
    TopicKey(name="retention.ms", type=_L, default=_WEEK_MS, minimum=-1,
             doc="Delete segments older than this; -1 keeps forever."),
    TopicKey(name="segment.bytes", type=_I, default="1073741824", minimum=14, maximum=INT_MAX,
             doc="Roll to a new segment before the active one passes this size."),
    TopicKey(name="segment.index.bytes", type=_I, default="10485760", minimum=12,
             doc="Largest index file; a full index rolls the segment."),
    TopicKey(name="segment.ms", type=_L, default=_WEEK_MS, minimum=1,
             doc="Roll a segment whose first batch is this old."),
    TopicKey(name="unclean.leader.election.enable", type=_B, default="false",
             doc="Allow an out-of-sync replica to become leader (loses committed data)."),
    # Kafka keys strait accepts for compatibility (tools and clients set them) and ignores.
    TopicKey(name="message.format.version", type=_STR, default="3.0-IV1", check=check_kafka_version,
             valid="a Kafka version such as `2.8` or `3.0-IV1`", effect=False,
             doc="Ignored, as by Kafka 3.x with inter.broker.protocol.version 3.0 or later: batches are magic 2."),
    TopicKey(name="message.downconversion.enable", type=_B, default="true", effect=False,
             doc="Ignored: strait never down-converts (it serves magic 2 batches only)."),
    TopicKey(name="preallocate", type=_B, default="false", effect=False,
             doc="Ignored: segment files grow as they are written."),
    TopicKey(name="segment.jitter.ms", type=_L, default="0", minimum=0, effect=False,
             doc="Ignored: segments roll at segment.ms without jitter."),
    TopicKey(name="leader.replication.throttled.replicas", type=_LIST, default="", check=check_throttled_replicas,
             valid="`*`, or a list of `partition:broker`", effect=False,
             doc="Ignored (set by reassignment tools): strait does not throttle replication."),
    TopicKey(name="follower.replication.throttled.replicas", type=_LIST, default="", check=check_throttled_replicas,
             valid="`*`, or a list of `partition:broker`", effect=False,
             doc="Ignored (set by reassignment tools): strait does not throttle replication."),
    TopicKey(name="remote.storage.enable", type=_B, default="false", check=check_no_tiered_storage, effect=False,
             valid="false", doc="Tiered storage is not supported: only false is accepted."),
    TopicKey(name="local.retention.ms", type=_L, default="-2", minimum=-2, effect=False,
             doc="Ignored: without tiered storage the local log is the whole log (retention.ms applies)."),
    TopicKey(name="local.retention.bytes", type=_L, default="-2", minimum=-2, effect=False,
             doc="Ignored: without tiered storage the local log is the whole log (retention.bytes applies)."),
    TopicKey(name=MIRROR_LINK, type=_STR, default="", check=check_link_name,
             valid="unset, or 1-249 characters of `[A-Za-z0-9._-]`",
             doc="strait only. Set: the topic is a read-only mirror owned by this link (clients get "
                 "POLICY_VIOLATION on Produce and DeleteRecords; only the link's MirrorAppend writes). "
                 "Unset (the default): a normal topic. Removing it makes a mirror writable (failover)."),
    TopicKey(name=FENCED, type=_STR, default="", check=check_fence_text,
             valid="unset, or 1-1024 characters without control characters",
             doc="strait only. Set: the topic is fenced (DR failover: the site is no longer the primary): every "
                 "Produce to it fails with POLICY_VIOLATION and the message `topic 'T' is fenced: <value>`, so "
                 "say where to produce instead. Reads, commits, MirrorAppend, DeleteRecords and config changes "
                 "still work. Removing it un-fences the topic."),
)  # fmt: skip

TOPIC_KEY_INDEX: Mapping[str, TopicKey] = {k.name: k for k in TOPIC_KEYS}
LIST_KEYS: tuple[str, ...] = tuple(k.name for k in TOPIC_KEYS if k.type == ConfigType.LIST)

# Kafka topic keys strait does not support (named as such instead of "unknown").
KAFKA_ONLY_TOPIC_KEYS = frozenset(
    {
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "max.compaction.lag.ms",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
    }
)

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}


def _topic_key(name: str, value: str | None) -> TopicKey:
    key = TOPIC_KEY_INDEX.get(name)
    if key is not None:
        return key
    if name in KAFKA_ONLY_TOPIC_KEYS:
        raise ConfigError("is a Kafka topic config that strait does not support", key=name, value=value)
    close = difflib.get_close_matches(name, TOPIC_KEY_INDEX.keys(), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(f"unknown topic config{hint}", key=name, value=value)


def validate_topic_config(config: Mapping[str, str]) -> dict[str, str]:
    """Check topic overrides and return them in canonical form (trimmed, ``true``/``false``, ``a,b``).

    Raises ConfigError naming the key (and value) for an unknown or unsupported key, a value
    of the wrong type, out of range, or not among the valid values.
    """
    out: dict[str, str] = {}
    for name, raw in config.items():
        key = _topic_key(name, raw)
        try:
            out[name] = key.normalise(raw)
        except ValueError as exc:
            raise ConfigError(str(exc), key=name, value=raw) from None
    return out


def resolve_topic_key(node: NodeConfig, overrides: Mapping[str, str], key: TopicKey) -> tuple[str, list[Synonym]]:
    """(effective value, synonyms in precedence order) of ``key``; ``overrides`` already canonical."""
    synonyms: list[Synonym] = [
        (n, overrides[n], ConfigSource.DYNAMIC_TOPIC_CONFIG) for n in key.names if n in overrides
    ]
    chain = key.broker_keys
    synonyms += [
        (b.name, node.explicit_values[b.name], ConfigSource.STATIC_BROKER_CONFIG)
        for b in chain
        if b.name in node.explicit_values
    ]
    synonyms += [(b.name, b.default, ConfigSource.DEFAULT_CONFIG) for b in chain if b.default is not None]
    if not synonyms:
        return key.default, []
    name, text, source = synonyms[0]
    assert text is not None
    broker_key = BROKER_KEY_INDEX.get(name) if source != ConfigSource.DYNAMIC_TOPIC_CONFIG else None
    if broker_key is not None and broker_key.scale != 1 and int(text) != -1:
        text = str(int(text) * broker_key.scale)
    return text, synonyms


def _effective(node: NodeConfig, overrides: Mapping[str, str], names: Iterable[str]) -> dict[str, str]:
    checked = validate_topic_config(overrides)
    return {name: resolve_topic_key(node, checked, TOPIC_KEY_INDEX[name])[0] for name in names}


def effective_log_config(node: NodeConfig, overrides: Mapping[str, str]) -> LogConfig:
    """The storage settings of a topic: its overrides over the broker defaults.

    Equals ``node.log_config()`` when there are no overrides. Raises ConfigError for invalid overrides.
    """
    storage_keys = LogConfig().to_topic_configs().keys()
    values = _effective(node, overrides, storage_keys)
    try:
        return LogConfig().with_overrides(values)
    except ValueError as exc:  # a bound storage checks and this table does not: still name it
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True)
class TopicPolicy:
    """The per-topic settings the broker enforces outside storage."""

    min_insync_replicas: int
    unclean_leader_election: bool
    timestamp_before_max_ms: int
    timestamp_after_max_ms: int
    mirror_link: str | None = None  # strait.mirror.link: the link owning this read-only mirror topic
    fence: str | None = None  # strait.fenced: why clients may not produce here, and where to instead
    compression: str = "producer"  # compression.type: producer, or the codec every stored batch has

    @property
    def client_writable(self) -> bool:
        """Whether clients may produce: neither a mirror nor fenced."""
        return self.mirror_link is None and self.fence is None


def effective_policy(node: NodeConfig, overrides: Mapping[str, str]) -> TopicPolicy:
    """The broker-enforced settings of a topic; raises ConfigError for invalid overrides."""
    v = _effective(
        node,
        overrides,
        (
            "min.insync.replicas",
            "unclean.leader.election.enable",
            "message.timestamp.before.max.ms",
            "message.timestamp.after.max.ms",
            MIRROR_LINK,
            FENCED,
            "compression.type",
        ),
    )
    return TopicPolicy(
        min_insync_replicas=int(v["min.insync.replicas"]),
        unclean_leader_election=v["unclean.leader.election.enable"] == "true",
        timestamp_before_max_ms=int(v["message.timestamp.before.max.ms"]),
        timestamp_after_max_ms=int(v["message.timestamp.after.max.ms"]),
        mirror_link=v[MIRROR_LINK] or None,
        fence=v[FENCED] or None,
        compression=v["compression.type"],
    )


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def apply_incremental(current: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]]) -> dict[str, str]:
    """Apply IncrementalAlterConfigs operations ``(name, op, value)`` to a topic's overrides.

    Ops: 0 SET (value required), 1 DELETE (back to the broker default), 2 APPEND and 3 SUBTRACT
    (list keys only: see :data:`LIST_KEYS`; comma-separated items; both start from the current
    override, else Kafka's default, and APPEND skips items already present). The result is
    validated and returned in canonical form; ``current`` is not modified.

    Raises ConfigError naming the key for an unknown key, an unknown op, a key given twice,
    APPEND/SUBTRACT on a non-list key, a missing value, or a resulting value that is not valid.
    """
    result = dict(current)
    seen: set[str] = set()
    for name, op, value in ops:
        key = _topic_key(name, value)
        if name in seen:
            raise ConfigError("appears twice in one request", key=name, value=value)
        seen.add(name)
        if op not in _OP_NAMES:
            raise ConfigError(f"unknown operation {op} (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)", key=name, value=value)
        if op == OP_DELETE:
            result.pop(name, None)
            continue
        if value is None:
            raise ConfigError(f"{_OP_NAMES[op]} needs a value", key=name)
        if op == OP_SET:
            result[name] = value
            continue
        if key.type != ConfigType.LIST:
            raise ConfigError(
                f"{_OP_NAMES[op]} only applies to list configs ({', '.join(LIST_KEYS)})", key=name, value=value
            )
        items = _items(result.get(name, key.default))
        if op == OP_APPEND:
            items += [item for item in _items(value) if item not in items]
        else:
            items = [item for item in items if item not in _items(value)]
        result[name] = ",".join(items)
    return validate_topic_config(result)
