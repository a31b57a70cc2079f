"""The node's static configuration: ``server.properties`` with Kafka's key names and defaults.

One table, :data:`BROKER_KEYS`, declares every key (name, type, default, valid values, doc,
the topic-level key it is the default for). Parsing, validation, ``DescribeConfigs`` for a
broker and the reference in ``docs/configuration.md`` are all derived from it.

Flow: :func:`load_config` reads a file, :func:`parse_properties` turns Java ``.properties``
text into a dict, :meth:`NodeConfig.from_properties` validates it against the table and
builds one typed, frozen :class:`NodeConfig` (field names carry their units).

Every error is a :class:`ConfigError` naming the file, the key and the bad value.
"""

from __future__ import annotations

import difflib
import enum
import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from storage import LogConfig

__all__ = [
    "BROKER_KEYS",
    "BROKER_KEY_INDEX",
    "LONG_MAX",
    "NO_EFFECT_KEYS",
    "ConfigError",
    "ConfigKey",
    "ConfigType",
    "Listener",
    "NodeConfig",
    "ValueSpec",
    "broker_synonyms",
    "load_config",
    "parse_listeners",
    "parse_properties",
    "render_broker_reference",
]

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
SHORT_MAX = 2**15 - 1
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS

Value = int | bool | str | tuple[str, ...]


class ConfigError(ValueError):
    """A configuration key or value strait cannot accept.

    ``key``, ``value`` (the raw text) and ``source`` (file or origin) are kept as attributes
    and named in the message: ``server.properties: num.partitions='x': not an integer``.
    """

    def __init__(self, reason: str, *, key: str | None = None, value: str | None = None, source: str | None = None):
        self.reason, self.key, self.value, self.source = reason, key, value, source
        where = f"{source}: " if source else ""
        if key is not None and value is not None:
            what = f"{key}={value!r}: "
        elif key is not None:
            what = f"{key}: "
        else:
            what = ""
        super().__init__(f"{where}{what}{reason}")


# -- Java .properties ----------------------------------------------------------------------------

_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, *, source: str = "<string>") -> dict[str, str]:
    """Parse Java ``.properties`` text (``java.util.Properties.load`` rules) into a dict.

    Handles ``#``/``!`` comment lines, ``key=value``, ``key: value`` and ``key value``,
    backslash line continuations (leading blanks of the next line dropped), ``\\uXXXX`` and
    ``\\t \\n \\r \\f`` escapes (any other escaped character stands for itself) and blanks
    around the separator. Values keep trailing blanks, as in Java.

    Raises ConfigError naming ``source`` and the line for a malformed ``\\u`` escape, and naming
    both line numbers for a key given twice (Java would silently keep the last).
    """
    result: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for lineno, logical in _logical_lines(text):
        key_end, value_start = _split_key(logical)
        key = _unescape(logical[:key_end], lineno, source)
        value = _unescape(logical[value_start:], lineno, source)
        if key in first_line:
            raise ConfigError(f"duplicate key on lines {first_line[key]} and {lineno}", key=key, source=source)
        first_line[key] = lineno
        result[key] = value
    return result


def _logical_lines(text: str) -> list[tuple[int, str]]:
    natural = re.split(r"\r\n|\r|\n", text)
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(natural):
        start = i
        line = natural[i].lstrip(_BLANKS)
        i += 1
        if not line or line[0] in "#!":
            continue  # blank or comment: a trailing backslash does not continue a comment
        while _continues(line):
            line = line[:-1]
            if i == len(natural):
                break  # a continuation at end of input is dropped, as Java does
            line += natural[i].lstrip(_BLANKS)
            i += 1
        out.append((start + 1, line))
    return out


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key(line: str) -> tuple[int, int]:
    """(end of the key, start of the value), honouring escaped separators in the key."""
    escaped = False
    key_end = len(line)
    has_separator = False
    for pos, char in enumerate(line):
        if not escaped and char in "=:":
            key_end, has_separator = pos, True
            break
        if not escaped and char in _BLANKS:
            key_end = pos
            break
        escaped = char == "\\" and not escaped
    value_start = key_end + 1 if key_end < len(line) else key_end
    while value_start < len(line):
        char = line[value_start]
        if char in _BLANKS:
            value_start += 1
        elif not has_separator and char in "=:":
            has_separator = True
            value_start += 1
        else:
            break
    return key_end, value_start


def _unescape(raw: str, lineno: int, source: str) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    pos = 0
    while pos < len(raw):
        char = raw[pos]
        pos += 1
        if char != "\\" or pos == len(raw):
            if char != "\\":
                out.append(char)
            continue
        char = raw[pos]
        pos += 1
        if char == "u":
            digits = raw[pos : pos + 4]
            if not re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
                raise ConfigError(f"line {lineno}: malformed \\uXXXX escape '\\u{digits}'", source=source)
            out.append(chr(int(digits, 16)))
            pos += 4
        else:
            out.append(_ESCAPES.get(char, char))
    text = "".join(out)
    try:  # two \u escapes may form a UTF-16 surrogate pair: join them into one character
        return text.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        raise ConfigError(f"line {lineno}: unpaired UTF-16 surrogate in a \\u escape", source=source) from None


# -- listeners -----------------------------------------------------------------------------------

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
WILDCARD_HOSTS = ("", "0.0.0.0", "::")
_HOSTNAME = re.compile(r"[A-Za-z0-9_.-]+", re.ASCII)


