"""The group coordinator's typed errors; each names the group, partition or bytes involved.

Inside ``node.groups`` failures are these exceptions; the request handlers of ``GroupCoordinator``
turn them into Kafka error codes at the response boundary.
"""

from __future__ import annotations


class GroupError(Exception):
    """Base of every error raised by ``node.groups``."""


class OffsetStoreError(GroupError):
    """Raised by an ``OffsetStore`` whose ``__consumer_offsets`` partition is not (or no longer) served here.

    The coordinator answers NOT_COORDINATOR for the request that needed the write: the client then
    asks FindCoordinator again and finds the partition's new leader.
    """


class OffsetStoreTimeout(OffsetStoreError):
    """The store did not make a write durable within ``offsets_commit_timeout_ms`` (REQUEST_TIMED_OUT)."""

    def __init__(self, partition: int, timeout_ms: int) -> None:
        super().__init__(f"__consumer_offsets-{partition}: the write was not durable within {timeout_ms} ms")
        self.partition = partition
        self.timeout_ms = timeout_ms


class RecordFormatError(GroupError):
    """A ``__consumer_offsets`` key or value, or a consumer-protocol blob, that does not parse."""


class NotCoordinatorError(GroupError):
    """An operator call for a group whose ``__consumer_offsets`` partition is not loaded here."""

    def __init__(self, group_id: str, partition: int, *, loading: bool) -> None:
        what = "is still loading" if loading else "is not served by this node"
        super().__init__(f"group {group_id!r} lives in __consumer_offsets-{partition}, which {what}")
        self.group_id = group_id
        self.partition = partition
        self.loading = loading


class GroupBusy(GroupError):
    """An operator change refused because the group has active members (stop its consumers first)."""

    def __init__(self, group_id: str, state: str, members: int) -> None:
        super().__init__(
            f"group {group_id!r} is {state} with {members} active member(s): stop its consumers before changing it"
        )
        self.group_id = group_id
        self.state = state
        self.members = members


class IllegalGroupTransition(GroupError):
    """A state change the group state machine does not allow: a bug in the coordinator, never a client error."""

    def __init__(self, group_id: str, current: str, target: str) -> None:
        super().__init__(f"group {group_id!r} cannot go from {current} to {target}")
        self.group_id = group_id
        self.current = current
        self.target = target
