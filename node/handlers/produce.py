"""Produce (API 0): validate and append each partition's batch; acks=0 gets no response.

A mirror topic (``strait.mirror.link`` set) refuses every batch with POLICY_VIOLATION.
acks=1 answers once the leader appended; acks=all first requires an ISR of at least
min.insync.replicas (NOT_ENOUGH_REPLICAS, nothing written), then waits until the high
watermark passes the batch (REQUEST_TIMED_OUT after the request's timeout,
NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min.insync.replicas meanwhile,
NOT_LEADER_OR_FOLLOWER if leadership moved).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import trio

from node.errors import BrokerError
from node.handlers.mirror import check_writable
from node.offsets_topic import OFFSETS_TOPIC
from node.protocol import ErrorCode, RequestHeader, Struct
from node.server import CloseConnection

if TYPE_CHECKING:
    from node.broker import Broker
    from node.partition import Partition

log = logging.getLogger("strait.node.produce")

VALID_ACKS = (-1, 0, 1)
ZSTD_MIN_VERSION = 7


async def handle_produce(broker: Broker, header: RequestHeader, req: Struct) -> dict[str, Any] | None:
    started = time.perf_counter()
    acks = req.acks
    if req.transactional_id is not None:
        code: ErrorCode | None = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        message = "transactions are not supported by strait yet"
    elif acks not in VALID_ACKS:
        code, message = ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} must be -1, 0 or 1"
    else:
        code, message = None, None
    allow_zstd = header.api_version >= ZSTD_MIN_VERSION
    responses = []
    failed = False
    replicating: list[tuple[dict[str, Any], Partition, int, str]] = []
    for topic in req.topic_data:
        partitions = []
        for pd in topic.partition_data:
            entry = {
                "index": pd.index,
                "error_code": 0,
                "base_offset": -1,
                "log_append_time_ms": -1,
                "log_start_offset": -1,
                "record_errors": [],
                "error_message": None,
            }
            try:
                if code is not None:
                    raise BrokerError(code, message or "")
                if topic.name == OFFSETS_TOPIC:
                    raise BrokerError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"clients may not produce to {OFFSETS_TOPIC}")
                partition = broker.cluster.partition(topic.name, pd.index)
                check_writable(topic.name, partition.policy)
                if acks == -1:
                    partition.check_min_isr()
                result = partition.append_produced(pd.records, allow_zstd=allow_zstd)
                entry["base_offset"] = result.base_offset
                entry["log_append_time_ms"] = result.log_append_time
                entry["log_start_offset"] = result.log_start_offset
                if acks == -1:
                    replicating.append((entry, partition, result.last_offset, topic.name))
            except BrokerError as exc:
                failed = True
                entry["error_code"] = exc.code
                entry["error_message"] = exc.message
                broker.metrics.record_error("Produce", exc.code.name)
                log.info("produce to %s-%d rejected: %s", topic.name, pd.index, exc.message)
            partitions.append(entry)
        responses.append({"name": topic.name, "partition_responses": partitions})
    if replicating:
        # acks=all: answer once every written batch is below its partition's high watermark.
        deadline = trio.current_time() + max(req.timeout_ms, 0) / 1000
        for entry, partition, last_offset, name in replicating:
            try:
                await partition.wait_for_hw(last_offset, deadline)
            except BrokerError as exc:
                entry["error_code"] = exc.code
                entry["error_message"] = exc.message
                entry["base_offset"] = -1
                broker.metrics.record_error("Produce", exc.code.name)
                log.info("produce to %s-%d not committed: %s", name, entry["index"], exc.message)
    broker.metrics.observe_produce(time.perf_counter() - started)
    if acks == 0:
        if failed:
            # Kafka closes the connection so that an acks=0 producer notices something went wrong.
            raise CloseConnection("acks=0 produce failed")
        return None
    return {"responses": responses, "throttle_time_ms": 0}
