"""The options of ``strait-kafka``, parsed and checked once, in the driver, before anything connects.

Names and formats are Spark's Kafka source's (``subscribe``, ``startingOffsets`` as
``{"orders":{"0":23,"1":-2}}``, ...), so a query written for it needs only its ``format``
changed; the table is in :mod:`spark_jobs.sources.kafka`. Spark hands a data source its options
with lower-cased keys; messages use the documented spelling.

Every bad value is an :class:`OptionError` (a ValueError) naming the option and the value. An
option this source does not know is an error too: a misspelt ``startingOffset`` silently read
from the latest offset is the worst kind of mistake in an audit.

The security options are Spark's too (``kafka.security.protocol``, ``kafka.ssl.*``,
``kafka.sasl.*``: the Java client's keys), read by ``node.client``'s one reader of them into a
:class:`~node.client.ClientSecurity`, plain values that the executors build their TLS context
and SASL credentials from. They are checked here, on the driver, files included; an ``ssl.*`` or
``sasl.*`` option that ``kafka.security.protocol`` would ignore is an error (a forgotten
protocol must not read over PLAINTEXT unnoticed). A password is never in a message or a repr.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from node.client import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    SECURITY_KEYS,
    ClientSecurity,
    SecurityConfigError,
    parse_client_security,
)

#: Offsets in the JSON forms, as in Spark: -2 the log start, -1 the end (high watermark).
EARLIEST, LATEST = -2, -1

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]

# Every option a reader or the writer takes, in its documented spelling (keys arrive lower-cased).
_SPELLING = {
    name.lower(): name
    for name in (
        "kafka.bootstrap.servers",
        "bootstrap.servers",
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "endingTimestamp",
        "startingOffsetsByTimestamp",
        "endingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy",
        "failOnDataLoss",
        "minPartitions",
        "maxRecordsPerPartition",
        "maxOffsetsPerTrigger",
        "includeControl",
        "includeHeaders",
        "kafka.isolation.level",
        "kafka.fetch.max.bytes",
        "kafka.request.timeout.ms",
        "kafkaConsumer.pollTimeoutMs",
        "fetchOffset.numRetries",
        "fetchOffset.retryIntervalMs",
        "groupIdPrefix",
        "kafka.group.id",
        "rows",
        "topic",
        *(f"kafka.{key}" for key in SECURITY_KEYS),
    )
}
_BATCH_ONLY = ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp")
# Spark's Kafka source options that mean nothing here (no consumer group is used): accepted so that
# an existing query runs unchanged; headers are always read.
_NO_EFFECT = ("groupidprefix", "kafka.group.id", "includeheaders")
_READ = frozenset(_SPELLING) - {"topic"}
_SECURITY = frozenset(f"kafka.{key}" for key in SECURITY_KEYS)
_WRITE = frozenset({"kafka.bootstrap.servers", "bootstrap.servers", "topic", "kafka.request.timeout.ms"}) | _SECURITY
# Producer settings the writer fixes: idempotence and acks=all are what make it safe, and Spark's
# sink refuses serializers the same way (the rows are bytes already).
_WRITER_FIXED = ("enable.idempotence", "acks", "key.serializer", "value.serializer", "transactional.id")
# librdkafka's own security settings: the writer takes Spark's names, as the reader does, and
# sets these itself from them (two spellings of one setting could disagree).
_WRITER_SECURITY = (
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.keystore.password",
    "sasl.username",
    "sasl.password",
)

DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
DEFAULT_FETCH_MAX_BYTES = 4 * 1024 * 1024
DEFAULT_REQUEST_TIMEOUT_MS = 30_000
DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's default (spark.network.timeout)
DEFAULT_OFFSET_RETRIES = 3
DEFAULT_OFFSET_RETRY_INTERVAL_MS = 1_000  # Spark: 10 ms, between consumer polls; here each try is one request


class OptionError(ValueError):
    """An option's value is wrong; the message names the option and the value."""