@dataclass(frozen=True)
class Listener:
    """One ``NAME://host:port`` endpoint. ``host`` is kept without IPv6 brackets."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"

    @property
    def is_wildcard(self) -> bool:
        """True when the host means "every interface" (empty, ``0.0.0.0`` or ``::``)."""
        return self.host in WILDCARD_HOSTS


def parse_listeners(value: str, key: str) -> tuple[Listener, ...]:
    """Parse a comma list of ``NAME://host:port`` for ``key`` (``listeners`` or ``advertised.listeners``).

    Only the PLAINTEXT security protocol is supported, so the listener name must be PLAINTEXT
    (strait has no ``listener.security.protocol.map``). ``listeners`` may use port 0 (bind any
    free port) and an unspecified host (empty, ``0.0.0.0``, ``::``); ``advertised.listeners`` may
    not, since clients connect to what it says. Names must be unique.

    Raises ConfigError naming the key, the whole value and the offending listener.
    """
    try:
        return _parse_listeners(value, advertised=key == "advertised.listeners")
    except ValueError as exc:
        raise ConfigError(str(exc), key=key, value=value) from None


def _parse_listeners(value: str, *, advertised: bool) -> tuple[Listener, ...]:
    listeners: list[Listener] = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        scheme, sep, address = item.partition("://")
        if not sep:
            raise ValueError(f"listener {item!r} is not NAME://host:port")
        name = scheme.strip().upper()
        if name in SECURITY_PROTOCOLS[1:]:
            raise ValueError(f"listener {item!r}: security protocol {name} is not supported yet (only PLAINTEXT)")
        if name != "PLAINTEXT":
            raise ValueError(
                f"listener {item!r}: listener name {name!r} would need listener.security.protocol.map, "
                "which strait does not support; name it PLAINTEXT"
            )
        host, port = _parse_host_port(address, what=f"listener {item!r}")
        if advertised and host in WILDCARD_HOSTS:
            raise ValueError(f"listener {item!r}: clients cannot connect to {host or 'an empty host'}; name a host")
        if advertised and port == 0:
            raise ValueError(f"listener {item!r}: port 0 cannot be advertised; give the real port")
        if any(existing.name == name for existing in listeners):
            raise ValueError(f"listener {item!r}: listener name {name} is used twice")
        listeners.append(Listener(name, host, port))
    if not listeners:
        raise ValueError("no listener given")
    return tuple(listeners)


def _parse_host_port(address: str, *, what: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` -> (host without brackets, port); ValueError naming ``what``."""
    match = re.fullmatch(r"\[([^\]]*)\]:([^:]*)|([^:\[\]]*):([^:]*)", address.strip())
    if match is None:
        raise ValueError(f"{what}: {address!r} is not host:port (write IPv6 hosts as [addr]:port)")
    bracketed = match.group(1) is not None
    host = match.group(1) if bracketed else match.group(3)
    port_text = match.group(2) if bracketed else match.group(4)
    if not re.fullmatch(r"[0-9]{1,5}", port_text, re.ASCII) or int(port_text) > 65535:
        raise ValueError(f"{what}: port {port_text!r} is not a number from 0 to 65535")
    if bracketed:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{what}: {host!r} is not an IPv6 address") from None
    elif host and (not _HOSTNAME.fullmatch(host) or _looks_like_bad_ipv4(host)):
        raise ValueError(f"{what}: {host!r} is not a host name or IPv4 address")
    return host, int(port_text)


def _looks_like_bad_ipv4(host: str) -> bool:
    if not re.fullmatch(r"[0-9.]+", host):
        return False
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return True
    return False


# -- the key table --------------------------------------------------------------------------------


class ConfigType(enum.IntEnum):
    """Value types, numbered as Kafka's DescribeConfigs ``ConfigType`` (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


_INT_RANGES = {ConfigType.INT: INT_MAX, ConfigType.LONG: LONG_MAX, ConfigType.SHORT: SHORT_MAX}


@dataclass(frozen=True, kw_only=True)
class ValueSpec:
    """How one key's text becomes a typed value (shared by broker and topic keys).

    ``choices`` are the accepted values (of each item, for lists); ``unsupported`` names values
    Kafka accepts that strait refuses, with the reason; ``check`` raises ValueError(reason).
    """

    type: ConfigType
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    unsupported: tuple[tuple[str, str], ...] = ()
    check: Callable[[Value], None] | None = None
    valid: str = ""  # valid values in words, for the docs, when the fields above do not say it

    def parse(self, raw: str) -> Value:
        """The typed value of ``raw`` (surrounding blanks ignored, as Kafka trims); ValueError(reason)."""
        text = raw.strip()
        value: Value
        if self.type in _INT_RANGES:
            if not re.fullmatch(r"[+-]?[0-9]+", text, re.ASCII):
                raise ValueError("not an integer")
            value = int(text)
            limit = _INT_RANGES[self.type]
            if not -limit - 1 <= value <= limit:
                raise ValueError(f"out of range for a {self.type.name.lower()} ({-limit - 1}..{limit})")
            if self.minimum is not None and value < self.minimum:
                raise ValueError(f"must be at least {self.minimum}")
            if self.maximum is not None and value > self.maximum:
                raise ValueError(f"must be at most {self.maximum}")
        elif self.type == ConfigType.BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise ValueError("must be true or false")
            value = text.lower() == "true"
        elif self.type == ConfigType.LIST:
            items = tuple(item.strip() for item in text.split(",")) if text else ()
            if "" in items:
                raise ValueError("has an empty list item")
            for item in items:
                self._check_choice(item)
            value = items
        else:
            self._check_choice(text)
            value = text
        if self.check is not None:
            self.check(value)
        return value

    def _check_choice(self, text: str) -> None:
        reason = dict(self.unsupported).get(text)
        if reason is not None:
            raise ValueError(reason)
        if self.choices and text not in self.choices:
            raise ValueError(f"must be one of {', '.join(self.choices)}")

    def render(self, value: Value) -> str:
        """Kafka's string form of a typed value: ``true``, ``5``, ``a,b``."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, tuple):
            return ",".join(value)
        return str(value)

    def normalise(self, raw: str) -> str:
        """``render(parse(raw))``: the canonical text of a valid value; ValueError(reason)."""
        return self.render(self.parse(raw))

    def describe_valid(self) -> str:
        """Valid values in words, for the docs."""
        if self.valid:
            return self.valid
        if self.type == ConfigType.BOOLEAN:
            return "true, false"
        parts: list[str] = []
        if self.choices:
            parts.append(("each of " if self.type == ConfigType.LIST else "one of ") + ", ".join(self.choices))
        if self.minimum is not None and self.maximum is not None:
            parts.append(f"{self.minimum}..{self.maximum}")
        elif self.minimum is not None:
            parts.append(f">= {self.minimum}")
        return "; ".join(parts)


