"""Kafka's classic ZooKeeper layout: znode paths, their JSON, and encode/decode for each.

The JSON is what Kafka 3.x brokers write and read (``kafka.zk.ZkData``), so Kafka's own
tools and ZooKeeper browsers read strait's state unchanged. Every path is relative to the
chroot of ``zookeeper.connect`` (``127.0.0.1:2181/site-east`` keeps everything under
``/site-east``).

================================================  =====  ==========================================================
znode                                             kind   data (JSON)
================================================  =====  ==========================================================
``/cluster/id``                                   P      ``{"version":"1","id":"<22-char base64url uuid>"}``
``/brokers/ids/<id>``                             E      ``{"listener_security_protocol_map":{"PLAINTEXT":
                                                         "PLAINTEXT"},"endpoints":["PLAINTEXT://host:9092"],
                                                         "jmx_port":-1,"features":{},"host":"host","port":9092,
                                                         "timestamp":"<ms since epoch>","rack":null,"version":5}``
``/brokers/topics/<topic>``                       P      ``{"version":3,"topic_id":"<22-char base64url uuid>",
                                                         "partitions":{"0":[1,2]},"adding_replicas":{},
                                                         "removing_replicas":{}}`` (replica lists: broker ids,
                                                         the first is the preferred leader)
``/brokers/topics/<topic>/partitions/<p>/state``  P      ``{"controller_epoch":3,"leader":1,"version":1,
                                                         "leader_epoch":7,"isr":[1,2]}``; written with
                                                         compare-and-set on the znode version. strait
                                                         extension: ``"strait_truncation":{"leader_epoch":7,
                                                         "offset":1200}``, the last truncation to a cut
                                                         (:class:`Truncation`); Kafka ignores the key
``/config/topics/<topic>``                        P      ``{"version":1,"config":{"retention.ms":"86400000"}}``
                                                         (values are strings; absent keys take broker defaults)
``/config/changes/config_change_<seq>``           PS     ``{"version":2,"entity_path":"topics/<topic>"}``, one per
                                                         config update, telling brokers to re-read that config
``/latest_producer_id_block``                     P      ``{"version":1,"broker":2,"block_start":"1000",
                                                         "block_end":"1999"}``: the last block of producer ids
                                                         claimed (empty before the first); compare-and-set
``/controller``                                   E      ``{"version":1,"brokerid":1,"timestamp":"<ms since
                                                         epoch>"}``: the elected controller
``/controller_epoch``                             P      ``3`` (a decimal string, not JSON): bumped in the same
                                                         transaction that creates ``/controller``
``/admin/reassign_partitions``                    P      ``{"version":1,"partitions":[{"topic":"t","partition":0,
                                                         "replicas":[1,2,3],"original_replicas":[1,2]}],
                                                         "throttle_bytes_per_s":null}``: the reassignment in
                                                         progress (target replica lists); strait extensions:
                                                         ``throttle_bytes_per_s`` (an integer or null) and
                                                         ``original_replicas``, the partition's replicas
                                                         when its entry was written (what cancelling goes
                                                         back to; absent from other writers' entries);
                                                         entries are removed as they complete
``/strait/offline_replicas/<id>``                 E      ``{"version":1,"partitions":[["t",0],["t",3]]}``: the
                                                         replicas of broker ``<id>`` on failed log dirs
                                                         (strait extension; absent when there are none)
================================================  =====  ==========================================================

Kinds: P persistent, E ephemeral (vanishes with the session that created it), PS persistent
sequential (ZooKeeper appends a 10-digit counter). The empty persistent parents Kafka
creates at startup are listed in :data:`PERSISTENT_PATHS`, strait's own in :data:`STRAIT_PATHS`.

Decoders are lenient where Kafka is (missing optional keys, older versions) and raise
:class:`MalformedZnode` naming the path for anything else.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from node.ids import NodeId
from storage.records import LeaderEpoch, Offset

from ._errors import MalformedZnode

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = f"{CONFIG_CHANGES}/config_change_"
DELETE_TOPICS = "/admin/delete_topics"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ADMIN = "/admin"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
OFFLINE_REPLICAS = "/strait/offline_replicas"

#: Persistent paths Kafka brokers create at startup (``ZkData.PersistentZkPaths``).
PERSISTENT_PATHS: tuple[str, ...] = (
    "/consumers",
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    "/brokers/seqid",
    "/isr_change_notification",
    PRODUCER_ID_BLOCK,
    "/log_dir_event_notification",
    CONFIG_TOPICS,
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
)

#: Persistent parents of strait's own extensions, created at startup next to Kafka's.
STRAIT_PATHS: tuple[str, ...] = (OFFLINE_REPLICAS,)

BROKER_REGISTRATION_VERSION = 5
TOPIC_ASSIGNMENT_VERSION = 3
PARTITION_STATE_VERSION = 1
ENTITY_CONFIG_VERSION = 1
CONFIG_CHANGE_VERSION = 2
PRODUCER_ID_BLOCK_VERSION = 1
CONTROLLER_VERSION = 1
REASSIGNMENT_VERSION = 1
OFFLINE_REPLICAS_VERSION = 1

# Kafka's security protocols; a listener named after one of them uses it.
_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
_ENDPOINT = re.compile(r"^(?P<listener>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>\d+)$")
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def broker_path(broker_id: NodeId) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def offline_replicas_path(broker_id: NodeId) -> str:
    return f"{OFFLINE_REPLICAS}/{broker_id}"


def validate_topic_name(topic: str) -> str:
    """Return ``topic`` if Kafka accepts it as a topic name (so it is also a safe znode name).

    Raises:
        ValueError: naming the topic: empty, ``.``/``..``, longer than 249 characters, or
            holding characters other than ASCII letters, digits, ``.``, ``_`` and ``-``.
    """
    if topic in (".", "..") or not _TOPIC_NAME.match(topic):
        raise ValueError(f"invalid topic name {topic!r}: use 1-249 characters from [A-Za-z0-9._-], and not '.' or '..'")
    return topic


def uuid_of(text: str) -> uuid.UUID:
    """The ``Uuid`` a topic id string (:func:`new_uuid`'s form) stands for, as the protocol carries
    it; Kafka's zero ``Uuid`` for an empty or malformed one (a topic written without an id)."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return uuid.UUID(int=0)
    return uuid.UUID(bytes=raw) if len(raw) == 16 else uuid.UUID(int=0)


def new_uuid() -> str:
    """A random Kafka ``Uuid`` in its string form: 16 bytes, base64url, no padding (22 characters).

    Like Kafka's ``Uuid.randomUuid`` it never starts with ``-`` (command lines would read an option).
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text


@dataclass(frozen=True)
class BrokerRegistration:
    """A live broker as registered in ``/brokers/ids/<broker_id>``.

    ``endpoints`` are ``LISTENER://host:port`` strings (``PLAINTEXT://127.0.0.1:9092``), one per
    advertised listener; an empty tuple registers ``PLAINTEXT://host:port``. ``host``/``port`` are
    the top-level fields older clients read; strait writes its inter-broker listener's there.
    ``security_protocols`` maps each endpoint's listener name to its security protocol; left
    empty, a listener named after a protocol uses it and any other uses PLAINTEXT. It does not
    take part in equality (a registration read back equals the one written, whether or not the
    map was given).
    """

    broker_id: NodeId
    host: str
    port: int
    endpoints: tuple[str, ...] = ()
    rack: str | None = None
    security_protocols: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.broker_id < 0:
            raise ValueError(f"broker id {self.broker_id} is negative")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"broker {self.broker_id}: port {self.port} is out of range 0..65535")
        for endpoint in self.endpoints:
            if not _ENDPOINT.match(endpoint):
                raise ValueError(f"broker {self.broker_id}: endpoint {endpoint!r} is not LISTENER://host:port")

    @property
    def advertised_endpoints(self) -> tuple[str, ...]:
        """``endpoints``, or ``PLAINTEXT://host:port`` when none were given."""
        return self.endpoints or (f"PLAINTEXT://{self.host}:{self.port}",)

    @property
    def listener_security_protocol_map(self) -> dict[str, str]:
        """Each advertised listener name with its security protocol (as the registration JSON has it)."""
        out: dict[str, str] = {}
        for endpoint in self.advertised_endpoints:
            listener = endpoint.split("://", 1)[0]
            derived = listener if listener in _SECURITY_PROTOCOLS else "PLAINTEXT"
            out[listener] = self.security_protocols.get(listener, derived)
        return out

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """(host without IPv6 brackets, port) of this broker's listener named ``listener``; None if it has none."""
        for endpoint in self.advertised_endpoints:
            match = _ENDPOINT.match(endpoint)
            if match is not None and match["listener"] == listener:
                return match["host"].removeprefix("[").removesuffix("]"), int(match["port"])
        return None

    def reached_through(self, listener: str) -> BrokerRegistration:
        """This registration with ``host``/``port`` set to its endpoint on ``listener`` (the listener
        another broker connects through); unchanged when it has no such listener."""
        found = self.endpoint(listener)
        if found is None or found == (self.host, self.port):
            return self
        return replace(self, host=found[0], port=found[1])


@dataclass(frozen=True)
class TopicAssignment:
    """A topic's replica assignment (``/brokers/topics/<name>``) and that znode's version.

    ``partitions`` maps partition id to replica broker ids, preferred leader first.
    """

    name: str
    topic_id: str
    partitions: dict[int, tuple[NodeId, ...]]
    version: int


@dataclass(frozen=True)
class Truncation:
    """A truncation of a partition to a cut (``TruncatePartitions``), recorded in its state.

    Every replica whose log has no batch of ``leader_epoch`` or later when it learns of that
    epoch (or a later one) truncates its log to ``offset``: everything it holds beyond the cut
    was written before the truncation. The controller writes it with the epoch bump that
    starts ``leader_epoch``; it stays in the state (carried over by every later write) until a
    newer truncation replaces it.
    """

    leader_epoch: LeaderEpoch
    offset: Offset


@dataclass(frozen=True)
class PartitionState:
    """Leader and ISR of one partition (``.../partitions/<p>/state``).

    ``leader`` is ``NO_NODE`` (-1) while the partition has none. ``version`` is the znode version
    it was read at: pass it back unchanged to a compare-and-set write; ``-1`` means "the znode
    must not exist yet". ``truncation`` is the last truncation to a cut, if any: a writer that
    derives a new state from a read one keeps it (``dataclasses.replace``).
    """

    leader: NodeId
    leader_epoch: LeaderEpoch
    isr: tuple[NodeId, ...]
    controller_epoch: int
    version: int = -1
    truncation: Truncation | None = None


@dataclass(frozen=True)
class Reassignment:
    """The partition reassignment in progress (``/admin/reassign_partitions``) and that znode's version.

    ``partitions`` maps ``(topic, partition)`` to its target replica list, preferred leader
    first; an entry is removed when that partition's reassignment completes.
    ``throttle_bytes_per_s`` caps the replication traffic the reassignment may use (None: no cap).
    ``originals`` holds, for the entries that recorded it, the partition's replica list before
    its reassignment started: cancelling (AlterPartitionReassignments with null replicas) moves
    the partition back there, as Kafka does.
    """

    partitions: dict[tuple[str, int], tuple[NodeId, ...]]
    throttle_bytes_per_s: int | None
    version: int
    originals: dict[tuple[str, int], tuple[NodeId, ...]] = field(default_factory=dict)


# -- JSON helpers -----------------------------------------------------------------------------


def _dump(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def _load(data: bytes | None, path: str) -> dict[str, Any]:
    if not data:
        raise MalformedZnode(path, "it holds no data")
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedZnode(path, f"not JSON ({exc}): {data[:200]!r}") from exc
    if not isinstance(value, dict):
        raise MalformedZnode(path, f"expected a JSON object, got {data[:200]!r}")
    return value


def _int(obj: Mapping[str, Any], key: str, path: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedZnode(path, f"{key!r} must be an integer, got {value!r}")
    return value


def _node_ids(value: Any, what: str, path: str) -> tuple[NodeId, ...]:
    """A JSON list of broker ids (a replica list, an ISR)."""
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise MalformedZnode(path, f"{what} must be a list of integers, got {value!r}")
    return tuple(NodeId(v) for v in value)


# -- /cluster/id ------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    value = _load(data, CLUSTER_ID).get("id")
    if not isinstance(value, str) or not value:
        raise MalformedZnode(CLUSTER_ID, f"'id' must be a non-empty string, got {value!r}")
    return value


# -- /brokers/ids/<id> ------------------------------------------------------------------------


def encode_broker(reg: BrokerRegistration, timestamp_ms: int) -> bytes:
    """Version 5 broker registration, as Kafka 2.7+ writes it (no supported features)."""
    return _dump(
        {
            "listener_security_protocol_map": reg.listener_security_protocol_map,
            "endpoints": list(reg.advertised_endpoints),
            "jmx_port": -1,
            "features": {},
            "host": reg.host,
            "port": reg.port,
            "timestamp": str(timestamp_ms),
            "rack": reg.rack,
            "version": BROKER_REGISTRATION_VERSION,
        }
    )


def decode_broker(broker_id: NodeId, data: bytes | None) -> BrokerRegistration:
    """Decode any registration version >= 1; ``host``/``port`` fall back to the first endpoint."""
    path = broker_path(broker_id)
    obj = _load(data, path)
    raw_endpoints = obj.get("endpoints", [])
    if not isinstance(raw_endpoints, list) or not all(isinstance(e, str) for e in raw_endpoints):
        raise MalformedZnode(path, f"'endpoints' must be a list of strings, got {raw_endpoints!r}")
    host, port = obj.get("host"), obj.get("port")
    if (not isinstance(host, str) or not isinstance(port, int) or port < 0) and raw_endpoints:
        match = _ENDPOINT.match(raw_endpoints[0])
        if match is None:
            raise MalformedZnode(path, f"endpoint {raw_endpoints[0]!r} is not LISTENER://host:port")
        host, port = match["host"], int(match["port"])
    if not isinstance(host, str) or not isinstance(port, int):
        raise MalformedZnode(path, "no host/port and no endpoints")
    rack = obj.get("rack")
    protocols = obj.get("listener_security_protocol_map")
    if not isinstance(protocols, dict) or not all(isinstance(v, str) for v in protocols.values()):
        protocols = {}
    try:
        return BrokerRegistration(
            broker_id=broker_id,
            host=host,
            port=port,
            endpoints=tuple(raw_endpoints),
            rack=rack if isinstance(rack, str) else None,
            security_protocols=protocols,
        )
    except ValueError as exc:
        raise MalformedZnode(path, str(exc)) from exc


# -- /brokers/topics/<topic> ------------------------------------------------------------------


def encode_topic(
    topic_id: str, partitions: Mapping[int, tuple[NodeId, ...]], extra: Mapping[str, Any] | None = None
) -> bytes:
    """Version 3 assignment. ``extra`` carries keys read from an existing znode that we keep as they
    were (``adding_replicas``/``removing_replicas`` of an ongoing reassignment)."""
    value: dict[str, Any] = {"adding_replicas": {}, "removing_replicas": {}}
    value.update(extra or {})
    value["version"] = TOPIC_ASSIGNMENT_VERSION
    value["topic_id"] = topic_id
    value["partitions"] = {str(p): list(replicas) for p, replicas in sorted(partitions.items())}
    return _dump(value)


def decode_topic_raw(topic: str, data: bytes | None) -> dict[str, Any]:
    """The assignment znode as a JSON object (for read-modify-write that keeps unknown keys)."""
    return _load(data, topic_path(topic))


def decode_topic(topic: str, data: bytes | None, version: int) -> TopicAssignment:
    """Decode an assignment (versions 1-3). A missing ``topic_id`` (pre-2.8 Kafka) decodes as ``""``."""
    path = topic_path(topic)
    obj = _load(data, path)
    raw_partitions = obj.get("partitions", {})
    if not isinstance(raw_partitions, dict):
        raise MalformedZnode(path, f"'partitions' must be an object, got {raw_partitions!r}")
    partitions: dict[int, tuple[NodeId, ...]] = {}
    for key, replicas in raw_partitions.items():
        if not key.isdigit():
            raise MalformedZnode(path, f"partition id {key!r} is not a non-negative integer")
        partitions[int(key)] = _node_ids(replicas, f"replicas of partition {key}", path)
    topic_id = obj.get("topic_id", "")
    if not isinstance(topic_id, str):
        raise MalformedZnode(path, f"'topic_id' must be a string, got {topic_id!r}")
    return TopicAssignment(name=topic, topic_id=topic_id, partitions=dict(sorted(partitions.items())), version=version)


# -- /brokers/topics/<topic>/partitions/<p>/state ---------------------------------------------


TRUNCATION_KEY = "strait_truncation"


def encode_partition_state(state: PartitionState) -> bytes:
    obj: dict[str, Any] = {
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": PARTITION_STATE_VERSION,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.truncation is not None:
        obj[TRUNCATION_KEY] = {"leader_epoch": state.truncation.leader_epoch, "offset": state.truncation.offset}
    return _dump(obj)


def decode_partition_state(topic: str, partition: int, data: bytes | None, version: int) -> PartitionState:
    path = partition_state_path(topic, partition)
    obj = _load(data, path)
    raw = obj.get(TRUNCATION_KEY)
    truncation = None
    if raw is not None:
        if not isinstance(raw, dict):
            raise MalformedZnode(path, f"{TRUNCATION_KEY!r} must be an object, got {raw!r}")
        epoch, offset = _int(raw, "leader_epoch", path), _int(raw, "offset", path)
        if epoch < 0 or offset < 0:
            raise MalformedZnode(path, f"{TRUNCATION_KEY!r} needs a leader epoch and an offset >= 0, got {raw!r}")
        truncation = Truncation(LeaderEpoch(epoch), Offset(offset))
    return PartitionState(
        leader=NodeId(_int(obj, "leader", path)),
        leader_epoch=LeaderEpoch(_int(obj, "leader_epoch", path)),
        isr=_node_ids(obj.get("isr"), "'isr'", path),
        controller_epoch=_int(obj, "controller_epoch", path),
        version=version,
        truncation=truncation,
    )


# -- /config/topics/<topic> and /config/changes -----------------------------------------------


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    return _dump({"version": ENTITY_CONFIG_VERSION, "config": dict(sorted(config.items()))})


def decode_topic_config(topic: str, data: bytes | None) -> dict[str, str]:
    """The config map; an empty znode (Kafka tolerates it) decodes as ``{}``."""
    if not data:
        return {}
    path = topic_config_path(topic)
    config = _load(data, path).get("config", {})
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise MalformedZnode(path, f"'config' must map names to strings, got {config!r}")
    return dict(config)


def encode_config_change(topic: str) -> bytes:
    return _dump({"version": CONFIG_CHANGE_VERSION, "entity_path": f"topics/{topic}"})


# -- /latest_producer_id_block ----------------------------------------------------------------


def encode_producer_id_block(broker_id: NodeId, first: int, last: int) -> bytes:
    """Kafka writes the block bounds as strings (they are 64-bit)."""
    return _dump(
        {"version": PRODUCER_ID_BLOCK_VERSION, "broker": broker_id, "block_start": str(first), "block_end": str(last)}
    )


def decode_producer_id_block_end(data: bytes | None) -> int | None:
    """The last producer id claimed so far, or None when no block was ever claimed (empty znode)."""
    if not data:
        return None
    end = _load(data, PRODUCER_ID_BLOCK).get("block_end")
    if not isinstance(end, str) or not end.isdigit():
        raise MalformedZnode(PRODUCER_ID_BLOCK, f"'block_end' must be a decimal string, got {end!r}")
    return int(end)


# -- /controller and /controller_epoch ------------------------------------------------------


def encode_controller(broker_id: NodeId, timestamp_ms: int) -> bytes:
    return _dump({"version": CONTROLLER_VERSION, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes | None) -> NodeId:
    """The controller's broker id."""
    broker_id = NodeId(_int(_load(data, CONTROLLER), "brokerid", CONTROLLER))
    if broker_id < 0:
        raise MalformedZnode(CONTROLLER, f"'brokerid' {broker_id} is negative")
    return broker_id


def encode_controller_epoch(epoch: int) -> bytes:
    """Kafka writes the epoch as a bare decimal string."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes | None) -> int:
    text = (data or b"").strip()
    if not text.isdigit():
        raise MalformedZnode(CONTROLLER_EPOCH, f"expected a decimal epoch, got {(data or b'')[:200]!r}")
    return int(text)


# -- /admin/reassign_partitions -----------------------------------------------------------------


def encode_reassignment(
    partitions: Mapping[tuple[str, int], tuple[NodeId, ...]],
    throttle_bytes_per_s: int | None,
    originals: Mapping[tuple[str, int], tuple[NodeId, ...]] | None = None,
) -> bytes:
    """``originals`` (optional, per entry) become each entry's ``original_replicas``."""
    entries: list[dict[str, Any]] = []
    for (topic, partition), replicas in sorted(partitions.items()):
        entry: dict[str, Any] = {"topic": topic, "partition": partition, "replicas": list(replicas)}
        original = (originals or {}).get((topic, partition))
        if original is not None:
            entry["original_replicas"] = list(original)
        entries.append(entry)
    return _dump({"version": REASSIGNMENT_VERSION, "partitions": entries, "throttle_bytes_per_s": throttle_bytes_per_s})


def decode_reassignment(data: bytes | None, version: int) -> Reassignment:
    """Kafka's format (any extra keys ignored); a repeated partition takes its last entry, as in Kafka."""
    path = REASSIGN_PARTITIONS
    obj = _load(data, path)
    entries = obj.get("partitions")
    if not isinstance(entries, list):
        raise MalformedZnode(path, f"'partitions' must be a list, got {entries!r}")
    partitions: dict[tuple[str, int], tuple[NodeId, ...]] = {}
    originals: dict[tuple[str, int], tuple[NodeId, ...]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise MalformedZnode(path, f"entry {entry!r} has no 'topic' string")
        partition = _int(entry, "partition", path)
        key = (entry["topic"], partition)
        partitions[key] = _node_ids(entry.get("replicas"), f"replicas of {entry['topic']}-{partition}", path)
        originals.pop(key, None)  # a repeated entry replaces the earlier one entirely
        if entry.get("original_replicas") is not None:
            originals[key] = _node_ids(
                entry["original_replicas"], f"original replicas of {entry['topic']}-{partition}", path
            )
    throttle = obj.get("throttle_bytes_per_s")
    if throttle is not None and (isinstance(throttle, bool) or not isinstance(throttle, int)):
        raise MalformedZnode(path, f"'throttle_bytes_per_s' must be an integer or null, got {throttle!r}")
    return Reassignment(
        partitions=dict(sorted(partitions.items())),
        throttle_bytes_per_s=throttle,
        version=version,
        originals=dict(sorted(originals.items())),
    )


# -- /strait/offline_replicas/<id> --------------------------------------------------------------


def encode_offline_replicas(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _dump({"version": OFFLINE_REPLICAS_VERSION, "partitions": [[t, p] for t, p in sorted(set(partitions))]})


def decode_offline_replicas(broker_id: NodeId, data: bytes | None) -> frozenset[tuple[str, int]]:
    path = offline_replicas_path(broker_id)
    entries = _load(data, path).get("partitions")
    if not isinstance(entries, list):
        raise MalformedZnode(path, f"'partitions' must be a list, got {entries!r}")
    partitions = set()
    for entry in entries:
        if (
            not isinstance(entry, list)
            or len(entry) != 2
            or not isinstance(entry[0], str)
            or isinstance(entry[1], bool)
            or not isinstance(entry[1], int)
        ):
            raise MalformedZnode(path, f"entry {entry!r} is not [topic, partition]")
        partitions.add((entry[0], entry[1]))
    return frozenset(partitions)


# -- argument checks (ValueError naming the value) ---------------------------------------------


def validate_partition(topic: str, partition: int) -> None:
    if partition < 0:
        raise ValueError(f"topic {topic!r}: partition {partition} is negative")


def validate_assignment(topic: str, partitions: Mapping[int, tuple[NodeId, ...]], *, first: int) -> None:
    expected = list(range(first, first + len(partitions)))
    if not partitions or sorted(partitions) != expected:
        raise ValueError(
            f"topic {topic!r}: partitions {sorted(partitions)} must be numbered {first}..{first + len(partitions) - 1}"
            + (" (at least one)" if not partitions else "")
        )
    for partition, replicas in partitions.items():
        if not replicas or len(set(replicas)) != len(replicas) or any(r < 0 for r in replicas):
            raise ValueError(
                f"topic {topic!r} partition {partition}: replicas {list(replicas)} must be distinct "
                "non-negative broker ids, at least one"
            )


def validate_states(
    topic: str, states: Mapping[int, PartitionState], partitions: Mapping[int, tuple[NodeId, ...]]
) -> None:
    for partition in states:
        if partition not in partitions:
            raise ValueError(f"topic {topic!r}: state for partition {partition}, which is not being created")


def validate_config(topic: str, config: Mapping[str, str]) -> None:
    for key, value in config.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"topic {topic!r}: config {key!r}={value!r} must map strings to strings")


def validate_reassignment(
    partitions: Mapping[tuple[str, int], tuple[NodeId, ...]], throttle_bytes_per_s: int | None
) -> None:
    """Shape only (names, numbers, replica lists); the worker checks the topics and partitions exist."""
    if not partitions:
        raise ValueError("a reassignment needs at least one partition")
    for (topic, partition), replicas in partitions.items():
        validate_topic_name(topic)
        validate_partition(topic, partition)
        if not replicas or len(set(replicas)) != len(replicas) or any(r < 0 for r in replicas):
            raise ValueError(
                f"reassignment of {topic}-{partition}: replicas {list(replicas)} must be distinct "
                "non-negative broker ids, at least one"
            )
    if throttle_bytes_per_s is not None and (
        isinstance(throttle_bytes_per_s, bool) or not isinstance(throttle_bytes_per_s, int) or throttle_bytes_per_s <= 0
    ):
        raise ValueError(f"throttle_bytes_per_s must be a positive integer or None, got {throttle_bytes_per_s!r}")
