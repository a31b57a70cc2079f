"""The transaction coordinator against fakes: the life of a transaction, fencing, KIP-360 bumps, timeouts,
expiration, load and unload, and the errors Kafka answers."""

from __future__ import annotations

import pytest
import trio

from node.protocol import ErrorCode
from node.txn import MAX_EPOCH, TransactionCoordinator, TxnLogValue, TxnState, encode_key, encode_value
from tests.node.groups.helpers import wall_ms
from tests.node.txn.helpers import CONFIG, Env, FakeMarkers, MemoryLog, run, settle

pytestmark = pytest.mark.unit

TX = "tx-1"
TIMEOUT_MS = 30_000
E = ErrorCode


async def init(
    env: Env, tid: str = TX, *, pid: int = -1, epoch: int = -1, timeout: int = TIMEOUT_MS
) -> tuple[int, int]:
    result = await env.coordinator.init_producer_id(tid, timeout, pid, epoch)
    assert result.error is E.NONE, result
    return result.producer_id, result.producer_epoch


def state(env: Env, tid: str = TX) -> str:
    error, described = env.coordinator.describe(tid)
    assert error is E.NONE and described is not None
    return described.state


def test_init_gives_a_new_id_at_epoch_0_and_bumps_the_epoch_each_time() -> None:
    async def test(env: Env) -> None:
        assert await init(env) == (1000, 0)
        assert await init(env) == (1000, 1)
        assert env.log.states(TX) == ["Empty", "Empty"]
        first = env.log.history(TX)[0]
        assert first is not None and (first.timeout_ms, first.start_ms) == (TIMEOUT_MS, -1)

    run(test)


def test_init_refuses_bad_ids_bad_timeouts_and_ids_led_elsewhere() -> None:
    async def test(env: Env) -> None:
        c = env.coordinator
        assert (await c.init_producer_id("", 1000)).error is E.INVALID_REQUEST
        assert (await c.init_producer_id(TX, 0)).error is E.INVALID_TRANSACTION_TIMEOUT
        assert (await c.init_producer_id(TX, CONFIG.max_timeout_ms + 1)).error is E.INVALID_TRANSACTION_TIMEOUT
        c.unload_partition(c.partition_for(TX))
        assert (await c.init_producer_id(TX, 1000)).error is E.NOT_COORDINATOR
        assert env.ids.next == 1000  # no id used up

    run(test)


def test_nothing_is_served_before_run() -> None:
    async def main() -> None:
        c = TransactionCoordinator(CONFIG, MemoryLog(), None, FakeMarkers(), wall_clock_ms=wall_ms)  # type: ignore[arg-type]
        c.load_partition(c.partition_for(TX), [], 1)
        assert (await c.init_producer_id(TX, 1000)).error is E.COORDINATOR_NOT_AVAILABLE
        assert c.list_transactions()[0] is E.COORDINATOR_NOT_AVAILABLE

    trio.run(main)


def test_a_committed_transaction_writes_prepare_markers_then_complete() -> None:
    async def test(env: Env) -> None:
        c = env.coordinator
        pid, epoch = await init(env)
        assert await c.add_partitions(TX, pid, epoch, [("t", 0), ("t", 1)]) is E.NONE
        assert await c.add_partitions(TX, pid, epoch, [("t", 1)]) is E.NONE  # already in: nothing written
        assert await c.add_partitions(TX, pid, epoch, [("u", 0)]) is E.NONE
        assert state(env) == "Ongoing"
        _, described = c.describe(TX)
        assert described is not None and described.partitions == (("t", 0), ("t", 1), ("u", 0))
        assert described.start_ms == wall_ms()
        assert await c.end_txn(TX, pid, epoch, commit=True) is E.NONE
        await settle(lambda: state(env) == "CompleteCommit")
        assert env.log.states(TX) == ["Empty", "Ongoing", "Ongoing", "PrepareCommit", "CompleteCommit"]
        assert sorted(tp for tp, _ in env.markers.written) == [("t", 0), ("t", 1), ("u", 0)]
        marker = env.markers.written[0][1]
        assert (marker.producer_id, marker.producer_epoch, marker.commit, marker.coordinator_epoch) == (pid, 0, True, 5)
        last = env.log.history(TX)[-1]
        assert last is not None and last.partitions == frozenset()
        assert await c.end_txn(TX, pid, epoch, commit=True) is E.NONE  # a retry of a completed commit
        assert await c.end_txn(TX, pid, epoch, commit=False) is E.INVALID_TXN_STATE

    run(test)


