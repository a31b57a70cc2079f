"""Which client errors complete an operation as ``fail`` (proven absent) and which as ``info``."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from chaos.workloads import commit_outcome, send_outcome
from chaos.workloads._outcomes import describe

pytestmark = pytest.mark.unit

#: Errors a delivery report may carry: local ones and broker ones, retriable or not.
SEND_ERRORS = [
    KafkaError._PURGE_QUEUE,
    KafkaError._PURGE_INFLIGHT,
    KafkaError._MSG_TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._FATAL,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.POLICY_VIOLATION,
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER,
]


@pytest.mark.parametrize("code", SEND_ERRORS, ids=lambda code: KafkaError(code).name())
def test_a_write_routed_to_a_partition_is_never_proven_absent(code: int) -> None:
    # Any attempt before the last one may have been appended (a retry after a broken connection
    # waits in the same queue a purge empties), and the report does not say whether there was one.
    assert send_outcome(KafkaError(code), 0) == "info"
    assert send_outcome(KafkaError(code), 5) == "info"


@pytest.mark.parametrize("code", SEND_ERRORS, ids=lambda code: KafkaError(code).name())
def test_a_write_never_routed_to_a_partition_or_refused_by_produce_is_absent(code: int) -> None:
    assert send_outcome(KafkaError(code), None) == "fail"  # confluent-kafka's partition of an unrouted message
    assert send_outcome(KafkaError(code), -1) == "fail"  # librdkafka's RD_KAFKA_PARTITION_UA
    assert send_outcome(KafkaError(code), 3, taken=False) == "fail"


def test_only_commit_errors_raised_before_any_request_are_failures() -> None:
    assert commit_outcome(KafkaError(KafkaError._NO_OFFSET)) == "fail"
    assert commit_outcome(KafkaError(KafkaError._INVALID_ARG)) == "fail"
    for code in (
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.NOT_COORDINATOR,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._DESTROY,
    ):
        assert commit_outcome(KafkaError(code)) == "info", KafkaError(code).name()


def test_errors_are_described_by_name_and_text() -> None:
    text = describe(KafkaError(KafkaError._PURGE_QUEUE))
    assert text.startswith("_PURGE_QUEUE: ") and "fatal" not in text
    assert describe(KafkaError(KafkaError._FATAL, "gave up", fatal=True)) == "_FATAL: gave up (fatal)"