def spelled(key: str) -> str:
    return _SPELLING.get(key.lower(), key)


@dataclass(frozen=True, slots=True)
class Subscription:
    """Which topics a read covers: ``subscribe`` (names), ``subscribePattern`` (a regular
    expression every name must match whole) or ``assign`` (topic -> partitions)."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def describe(self) -> str:
        if self.kind == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.kind == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return "assign=" + json.dumps({t: list(ps) for t, ps in self.assigned}, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a read starts or ends, and which option said so (for messages).

    ``kind``: ``earliest``, ``latest``, ``offsets`` (``per_partition`` holds offsets, -2 and -1
    allowed), ``timestamps`` (``per_partition`` holds times in ms) or ``timestamp`` (one time for
    every partition).
    """

    option: str
    kind: Literal["earliest", "latest", "offsets", "timestamps", "timestamp"]
    per_partition: tuple[tuple[TopicPartition, int], ...] = ()
    timestamp: int = -1

    @property
    def mapping(self) -> Offsets:
        return dict(self.per_partition)


@dataclass(frozen=True, slots=True)
class ReadOptions:
    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    starting_by_timestamp_strategy: Literal["error", "latest"] = "error"
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int = DEFAULT_MAX_RECORDS_PER_PARTITION
    max_offsets_per_trigger: int | None = None
    include_control: bool = False
    isolation_level: int = READ_UNCOMMITTED
    fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_MS / 1000
    poll_timeout_s: float = DEFAULT_POLL_TIMEOUT_MS / 1000
    offset_retries: int = DEFAULT_OFFSET_RETRIES
    offset_retry_interval_s: float = DEFAULT_OFFSET_RETRY_INTERVAL_MS / 1000
    rows: Literal["records", "batches"] = "records"
    security: ClientSecurity = field(default_factory=ClientSecurity)  # PLAINTEXT


@dataclass(frozen=True, slots=True)
class WriteOptions:
    bootstrap: str
    topic: str | None
    request_timeout_s: float
    producer: dict[str, str] = field(default_factory=dict)  # kafka.* settings passed to the producer
    security: ClientSecurity = field(default_factory=ClientSecurity)  # PLAINTEXT


# -- parsing -------------------------------------------------------------------------------------