def test_end_txn_and_add_partitions_check_the_producer_and_the_state() -> None:
    async def test(env: Env) -> None:
        c = env.coordinator
        pid, epoch = await init(env)
        assert await c.end_txn(TX, pid, epoch, commit=True) is E.INVALID_TXN_STATE  # nothing open
        assert await c.add_partitions(TX, pid + 1, epoch, [("t", 0)]) is E.INVALID_PRODUCER_ID_MAPPING
        assert await c.add_partitions("unknown", pid, epoch, [("t", 0)]) is E.INVALID_PRODUCER_ID_MAPPING
        assert await c.add_partitions(TX, pid, epoch + 1, [("t", 0)]) is E.PRODUCER_FENCED
        env.markers.answers[("t", 0)] = [E.NOT_LEADER_OR_FOLLOWER] * 3 + [E.NONE]
        assert await c.add_partitions(TX, pid, epoch, [("t", 0)]) is E.NONE
        assert await c.end_txn(TX, pid, epoch, commit=False) is E.NONE
        # While the abort completes: the same end again waits, the other end is refused, nothing may be added.
        assert await c.end_txn(TX, pid, epoch, commit=False) is E.CONCURRENT_TRANSACTIONS
        assert await c.end_txn(TX, pid, epoch, commit=True) is E.INVALID_TXN_STATE
        assert await c.add_partitions(TX, pid, epoch, [("t", 1)]) is E.CONCURRENT_TRANSACTIONS
        assert (await c.init_producer_id(TX, TIMEOUT_MS)).error is E.CONCURRENT_TRANSACTIONS
        await settle(lambda: state(env) == "CompleteAbort")
        assert len(env.markers.sent) == 4  # sent again until the leader took it
        assert not env.markers.written[0][1].commit

    run(test)


def test_a_write_under_way_answers_concurrent_transactions_and_a_failed_write_changes_nothing() -> None:
    async def test(env: Env) -> None:
        c = env.coordinator
        pid, epoch = await init(env)
        env.log.gate = trio.Event()
        results: list[ErrorCode] = []

        async def add() -> None:
            results.append(await c.add_partitions(TX, pid, epoch, [("t", 0)]))

        env.nursery.start_soon(add)
        await trio.sleep(0.001)
        assert await c.add_partitions(TX, pid, epoch, [("t", 1)]) is E.CONCURRENT_TRANSACTIONS
        env.log.gate.set()
        env.log.gate = None
        await settle(lambda: results == [E.NONE])
        env.log.unavailable.add(c.partition_for(TX))
        assert await c.add_partitions(TX, pid, epoch, [("t", 2)]) is E.NOT_COORDINATOR
        _, described = c.describe(TX)
        assert described is not None and described.partitions == (("t", 0),)

    run(test)


def test_a_write_that_does_not_become_durable_in_time_answers_coordinator_not_available() -> None:
    async def test(env: Env) -> None:
        pid, epoch = await init(env)
        env.log.gate = trio.Event()  # never set: the append hangs
        assert await env.coordinator.add_partitions(TX, pid, epoch, [("t", 0)]) is E.COORDINATOR_NOT_AVAILABLE
        assert state(env) == "Empty"

    run(test)