@dataclass(frozen=True, kw_only=True)
class ConfigKey(ValueSpec):
    """One ``server.properties`` key: its value spec plus what the docs and DescribeConfigs need.

    ``topic_key`` names the topic-level key this broker key is the default for; ``scale``
    converts the value to that key's unit (``log.retention.hours`` -> ms; -1 stays -1);
    ``effect=False`` marks keys accepted for compatibility that change nothing in strait.
    """

    name: str
    default: str | None
    group: str
    doc: str
    topic_key: str | None = None
    scale: int = 1
    required: bool = False
    effect: bool = True


def _check_listeners(value: Value) -> None:
    _parse_listeners(str(value), advertised=False)


def _check_advertised(value: Value) -> None:
    _parse_listeners(str(value), advertised=True)


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


def _split_dirs(value: str) -> list[str]:
    return [d.strip() for d in value.split(",") if d.strip()]


def _check_zookeeper_connect(value: Value) -> None:
    text = str(value)
    hosts, slash, chroot = text.partition("/")
    if not hosts:
        raise ValueError("needs host:port[,host:port...][/chroot]")
    for item in hosts.split(","):
        _parse_host_port(item, what=f"server {item.strip()!r}")
    path = slash + chroot
    if len(path) > 1 and (path.endswith("/") or "//" in path):
        raise ValueError(f"chroot {path!r} must not end with '/' or contain '//'")


def _check_admin_listener(value: Value) -> None:
    host, _ = _parse_host_port(str(value), what="admin listener")
    if not host:
        raise ValueError("give a host (127.0.0.1 for loopback only, 0.0.0.0 for every interface)")


def check_non_empty_list(value: Value) -> None:
    """A list key that needs at least one item (``cleanup.policy``)."""
    if value == ():
        raise ValueError("needs at least one item")


def check_ratio(value: Value) -> None:
    try:
        ratio = float(str(value))
    except ValueError:
        raise ValueError("not a number") from None
    if not 0.0 <= ratio <= 1.0:  # also refuses NaN
        raise ValueError("must be between 0.0 and 1.0")


def _check_retention(value: Value) -> None:
    if value == 0 or (isinstance(value, int) and value < -1):
        raise ValueError("retention must be -1 (unlimited) or at least 1")


_I, _L, _S, _B, _STR, _LIST = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.SHORT,
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.LIST,
)
_RECOMPRESS = "strait stores batches exactly as produced and never recompresses; only 'producer' is supported"
UNSUPPORTED_COMPRESSION = tuple((c, _RECOMPRESS) for c in ("uncompressed", "gzip", "snappy", "lz4", "zstd"))
_RETENTION_VALID = "-1 (forever) or >= 1"
_NO_EFFECT = "Accepted for compatibility; strait runs on trio tasks, so this has no effect."