def read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """The options of a batch (``streaming`` False) or streaming read. Raises OptionError."""
    opts = {k.lower(): str(v) for k, v in options.items()}
    unknown = sorted(k for k in opts if k not in _READ)
    if unknown:
        raise OptionError(_unknown_message(unknown, _READ, "read"))
    if streaming:
        for key in _BATCH_ONLY:
            if key in opts:
                raise OptionError(f"{spelled(key)}={opts[key]}: an ending offset is not valid in a streaming query")
    bootstrap = _bootstrap(opts)
    subscription = _subscription(opts)
    starting = _offset_spec(opts, "starting", default="latest" if streaming else "earliest")
    ending = _offset_spec(opts, "ending", default="latest")
    if not streaming:
        if starting.kind == "latest" or any(
            o == LATEST for _, o in starting.per_partition if starting.kind == "offsets"
        ):
            raise OptionError(
                f"{starting.option}={opts.get('startingoffsets')}: 'latest' (-1) is for streaming queries; "
                "a batch query starting at the end would read nothing"
            )
        if ending.kind == "earliest" or any(o == EARLIEST for _, o in ending.per_partition if ending.kind == "offsets"):
            raise OptionError(f"{ending.option}={opts.get('endingoffsets')}: 'earliest' (-2) cannot end a batch query")
    _check_names_match(subscription, starting)
    _check_names_match(subscription, ending)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"startingOffsetsByTimestampStrategy={strategy}: expected 'error' or 'latest'")
    rows = rows_of(opts)
    if streaming and rows == "batches":
        raise OptionError("rows=batches: only in a batch query (a streaming query reads records)")
    isolation = opts.get("kafka.isolation.level", "read_uncommitted").lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"kafka.isolation.level={isolation}: expected read_uncommitted or read_committed")
    return ReadOptions(
        bootstrap=bootstrap,
        subscription=subscription,
        starting=starting,
        ending=ending,
        starting_by_timestamp_strategy="latest" if strategy == "latest" else "error",
        fail_on_data_loss=_boolean(opts, "failondataloss", True),
        min_partitions=_optional_positive(opts, "minpartitions"),
        max_records_per_partition=_positive(opts, "maxrecordsperpartition", DEFAULT_MAX_RECORDS_PER_PARTITION),
        max_offsets_per_trigger=_optional_positive(opts, "maxoffsetspertrigger"),
        include_control=_boolean(opts, "includecontrol", False),
        isolation_level=READ_COMMITTED if isolation == "read_committed" else READ_UNCOMMITTED,
        fetch_max_bytes=_positive(opts, "kafka.fetch.max.bytes", DEFAULT_FETCH_MAX_BYTES),
        request_timeout_s=_positive(opts, "kafka.request.timeout.ms", DEFAULT_REQUEST_TIMEOUT_MS) / 1000,
        poll_timeout_s=_positive(opts, "kafkaconsumer.polltimeoutms", DEFAULT_POLL_TIMEOUT_MS) / 1000,
        offset_retries=_non_negative(opts, "fetchoffset.numretries", DEFAULT_OFFSET_RETRIES),
        offset_retry_interval_s=_non_negative(opts, "fetchoffset.retryintervalms", DEFAULT_OFFSET_RETRY_INTERVAL_MS)
        / 1000,
        rows=rows,
        security=security_of(opts),
    )


def rows_of(options: Mapping[str, str]) -> Literal["records", "batches"]:
    """The ``rows`` option: ``records`` (default) or ``batches``. Raises OptionError."""
    value = next((str(v) for k, v in options.items() if k.lower() == "rows"), "records").strip().lower()
    if value not in ("records", "batches"):
        raise OptionError(f"rows={value}: expected 'records' (one row per record) or 'batches' (one per batch)")
    return "batches" if value == "batches" else "records"


def write_options(options: Mapping[str, str]) -> WriteOptions:
    """The writer's options: the site, ``topic``, and ``kafka.*`` settings for the producer
    (librdkafka's names, which are the Java client's for the common ones). Raises OptionError."""
    opts = {k.lower(): str(v) for k, v in options.items()}
    producer: dict[str, str] = {}
    unknown = []
    for key, value in opts.items():
        if key in _WRITE:
            continue
        if key.startswith("kafka."):
            name = key[len("kafka.") :]
            if name in _WRITER_SECURITY:  # the value is not shown: it may be a password
                raise OptionError(
                    f"{key}: the writer takes security options as the reader does, in Spark's names "
                    "(kafka.security.protocol, kafka.ssl.truststore.location, kafka.ssl.keystore.location, "
                    "kafka.sasl.mechanism, kafka.sasl.jaas.config), and sets its producer's from them"
                )
            if name in _WRITER_FIXED:
                raise OptionError(
                    f"{key}={value}: the writer always produces idempotently with acks=all and bytes as they are; "
                    f"{name} cannot be set"
                )
            producer[name] = value
        else:
            unknown.append(key)
    if unknown:
        raise OptionError(_unknown_message(sorted(unknown), _WRITE | {"kafka.*"}, "write"))
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("topic='': expected a topic name")
    return WriteOptions(
        bootstrap=_bootstrap(opts),
        topic=topic.strip() if topic else None,
        request_timeout_s=_positive(opts, "kafka.request.timeout.ms", DEFAULT_REQUEST_TIMEOUT_MS) / 1000,
        producer=producer,
        security=security_of(opts),
    )


