"""The exceptions of ``node.coordination``: one base, subclasses that carry the values involved."""

from __future__ import annotations

from node.ids import NodeId


class CoordinationError(Exception):
    """Base of every error raised by ``node.coordination`` (ZooKeeper state and the embedded server)."""


class ZooKeeperError(CoordinationError):
    """The embedded ZooKeeper server could not be found, started or stopped (the message says which part)."""


class BrokerIdInUse(CoordinationError):
    """``/brokers/ids/<broker_id>`` is held by another ZooKeeper session (another live broker)."""

    def __init__(self, broker_id: NodeId, owner_session: int) -> None:
        super().__init__(
            f"broker id {broker_id} is already registered by ZooKeeper session {owner_session:#x}; "
            f"another broker with broker.id={broker_id} is running (or its session has not expired yet)"
        )
        self.broker_id = broker_id
        self.owner_session = owner_session


class TopicExists(CoordinationError):
    """A topic of that name already has an assignment znode."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} already exists")
        self.topic = topic


class UnknownTopic(CoordinationError):
    """The topic has no assignment znode (never created, or deleted)."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic {topic!r} does not exist")
        self.topic = topic


class StaleState(CoordinationError):
    """A versioned (compare-and-set) write lost a race: the znode changed since it was read."""

    def __init__(self, path: str, expected_version: int) -> None:
        what = "not to exist yet" if expected_version == -1 else f"to be at version {expected_version}"
        super().__init__(f"{path} changed concurrently: expected it {what}; re-read and retry")
        self.path = path
        self.expected_version = expected_version


class MalformedZnode(CoordinationError):
    """A znode holds data that does not decode as the layout says (written by a foreign or broken tool)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"znode {path} is malformed: {reason}")
        self.path = path
        self.reason = reason


class ReassignmentInProgress(CoordinationError):
    """``/admin/reassign_partitions`` exists: a reassignment is still running (one at a time, as in Kafka)."""

    def __init__(self, pending: tuple[tuple[str, int], ...]) -> None:
        shown = ", ".join(f"{topic}-{partition}" for topic, partition in pending[:10])
        more = f" and {len(pending) - 10} more" if len(pending) > 10 else ""
        super().__init__(
            f"a partition reassignment is in progress ({len(pending)} partitions left: {shown}{more}); "
            "wait for it to complete before starting another"
        )
        self.pending = pending