def test_a_new_producer_instance_fences_the_zombie_by_aborting_its_open_transaction() -> None:
    async def test(env: Env) -> None:
        c = env.coordinator
        pid, zombie_epoch = await init(env)
        assert await c.add_partitions(TX, pid, zombie_epoch, [("t", 0)]) is E.NONE
        # The new instance: its open transaction is aborted with a bumped epoch; it is told to retry.
        assert (await c.init_producer_id(TX, TIMEOUT_MS)).error is E.CONCURRENT_TRANSACTIONS
        await settle(lambda: state(env) == "CompleteAbort")
        (tp, marker), *_ = env.markers.written
        assert (tp, marker.commit, marker.producer_epoch) == (("t", 0), False, zombie_epoch + 1)
        # The zombie can do nothing more with its epoch.
        assert await c.add_partitions(TX, pid, zombie_epoch, [("t", 1)]) is E.PRODUCER_FENCED
        assert await c.end_txn(TX, pid, zombie_epoch, commit=True) is E.PRODUCER_FENCED
        # The retry gets the epoch above the fencing one.
        assert await init(env) == (pid, zombie_epoch + 2)
        assert env.log.states(TX) == ["Empty", "Ongoing", "PrepareAbort", "CompleteAbort", "Empty"]

    run(test)


def test_kip_360_a_producer_resumes_with_its_id_and_epoch_and_a_retry_gets_the_same_answer() -> None:
    async def test(env: Env) -> None:
        pid, epoch = await init(env)
        assert await init(env, pid=pid, epoch=epoch) == (pid, epoch + 1)
        assert await init(env, pid=pid, epoch=epoch) == (pid, epoch + 1)  # the answer was lost: same again
        assert await init(env, pid=pid, epoch=epoch + 1) == (pid, epoch + 2)
        stale = await env.coordinator.init_producer_id(TX, TIMEOUT_MS, pid, epoch)
        assert stale.error is E.PRODUCER_FENCED
        other = await env.coordinator.init_producer_id(TX, TIMEOUT_MS, pid + 7, 0)
        assert other.error is E.PRODUCER_FENCED

    run(test)


def stored(tid: str, value: TxnLogValue | None) -> tuple[bytes, bytes | None]:
    return encode_key(tid), None if value is None else encode_value(value)


def test_an_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    log = MemoryLog()
    value = TxnLogValue(77, MAX_EPOCH - 1, TIMEOUT_MS, TxnState.COMPLETE_COMMIT, frozenset(), 1, -1)
    coordinator = TransactionCoordinator(CONFIG, log, None, None, wall_clock_ms=wall_ms)  # type: ignore[arg-type]
    log.records[coordinator.partition_for(TX)].append(stored(TX, value))

    async def test(env: Env) -> None:
        assert await init(env, pid=77, epoch=MAX_EPOCH - 1) == (1000, 0)
        # A retry of that call (its answer lost) names the old id at its exhausted epoch: the same answer.
        assert await init(env, pid=77, epoch=MAX_EPOCH - 1) == (1000, 0)
        assert await init(env, pid=1000, epoch=0) == (1000, 1)

    run(test, log=log)


def test_a_transaction_open_past_its_timeout_is_aborted_with_a_bumped_epoch() -> None:
    async def test(env: Env) -> None:
        c = env.coordinator
        pid, epoch = await init(env, timeout=5_000)
        assert await c.add_partitions(TX, pid, epoch, [("t", 0)]) is E.NONE
        await trio.sleep(4)
        assert state(env) == "Ongoing"
        await settle(lambda: state(env) == "CompleteAbort", seconds=10)
        assert env.markers.written[0][1].producer_epoch == epoch + 1
        assert await c.end_txn(TX, pid, epoch, commit=True) is E.PRODUCER_FENCED

    run(test)


def test_ids_unused_for_the_expiration_time_are_forgotten() -> None:
    async def test(env: Env) -> None:
        c = env.coordinator
        pid, epoch = await init(env)
        await init(env, "busy")
        busy_pid, busy_epoch = await init(env, "busy")
        assert await c.add_partitions("busy", busy_pid, busy_epoch, [("t", 0)]) is E.NONE
        env.markers.answers[("t", 0)] = [E.NOT_LEADER_OR_FOLLOWER]  # "busy" never completes
        assert await c.end_txn("busy", busy_pid, busy_epoch, commit=True) is E.NONE
        await trio.sleep(CONFIG.id_expiration_ms / 1000 + CONFIG.remove_expired_interval_ms / 1000)
        assert c.describe(TX)[0] is E.TRANSACTIONAL_ID_NOT_FOUND
        assert env.log.states(TX)[-1] == "tombstone"
        assert state(env, "busy") == "PrepareCommit"  # a transaction still completing is kept
        assert (pid, epoch) != (-1, -1)

    run(test)


