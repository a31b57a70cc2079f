"""The transaction APIs' handlers over fakes: what each asks of the authorizer, how per-partition errors
are answered, and the version rules of PRODUCER_FENCED; then the same handlers over the real coordinator."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from node.handlers._services import NO_AUTHORIZER, SecurityServices
from node.handlers.groups import GroupServices, handle_txn_offset_commit
from node.handlers.producer_id import ProducerIdServices, handle_init_producer_id
from node.handlers.txn import (
    TxnServices,
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_describe_transactions,
    handle_end_txn,
    handle_list_transactions,
)
from node.protocol import ApiKey, ErrorCode
from node.security._acl import AclOperation, ResourceType
from node.txn import TransactionCoordinator
from tests.node.groups.helpers import wall_ms
from tests.node.handlers.fakes import (
    ALICE,
    BOB,
    FakeCluster,
    RecordingGroups,
    RecordingTransactions,
    acl,
    node_config,
    request,
    secured,
    topic_state,
)
from tests.node.txn.helpers import CONFIG, CountingIds, FakeMarkers, MemoryLog

pytestmark = pytest.mark.unit

Op = AclOperation
TXN, TOPIC, GROUP = ResourceType.TRANSACTIONAL_ID, ResourceType.TOPIC, ResourceType.GROUP
E = ErrorCode


def run(fn: Any, *args: Any) -> Any:
    return trio.run(fn, *args)


def cluster() -> FakeCluster:
    return FakeCluster(topics={"orders": topic_state("orders", 2), "secret": topic_state("secret")})


def txn_services(
    security: SecurityServices = NO_AUTHORIZER, coordinator: RecordingTransactions | None = None
) -> TxnServices:
    return TxnServices(coordinator or RecordingTransactions(), RecordingGroups(), cluster(), security)


def add_partitions_body(*partitions: tuple[str, int], epoch: int = 1) -> dict[str, Any]:
    topics: dict[str, list[int]] = {}
    for topic, p in partitions:
        topics.setdefault(topic, []).append(p)
    return {
        "v3_and_below_transactional_id": "tx",
        "v3_and_below_producer_id": 4000,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


def partition_errors(body: dict[str, Any]) -> dict[tuple[str, int], int]:
    return {
        (t["name"], p["partition_index"]): p["partition_error_code"]
        for t in body["results_by_topic_v3_and_below"]
        for p in t["results_by_partition"]
    }


def test_add_partitions_needs_write_on_the_id_then_on_each_topic_and_adds_nothing_when_one_is_refused() -> None:
    security, _ = secured(acl(ALICE, Op.WRITE, TXN, "tx"), acl(ALICE, Op.WRITE, TOPIC, "orders"))
    services = txn_services(security)
    coordinator = services.coordinator
    assert isinstance(coordinator, RecordingTransactions)
    body = add_partitions_body(("orders", 0), ("orders", 1))
    refused = run(handle_add_partitions_to_txn, services, request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, body, principal=BOB))
    assert set(partition_errors(refused).values()) == {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    mixed = add_partitions_body(("orders", 0), ("secret", 0), ("orders", 7))
    answer = run(
        handle_add_partitions_to_txn, services, request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, mixed, principal=ALICE)
    )
    assert partition_errors(answer) == {
        ("orders", 0): E.OPERATION_NOT_ATTEMPTED,
        ("secret", 0): E.TOPIC_AUTHORIZATION_FAILED,
        ("orders", 7): E.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert coordinator.calls == []
    allowed = run(
        handle_add_partitions_to_txn, services, request(ApiKey.ADD_PARTITIONS_TO_TXN, 0, body, principal=ALICE)
    )
    assert partition_errors(allowed) == {("orders", 0): 0, ("orders", 1): 0}
    assert coordinator.calls == [("add_partitions", ("tx", 4000, 1, [("orders", 0), ("orders", 1)]))]


@pytest.mark.parametrize(("version", "expected"), [(1, E.INVALID_PRODUCER_EPOCH), (2, E.PRODUCER_FENCED)])
def test_producer_fenced_is_answered_from_v2_and_invalid_producer_epoch_before(version: int, expected: E) -> None:
    services = txn_services(coordinator=RecordingTransactions(error=E.PRODUCER_FENCED))
    add = run(handle_add_partitions_to_txn, services, request(ApiKey.ADD_PARTITIONS_TO_TXN, version,
                                                                add_partitions_body(("orders", 0))))  # fmt: skip
    assert partition_errors(add) == {("orders", 0): expected}
    body = {"transactional_id": "tx", "producer_id": 4000, "producer_epoch": 1, "group_id": "g"}
    assert (
        run(handle_add_offsets_to_txn, services, request(ApiKey.ADD_OFFSETS_TO_TXN, version, body))["error_code"]
        == expected
    )
    end = {"transactional_id": "tx", "producer_id": 4000, "producer_epoch": 1, "committed": True}
    assert run(handle_end_txn, services, request(ApiKey.END_TXN, version, end))["error_code"] == expected


def test_add_offsets_needs_write_on_the_id_and_read_on_the_group_and_adds_the_groups_offsets_partition() -> None:
    security, _ = secured(
        acl(ALICE, Op.WRITE, TXN, "tx"), acl(ALICE, Op.READ, GROUP, "g"), acl(BOB, Op.READ, GROUP, "g")
    )
    services = txn_services(security)
    body = {"transactional_id": "tx", "producer_id": 4000, "producer_epoch": 1, "group_id": "g"}

    def add(principal: str, group: str = "g") -> int:
        req = request(ApiKey.ADD_OFFSETS_TO_TXN, 3, body | {"group_id": group}, principal=principal)
        return run(handle_add_offsets_to_txn, services, req)["error_code"]  # type: ignore[no-any-return]

    assert add(BOB) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert add(ALICE, "other") == E.GROUP_AUTHORIZATION_FAILED
    assert add(ALICE) == E.NONE
    assert services.coordinator.calls == [("add_partitions", ("tx", 4000, 1, [("__consumer_offsets", 0)]))]  # type: ignore[attr-defined]


def test_end_txn_needs_write_on_the_id() -> None:
    security, _ = secured(acl(ALICE, Op.WRITE, TXN, "tx"))
    services = txn_services(security)
    body = {"transactional_id": "tx", "producer_id": 4000, "producer_epoch": 1, "committed": False}
    refused = run(handle_end_txn, services, request(ApiKey.END_TXN, 3, body, principal=BOB))
    assert refused["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert run(handle_end_txn, services, request(ApiKey.END_TXN, 3, body, principal=ALICE))["error_code"] == E.NONE
    assert services.coordinator.calls == [("end_txn", ("tx", 4000, 1, False))]  # type: ignore[attr-defined]


def test_init_producer_id_with_an_id_needs_write_on_it() -> None:
    security, _ = secured(acl(ALICE, Op.WRITE, TXN, "tx"), acl(BOB, Op.IDEMPOTENT_WRITE))
    transactions = RecordingTransactions()
    services = ProducerIdServices(CountingIds(), transactions, security)  # type: ignore[arg-type]
    body = {"transactional_id": "tx", "transaction_timeout_ms": 1000}
    refused = run(handle_init_producer_id, services, request(ApiKey.INIT_PRODUCER_ID, 4, body, principal=BOB))
    assert (refused["error_code"], transactions.calls) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, [])
    allowed = run(handle_init_producer_id, services, request(ApiKey.INIT_PRODUCER_ID, 4, body, principal=ALICE))
    assert (allowed["error_code"], allowed["producer_id"]) == (0, 4000)


def test_describe_needs_describe_on_each_id_and_shows_only_describable_topics() -> None:
    security, _ = secured(acl(ALICE, Op.DESCRIBE, TXN, "tx"), acl(ALICE, Op.DESCRIBE, TOPIC, "orders"))
    known = {"tx": (4000, "Ongoing", (("orders", 0), ("secret", 0))), "other": (4001, "Empty", ())}
    services = txn_services(security, RecordingTransactions(known=known))
    body = {"transactional_ids": ["tx", "other", "missing"]}
    answer = run(
        handle_describe_transactions, services, request(ApiKey.DESCRIBE_TRANSACTIONS, 0, body, principal=ALICE)
    )
    tx, other, missing = answer["transaction_states"]
    assert (tx["error_code"], tx["transaction_state"], tx["producer_id"]) == (0, "Ongoing", 4000)
    assert tx["topics"] == [{"topic": "orders", "partitions": [0]}]
    assert other["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert missing["error_code"] == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    open_services = txn_services(coordinator=RecordingTransactions(known=known))
    answer = run(handle_describe_transactions, open_services, request(ApiKey.DESCRIBE_TRANSACTIONS, 0, body))
    assert [s["error_code"] for s in answer["transaction_states"]] == [0, 0, E.TRANSACTIONAL_ID_NOT_FOUND]


def test_list_shows_only_the_ids_the_principal_may_describe_and_passes_the_filters() -> None:
    security, _ = secured(acl(ALICE, Op.DESCRIBE, TXN, "tx"))
    coordinator = RecordingTransactions(known={"tx": (4000, "Ongoing", ()), "other": (4001, "Empty", ())})
    services = txn_services(security, coordinator)
    body = {"state_filters": ["Ongoing"], "producer_id_filters": [4000], "duration_filter": 500}
    answer = run(handle_list_transactions, services, request(ApiKey.LIST_TRANSACTIONS, 1, body, principal=ALICE))
    assert answer["transaction_states"] == [
        {"transactional_id": "tx", "producer_id": 4000, "transaction_state": "Ongoing"}
    ]
    run(handle_list_transactions, services, request(ApiKey.LIST_TRANSACTIONS, 0, body, principal=BOB))
    assert coordinator.calls == [
        ("list_transactions", (["Ongoing"], [4000], 500)),
        ("list_transactions", (["Ongoing"], [4000], -1)),  # v0 has no duration filter
    ]


def test_txn_offset_commit_needs_write_on_the_id_read_on_the_group_and_on_each_topic() -> None:
    security, _ = secured(
        acl(ALICE, Op.WRITE, TXN, "tx"), acl(ALICE, Op.READ, GROUP, "g"), acl(ALICE, Op.READ, TOPIC, "orders"),
        acl(BOB, Op.READ, GROUP, "g"), acl(BOB, Op.READ, TOPIC, "orders"),
    )  # fmt: skip
    groups = RecordingGroups()
    services = GroupServices(groups, cluster(), cluster(), node_config(), security)
    body = {
        "transactional_id": "tx",
        "group_id": "g",
        "producer_id": 4000,
        "producer_epoch": 1,
        "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]},
            {"name": "secret", "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]},
        ],
    }

    def commit(principal: str, **changes: Any) -> dict[tuple[str, int], int]:
        req = request(ApiKey.TXN_OFFSET_COMMIT, 3, body | changes, principal=principal)
        answer = run(handle_txn_offset_commit, services, req)
        return {(t["name"], p["partition_index"]): p["error_code"] for t in answer["topics"] for p in t["partitions"]}

    assert set(commit(BOB).values()) == {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    assert set(commit(ALICE, group_id="h").values()) == {E.GROUP_AUTHORIZATION_FAILED}
    assert groups.calls == []
    assert commit(ALICE) == {("orders", 0): 0, ("secret", 0): E.TOPIC_AUTHORIZATION_FAILED}
    assert groups.calls == [("txn_offset_commit", [("orders", 0)])]


def test_the_handlers_over_the_real_coordinator() -> None:
    async def main() -> None:
        coordinator = TransactionCoordinator(CONFIG, MemoryLog(), CountingIds(), FakeMarkers(), wall_clock_ms=wall_ms)
        coordinator.load_partition(coordinator.partition_for("tx"), [], 1)
        services = TxnServices(coordinator, RecordingGroups(), cluster())
        ids = ProducerIdServices(CountingIds(), coordinator)
        async with trio.open_nursery() as nursery:
            await nursery.start(coordinator.run)
            init = {"transactional_id": "tx", "transaction_timeout_ms": 10_000}
            got = await handle_init_producer_id(ids, request(ApiKey.INIT_PRODUCER_ID, 4, init))
            pid, epoch = got["producer_id"], got["producer_epoch"]
            add = add_partitions_body(("orders", 1), epoch=epoch) | {"v3_and_below_producer_id": pid}
            assert set(partition_errors(await handle_add_partitions_to_txn(
                services, request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add))).values()) == {0}  # fmt: skip
            listed = await handle_list_transactions(services, request(ApiKey.LIST_TRANSACTIONS, 1, {}))
            assert listed["transaction_states"] == [
                {"transactional_id": "tx", "producer_id": pid, "transaction_state": "Ongoing"}
            ]
            end = {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch, "committed": True}
            assert (await handle_end_txn(services, request(ApiKey.END_TXN, 3, end)))["error_code"] == 0
            while coordinator.describe("tx")[1].state != "CompleteCommit":  # type: ignore[union-attr]
                await trio.sleep(0.01)
            described = await handle_describe_transactions(
                services, request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx"]})
            )
            assert described["transaction_states"][0]["transaction_state"] == "CompleteCommit"
            nursery.cancel_scope.cancel()

    async def bounded() -> None:
        with trio.fail_after(60):  # mock time
            await main()

    trio.run(bounded, clock=trio.testing.MockClock(autojump_threshold=0))
