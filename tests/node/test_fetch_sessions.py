"""The fetch session cache (KIP-227): session ids and epochs, incremental updates, what an incremental
answer carries, eviction, and the metrics it reports. Pure: a fake clock, no I/O."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from node.errors import BrokerError
from node.fetch_sessions import (
    EVICTION_MS,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INT32_MAX,
    INVALID_SESSION_ID,
    Answer,
    FetchContext,
    FetchPosition,
    FetchSessionCache,
    PartitionKey,
    next_epoch,
)
from node.protocol import ErrorCode
from tests.node.handlers.fakes import FakeMetrics

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> float:
        return self.ms / 1000


def cache(slots: int = 10, clock: Clock | None = None, metrics: FakeMetrics | None = None) -> FetchSessionCache:
    return FetchSessionCache(slots, clock=clock or Clock(), metrics=metrics, rng=random.Random(7))


def positions(*keys: PartitionKey, offset: int = 0) -> dict[PartitionKey, FetchPosition]:
    return {key: FetchPosition(offset, 1024) for key in keys}


def entry(*, hw: int = 10, log_start: int = 0, error: int = 0, **extra: Any) -> dict[str, Any]:
    return {"error_code": error, "high_watermark": hw, "log_start_offset": log_start, **extra}


def answer_all(context: FetchContext, size: int = 0, **kw: Any) -> list[Answer]:
    return [Answer(key, entry(**kw), size) for key, _ in context.positions]


def open_session(sessions: FetchSessionCache, *keys: PartitionKey, privileged: bool = False) -> int:
    context = sessions.open(0, INITIAL_EPOCH, positions(*keys), [], uses_topic_ids=False)
    session_id, sent = context.respond(answer_all(context), privileged=privileged, uses_topic_ids=False)
    assert len(sent) == len(keys)
    return session_id


def test_epochs_go_up_by_one_and_wrap_to_one() -> None:
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(41) == 42
    assert next_epoch(INT32_MAX) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_a_sessionless_fetch_opens_nothing_and_closes_the_session_it_names() -> None:
    metrics = FakeMetrics()
    sessions = cache(metrics=metrics)
    context = sessions.open(0, FINAL_EPOCH, positions(("t", 0)), [], uses_topic_ids=False)
    assert context.respond(answer_all(context), privileged=False, uses_topic_ids=False)[0] == INVALID_SESSION_ID
    assert sessions.size == 0
    session_id = open_session(sessions, ("t", 0), ("t", 1))
    assert session_id != INVALID_SESSION_ID and metrics.sessions == (1, 2)
    context = sessions.open(session_id, FINAL_EPOCH, positions(("t", 0)), [], uses_topic_ids=False)
    assert sessions.get(session_id) is None and metrics.sessions == (0, 0)
    assert [key for key, _ in context.positions] == [("t", 0)]


def test_a_full_fetch_naming_a_session_replaces_it() -> None:
    sessions = cache()
    old = open_session(sessions, ("t", 0))
    context = sessions.open(old, INITIAL_EPOCH, positions(("u", 0)), [], uses_topic_ids=False)
    new, _ = context.respond(answer_all(context), privileged=False, uses_topic_ids=False)
    assert sessions.get(old) is None and new not in (old, INVALID_SESSION_ID)
    assert list(sessions.get(new).partitions) == [("u", 0)]  # type: ignore[union-attr]


def test_an_unknown_session_or_a_wrong_epoch_or_naming_is_an_error() -> None:
    sessions = cache()
    with pytest.raises(BrokerError) as raised:
        sessions.open(12345, 1, {}, [], uses_topic_ids=False)
    assert raised.value.code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    session_id = open_session(sessions, ("t", 0))
    with pytest.raises(BrokerError) as raised:
        sessions.open(session_id, 2, {}, [], uses_topic_ids=False)
    assert raised.value.code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    with pytest.raises(BrokerError) as raised:
        sessions.open(session_id, 1, {}, [], uses_topic_ids=True)
    assert raised.value.code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    sessions.open(session_id, 1, {}, [], uses_topic_ids=False)  # the right epoch still works
    with pytest.raises(BrokerError) as raised:
        sessions.open(session_id, 1, {}, [], uses_topic_ids=False)  # once
    assert raised.value.code == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_an_incremental_fetch_adds_updates_forgets_and_reads_the_whole_session() -> None:
    metrics = FakeMetrics()
    sessions = cache(metrics=metrics)
    session_id = open_session(sessions, ("t", 0), ("t", 1))
    moved = {("t", 1): FetchPosition(5, 2048), ("u", 0): FetchPosition(7, 512)}
    context = sessions.open(session_id, 1, moved, [("t", 0)], uses_topic_ids=False)
    assert context.incremental
    assert [(key, p.fetch_offset, p.partition_max_bytes) for key, p in context.positions] == [
        (("t", 1), 5, 2048),
        (("u", 0), 7, 512),
    ]
    assert metrics.sessions == (1, 2)
    context = sessions.open(session_id, 2, {}, [], uses_topic_ids=False)
    assert [p.fetch_offset for _, p in context.positions] == [5, 7]  # the node never moves them itself


def test_an_incremental_answer_carries_only_what_changed() -> None:
    sessions = cache()
    keys = [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("t", 4), ("t", 5)]
    session_id = open_session(sessions, *keys)  # answered hw 10, log start 0
    context = sessions.open(session_id, 1, {}, [], uses_topic_ids=False)
    answers = [
        Answer(keys[0], entry(), 0),  # nothing new
        Answer(keys[1], entry(), 300),  # records
        Answer(keys[2], entry(hw=11), 0),  # high watermark moved
        Answer(keys[3], entry(log_start=4), 0),  # log start moved
        Answer(keys[4], entry(error=ErrorCode.NOT_LEADER_OR_FOLLOWER, hw=-1), 0),
        Answer(keys[5], entry(diverging_epoch={"epoch": 3, "end_offset": 8}), 0),
    ]
    answered, sent = context.respond(answers, privileged=False, uses_topic_ids=False)
    assert answered == session_id
    assert [a.key for a in sent] == keys[1:]
    # the partition with records went last; the error is answered again once it is gone
    session = sessions.get(session_id)
    assert session is not None and list(session.partitions)[-1] == keys[1]
    context = sessions.open(session_id, 2, {}, [], uses_topic_ids=False)
    answers = [
        Answer(key, entry(hw=11 if key == keys[2] else 10, log_start=4 if key == keys[3] else 0), 0) for key in keys
    ]
    _, sent = context.respond(answers, privileged=False, uses_topic_ids=False)
    assert [a.key for a in sent] == [keys[4]]


def test_a_preferred_read_replica_is_always_answered() -> None:
    sessions = cache()
    session_id = open_session(sessions, ("t", 0))
    context = sessions.open(session_id, 1, {}, [], uses_topic_ids=False)
    _, sent = context.respond(
        [Answer(("t", 0), entry(preferred_read_replica=2), 0)], privileged=False, uses_topic_ids=False
    )
    assert len(sent) == 1


def test_a_session_left_without_partitions_is_closed() -> None:
    sessions = cache()
    session_id = open_session(sessions, ("t", 0))
    context = sessions.open(session_id, 1, {}, [("t", 0)], uses_topic_ids=False)
    assert not context.incremental and sessions.get(session_id) is None
    assert context.respond([], privileged=False, uses_topic_ids=False) == (INVALID_SESSION_ID, [])


def test_two_fetches_of_one_session_at_once_the_later_answer_is_an_epoch_error() -> None:
    sessions = cache()
    session_id = open_session(sessions, ("t", 0))
    waiting = sessions.open(session_id, 1, {}, [], uses_topic_ids=False)
    quick = sessions.open(session_id, 2, {}, [], uses_topic_ids=False)
    quick.respond(answer_all(quick), privileged=False, uses_topic_ids=False)
    with pytest.raises(BrokerError) as raised:
        waiting.respond(answer_all(waiting), privileged=False, uses_topic_ids=False)
    assert raised.value.code == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_sessions_by_topic_id() -> None:
    sessions = cache()
    topic = uuid.uuid4()
    context = sessions.open(0, INITIAL_EPOCH, positions((topic, 0)), [], uses_topic_ids=True)
    session_id, _ = context.respond(answer_all(context), privileged=False, uses_topic_ids=True)
    context = sessions.open(session_id, 1, positions((topic, 1)), [(topic, 0)], uses_topic_ids=True)
    assert [key for key, _ in context.positions] == [(topic, 1)]


def test_no_slots_means_no_sessions() -> None:
    sessions = cache(slots=0)
    context = sessions.open(0, INITIAL_EPOCH, positions(("t", 0)), [], uses_topic_ids=False)
    assert not context.opens
    assert context.respond(answer_all(context), privileged=False, uses_topic_ids=False)[0] == INVALID_SESSION_ID


def test_a_full_cache_evicts_a_stale_session_first() -> None:
    clock, metrics = Clock(), FakeMetrics()
    sessions = cache(slots=2, clock=clock, metrics=metrics)
    first = open_session(sessions, ("a", 0))
    clock.ms += 1
    second = open_session(sessions, ("b", 0), ("b", 1))
    clock.ms += EVICTION_MS  # the first is now unused for longer than EVICTION_MS; the second is not
    sessions.open(second, 1, {}, [], uses_topic_ids=False)
    third = open_session(sessions, ("c", 0))
    assert third != INVALID_SESSION_ID
    assert sessions.get(first) is None and sessions.get(second) is not None
    assert (sessions.evictions, metrics.evictions, metrics.sessions) == (1, 1, (2, 3))


def test_a_full_cache_of_young_sessions_takes_no_consumer_but_a_follower_evicts_a_consumer() -> None:
    clock = Clock()
    sessions = cache(slots=2, clock=clock)
    small = open_session(sessions, ("a", 0))
    big = open_session(sessions, ("b", 0), ("b", 1), ("b", 2))
    assert open_session_or_none(sessions, ("c", 0), ("c", 1), ("c", 2), ("c", 3)) == INVALID_SESSION_ID
    follower = open_session_or_none(sessions, ("r", 0), privileged=True)
    assert follower != INVALID_SESSION_ID
    assert sessions.get(small) is None and sessions.get(big) is not None  # the least valuable went
    # another follower evicts the consumer's session left, but no young follower session
    assert open_session_or_none(sessions, ("s", 0), privileged=True) != INVALID_SESSION_ID
    assert sessions.get(big) is None
    assert open_session_or_none(sessions, ("q", 0), privileged=True) == INVALID_SESSION_ID
    assert sessions.size == 2


def test_an_old_consumer_session_gives_way_to_a_bigger_consumer_session() -> None:
    clock = Clock()
    sessions = cache(slots=1, clock=clock)
    old = open_session(sessions, ("a", 0))
    clock.ms += EVICTION_MS + 1
    sessions.open(old, 1, {}, [], uses_topic_ids=False)  # used just now: not stale, but old
    assert open_session_or_none(sessions, ("b", 0)) == INVALID_SESSION_ID  # the same size is not worth more
    assert open_session_or_none(sessions, ("b", 0), ("b", 1)) != INVALID_SESSION_ID
    assert sessions.get(old) is None


def open_session_or_none(sessions: FetchSessionCache, *keys: PartitionKey, privileged: bool = False) -> int:
    context = sessions.open(0, INITIAL_EPOCH, positions(*keys), [], uses_topic_ids=False)
    return context.respond(answer_all(context), privileged=privileged, uses_topic_ids=False)[0]