BROKER_KEYS: tuple[ConfigKey, ...] = (
    # identity and ZooKeeper
    ConfigKey(name="broker.id", type=_I, default=None, required=True, minimum=0, group="Node and ZooKeeper",
              doc="This node's id, unique in the cluster. Required in strait (no automatic generation)."),
    ConfigKey(name="broker.rack", type=_STR, default=None, group="Node and ZooKeeper",
              doc="Rack (or availability zone) of this node, published in its ZooKeeper registration."),
    ConfigKey(name="zookeeper.connect", type=_STR, default=None, required=True, check=_check_zookeeper_connect,
              valid="host:port[,host:port...][/chroot]", group="Node and ZooKeeper",
              doc="ZooKeeper servers as host:port[,host:port...][/chroot]. A chroot isolates one cluster."),
    ConfigKey(name="zookeeper.session.timeout.ms", type=_I, default="18000", minimum=1, group="Node and ZooKeeper",
              doc="ZooKeeper session timeout; a node whose session expires loses its registration."),
    ConfigKey(name="zookeeper.connection.timeout.ms", type=_I, default=None, minimum=1, group="Node and ZooKeeper",
              doc="How long to wait for the ZooKeeper connection; unset means zookeeper.session.timeout.ms."),
    # listeners and sockets
    ConfigKey(name="listeners", type=_STR, default="PLAINTEXT://127.0.0.1:9092", check=_check_listeners,
              valid="PLAINTEXT://host:port", group="Listeners and connections",
              doc="Where the Kafka protocol listens, NAME://host:port. strait's default is loopback "
                  "(Kafka's is every interface). Port 0 binds any free port; only PLAINTEXT is supported."),
    ConfigKey(name="advertised.listeners", type=_STR, default=None, check=_check_advertised,
              valid="PLAINTEXT://host:port, port > 0", group="Listeners and connections",
              doc="What clients are told to connect to. Unset: the listeners, with an unspecified host "
                  "(empty, 0.0.0.0, ::) replaced by 127.0.0.1 and port 0 replaced by the bound port. "
                  "May not use 0.0.0.0, an empty host or port 0; names must appear in listeners."),
    ConfigKey(name="socket.request.max.bytes", type=_I, default="104857600", minimum=1,
              group="Listeners and connections",
              doc="Largest request accepted; a bigger size prefix closes the connection."),
    ConfigKey(name="socket.send.buffer.bytes", type=_I, default="102400", minimum=-1,
              group="Listeners and connections", doc="SO_SNDBUF for client connections; -1 keeps the OS default."),
    ConfigKey(name="socket.receive.buffer.bytes", type=_I, default="102400", minimum=-1,
              group="Listeners and connections", doc="SO_RCVBUF for client connections; -1 keeps the OS default."),
    ConfigKey(name="queued.max.requests", type=_I, default="500", minimum=1, group="Listeners and connections",
              effect=False,
              doc="Kafka: the shared request queue size. strait handles one request per connection at a "
                  "time (as Kafka mutes a connection) and holds at most one request plus a 256 KiB read buffer "
                  "per connection, so there is no queue to bound."),
    ConfigKey(name="connections.max.idle.ms", type=_L, default="600000", minimum=1,
              group="Listeners and connections", doc="Close a connection idle for this long."),
    # topics
    ConfigKey(name="num.partitions", type=_I, default="1", minimum=1, group="Topics",
              doc="Partitions of an auto-created topic, or of CreateTopics asking for -1."),
    ConfigKey(name="default.replication.factor", type=_I, default="1", minimum=1, group="Topics",
              doc="Replication factor of an auto-created topic, or of CreateTopics asking for -1."),
    ConfigKey(name="auto.create.topics.enable", type=_B, default="true", group="Topics",
              doc="Create a topic when a client asks Metadata for one that does not exist."),
    ConfigKey(name="delete.topic.enable", type=_B, default="true", group="Topics",
              doc="Allow DeleteTopics; when false it fails with TOPIC_DELETION_DISABLED."),
    ConfigKey(name="compression.type", type=_STR, default="producer", choices=("producer",),
              unsupported=UNSUPPORTED_COMPRESSION, topic_key="compression.type", group="Topics",
              doc="Codec of stored batches. Only producer: batches are stored exactly as produced."),
    # log dirs and segments
    ConfigKey(name="log.dirs", type=_STR, default=None, check=_check_log_dirs, valid="comma list of paths",
              group="Log directories and segments",
              doc="Comma list of log directories (JBOD); wins over log.dir."),
    ConfigKey(name="log.dir", type=_STR, default="/tmp/kafka-logs", check=_check_log_dirs, valid="comma list of paths",
              group="Log directories and segments", doc="Log directories when log.dirs is not set."),
    ConfigKey(name="message.max.bytes", type=_I, default="1048588", minimum=0, topic_key="max.message.bytes",
              group="Log directories and segments", doc="Largest record batch accepted (after compression)."),
    ConfigKey(name="log.segment.bytes", type=_I, default="1073741824", minimum=14, topic_key="segment.bytes",
              group="Log directories and segments", doc="Roll to a new segment before the active one passes this."),
    ConfigKey(name="log.roll.ms", type=_L, default=None, minimum=1, topic_key="segment.ms",
              group="Log directories and segments",
              doc="Roll a segment whose first batch is this old; wins over log.roll.hours."),
    ConfigKey(name="log.roll.hours", type=_I, default="168", minimum=1, topic_key="segment.ms", scale=HOUR_MS,
              group="Log directories and segments", doc="log.roll.ms in hours, used when log.roll.ms is not set."),
    ConfigKey(name="log.index.size.max.bytes", type=_I, default="10485760", minimum=12,
              topic_key="segment.index.bytes", group="Log directories and segments",
              doc="Largest offset/time index file; a full index rolls the segment."),
    ConfigKey(name="log.index.interval.bytes", type=_I, default="4096", minimum=0, topic_key="index.interval.bytes",
              group="Log directories and segments", doc="Log bytes between two offset index entries."),
    ConfigKey(name="log.message.timestamp.type", type=_STR, default="CreateTime",
              choices=("CreateTime", "LogAppendTime"), topic_key="message.timestamp.type",
              group="Log directories and segments",
              doc="CreateTime keeps the producer's timestamps; LogAppendTime stamps the append time."),
    ConfigKey(name="log.message.timestamp.before.max.ms", type=_L, default=str(LONG_MAX), minimum=0,
              topic_key="message.timestamp.before.max.ms", group="Log directories and segments",
              doc="Reject (INVALID_TIMESTAMP) a CreateTime batch whose timestamp is further in the past."),
    ConfigKey(name="log.message.timestamp.after.max.ms", type=_L, default=str(LONG_MAX), minimum=0,
              topic_key="message.timestamp.after.max.ms", group="Log directories and segments",
              doc="Reject (INVALID_TIMESTAMP) a CreateTime batch whose timestamp is further in the future."),
    ConfigKey(name="log.message.timestamp.difference.max.ms", type=_L, default=str(LONG_MAX), minimum=0,
              topic_key="message.timestamp.difference.max.ms", group="Log directories and segments",
              doc="Older name for both bounds (deprecated in Kafka 3.6): used for before/after wherever "
                  "the newer key is not set."),
    # retention
    ConfigKey(name="log.cleanup.policy", type=_LIST, default="delete", choices=("delete", "compact"),
              check=check_non_empty_list, topic_key="cleanup.policy", group="Retention",
              doc="What happens to old segments: delete (retention), compact (keep the latest record per key), "
                  "or both."),
    ConfigKey(name="log.cleaner.delete.retention.ms", type=_L, default="86400000", minimum=0,
              topic_key="delete.retention.ms", group="Retention",
              doc="How long a compacted log keeps a tombstone (null value) after the clean that kept it."),
    ConfigKey(name="log.cleaner.min.cleanable.ratio", type=ConfigType.DOUBLE, default="0.5", check=check_ratio,
              valid="0.0..1.0", topic_key="min.cleanable.dirty.ratio", group="Retention",
              doc="Clean a compacted log once this share of its cleanable bytes is dirty (not yet cleaned)."),
    ConfigKey(name="log.cleaner.min.compaction.lag.ms", type=_L, default="0", minimum=0,
              topic_key="min.compaction.lag.ms", group="Retention",
              doc="A record stays uncompacted for at least this long."),
    ConfigKey(name="log.cleaner.backoff.ms", type=_L, default="15000", minimum=1, group="Retention",
              doc="How often the node looks for compacted logs to clean."),
    ConfigKey(name="log.retention.ms", type=_L, default=None, check=_check_retention, valid=_RETENTION_VALID,
              topic_key="retention.ms",
              group="Retention", doc="Delete segments older than this; -1 keeps forever. Wins over minutes and hours."),
    ConfigKey(name="log.retention.minutes", type=_I, default=None, check=_check_retention, valid=_RETENTION_VALID,
              topic_key="retention.ms",
              scale=MINUTE_MS, group="Retention", doc="Retention in minutes; wins over log.retention.hours."),
    ConfigKey(name="log.retention.hours", type=_I, default="168", check=_check_retention, valid=_RETENTION_VALID,
              topic_key="retention.ms",
              scale=HOUR_MS, group="Retention", doc="Retention in hours, used when neither ms nor minutes is set."),
    ConfigKey(name="log.retention.bytes", type=_L, default="-1", minimum=-1, topic_key="retention.bytes",
              group="Retention", doc="Per-partition size limit; oldest segments go first. -1: no limit."),
    ConfigKey(name="log.retention.check.interval.ms", type=_L, default="300000", minimum=1, group="Retention",
              doc="How often retention runs."),
    ConfigKey(name="log.segment.delete.delay.ms", type=_L, default="60000", minimum=0,
              topic_key="file.delete.delay.ms", group="Retention",
              doc="Delay between renaming a deleted segment to .deleted and unlinking it."),
    # flush
    ConfigKey(name="log.flush.interval.messages", type=_L, default=str(LONG_MAX), minimum=1,
              topic_key="flush.messages", group="Flush",
              doc="fsync after this many records; 1 fsyncs every append. Default: rely on replication."),
    ConfigKey(name="log.flush.interval.ms", type=_L, default=None, minimum=0, topic_key="flush.ms", group="Flush",
              doc="fsync when the oldest unflushed write is this old; unset means log.flush.scheduler.interval.ms."),
    ConfigKey(name="log.flush.scheduler.interval.ms", type=_L, default=str(LONG_MAX), minimum=0,
              topic_key="flush.ms", group="Flush",
              doc="How often the flusher checks logs; also the default of log.flush.interval.ms."),
    ConfigKey(name="log.flush.offset.checkpoint.interval.ms", type=_I, default="60000", minimum=0, group="Flush",
              doc="How often recovery points are checkpointed."),
    # replication
    ConfigKey(name="min.insync.replicas", type=_I, default="1", minimum=1, topic_key="min.insync.replicas",
              group="Replication",
              doc="acks=all produce fails with NOT_ENOUGH_REPLICAS when the ISR is smaller than this."),
    ConfigKey(name="unclean.leader.election.enable", type=_B, default="false",
              topic_key="unclean.leader.election.enable", group="Replication",
              doc="Allow an out-of-sync replica to become leader (loses committed data). Off, as in Kafka."),
    ConfigKey(name="replica.lag.time.max.ms", type=_L, default="30000", minimum=1, group="Replication",
              doc="A follower that has not caught up for this long leaves the ISR."),
    ConfigKey(name="controlled.shutdown.enable", type=_B, default="true", group="Replication",
              doc="On a clean stop, hand leadership to other ISR members before exiting."),
    ConfigKey(name="controlled.shutdown.max.retries", type=_I, default="3", minimum=0, group="Replication",
              doc="How many times a stopping node asks the controller to move its leaderships away."),
    ConfigKey(name="controlled.shutdown.retry.backoff.ms", type=_L, default="5000", minimum=0, group="Replication",
              doc="Pause between controlled shutdown attempts."),
    ConfigKey(name="replica.fetch.wait.max.ms", type=_I, default="500", minimum=0, group="Replication",
              doc="How long a follower's fetch waits at the leader for new data (must stay below "
                  "replica.lag.time.max.ms)."),
    ConfigKey(name="replica.fetch.min.bytes", type=_I, default="1", minimum=1, group="Replication",
              doc="Bytes a follower's fetch waits for before the leader answers."),
    ConfigKey(name="replica.fetch.max.bytes", type=_I, default="1048576", minimum=0, group="Replication",
              doc="Bytes a follower asks per partition in one fetch (the first batch is always returned)."),
    ConfigKey(name="replica.fetch.response.max.bytes", type=_I, default="10485760", minimum=0,
              group="Replication", doc="Bytes a follower asks in one fetch response across partitions."),
    ConfigKey(name="replica.fetch.backoff.ms", type=_I, default="1000", minimum=0, group="Replication",
              doc="Pause after a follower's fetch failed (leader unreachable, error)."),
    ConfigKey(name="replica.socket.timeout.ms", type=_I, default="30000", minimum=1, group="Replication",
              doc="A follower gives up on a leader connection after this long without an answer."),
    ConfigKey(name="auto.leader.rebalance.enable", type=_B, default="true", group="Replication",
              doc="The controller moves leadership back to each partition's preferred replica (the first "
                  "in its assignment) when it is alive and in the ISR."),
    ConfigKey(name="leader.imbalance.check.interval.seconds", type=_L, default="300", minimum=1,
              group="Replication", doc="How often the controller checks for preferred leader imbalance."),
    ConfigKey(name="leader.imbalance.per.broker.percentage", type=_I, default="10", minimum=0, maximum=100,
              group="Replication",
              doc="A broker's partitions are rebalanced when more than this percentage of them are not led by "
                  "their preferred replica."),
    # groups and offsets
    ConfigKey(name="offsets.topic.num.partitions", type=_I, default="50", minimum=1, group="Groups and offsets",
              doc="Partitions of __consumer_offsets (fixed once created)."),
    ConfigKey(name="offsets.topic.replication.factor", type=_S, default="3", minimum=1, group="Groups and offsets",
              doc="Replication factor of __consumer_offsets. As in Kafka, creating it fails while fewer "
                  "nodes are alive; set 1 for a single-node cluster."),
    ConfigKey(name="offsets.topic.segment.bytes", type=_I, default="104857600", minimum=14, group="Groups and offsets",
              doc="segment.bytes of __consumer_offsets (small segments let the cleaner compact it sooner)."),
    ConfigKey(name="offsets.retention.minutes", type=_I, default="10080", minimum=1, group="Groups and offsets",
              doc="Committed offsets of an empty group are dropped after this long."),
    ConfigKey(name="group.initial.rebalance.delay.ms", type=_I, default="3000", minimum=0,
              group="Groups and offsets", doc="Wait this long for more members before the first rebalance."),
    ConfigKey(name="group.min.session.timeout.ms", type=_I, default="6000", minimum=0, group="Groups and offsets",
              doc="Smallest session timeout a member may ask for."),
    ConfigKey(name="group.max.session.timeout.ms", type=_I, default="1800000", minimum=0, group="Groups and offsets",
              doc="Largest session timeout a member may ask for; at least group.min.session.timeout.ms."),
    # transactions
    ConfigKey(name="transaction.state.log.replication.factor", type=_S, default="3", minimum=1,
              group="Transactions", doc="Replication factor of __transaction_state."),
    ConfigKey(name="transaction.state.log.min.isr", type=_I, default="2", minimum=1, group="Transactions",
              doc="min.insync.replicas of __transaction_state."),
    # strait's own
    ConfigKey(name="strait.admin.listener", type=_STR, default="127.0.0.1:0", check=_check_admin_listener,
              valid="host:port", group="strait",
              doc="host:port of the admin HTTP API (/health, /metrics). Default: loopback, any free port."),
    ConfigKey(name="strait.producer.state.max.ids", type=_I, default="10000", minimum=1, group="strait",
              doc="Most idempotent producer ids remembered per partition; the least recently used is forgotten."),
    # accepted, no effect
    ConfigKey(name="num.network.threads", type=_I, default="3", minimum=1, effect=False, group="", doc=_NO_EFFECT),
    ConfigKey(name="num.io.threads", type=_I, default="8", minimum=1, effect=False, group="", doc=_NO_EFFECT),
    ConfigKey(name="num.recovery.threads.per.data.dir", type=_I, default="1", minimum=1, effect=False, group="",
              doc=_NO_EFFECT),
)  # fmt: skip