def security_of(options: Mapping[str, str]) -> ClientSecurity:
    """The security options (``kafka.security.protocol``, ``kafka.ssl.*``, ``kafka.sasl.*``),
    checked on the driver: their values, and that the TLS files load here. Raises OptionError
    naming the option, never a password."""
    opts = {k.lower(): str(v) for k, v in options.items()}
    try:
        security = parse_client_security(opts, prefix="kafka.")
        ignored = [
            key
            for key in sorted(_SECURITY & set(opts))
            if (key.startswith("kafka.ssl.") and not security.uses_tls)
            or (key.startswith("kafka.sasl.") and not security.uses_sasl)
        ]
        if ignored:
            raise OptionError(
                f"{', '.join(ignored)}: set, but kafka.security.protocol is {security.protocol}, which would ignore "
                f"{'it' if len(ignored) == 1 else 'them'}; set kafka.security.protocol (SSL, SASL_PLAINTEXT, SASL_SSL)"
            )
        security.site_client_kwargs()  # the files load (the executors load them again, from the same paths)
    except SecurityConfigError as exc:
        raise OptionError(str(exc)) from None
    return security


def _unknown_message(unknown: list[str], known: frozenset[str], what: str) -> str:
    names = ", ".join(spelled(k) for k in unknown)
    listed = ", ".join(sorted(spelled(k) for k in known if k not in _NO_EFFECT))
    return f"strait-kafka does not know the {what} option(s) {names}; it knows {listed}"


def _bootstrap(opts: dict[str, str]) -> str:
    value = opts.get("kafka.bootstrap.servers", opts.get("bootstrap.servers"))
    if value is None:
        raise OptionError("kafka.bootstrap.servers is required (host:port,host:port of the site)")
    addresses = [a.strip() for a in value.split(",") if a.strip()]
    for address in addresses:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise OptionError(f"kafka.bootstrap.servers={value}: {address!r} is not host:port")
    if not addresses:
        raise OptionError(f"kafka.bootstrap.servers={value!r}: no address")
    return ",".join(addresses)


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [k for k in ("assign", "subscribe", "subscribepattern") if k in opts]
    if len(given) != 1:
        which = ", ".join(spelled(k) for k in given) if given else "none"
        raise OptionError(f"exactly one of assign, subscribe, subscribePattern must be set (got {which})")
    (key,) = given
    value = opts[key]
    if key == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise OptionError(f"subscribe={value!r}: no topic name")
        return Subscription("subscribe", topics=topics)
    if key == "subscribepattern":
        if not value.strip():
            raise OptionError("subscribePattern='': an empty pattern")
        try:
            re.compile(value)
        except re.error as exc:
            raise OptionError(f"subscribePattern={value}: not a regular expression ({exc})") from None
        return Subscription("subscribePattern", pattern=value)
    parsed = _json(value, "assign")
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(f'assign={value}: expected a JSON object of topic to partitions, e.g. {{"orders":[0,1]}}')
    assigned = []
    for topic, parts in parsed.items():
        if not isinstance(parts, list) or not all(_is_int(p) and p >= 0 for p in parts) or not parts:
            raise OptionError(f"assign={value}: topic {topic!r} needs a non-empty list of partition numbers")
        assigned.append((topic, tuple(sorted(set(parts)))))
    return Subscription("assign", assigned=tuple(assigned))


