"""The error table against two independent tables: librdkafka's (confluent-kafka) and kafka-python's."""

from __future__ import annotations

from typing import Any

import confluent_kafka
import kafka.errors

from node.protocol import ErrorCode, ErrorInfo, error_info

# librdkafka abbreviates some of Kafka's names
LIBRDKAFKA_NAMES = {
    -1: "UNKNOWN",
    0: "NO_ERROR",
    2: "INVALID_MSG",
    3: "UNKNOWN_TOPIC_OR_PART",
    4: "INVALID_MSG_SIZE",
    6: "NOT_LEADER_FOR_PARTITION",
    10: "MSG_SIZE_TOO_LARGE",
    11: "STALE_CTRL_EPOCH",
    17: "TOPIC_EXCEPTION",
}
# kafka-python uses some older names, and marks CORRUPT_MESSAGE non-retriable where Kafka says retriable
KAFKA_PYTHON_NAMES = {
    -1: "UNKNOWN",
    0: "NO_ERROR",
    6: "NOT_LEADER_FOR_PARTITION",
    10: "MESSAGE_SIZE_TOO_LARGE",
    17: "INVALID_TOPIC",
    39: "INVALID_REPLICATION_ASSIGNMENT",
}
KAFKA_PYTHON_RETRIABLE_DIFFERS = {2}


def test_codes_are_contiguous_from_minus_one() -> None:
    codes = sorted(member.value for member in ErrorCode)
    assert codes == list(range(-1, codes[-1] + 1))
    assert codes[-1] >= 133


def test_every_code_has_a_row() -> None:
    for member in ErrorCode:
        info = error_info(member)
        assert info == ErrorInfo(member.value, member.name, info.retriable, info.description)
        assert info.description.endswith(".")
        assert "\n" not in info.description


def test_unknown_code_is_described_not_raised() -> None:
    info = error_info(5000)
    assert info.code == 5000
    assert "5000" in info.name
    assert "not a known" in info.description
    assert not info.retriable


def test_known_retriable_codes() -> None:
    retriable = {member.name for member in ErrorCode if error_info(member).retriable}
    assert {"NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS"} <= retriable
    assert not {"UNSUPPORTED_VERSION", "TOPIC_ALREADY_EXISTS", "INVALID_PRODUCER_EPOCH", "NONE"} & retriable


def test_matches_librdkafka() -> None:
    theirs: dict[int, str] = {
        value: name
        for name, value in vars(confluent_kafka.KafkaError).items()
        if isinstance(value, int) and not name.startswith("_") and -1 <= value < 1000
    }
    assert max(theirs) == max(member.value for member in ErrorCode)
    for code, name in theirs.items():
        assert LIBRDKAFKA_NAMES.get(code, error_info(code).name) == name, code


def test_matches_kafka_python() -> None:
    theirs: dict[int, Any] = {}
    for value in vars(kafka.errors).values():
        is_error = isinstance(value, type) and issubclass(value, kafka.errors.BrokerResponseError)
        if is_error and getattr(value, "errno", None) is not None:
            theirs[value.errno] = value
    assert len(theirs) > 120
    for code, cls in theirs.items():
        info = error_info(code)
        assert KAFKA_PYTHON_NAMES.get(code, info.name) == cls.message, code
        if code not in KAFKA_PYTHON_RETRIABLE_DIFFERS:
            assert info.retriable == cls.retriable, code