BROKER_KEY_INDEX: Mapping[str, ConfigKey] = MappingProxyType({k.name: k for k in BROKER_KEYS})
NO_EFFECT_KEYS: frozenset[str] = frozenset(k.name for k in BROKER_KEYS if not k.effect)

_ROLL = ("log.roll.ms", "log.roll.hours")
_RETENTION = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
_FLUSH = ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
# Kafka's broker-level synonyms, in precedence order (DescribeConfigs on a broker lists them).
BROKER_SYNONYMS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {name: chain for chain in (_ROLL, _RETENTION) for name in chain} | {"log.flush.interval.ms": _FLUSH}
)


def broker_synonyms(name: str) -> tuple[str, ...]:
    """The broker keys Kafka lists as synonyms of ``name``, in precedence order (``(name,)`` if none)."""
    return BROKER_SYNONYMS.get(name, (name,))


# -- the node's config ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeConfig:
    """The validated configuration of one node, built by :meth:`from_properties` or :func:`load_config`.

    Synonym keys are resolved (``log_retention_ms`` from ms/minutes/hours, ...). ``explicit_values``
    holds the canonical text of every key set in the file, so DescribeConfigs can tell a
    server.properties setting (STATIC_BROKER_CONFIG) from a default.
    """

    broker_id: int
    broker_rack: str | None
    zookeeper_connect: str
    zookeeper_session_timeout_ms: int
    zookeeper_connection_timeout_ms: int  # else the session timeout
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...]  # else listeners on 127.0.0.1; port 0 kept (advertised_for)
    socket_request_max_bytes: int
    socket_send_buffer_bytes: int  # -1: OS default
    socket_receive_buffer_bytes: int  # -1: OS default
    queued_max_requests: int
    connections_max_idle_ms: int
    num_partitions: int
    default_replication_factor: int
    auto_create_topics_enable: bool
    delete_topic_enable: bool
    compression_type: str
    log_dirs: tuple[Path, ...]  # log.dirs, else log.dir
    message_max_bytes: int
    log_segment_bytes: int
    log_roll_ms: int  # log.roll.ms, else log.roll.hours
    log_index_size_max_bytes: int
    log_index_interval_bytes: int
    log_message_timestamp_type: str
    log_message_timestamp_before_max_ms: int  # else log.message.timestamp.difference.max.ms
    log_message_timestamp_after_max_ms: int  # else log.message.timestamp.difference.max.ms
    log_cleanup_policy: tuple[str, ...]
    log_cleaner_delete_retention_ms: int
    log_cleaner_min_cleanable_ratio: float
    log_cleaner_min_compaction_lag_ms: int
    log_cleaner_backoff_ms: int
    log_retention_ms: int  # ms, else minutes, else hours; -1: forever
    log_retention_bytes: int
    log_retention_check_interval_ms: int
    log_segment_delete_delay_ms: int
    log_flush_interval_messages: int
    log_flush_interval_ms: int  # else log.flush.scheduler.interval.ms
    log_flush_scheduler_interval_ms: int
    log_flush_offset_checkpoint_interval_ms: int
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    replica_lag_time_max_ms: int
    controlled_shutdown_enable: bool
    controlled_shutdown_max_retries: int
    controlled_shutdown_retry_backoff_ms: int
    replica_fetch_wait_max_ms: int
    replica_fetch_min_bytes: int
    replica_fetch_max_bytes: int
    replica_fetch_response_max_bytes: int
    replica_fetch_backoff_ms: int
    replica_socket_timeout_ms: int
    auto_leader_rebalance_enable: bool
    leader_imbalance_check_interval_seconds: int
    leader_imbalance_per_broker_percentage: int
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    offsets_topic_segment_bytes: int
    offsets_retention_minutes: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    transaction_state_log_replication_factor: int
    transaction_state_log_min_isr: int
    admin_listener: tuple[str, int]  # (host, port) of strait.admin.listener
    producer_state_max_ids: int
    explicit_values: Mapping[str, str] = field(default_factory=dict, hash=False)
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
        range or not among the valid values, and for keys that contradict each other.
        """
        for name, raw in props.items():
            if name not in BROKER_KEY_INDEX:
                close = difflib.get_close_matches(name, BROKER_KEY_INDEX.keys(), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigError(f"unknown key{hint}; see docs/configuration.md", key=name, value=raw, source=source)
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
                raise ConfigError(str(exc), key=key.name, value=text, source=source) from None
            if given is not None:
                explicit[key.name] = key.render(values[key.name])
        return _build(_Values(values, frozenset(explicit)), MappingProxyType(explicit), source)


class _Values:
    """Typed access to parsed values, plus Kafka's "first key that is set" resolution."""

    def __init__(self, values: Mapping[str, Value], explicit: frozenset[str]) -> None:
        self.values, self.explicit = values, explicit

    def as_int(self, name: str) -> int:
        value = self.values[name]
        assert isinstance(value, int) and not isinstance(value, bool), name
        return value

    def as_bool(self, name: str) -> bool:
        value = self.values[name]
        assert isinstance(value, bool), name
        return value

    def as_str(self, name: str) -> str:
        value = self.values[name]
        assert isinstance(value, str), name
        return value

    def optional_str(self, name: str) -> str | None:
        return self.as_str(name) if name in self.values else None

    def as_list(self, name: str) -> tuple[str, ...]:
        value = self.values[name]
        assert isinstance(value, tuple), name
        return value

    def first(self, *names: str) -> str:
        """The first of ``names`` set in the file, else the first with a default."""
        for name in names:
            if name in self.explicit:
                return name
        return next(name for name in names if name in self.values)

    def ms(self, *names: str) -> int:
        """The first set of ``names`` converted to ms with its key's scale (-1 stays -1)."""
        name = self.first(*names)
        value = self.as_int(name)
        return value if value == -1 else value * BROKER_KEY_INDEX[name].scale


