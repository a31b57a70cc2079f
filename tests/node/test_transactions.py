"""The transaction coordinator in a real node with real clients: a confluent-kafka transactional producer
gets through ``init_transactions``, begins and ends transactions that touch no partition, a second
instance of it is given a higher epoch, and DescribeTransactions / ListTransactions (raw requests:
confluent-kafka's AdminClient has no call for them) answer; after a restart the coordinator has
reloaded the id from ``__transaction_state``. DescribeProducers shows a transaction open on a
partition until its marker ends it.

Transactions that write to partitions need the partition side (transactional produce, markers):
their end-to-end tests live with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from node.client import NodeConnection
from node.protocol import ApiKey, Struct
from tests.node.harness import NodeProcess, wait_for

pytestmark = pytest.mark.integration

NodeFactory = Callable[..., NodeProcess]
TXN_PROPS = {
    "transaction_state_log_replication_factor": "1",
    "transaction_state_log_min_isr": "1",
    "transaction_state_log_num_partitions": "5",
}
TIMEOUT_S = 30.0


def ask(node: NodeProcess, api_key: ApiKey, version: int, body: dict[str, Any]) -> Struct:
    """One raw request to ``node`` with strait's own client."""

    async def main() -> Struct:
        async with await NodeConnection.open(node.bootstrap, client_id="txn-test") as conn:
            return await conn.request(api_key, version, body, timeout=TIMEOUT_S)

    return trio.run(main)


def describe(node: NodeProcess, transactional_id: str) -> Struct:
    body = ask(node, ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [transactional_id]})
    (state,) = body.transaction_states
    return state


def producer(node: NodeProcess, transactional_id: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": node.bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 20_000,
            "socket.timeout.ms": 10_000,
        }
    )


def test_a_transactional_producer_initialises_and_ends_empty_transactions(node_factory: NodeFactory) -> None:
    node = node_factory(1, **TXN_PROPS)
    first = producer(node, "tx-it")
    first.init_transactions(TIMEOUT_S)
    first.begin_transaction()
    first.abort_transaction(TIMEOUT_S)
    first.begin_transaction()
    first.commit_transaction(TIMEOUT_S)

    found = ask(node, ApiKey.FIND_COORDINATOR, 2, {"key": "tx-it", "key_type": 1})
    assert (found.error_code, found.node_id) == (0, 1)
    state = describe(node, "tx-it")
    assert (state.error_code, state.transaction_state, state.producer_epoch) == (0, "Empty", 0)
    assert state.producer_id >= 0 and state.transaction_timeout_ms == 20_000
    listed = ask(node, ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": []})
    assert [(t.transactional_id, t.producer_id, t.transaction_state) for t in listed.transaction_states] == [
        ("tx-it", state.producer_id, "Empty")
    ]
    assert ask(node, ApiKey.LIST_TRANSACTIONS, 0, {"state_filters": ["Ongoing"]}).transaction_states == []

    # A second instance with the same id fences the first: same producer id, the next epoch.
    second = producer(node, "tx-it")
    second.init_transactions(TIMEOUT_S)
    again = describe(node, "tx-it")
    assert (again.producer_id, again.producer_epoch) == (state.producer_id, 1)

    # The coordinator's state survives a restart: it is reloaded from __transaction_state.
    node.restart()
    reloaded = wait_for("the coordinator to reload tx-it", lambda: describe(node, "tx-it").error_code == 0 or None)
    assert reloaded
    after = describe(node, "tx-it")
    assert (after.transaction_state, after.producer_id, after.producer_epoch) == ("Empty", state.producer_id, 1)
    third = producer(node, "tx-it")
    third.init_transactions(TIMEOUT_S)
    assert describe(node, "tx-it").producer_epoch == 2
    missing = describe(node, "never-used")
    assert missing.error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND


def test_describe_producers_shows_the_open_transaction_until_it_ends(node_factory: NodeFactory) -> None:
    node = node_factory(1, **TXN_PROPS)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic("described", 1, 1)])["described"].result(TIMEOUT_S)
    txn = producer(node, "tx-described")
    txn.init_transactions(TIMEOUT_S)
    txn.begin_transaction()
    for i in range(3):
        txn.produce("described", str(i).encode(), partition=0)
    assert txn.flush(TIMEOUT_S) == 0

    def active() -> list[Any]:
        body = ask(node, ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "described", "partition_indexes": [0]}]})
        (part,) = body.topics[0].partitions
        assert part.error_code == 0
        return list(part.active_producers)

    (open_,) = active()
    assert (open_.producer_id, open_.current_txn_start_offset, open_.last_sequence) == (
        describe(node, "tx-described").producer_id,
        0,
        2,
    )
    txn.commit_transaction(TIMEOUT_S)
    # The commit returns once decided; its marker follows (as in Kafka), then the state ends it.
    wait_for("the commit's marker", lambda: active()[0].current_txn_start_offset == -1)
    (done,) = active()
    assert done.coordinator_epoch >= 0
