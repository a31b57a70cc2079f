"""Which replica a consumer should fetch from (KIP-392, fetch from follower): Kafka's
rack-aware replica selector.

A leader configured with ``replica.selector.class`` set to Kafka's
``org.apache.kafka.common.replica.RackAwareReplicaSelector`` answers a consumer's Fetch (v11+,
``rack_id`` = the consumer's ``client.rack``) with ``preferred_read_replica`` when another replica
sits in the consumer's rack; the consumer then fetches from that replica until it fails or its
metadata changes. The rules, as Kafka's selector and ``ReplicaManager`` apply them:

* no ``client.rack``, no selector configured, or the leader in the consumer's rack: the leader
  serves (no preferred replica);
* otherwise a replica in the consumer's rack that is in sync and already holds the fetch offset
  (its log end offset reached it); among several, the one whose log ends furthest, then the
  lowest id; none: the leader serves.

Sans-IO: the caller passes what the leader knows.
"""

from __future__ import annotations

from collections.abc import Mapping

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTORS = frozenset({RACK_AWARE})


def preferred_read_replica(
    *,
    selector: str | None,
    client_rack: str,
    leader: int,
    racks: Mapping[int, str | None],
    in_sync_ends: Mapping[int, int],
    fetch_offset: int,
) -> int | None:
    """The replica a consumer in ``client_rack`` should read ``fetch_offset`` from, or None for
    the leader itself. ``in_sync_ends``: each in-sync follower's log end offset."""
    if selector != RACK_AWARE or not client_rack or racks.get(leader) == client_rack:
        return None
    candidates = [
        (end, -replica)
        for replica, end in in_sync_ends.items()
        if replica != leader and racks.get(replica) == client_rack and end >= fetch_offset
    ]
    if not candidates:
        return None
    return -max(candidates)[1]