def _build(v: _Values, explicit: Mapping[str, str], source: str) -> NodeConfig:
    listeners = parse_listeners(v.as_str("listeners"), "listeners")
    if "advertised.listeners" in v.explicit:
        advertised = parse_listeners(v.as_str("advertised.listeners"), "advertised.listeners")
        names = {listener.name for listener in listeners}
        for adv in advertised:
            if adv.name not in names:
                raise ConfigError(
                    f"listener name {adv.name} is not in listeners ({v.as_str('listeners')})",
                    key="advertised.listeners",
                    value=v.as_str("advertised.listeners"),
                    source=source,
                )
    else:
        advertised = tuple(Listener(x.name, "127.0.0.1", x.port) if x.is_wildcard else x for x in listeners)
    if v.as_int("group.min.session.timeout.ms") > v.as_int("group.max.session.timeout.ms"):
        raise ConfigError(
            f"must be at least group.min.session.timeout.ms ({v.as_int('group.min.session.timeout.ms')})",
            key="group.max.session.timeout.ms",
            value=str(v.as_int("group.max.session.timeout.ms")),
            source=source,
        )
    admin_host, admin_port = _parse_host_port(v.as_str("strait.admin.listener"), what="admin listener")
    ts_before = v.first("log.message.timestamp.before.max.ms", "log.message.timestamp.difference.max.ms")
    ts_after = v.first("log.message.timestamp.after.max.ms", "log.message.timestamp.difference.max.ms")
    return NodeConfig(
        broker_id=v.as_int("broker.id"),
        broker_rack=v.optional_str("broker.rack"),
        zookeeper_connect=v.as_str("zookeeper.connect"),
        zookeeper_session_timeout_ms=v.as_int("zookeeper.session.timeout.ms"),
        zookeeper_connection_timeout_ms=v.as_int(
            v.first("zookeeper.connection.timeout.ms", "zookeeper.session.timeout.ms")
        ),
        listeners=listeners,
        advertised_listeners=advertised,
        socket_request_max_bytes=v.as_int("socket.request.max.bytes"),
        socket_send_buffer_bytes=v.as_int("socket.send.buffer.bytes"),
        socket_receive_buffer_bytes=v.as_int("socket.receive.buffer.bytes"),
        queued_max_requests=v.as_int("queued.max.requests"),
        connections_max_idle_ms=v.as_int("connections.max.idle.ms"),
        num_partitions=v.as_int("num.partitions"),
        default_replication_factor=v.as_int("default.replication.factor"),
        auto_create_topics_enable=v.as_bool("auto.create.topics.enable"),
        delete_topic_enable=v.as_bool("delete.topic.enable"),
        compression_type=v.as_str("compression.type"),
        log_dirs=tuple(Path(d) for d in _split_dirs(v.as_str(v.first("log.dirs", "log.dir")))),
        message_max_bytes=v.as_int("message.max.bytes"),
        log_segment_bytes=v.as_int("log.segment.bytes"),
        log_roll_ms=v.ms("log.roll.ms", "log.roll.hours"),
        log_index_size_max_bytes=v.as_int("log.index.size.max.bytes"),
        log_index_interval_bytes=v.as_int("log.index.interval.bytes"),
        log_message_timestamp_type=v.as_str("log.message.timestamp.type"),
        log_message_timestamp_before_max_ms=v.as_int(ts_before),
        log_message_timestamp_after_max_ms=v.as_int(ts_after),
        log_cleanup_policy=v.as_list("log.cleanup.policy"),
        log_cleaner_delete_retention_ms=v.as_int("log.cleaner.delete.retention.ms"),
        log_cleaner_min_cleanable_ratio=float(v.as_str("log.cleaner.min.cleanable.ratio")),
        log_cleaner_min_compaction_lag_ms=v.as_int("log.cleaner.min.compaction.lag.ms"),
        log_cleaner_backoff_ms=v.as_int("log.cleaner.backoff.ms"),
        log_retention_ms=v.ms("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
        log_retention_bytes=v.as_int("log.retention.bytes"),
        log_retention_check_interval_ms=v.as_int("log.retention.check.interval.ms"),
        log_segment_delete_delay_ms=v.as_int("log.segment.delete.delay.ms"),
        log_flush_interval_messages=v.as_int("log.flush.interval.messages"),
        log_flush_interval_ms=v.ms("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
        log_flush_scheduler_interval_ms=v.as_int("log.flush.scheduler.interval.ms"),
        log_flush_offset_checkpoint_interval_ms=v.as_int("log.flush.offset.checkpoint.interval.ms"),
        min_insync_replicas=v.as_int("min.insync.replicas"),
        unclean_leader_election_enable=v.as_bool("unclean.leader.election.enable"),
        replica_lag_time_max_ms=v.as_int("replica.lag.time.max.ms"),
        controlled_shutdown_enable=v.as_bool("controlled.shutdown.enable"),
        controlled_shutdown_max_retries=v.as_int("controlled.shutdown.max.retries"),
        controlled_shutdown_retry_backoff_ms=v.as_int("controlled.shutdown.retry.backoff.ms"),
        replica_fetch_wait_max_ms=v.as_int("replica.fetch.wait.max.ms"),
        replica_fetch_min_bytes=v.as_int("replica.fetch.min.bytes"),
        replica_fetch_max_bytes=v.as_int("replica.fetch.max.bytes"),
        replica_fetch_response_max_bytes=v.as_int("replica.fetch.response.max.bytes"),
        replica_fetch_backoff_ms=v.as_int("replica.fetch.backoff.ms"),
        replica_socket_timeout_ms=v.as_int("replica.socket.timeout.ms"),
        auto_leader_rebalance_enable=v.as_bool("auto.leader.rebalance.enable"),
        leader_imbalance_check_interval_seconds=v.as_int("leader.imbalance.check.interval.seconds"),
        leader_imbalance_per_broker_percentage=v.as_int("leader.imbalance.per.broker.percentage"),
        offsets_topic_num_partitions=v.as_int("offsets.topic.num.partitions"),
        offsets_topic_replication_factor=v.as_int("offsets.topic.replication.factor"),
        offsets_topic_segment_bytes=v.as_int("offsets.topic.segment.bytes"),
        offsets_retention_minutes=v.as_int("offsets.retention.minutes"),
        group_initial_rebalance_delay_ms=v.as_int("group.initial.rebalance.delay.ms"),
        group_min_session_timeout_ms=v.as_int("group.min.session.timeout.ms"),
        group_max_session_timeout_ms=v.as_int("group.max.session.timeout.ms"),
        transaction_state_log_replication_factor=v.as_int("transaction.state.log.replication.factor"),
        transaction_state_log_min_isr=v.as_int("transaction.state.log.min.isr"),
        admin_listener=(admin_host, admin_port),
        producer_state_max_ids=v.as_int("strait.producer.state.max.ids"),
        explicit_values=explicit,
        source=source,
    )


def load_config(path: Path) -> NodeConfig:
    """Read ``path`` (UTF-8 ``server.properties``) and build the node's config.

    Raises ConfigError naming the file when it cannot be read or decoded, and as
    :func:`parse_properties` and :meth:`NodeConfig.from_properties` do.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", source=source) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", source=source) from None
    return NodeConfig.from_properties(parse_properties(text, source=source), source=source)


# -- docs ----------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_broker_reference() -> str:
    """The Markdown reference of every broker key, derived from :data:`BROKER_KEYS` (for docs/configuration.md)."""
    lines: list[str] = []
    groups = list(dict.fromkeys(k.group for k in BROKER_KEYS if k.effect))
    header = ["| Key | Type | Default | Valid values | Topic key | Meaning |", "|---|---|---|---|---|---|"]
    for group in groups:
        lines += [f"### {group}", "", *header]
        for key in (k for k in BROKER_KEYS if k.effect and k.group == group):
            default = "*(required)*" if key.required else "*(none)*" if key.default is None else f"`{key.default}`"
            topic = f"`{key.topic_key}`" if key.topic_key else ""
            lines.append(
                f"| `{key.name}` | {key.type.name.lower()} | {default} | {_cell(key.describe_valid())} "
                f"| {topic} | {_cell(key.doc)} |"
            )
        lines.append("")
    lines += ["### Accepted, no effect", "", "| Key | Type | Default | Valid values |", "|---|---|---|---|"]
    for key in (k for k in BROKER_KEYS if not k.effect):
        lines.append(f"| `{key.name}` | {key.type.name.lower()} | `{key.default}` | {key.describe_valid()} |")
    return "\n".join(lines) + "\n"
