"""Kafka's rack-aware replica selector (KIP-392): a consumer in another rack than the leader is
sent to an in-sync replica in its own rack that holds its fetch offset; otherwise the leader serves."""

from __future__ import annotations

from node.replica_selector import RACK_AWARE, preferred_read_replica

RACKS = {1: "r1", 2: "r2", 3: "r2", 4: None}


def pick(
    client_rack: str, ends: dict[int, int], *, fetch_offset: int = 10, selector: str | None = RACK_AWARE
) -> int | None:
    return preferred_read_replica(
        selector=selector, client_rack=client_rack, leader=1, racks=RACKS, in_sync_ends=ends, fetch_offset=fetch_offset
    )


def test_a_consumer_in_a_followers_rack_is_sent_to_the_follower_that_has_read_furthest() -> None:
    assert pick("r2", {2: 10, 3: 12}) == 3
    assert pick("r2", {2: 12, 3: 12}) == 2  # a tie: the lower id


def test_the_leader_serves_without_a_selector_a_rack_or_a_better_replica() -> None:
    assert pick("r2", {2: 10, 3: 12}, selector=None) is None  # replica.selector.class unset (Kafka's default)
    assert pick("r2", {2: 10, 3: 12}, selector="com.example.Other") is None
    assert pick("", {2: 10, 3: 12}) is None  # no client.rack
    assert pick("r1", {2: 10, 3: 12}) is None  # the leader's own rack
    assert pick("r9", {2: 10, 3: 12}) is None  # no replica in that rack
    assert pick("r2", {}) is None  # no follower in sync


def test_a_follower_that_does_not_hold_the_fetch_offset_yet_is_not_chosen() -> None:
    assert pick("r2", {2: 9, 3: 11}, fetch_offset=10) == 3
    assert pick("r2", {2: 9, 3: 9}, fetch_offset=10) is None