def test_load_rebuilds_ids_completes_prepared_transactions_and_skips_tombstones_and_bad_records() -> None:
    log = MemoryLog()
    probe = TransactionCoordinator(CONFIG, log, None, None, wall_clock_ms=wall_ms)  # type: ignore[arg-type]
    ongoing = TxnLogValue(1, 2, TIMEOUT_MS, TxnState.ONGOING, frozenset({("t", 0)}), 10, 5)
    prepared = TxnLogValue(2, 4, TIMEOUT_MS, TxnState.PREPARE_COMMIT, frozenset({("t", 1), ("u", 0)}), 10, 5)
    for tid, values in {
        "a": [ongoing],
        "b": [prepared],
        "c": [ongoing, None],
    }.items():
        log.records[probe.partition_for(tid)].extend(stored(tid, v) for v in values)
    log.records[probe.partition_for("a")].append((encode_key("a") + b"", b"\x00\x09junk"))  # unreadable: skipped
    log.records[probe.partition_for("a")].append((encode_key("a"), encode_value(ongoing)))

    async def test(env: Env) -> None:
        c = env.coordinator
        assert state(env, "a") == "Ongoing"
        assert c.describe("c")[0] is E.TRANSACTIONAL_ID_NOT_FOUND
        await settle(lambda: state(env, "b") == "CompleteCommit")
        assert sorted(tp for tp, _ in env.markers.written) == [("t", 1), ("u", 0)]
        assert {m.coordinator_epoch for _, m in env.markers.written} == {5}
        assert await c.add_partitions("a", 1, 2, [("t", 3)]) is E.NONE

    run(test, log=log)


def test_unloading_stops_the_markers_and_leaves_completion_to_the_next_coordinator() -> None:
    markers = FakeMarkers(answers={("t", 0): [E.NOT_LEADER_OR_FOLLOWER]})

    async def test(env: Env) -> None:
        c = env.coordinator
        pid, epoch = await init(env)
        assert await c.add_partitions(TX, pid, epoch, [("t", 0)]) is E.NONE
        assert await c.end_txn(TX, pid, epoch, commit=True) is E.NONE
        await trio.sleep(1)
        sent = len(env.markers.sent)
        assert sent > 1
        c.unload_partition(c.partition_for(TX))
        await trio.sleep(5)
        assert len(env.markers.sent) <= sent + 1
        assert env.log.states(TX)[-1] == "PrepareCommit"

    run(test, markers=markers)


def test_a_fenced_coordinator_stops_sending_and_never_writes_complete() -> None:
    markers = FakeMarkers(answers={("t", 0): [E.TRANSACTION_COORDINATOR_FENCED]})

    async def test(env: Env) -> None:
        c = env.coordinator
        pid, epoch = await init(env)
        assert await c.add_partitions(TX, pid, epoch, [("t", 0)]) is E.NONE
        assert await c.end_txn(TX, pid, epoch, commit=True) is E.NONE
        await trio.sleep(5)
        assert len(env.markers.sent) == 1
        assert state(env) == "PrepareCommit"

    run(test, markers=markers)


def test_markers_skip_deleted_partitions_wait_for_a_leader_and_retry_unreachable_nodes() -> None:
    markers = FakeMarkers(leaders={("gone", 0): None, ("t", 0): -1, ("t", 1): 2}, unreachable={2})

    async def test(env: Env) -> None:
        c = env.coordinator
        pid, epoch = await init(env)
        assert await c.add_partitions(TX, pid, epoch, [("gone", 0), ("t", 0), ("t", 1)]) is E.NONE
        assert await c.end_txn(TX, pid, epoch, commit=False) is E.NONE
        await trio.sleep(2)
        assert state(env) == "PrepareAbort"
        assert all(node == 2 for node, _ in env.markers.sent)
        env.markers.leaders[("t", 0)] = 3
        env.markers.unreachable.clear()
        await settle(lambda: state(env) == "CompleteAbort")
        assert sorted(tp for tp, _ in env.markers.written) == [("t", 0), ("t", 1)]

    run(test, markers=markers)


