"""One group's rules, without a coordinator: protocol choice, member checks, retention, state moves."""

from __future__ import annotations

import pytest

from node.groups import GroupState, OffsetCommitValue
from node.groups._errors import IllegalGroupTransition
from node.groups._group import Group, Member
from node.protocol import ErrorCode
from tests.node.groups.helpers import subscription

NOW = 1_000_000


def member(member_id: str, *protocols: str, instance: str | None = None, topics: tuple[str, ...] = ("t",)) -> Member:
    return Member(
        member_id,
        instance,
        "client",
        "/h",
        30000,
        10000,
        "consumer",
        tuple((p, subscription(*topics)) for p in protocols),
    )


def group_of(*members: Member, state: GroupState = GroupState.PREPARING_REBALANCE) -> Group:
    g = Group("g", now_ms=NOW)
    for m in members:
        g.add(m, None)
    g.state = state
    return g


def test_the_protocol_all_support_that_most_prefer_wins() -> None:
    g = group_of(
        member("a", "roundrobin", "range"),
        member("b", "range", "roundrobin", "sticky"),
        member("c", "roundrobin", "range"),
    )
    assert g.select_protocol() == "roundrobin"
    g.remove("c")
    # one vote each: the first member's vote decides, deterministically
    assert g.select_protocol() == "roundrobin"
    g.remove("a")
    assert g.select_protocol() == "range"


def test_a_protocol_only_some_support_is_never_chosen() -> None:
    g = group_of(member("a", "sticky", "range"), member("b", "range"))
    assert g.select_protocol() == "range"


def test_supports_protocols() -> None:
    empty = Group("g", now_ms=NOW)
    assert empty.supports_protocols("consumer", ["range"])
    assert not empty.supports_protocols("", ["range"])
    assert not empty.supports_protocols("consumer", [])
    g = group_of(member("a", "range", "roundrobin"), member("b", "range"))
    assert g.supports_protocols("consumer", ["sticky", "range"])
    assert not g.supports_protocols("consumer", ["roundrobin"])  # b does not support it
    assert not g.supports_protocols("connect", ["range"])


def test_validate_member_and_static_fencing() -> None:
    g = group_of(member("a-1", "range", instance="a"), member("b", "range"))
    assert g.validate_member("b", None) is None
    assert g.validate_member("x", None) is ErrorCode.UNKNOWN_MEMBER_ID
    assert g.validate_member("a-1", "a") is None
    assert g.validate_member("a-0", "a") is ErrorCode.FENCED_INSTANCE_ID
    assert g.validate_member("a-1", "other") is ErrorCode.UNKNOWN_MEMBER_ID
    replaced = g.replace_static_member("a", "a-1", "a-2")
    assert replaced.member_id == "a-2" and g.leader_id == "a-2"
    assert g.validate_member("a-1", "a") is ErrorCode.FENCED_INSTANCE_ID
    assert set(g.members) == {"a-2", "b"}


def test_leadership_passes_on_when_the_leader_goes() -> None:
    g = group_of(member("a", "range"), member("b", "range"))
    assert g.leader_id == "a"
    g.remove("a")
    assert g.leader_id == "b"
    g.remove("b")
    assert g.leader_id is None


def test_illegal_transitions_name_both_states() -> None:
    g = Group("g", now_ms=NOW)
    with pytest.raises(IllegalGroupTransition, match="from Empty to Stable"):
        g.transition_to(GroupState.STABLE, NOW)
    g.transition_to(GroupState.PREPARING_REBALANCE, NOW + 5)
    assert (g.state, g.state_timestamp_ms) == (GroupState.PREPARING_REBALANCE, NOW + 5)


def offsets(**commit_times: int) -> dict[tuple[str, int], OffsetCommitValue]:
    return {(topic, 0): OffsetCommitValue(1, "", ts) for topic, ts in commit_times.items()}


def test_retention_of_an_empty_group_counts_from_when_it_became_empty() -> None:
    g = Group("g", now_ms=NOW)
    g.protocol_type = "consumer"
    g.offsets = offsets(a=0, b=NOW)
    assert g.expired_offsets(NOW + 999, 1000) == []
    assert sorted(g.expired_offsets(NOW + 1000, 1000)) == [("a", 0), ("b", 0)]
    g.pending_commits[("a", 0)] += 1
    assert g.expired_offsets(NOW + 1000, 1000) == [("b", 0)]


def test_retention_of_a_simple_group_counts_from_each_commit() -> None:
    g = Group("g", now_ms=NOW)
    g.offsets = offsets(a=NOW - 1000, b=NOW)
    assert g.expired_offsets(NOW, 1000) == [("a", 0)]
    g.offsets[("c", 0)] = OffsetCommitValue(1, "", NOW, expire_timestamp=NOW + 10)
    assert sorted(g.expired_offsets(NOW + 10, 1_000_000)) == [("c", 0)]


def test_retention_of_a_stable_consumer_group_spares_subscribed_topics() -> None:
    g = group_of(member("a", "range", topics=("kept",)))
    g.init_next_generation(NOW)
    g.transition_to(GroupState.STABLE, NOW)
    g.offsets = offsets(kept=0, dropped=0)
    assert g.expired_offsets(NOW, 1000) == [("dropped", 0)]
    g.state = GroupState.PREPARING_REBALANCE
    assert g.expired_offsets(NOW, 1000) == []  # no retention while a consumer group rebalances


def test_subscribed_topics_come_from_the_members_subscriptions() -> None:
    g = group_of(member("a", "range", topics=("x", "y")), member("b", "range", topics=("y", "z")))
    g.init_next_generation(NOW)
    assert (g.state, g.generation_id, g.protocol_name) == (GroupState.COMPLETING_REBALANCE, 1, "range")
    assert g.subscribed_topics == frozenset({"x", "y", "z"})
    assert g.is_subscribed_to_topic("z") and not g.is_subscribed_to_topic("w")


def test_undecodable_subscriptions_mean_unknown_topics() -> None:
    bad = Member("a", None, "c", "/h", 1, 1, "consumer", (("range", b"\x00"),))
    g = group_of(bad)
    g.init_next_generation(NOW)
    assert g.subscribed_topics is None
    assert g.snapshot().members[0].assignment == ()
