"""Produce (API 0): validate and append each partition's batch; acks=0 gets no response.

A fenced topic (``strait.fenced`` set) refuses every batch with POLICY_VIOLATION and the
message ``topic 'T' is fenced: <the fence's text>`` (carried from Produce v8); so does a mirror
topic (``strait.mirror.link`` set), naming its link. Both are checked against the node's view of
the topic config when the request is handled: a batch appended before the node saw the change
completes as usual (acks=all still waits for its high watermark).
acks=1 answers once the leader appended; acks=all first requires an ISR of at least
min.insync.replicas (NOT_ENOUGH_REPLICAS, nothing written), then waits until the high
watermark passes the batch (REQUEST_TIMED_OUT after the request's timeout,
NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below min.insync.replicas meanwhile,
NOT_LEADER_OR_FOLLOWER if leadership moved). From v10 a NOT_LEADER_OR_FOLLOWER answer names the
partition's current leader and epoch and that leader's address (KIP-951, ``_services.leader_hint``).

Transactional batches (KIP-98) are appended like any other, after the transaction rules of
``node.producer_state``; a transaction's markers come from its coordinator (WriteTxnMarkers,
``node.handlers.txn_markers``), never from a client (a control batch is INVALID_RECORD).

Authorisation (Kafka's): a request carrying a transactional batch needs its
``transactional_id`` and WRITE on that TRANSACTIONAL_ID, else every partition answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and nothing is written. Then WRITE on each topic, else
TOPIC_AUTHORIZATION_FAILED for its partitions before anything else is checked, so a client
learns nothing about a topic it may not write. Idempotent batches need nothing more: since
KIP-679 Kafka checks IDEMPOTENT_WRITE only at InitProducerId.
"""

from __future__ import annotations

import functools
import logging
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from node.errors import BrokerError, answer_errors
from node.offsets_topic import OFFSETS_TOPIC
from node.protocol import ErrorCode
from node.request import CloseConnection, Deferred, Request
from node.security._acl import AclOperation, ResourceType
from storage.records import ATTR_TRANSACTIONAL

from ._services import (
    NO_AUTHORIZER,
    MetadataView,
    PartitionSource,
    RequestMetrics,
    SecurityServices,
    denied,
    leader_hint,
)

if TYPE_CHECKING:
    from node.partition import Partition

log = logging.getLogger("strait.node.produce")

VALID_ACKS = (-1, 0, 1)
ZSTD_MIN_VERSION = 7
LEADER_HINT_VERSION = 10  # current_leader / node_endpoints (KIP-951)
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_POS = 21  # in a batch header (storage.records._batch)


@dataclass(frozen=True, slots=True)
class ProduceServices:
    partitions: PartitionSource
    metrics: RequestMetrics
    security: SecurityServices = NO_AUTHORIZER
    #: Leader hints come from here (v10+); without it a NOT_LEADER_OR_FOLLOWER answer has none.
    metadata: MetadataView | None = None