def _offset_spec(opts: dict[str, str], side: Literal["starting", "ending"], *, default: str) -> OffsetSpec:
    """Precedence as in Spark: ``<side>Timestamp``, then ``<side>OffsetsByTimestamp``, then ``<side>Offsets``."""
    name = f"{side}Timestamp"
    if name.lower() in opts:
        raw = opts[name.lower()]
        if not _is_int_text(raw) or int(raw) < 0:
            raise OptionError(f"{name}={raw}: expected a time in milliseconds since the epoch (>= 0)")
        return OffsetSpec(name, "timestamp", timestamp=int(raw))
    name = f"{side}OffsetsByTimestamp"
    if name.lower() in opts:
        per = _per_partition(opts[name.lower()], name, minimum=0, what="a time in ms (>= 0)")
        return OffsetSpec(name, "timestamps", per_partition=per)
    name = f"{side}Offsets"
    raw = opts.get(name.lower(), default)
    word = raw.strip().lower()
    if word in ("earliest", "latest"):
        return OffsetSpec(name, "earliest" if word == "earliest" else "latest")
    if not raw.strip().startswith("{"):
        raise OptionError(f'{name}={raw}: expected earliest, latest or JSON such as {{"orders":{{"0":23,"1":-2}}}}')
    per = _per_partition(raw, name, minimum=EARLIEST, what="an offset (>= 0, or -2 earliest, -1 latest)")
    return OffsetSpec(name, "offsets", per_partition=per)


def _per_partition(raw: str, option: str, *, minimum: int, what: str) -> tuple[tuple[TopicPartition, int], ...]:
    parsed = _json(raw, option)
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(f'{option}={raw}: expected a JSON object such as {{"orders":{{"0":23,"1":-2}}}}')
    out: list[tuple[TopicPartition, int]] = []
    for topic, parts in parsed.items():
        if not isinstance(parts, dict) or not parts:
            raise OptionError(f"{option}={raw}: topic {topic!r} needs an object of partition to {what}")
        for p, value in parts.items():
            if not _is_int_text(p) or int(p) < 0:
                raise OptionError(f"{option}={raw}: {topic!r} partition {p!r} is not a partition number")
            if not _is_int(value) or value < minimum:
                raise OptionError(f"{option}={raw}: {topic}-{p} has {value!r}, expected {what}")
            out.append(((topic, int(p)), int(value)))
    return tuple(sorted(out))


def _check_names_match(subscription: Subscription, spec: OffsetSpec) -> None:
    """Per-partition offsets must name only topics the read covers (the partitions are checked
    against the site when the read is planned)."""
    if spec.kind not in ("offsets", "timestamps"):
        return
    topics = {tp[0] for tp, _ in spec.per_partition}
    if subscription.kind == "subscribe":
        outside = sorted(topics - set(subscription.topics))
    elif subscription.kind == "assign":
        outside = sorted(topics - {t for t, _ in subscription.assigned})
    else:
        outside = sorted(t for t in topics if re.fullmatch(subscription.pattern, t) is None)
    if outside:
        raise OptionError(
            f"{spec.option} names topic(s) {', '.join(outside)}, which {subscription.describe()} does not read"
        )


def _json(raw: str, option: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(f"{option}={raw}: not valid JSON ({exc})") from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_int_text(text: str) -> bool:
    return re.fullmatch(r"-?\d+", text.strip()) is not None


def _boolean(opts: dict[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    if raw.strip().lower() not in ("true", "false"):
        raise OptionError(f"{spelled(key)}={raw}: expected true or false")
    return raw.strip().lower() == "true"


def _optional_positive(opts: dict[str, str], key: str) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    if not _is_int_text(raw) or int(raw) <= 0:
        raise OptionError(f"{spelled(key)}={raw}: expected a positive whole number")
    return int(raw)


def _positive(opts: dict[str, str], key: str, default: int) -> int:
    found = _optional_positive(opts, key)
    return default if found is None else found


def _non_negative(opts: dict[str, str], key: str, default: int) -> int:
    raw = opts.get(key)
    if raw is None:
        return default
    if not _is_int_text(raw) or int(raw) < 0:
        raise OptionError(f"{spelled(key)}={raw}: expected a whole number >= 0")
    return int(raw)


def security_options(security: ClientSecurity) -> dict[str, str]:
    """The options that stand for ``security`` (none for PLAINTEXT): what :func:`security_of` reads
    back. A job's driver, which has the settings from a ``--command-config`` file or a topology,
    hands them to the source with these."""
    if security.protocol == "PLAINTEXT":
        return {}
    return {f"kafka.{key}": value for key, value in security.properties().items()}
