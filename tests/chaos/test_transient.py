"""Which Kafka answers a wait treats as "not yet": passing states, including librdkafka's own for a
topic its metadata does not list yet; every other error fails the wait."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from chaos.transient import is_transient
from node.client import ClientError
from node.protocol import ErrorCode


def test_passing_states_are_transient_and_real_errors_are_not() -> None:
    for code in (KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC, KafkaError.LEADER_NOT_AVAILABLE):
        assert is_transient(KafkaException(KafkaError(code))), code
    assert is_transient(ClientError.from_code(ErrorCode.NOT_COORDINATOR, "offset fetch"))
    for code in (KafkaError._FENCED, KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.INVALID_RECORD):
        assert not is_transient(KafkaException(KafkaError(code))), code
    assert not is_transient(ValueError("not Kafka's"))
