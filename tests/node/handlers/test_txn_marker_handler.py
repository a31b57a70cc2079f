"""WriteTxnMarkers (27) over fakes: markers on real partitions, Kafka's errors, acks=all, the
``__consumer_offsets`` callback and authorisation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from node.coordination import PartitionState
from node.handlers.txn_markers import TxnMarkerServices, handle_write_txn_markers
from node.protocol import ApiKey, ErrorCode
from node.request import Deferred
from node.security._acl import AclOperation
from storage import AbortedTxn
from storage.records import BatchBuilder
from tests.node.handlers.fakes import (
    ALICE,
    BOB,
    BROKER_ID,
    NOW_MS,
    FakeMetrics,
    FakePartitions,
    acl,
    leader_partition,
    policy,
    request,
    secured,
)

pytestmark = pytest.mark.unit


def txn_batch(pid: int, epoch: int = 0) -> memoryview:
    builder = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True)
    builder.append(NOW_MS, None, b"t")
    builder.append(NOW_MS, None, b"u")
    return memoryview(builder.build())


def marker(pid: int, *, commit: bool, parts: list[tuple[str, int]], epoch: int = 0, coordinator: int = 0) -> dict:
    topics = {t: [p for tt, p in parts if tt == t] for t, _ in parts}
    return {
        "producer_id": pid,
        "producer_epoch": epoch,
        "transaction_result": commit,
        "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
        "coordinator_epoch": coordinator,
    }


async def answer(
    services: TxnMarkerServices, *markers: dict, principal: str = ALICE
) -> dict[tuple[int, str, int], int]:
    body = await handle_write_txn_markers(
        services, request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": list(markers)}, principal=principal)
    )
    if isinstance(body, Deferred):
        body = await body.result()
    return {
        (m["producer_id"], t["name"], p["partition_index"]): p["error_code"]
        for m in body["markers"]
        for t in m["topics"]
        for p in t["partitions"]
    }


def run(fn: Any, *args: Any, **kwargs: Any) -> Any:
    return trio.run(lambda: fn(*args, **kwargs))


def test_markers_end_transactions_on_every_partition_named(tmp_path: Path) -> None:
    a, b = leader_partition(tmp_path, "orders", 0), leader_partition(tmp_path, "orders", 1)
    a.append_produced(txn_batch(7))
    b.append_produced(txn_batch(7))
    a.append_produced(txn_batch(8))
    services = TxnMarkerServices(FakePartitions(a, b), FakeMetrics())
    codes = run(
        answer,
        services,
        marker(7, commit=False, parts=[("orders", 0), ("orders", 1)]),
        marker(8, commit=True, parts=[("orders", 0)]),
    )
    assert codes == {(7, "orders", 0): 0, (7, "orders", 1): 0, (8, "orders", 0): 0}
    assert a.log.collect_aborted_txns(0, 100) == [AbortedTxn(7, 0, 4, 2)]  # 8's was open at 2 then
    assert b.log.collect_aborted_txns(0, 100) == [AbortedTxn(7, 0, 2, 3)]
    assert a.producers.ongoing == b.producers.ongoing == {}
    assert a.last_stable_offset == a.log.log_end_offset == 6


def test_kafkas_errors_per_partition(tmp_path: Path) -> None:
    led = leader_partition(tmp_path, "orders")
    led.append_produced(txn_batch(7, epoch=2))
    mirror = leader_partition(tmp_path, "copy", mirror_link="east")
    follower = leader_partition(tmp_path, "followed")
    follower.apply_state(PartitionState(2, 1, (2, BROKER_ID), 1, version=1), (2, BROKER_ID))
    metrics = FakeMetrics()
    services = TxnMarkerServices(FakePartitions(led, mirror, follower), metrics)
    codes = run(
        answer,
        services,
        marker(7, commit=True, parts=[("orders", 0)], epoch=1),
        marker(9, commit=True, parts=[("ghost", 0), ("copy", 0), ("followed", 0)]),
    )
    assert codes == {
        (7, "orders", 0): ErrorCode.INVALID_PRODUCER_EPOCH,
        (9, "ghost", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (9, "copy", 0): ErrorCode.POLICY_VIOLATION,
        (9, "followed", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER,
    }
    assert run(answer, services, marker(7, commit=False, parts=[("orders", 0)], epoch=2, coordinator=5)) == {
        (7, "orders", 0): 0
    }
    fenced = run(answer, services, marker(7, commit=True, parts=[("orders", 0)], epoch=2, coordinator=4))
    assert fenced == {(7, "orders", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
    assert ("WriteTxnMarkers", "TRANSACTION_COORDINATOR_FENCED") in metrics.errors


def test_a_marker_is_answered_once_replicated_and_never_below_min_isr(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, "orders")
    partition.apply_state(PartitionState(BROKER_ID, 1, (BROKER_ID, 2), 1, version=1), (BROKER_ID, 2))
    partition.append_produced(txn_batch(7))
    services = TxnMarkerServices(FakePartitions(partition), FakeMetrics(), timeout_s=5)
    answers: list[dict[tuple[int, str, int], int]] = []

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: _collect(answers, services, marker(7, commit=True, parts=[("orders", 0)])))
            await trio.sleep(1)
            assert answers == [], "no answer before the follower has the marker"
            partition.record_follower_fetch(2, partition.log.log_end_offset)
        assert answers == [{(7, "orders", 0): 0}]
        await _collect(answers, services, marker(7, commit=True, parts=[("orders", 0)]))  # nobody fetches
        assert answers[-1] == {(7, "orders", 0): ErrorCode.REQUEST_TIMED_OUT}

    trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))
    lone = leader_partition(tmp_path / "lone", "orders")
    lone.policy = policy(min_isr=2)
    services = TxnMarkerServices(FakePartitions(lone), FakeMetrics())
    assert run(answer, services, marker(7, commit=True, parts=[("orders", 0)])) == {
        (7, "orders", 0): ErrorCode.NOT_ENOUGH_REPLICAS
    }
    assert lone.log.log_end_offset == 0


async def _collect(answers: list, services: TxnMarkerServices, *markers: dict) -> None:
    answers.append(await answer(services, *markers))


def test_a_committed_offsets_marker_is_handed_to_the_group_coordinator(tmp_path: Path) -> None:
    offsets = leader_partition(tmp_path, "__consumer_offsets", 3)
    offsets.append_internal(bytes(txn_batch(7)))
    seen: list[tuple[int, int, bool]] = []
    services = TxnMarkerServices(FakePartitions(offsets), FakeMetrics(), on_offsets_marker=lambda *a: seen.append(a))
    run(answer, services, marker(7, commit=True, parts=[("__consumer_offsets", 3)]))
    assert seen == [(3, 7, True)]


def test_write_txn_markers_needs_cluster_action(tmp_path: Path) -> None:
    partition = leader_partition(tmp_path, "orders")
    security, _ = secured(acl(ALICE, AclOperation.CLUSTER_ACTION))
    services = TxnMarkerServices(FakePartitions(partition), FakeMetrics(), security)
    refused = run(answer, services, marker(7, commit=True, parts=[("orders", 0)]), principal=BOB)
    assert refused == {(7, "orders", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    assert partition.log.log_end_offset == 0
    assert run(answer, services, marker(7, commit=True, parts=[("orders", 0)])) == {(7, "orders", 0): 0}
    assert partition.log.log_end_offset == 1
