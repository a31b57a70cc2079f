"""Transactional offset commits: written as the producer's transactional batch, visible only once its
transaction commits (the marker callback), dropped on abort, and replayed the same way from the log."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from node.groups import (
    GroupConfig,
    GroupCoordinator,
    OffsetCommitKey,
    OffsetCommitValue,
    TxnEnd,
    TxnRecord,
    decode_offset_commit_value,
    encode_key,
    encode_offset_commit_value,
)
from node.protocol import ApiKey, ErrorCode
from tests.node.groups.helpers import CONFIG, Client, Env, MemoryStore, committed, request, response, run, stable_group

pytestmark = pytest.mark.unit

PID, EPOCH = 4000, 2
RETENTION = GroupConfig(offsets_partitions=4, offsets_retention_ms=60_000, offsets_retention_check_interval_ms=5_000)


async def txn_commit(
    env: Env, group: str, offsets: dict[tuple[str, int], int], *, version: int = 3, **member: Any
) -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": p, "committed_offset": offset, "committed_leader_epoch": 3, "committed_metadata": "m"}
        )
    req = request(
        ApiKey.TXN_OFFSET_COMMIT,
        version,
        transactional_id="tx",
        group_id=group,
        producer_id=PID,
        producer_epoch=EPOCH,
        topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        **member,
    )
    body = response(ApiKey.TXN_OFFSET_COMMIT, version, await env.coordinator.txn_offset_commit(req, version))
    return {(t.name, p.partition_index): p.error_code for t in body.topics for p in t.partitions}


def test_offsets_of_a_transaction_are_hidden_until_it_commits() -> None:
    async def test(env: Env) -> None:
        c = env.coordinator
        assert await txn_commit(env, "g", {("t", 0): 10, ("t", 1): 20}) == {("t", 0): 0, ("t", 1): 0}
        (partition, producer, records), *_ = env.store.transactional
        assert (partition, producer) == (c.partition_for("g"), (PID, EPOCH))
        assert decode_offset_commit_value(records[0][1] or b"").offset == 10
        assert committed(await Client(c).fetch("g", [("t", 0)])) == {("t", 0): (-1, "")}
        c.complete_txn_offsets(c.partition_for("g"), PID + 1, commit=True)  # another producer's marker
        assert committed(await Client(c).fetch("g", [("t", 0)])) == {("t", 0): (-1, "")}
        c.complete_txn_offsets(c.partition_for("g"), PID, commit=True)
        assert committed(await Client(c).fetch("g")) == {("t", 0): (10, "m"), ("t", 1): (20, "m")}

    run(test)


def test_offsets_of_an_aborted_transaction_are_dropped() -> None:
    async def test(env: Env) -> None:
        c = env.coordinator
        assert await Client(c).commit("g", {("t", 0): (5, None)}) == {("t", 0): 0}
        assert await txn_commit(env, "g", {("t", 0): 10}) == {("t", 0): 0}
        c.complete_txn_offsets(c.partition_for("g"), PID, commit=False)
        c.complete_txn_offsets(c.partition_for("g"), PID, commit=True)  # nothing left to commit
        assert committed(await Client(c).fetch("g")) == {("t", 0): (5, "")}

    run(test)


def test_v3_checks_the_member_and_generation_when_given() -> None:
    async def test(env: Env) -> None:
        (member,) = await stable_group(env, 1)
        ok = await txn_commit(env, "g", {("t", 0): 1}, member_id=member.member_id, generation_id=member.generation)
        assert ok == {("t", 0): 0}
        unknown = await txn_commit(env, "g", {("t", 0): 1}, member_id="nobody", generation_id=member.generation)
        assert unknown == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
        stale = await txn_commit(env, "g", {("t", 0): 1}, member_id=member.member_id, generation_id=99)
        assert stale == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
        assert await txn_commit(env, "g", {("t", 0): 1}, version=2) == {("t", 0): 0}  # no member before v3

    run(test)


def test_a_failed_write_leaves_nothing_pending() -> None:
    store = MemoryStore()

    async def test(env: Env) -> None:
        c = env.coordinator
        store.unavailable.add(c.partition_for("g"))
        assert await txn_commit(env, "g", {("t", 0): 10}) == {("t", 0): ErrorCode.NOT_COORDINATOR}
        store.unavailable.clear()
        c.complete_txn_offsets(c.partition_for("g"), PID, commit=True)
        assert committed(await Client(c).fetch("g", [("t", 0)])) == {("t", 0): (-1, "")}

    run(test, store=store)


def offset(group: str, partition: int, value: int) -> tuple[bytes, bytes]:
    return encode_key(OffsetCommitKey(group, "t", partition)), encode_offset_commit_value(
        OffsetCommitValue(value, "", 1)
    )


def test_a_load_counts_committed_transactions_drops_aborted_ones_and_keeps_open_ones_pending() -> None:
    coordinator_probe = GroupCoordinator(CONFIG, MemoryStore(), wall_clock_ms=lambda: 0)
    partition = coordinator_probe.partition_for("g")

    def load(c: GroupCoordinator) -> None:
        c.unload_partition(partition)
        c.load_partition(
            partition,
            [
                offset("g", 0, 1),
                TxnRecord(7, *offset("g", 0, 100)),
                TxnRecord(8, *offset("g", 1, 200)),
                TxnRecord(9, *offset("g", 2, 300)),
                TxnEnd(7, commit=True),
                TxnEnd(8, commit=False),
            ],
        )

    async def test(env: Env) -> None:
        c = env.coordinator
        load(c)
        assert committed(await Client(c).fetch("g")) == {("t", 0): (100, "")}
        c.complete_txn_offsets(partition, 9, commit=True)  # producer 9's transaction was still open
        assert committed(await Client(c).fetch("g")) == {("t", 0): (100, ""), ("t", 2): (300, "")}
        c.unload_partition(partition)
        load(c)
        c.unload_partition(partition)
        c.load_partition(partition, [])
        c.complete_txn_offsets(partition, 9, commit=True)  # unloading forgot what was pending
        assert committed(await Client(c).fetch("g")) == {}

    run(test)


def test_the_response_is_the_schema_of_every_version() -> None:
    async def test(env: Env) -> None:
        for version in range(4):
            assert await txn_commit(env, "g", {("t", 0): version}, version=version) == {("t", 0): 0}

    run(test)


def test_a_group_being_deleted_refuses_transactional_offsets() -> None:
    store = MemoryStore()

    async def test(env: Env) -> None:
        c = env.coordinator
        assert await Client(c).commit("g", {("t", 0): (5, None)}) == {("t", 0): 0}
        store.gate = trio.Event()
        env.nursery.start_soon(c.delete_groups, ["g"])  # Dead while its tombstones are written
        await trio.sleep(0.01)
        assert await txn_commit(env, "g", {("t", 0): 10}) == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
        store.gate.set()

    run(test, store=store)


def test_a_group_holding_only_offsets_of_an_open_transaction_does_not_expire() -> None:
    async def test(env: Env) -> None:
        c = env.coordinator
        assert await txn_commit(env, "g", {("t", 0): 10}) == {("t", 0): 0}
        assert await txn_commit(env, "h", {("t", 0): 10}) == {("t", 0): 0}
        c.complete_txn_offsets(c.partition_for("h"), PID, commit=False)
        await trio.sleep((RETENTION.offsets_retention_ms + 2 * RETENTION.offsets_retention_check_interval_ms) / 1000)
        assert c.describe("g") is not None
        assert c.describe("h") is None  # its transaction aborted: an Empty group without offsets goes

    run(test, config=RETENTION)