def test_list_transactions_filters_by_state_producer_and_duration() -> None:
    async def test(env: Env) -> None:
        c = env.coordinator
        a_pid, a_epoch = await init(env, "a")
        b_pid, _ = await init(env, "b")
        assert await c.add_partitions("a", a_pid, a_epoch, [("t", 0)]) is E.NONE
        await trio.sleep(10)
        error, unknown, found = c.list_transactions()
        assert (error, unknown, found) == (E.NONE, [], [("a", a_pid, "Ongoing"), ("b", b_pid, "Empty")])
        assert c.list_transactions(["Ongoing", "Bogus"])[1:] == (["Bogus"], [("a", a_pid, "Ongoing")])
        assert c.list_transactions(["Bogus"])[2] == []
        assert c.list_transactions(producer_ids=[b_pid])[2] == [("b", b_pid, "Empty")]
        assert c.list_transactions(["Ongoing"], duration_ms=20_000)[2] == []
        assert c.list_transactions(["Ongoing"], duration_ms=5_000)[2] == [("a", a_pid, "Ongoing")]

    run(test)


def test_an_id_whose_partition_moves_while_its_producer_id_is_claimed_gets_not_coordinator() -> None:
    log = MemoryLog()
    probe = TransactionCoordinator(CONFIG, log, None, None, wall_clock_ms=wall_ms)  # type: ignore[arg-type]
    exhausted = TxnLogValue(77, MAX_EPOCH - 1, TIMEOUT_MS, TxnState.EMPTY, frozenset(), 1, -1)
    log.records[probe.partition_for("old")].append(stored("old", exhausted))

    async def test(env: Env) -> None:
        c = env.coordinator

        async def claim(tid: str, results: list[ErrorCode]) -> None:
            results.append((await c.init_producer_id(tid, TIMEOUT_MS)).error)

        for tid in ("new", "old"):
            env.ids.gate = trio.Event()
            results: list[ErrorCode] = []
            env.nursery.start_soon(claim, tid, results)
            await trio.sleep(0.01)  # the claim waits for its producer id
            if tid == "old":
                assert (await c.init_producer_id(tid, TIMEOUT_MS)).error is E.CONCURRENT_TRANSACTIONS
            c.unload_partition(c.partition_for(tid))
            env.ids.gate.set()
            await settle(lambda got=results: len(got) == 1)  # type: ignore[misc]
            assert results == [E.NOT_COORDINATOR], tid
            assert env.log.states(tid) == ([] if tid == "new" else ["Empty"])

    run(test, log=log)


def test_an_id_found_in_a_state_no_coordinator_writes_refuses_new_partitions() -> None:
    log = MemoryLog()
    probe = TransactionCoordinator(CONFIG, log, None, None, wall_clock_ms=wall_ms)  # type: ignore[arg-type]
    fencing = TxnLogValue(9, 1, TIMEOUT_MS, TxnState.PREPARE_EPOCH_FENCE, frozenset({("t", 0)}), 1, 1)
    log.records[probe.partition_for(TX)].append(stored(TX, fencing))

    async def test(env: Env) -> None:
        assert await env.coordinator.add_partitions(TX, 9, 1, [("t", 1)]) is E.INVALID_TXN_STATE

    run(test, log=log)


def test_a_partition_that_does_not_take_markers_of_its_format_needs_none() -> None:
    markers = FakeMarkers(answers={("old", 0): [E.UNSUPPORTED_FOR_MESSAGE_FORMAT]})

    async def test(env: Env) -> None:
        c = env.coordinator
        pid, epoch = await init(env)
        assert await c.add_partitions(TX, pid, epoch, [("old", 0), ("t", 0)]) is E.NONE
        assert await c.end_txn(TX, pid, epoch, commit=True) is E.NONE
        await settle(lambda: state(env) == "CompleteCommit")
        assert len(env.markers.sent) == 1

    run(test, markers=markers)