async def handle_produce(services: ProduceServices, request: Request) -> dict[str, Any] | Deferred | None:
    started = time.perf_counter()
    req = request.body
    acks = req.acks
    txn_denied = _transactional_id_denied(services, request)
    code: ErrorCode | None = None
    message = ""
    if acks not in VALID_ACKS:
        code, message = ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} must be -1, 0 or 1"
    allow_zstd = request.api_version >= ZSTD_MIN_VERSION
    responses = []
    failed = False
    replicating: list[tuple[dict[str, Any], Partition, int, str]] = []
    endpoints: list[dict[str, Any]] = []
    where = (request.api_version, request.connection.listener)
    for topic in req.topic_data:
        partitions = []
        may_write = services.security.allowed(request, AclOperation.WRITE, ResourceType.TOPIC, topic.name)
        for pd in topic.partition_data:
            entry = {
                "index": pd.index,
                "error_code": 0,
                "base_offset": -1,
                "log_append_time_ms": -1,
                "log_start_offset": -1,
                "record_errors": [],
                "error_message": None,
                "current_leader": None,
            }
            with answer_errors(entry) as answer:
                if txn_denied is not None:
                    raise txn_denied
                if not may_write:
                    raise denied(request, AclOperation.WRITE, ResourceType.TOPIC, topic.name)
                if code is not None:
                    raise BrokerError(code, message)
                if topic.name == OFFSETS_TOPIC:
                    raise BrokerError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"clients may not produce to {OFFSETS_TOPIC}")
                partition = services.partitions.partition(topic.name, pd.index)
                partition.check_fenced()
                partition.check_writable()
                if acks == -1:
                    partition.check_min_isr()
                result = partition.append_produced(pd.records, allow_zstd=allow_zstd)
                entry["base_offset"] = result.base_offset
                entry["log_append_time_ms"] = result.log_append_time
                entry["log_start_offset"] = result.log_start_offset
                if acks == -1:
                    replicating.append((entry, partition, result.last_offset, topic.name))
            if answer.error is not None:
                failed = True
                services.metrics.record_error("Produce", answer.error.code.name)
                log.info("produce to %s-%d rejected: %s", topic.name, pd.index, answer.error.message)
                _hint(services, where, topic.name, entry, endpoints)
            partitions.append(entry)
        responses.append({"name": topic.name, "partition_responses": partitions})
    body: dict[str, Any] = {"responses": responses, "throttle_time_ms": 0, "node_endpoints": endpoints}
    if replicating:
        # acks=all: answer once every written batch is below its partition's high watermark. The
        # server reads the connection's next Produce meanwhile (node.server: answers in order).
        deadline = trio.current_time() + max(req.timeout_ms, 0) / 1000
        return Deferred(functools.partial(_replicated, services, where, replicating, deadline, started, body))
    services.metrics.observe_produce(time.perf_counter() - started)
    if acks == 0:
        if failed:
            # Kafka closes the connection so that an acks=0 producer notices something went wrong.
            raise CloseConnection("acks=0 produce failed")
        return None
    return body


def _transactional_id_denied(services: ProduceServices, request: Request) -> BrokerError | None:
    """Kafka's check for a request with transactional batches: it needs a transactional id and
    WRITE on it. Returns the error every partition answers, None when the request may go on."""
    req = request.body
    transactional = any(
        pd.records is not None
        and len(pd.records) > _ATTRIBUTES_POS + 1
        and _ATTRIBUTES.unpack_from(pd.records, _ATTRIBUTES_POS)[0] & ATTR_TRANSACTIONAL
        for topic in req.topic_data
        for pd in topic.partition_data
    )
    if not transactional:
        return None
    txn_id = req.transactional_id
    if txn_id is None:
        return BrokerError(
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional batches need the request's transactional_id"
        )
    if not services.security.allowed(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return denied(request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)
    return None


def _hint(
    services: ProduceServices, where: tuple[int, str], topic: str, entry: dict[str, Any], endpoints: list[Any]
) -> None:
    """Add the leader hint of KIP-951 to a NOT_LEADER_OR_FOLLOWER answer (v10+), its endpoint once per
    node; ``where`` is the request's (API version, listener)."""
    version, listener = where
    if version < LEADER_HINT_VERSION or entry["error_code"] != ErrorCode.NOT_LEADER_OR_FOLLOWER:
        return
    current, endpoint = leader_hint(services.metadata, topic, entry["index"], listener)
    entry["current_leader"] = current
    if endpoint is not None and all(e["node_id"] != endpoint["node_id"] for e in endpoints):
        endpoints.append(endpoint)


async def _replicated(
    services: ProduceServices,
    where: tuple[int, str],
    replicating: list[tuple[dict[str, Any], Partition, int, str]],
    deadline: float,
    started: float,
    body: dict[str, Any],
) -> dict[str, Any]:
    """acks=all's answer: each batch committed, or its error (it was written all the same)."""
    for entry, partition, last_offset, name in replicating:
        with answer_errors(entry) as answer:
            await partition.wait_for_hw(last_offset, deadline)
        if answer.error is not None:
            entry["base_offset"] = -1
            services.metrics.record_error("Produce", answer.error.code.name)
            log.info("produce to %s-%d not committed: %s", name, entry["index"], answer.error.message)
            _hint(services, where, name, entry, body["node_endpoints"])
    services.metrics.observe_produce(time.perf_counter() - started)
    return body
