"""The transaction APIs and InitProducerId v0-4: keys, ranges, headers, and bytes written by hand from
Kafka's specs (test_roundtrip and test_interop cover every version against kafka-python too)."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from node.protocol import (
    ApiKey,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_request_header,
    request_header,
    schema,
)
from node.protocol._messages_txn import TXN_APIS

pytestmark = pytest.mark.unit

TXN_KEYS = {
    ApiKey.ADD_PARTITIONS_TO_TXN: ("AddPartitionsToTxn", 3, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: ("AddOffsetsToTxn", 3, 3),
    ApiKey.END_TXN: ("EndTxn", 3, 3),
    ApiKey.TXN_OFFSET_COMMIT: ("TxnOffsetCommit", 3, 3),
    ApiKey.DESCRIBE_PRODUCERS: ("DescribeProducers", 0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: ("DescribeTransactions", 0, 0),
    ApiKey.LIST_TRANSACTIONS: ("ListTransactions", 1, 0),
}


def body_of(api_key: int, version: int, body: dict[str, Any]) -> tuple[bytes, Any]:
    """The request body's bytes (after the header) and what the codec decodes from them."""
    frame = encode_request(request_header(api_key, version, 3, "c"), body)[4:]
    header, at = read_request_header(frame)
    return frame[at:], decode_request(header, frame, at)


def s16(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def compact(text: str) -> bytes:
    return bytes([len(text) + 1]) + text.encode()


def test_keys_names_ranges_and_headers() -> None:
    for key, (name, max_version, flexible_from) in TXN_KEYS.items():
        api = schema(key)
        assert (api.name, api.min_version, api.max_version, api.flexible_from) == (name, 0, max_version, flexible_from)
    assert {api.api_key for api in TXN_APIS} == set(TXN_KEYS)
    end_txn = schema(ApiKey.END_TXN)
    assert [end_txn.request_header_version(v) for v in (0, 2, 3)] == [1, 1, 2]
    assert [end_txn.response_header_version(v) for v in (0, 2, 3)] == [0, 0, 1]
    init = schema(ApiKey.INIT_PRODUCER_ID)
    assert (init.max_version, init.flexible_from) == (4, 2)


def test_init_producer_id_v3_carries_the_producer_id_and_epoch_and_v1_reads_them_as_unknown() -> None:
    wire, body = body_of(
        ApiKey.INIT_PRODUCER_ID,
        3,
        {"transactional_id": "tx", "transaction_timeout_ms": 60000, "producer_id": 42, "producer_epoch": 7},
    )
    assert wire == compact("tx") + struct.pack(">iqh", 60000, 42, 7) + b"\x00"  # no tagged fields
    assert (body.producer_id, body.producer_epoch) == (42, 7)
    wire, body = body_of(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 5})
    assert wire == struct.pack(">hi", -1, 5)
    assert (body.transactional_id, body.producer_id, body.producer_epoch) == (None, -1, -1)


def test_add_partitions_to_txn_v0_bytes() -> None:
    request = {
        "v3_and_below_transactional_id": "tx",
        "v3_and_below_producer_id": 9,
        "v3_and_below_producer_epoch": 1,
        "v3_and_below_topics": [{"name": "t", "partitions": [0, 2]}],
    }
    wire, body = body_of(ApiKey.ADD_PARTITIONS_TO_TXN, 0, request)
    assert wire == s16("tx") + struct.pack(">qhi", 9, 1, 1) + s16("t") + struct.pack(">iii", 2, 0, 2)
    assert body.v3_and_below_topics[0].partitions == [0, 2]


def test_end_txn_v3_is_flexible() -> None:
    request = {"transactional_id": "tx", "producer_id": 9, "producer_epoch": 1, "committed": True}
    wire, _ = body_of(ApiKey.END_TXN, 3, request)
    assert wire == compact("tx") + struct.pack(">qh?", 9, 1, True) + b"\x00"


def test_list_transactions_v0_has_no_duration_filter_and_v1_has_one() -> None:
    request = {"state_filters": ["Ongoing"], "producer_id_filters": [5], "duration_filter": 1000}
    wire, body = body_of(ApiKey.LIST_TRANSACTIONS, 0, request)
    assert wire == b"\x02" + compact("Ongoing") + b"\x02" + struct.pack(">q", 5) + b"\x00"
    assert body.duration_filter == -1
    wire, body = body_of(ApiKey.LIST_TRANSACTIONS, 1, request)
    assert wire.endswith(struct.pack(">q", 1000) + b"\x00")
    assert body.duration_filter == 1000


def test_describe_transactions_response_roundtrips() -> None:
    state = {
        "error_code": 0,
        "transactional_id": "tx",
        "transaction_state": "Ongoing",
        "transaction_timeout_ms": 60000,
        "transaction_start_time_ms": 1_700_000_000_000,
        "producer_id": 9,
        "producer_epoch": 3,
        "topics": [{"topic": "t", "partitions": [1]}],
    }
    body = {"throttle_time_ms": 0, "transaction_states": [state]}
    header = request_header(ApiKey.DESCRIBE_TRANSACTIONS, 0, 11, "c")
    frame = b"".join(bytes(part) for part in encode_response(header, body).parts)  # type: ignore[arg-type]
    correlation_id, decoded = decode_response(ApiKey.DESCRIBE_TRANSACTIONS, 0, frame[4:])
    assert correlation_id == 11
    assert decoded.transaction_states[0].topics[0].partitions == [1]
    assert decoded.transaction_states[0].producer_epoch == 3
