"""The Kafka API handlers, one module per API area, and the one table that dispatches to them.

Every handler is ``async def handle_x(services, request) -> response body`` where ``services``
is its module's small dataclass of the protocols it uses (``_services``) and ``request`` a
``node.request.Request``. ``dispatch_table`` binds them to the node's real objects; tests bind
them to fakes. A handler never imports the broker, the server or another handler.

Per-entry failures are ``BrokerError`` (or a storage error that ``node.errors.as_broker_error``
maps) answered in that entry through ``node.errors.answer_errors``; a ``CloseConnection`` drops
the connection; anything else is a bug, which the broker logs before closing that connection.

Every handler checks what Kafka's authorizer checks for its API, through
``SecurityServices.allowed`` (``_services``); each module's docstring says what it asks for.
``NodeServices.security`` defaults to ``NO_AUTHORIZER``: everything allowed, as a Kafka broker
without ``authorizer.class.name``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from node.config import NodeConfig
from node.fetch_sessions import FetchSessionCache
from node.protocol import ApiKey, advertised_ranges
from node.request import Request

from . import (
    acls,
    alter_log_dirs,
    configs,
    controller,
    epochs,
    fetch,
    groups,
    log_dirs,
    metadata,
    mirror,
    offsets,
    produce,
    producer_id,
    producers,
    quotas,
    reassign,
    sasl,
    scram,
    topics,
    truncate,
    txn,
    txn_markers,
)
from ._services import NO_AUTHORIZER as NO_AUTHORIZER
from ._services import (
    ControllerService,
    FollowerTracker,
    GroupService,
    LogDirSource,
    MetadataView,
    PartitionSource,
    ProducerIdSource,
    PushedStateSink,
    RequestMetrics,
    TopicAdmin,
    TransactionService,
)
from ._services import SecurityServices as SecurityServices

Handler = Callable[[Request], Awaitable[Any]]

# Every API this node serves; ``dispatch_table`` answers exactly these.
SERVED_APIS: tuple[int, ...] = (
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.METADATA,
    ApiKey.CONTROLLED_SHUTDOWN,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
    ApiKey.FIND_COORDINATOR,
    ApiKey.JOIN_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.DESCRIBE_GROUPS,
    ApiKey.LIST_GROUPS,
    ApiKey.SASL_HANDSHAKE,
    ApiKey.API_VERSIONS,
    ApiKey.CREATE_TOPICS,
    ApiKey.DELETE_TOPICS,
    ApiKey.DELETE_RECORDS,
    ApiKey.INIT_PRODUCER_ID,
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    ApiKey.ADD_PARTITIONS_TO_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN,
    ApiKey.END_TXN,
    ApiKey.TXN_OFFSET_COMMIT,
    ApiKey.WRITE_TXN_MARKERS,
    ApiKey.DESCRIBE_ACLS,
    ApiKey.CREATE_ACLS,
    ApiKey.DELETE_ACLS,
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.ALTER_CONFIGS,
    ApiKey.ALTER_REPLICA_LOG_DIRS,
    ApiKey.DESCRIBE_LOG_DIRS,
    ApiKey.SASL_AUTHENTICATE,
    ApiKey.CREATE_PARTITIONS,
    ApiKey.DELETE_GROUPS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.OFFSET_DELETE,
    ApiKey.DESCRIBE_CLIENT_QUOTAS,
    ApiKey.ALTER_CLIENT_QUOTAS,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ApiKey.DESCRIBE_TRANSACTIONS,
    ApiKey.LIST_TRANSACTIONS,
    ApiKey.DESCRIBE_PRODUCERS,
    ApiKey.MIRROR_APPEND,
    ApiKey.TRUNCATE_PARTITIONS,
    ApiKey.PARTITION_STATES,
    ApiKey.ELECT_LEADERS,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
    ApiKey.DESCRIBE_CLUSTER,
)


def served_ranges() -> dict[int, tuple[int, int]]:
    """The (min, max) version this node serves of each API (what ApiVersions advertises)."""
    return advertised_ranges(SERVED_APIS)


@dataclass(frozen=True, slots=True)
class NodeServices:
    """Everything the handlers use, as the protocols they use it through."""

    config: NodeConfig
    cluster_id: str
    partitions: PartitionSource
    metadata: MetadataView
    admin: TopicAdmin
    groups: GroupService
    transactions: TransactionService
    controller: ControllerService
    followers: FollowerTracker
    producer_ids: ProducerIdSource
    metrics: RequestMetrics
    log_dirs: LogDirSource
    states: PushedStateSink
    security: SecurityServices = NO_AUTHORIZER
    #: Called once a transaction marker of a ``__consumer_offsets`` partition is committed
    #: (``txn_markers``): (partition index, producer id, commit).
    on_offsets_marker: Callable[[int, int, bool], None] = txn_markers.ignore_offsets_marker
    #: Where the site's client quotas are kept (DescribeClientQuotas / AlterClientQuotas).
    quota_store: quotas.QuotaStore | None = None


def dispatch_table(node: NodeServices, api_ranges: Mapping[int, tuple[int, int]]) -> dict[int, Handler]:
    """API key -> handler bound to its services, for every key in ``SERVED_APIS``."""
    security = node.security
    log_access = offsets.OffsetsServices(node.partitions, security)
    group = groups.GroupServices(node.groups, node.metadata, node.admin, node.config, security)
    transaction = txn.TxnServices(node.transactions, node.groups, node.metadata, security)
    meta = metadata.MetadataServices(node.metadata, node.admin, node.config, node.cluster_id, api_ranges, security)
    config = configs.ConfigServices(node.metadata, node.admin, node.config, security)
    topic = topics.TopicServices(node.admin, node.metadata, node.config, security)
    acl = acls.AclServices(security)
    credentials = scram.ScramServices(security)
    handshake = sasl.SaslServices()
    client_quotas = quotas.QuotaServices(node.quota_store, security)
    table: dict[int, Handler] = {
        ApiKey.PRODUCE: partial(
            produce.handle_produce, produce.ProduceServices(node.partitions, node.metrics, security, node.metadata)
        ),
        ApiKey.FETCH: partial(
            fetch.handle_fetch,
            fetch.FetchServices(
                node.partitions,
                node.followers,
                node.metrics,
                security,
                FetchSessionCache(node.config.max_incremental_fetch_session_cache_slots, metrics=node.metrics),
                node.metadata,
                replica_selector=node.config.replica_selector_class,
            ),
        ),
        ApiKey.LIST_OFFSETS: partial(offsets.handle_list_offsets, log_access),
        ApiKey.DELETE_RECORDS: partial(offsets.handle_delete_records, log_access),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: partial(
            epochs.handle_offset_for_leader_epoch, epochs.EpochServices(node.partitions, security)
        ),
        ApiKey.WRITE_TXN_MARKERS: partial(
            txn_markers.handle_write_txn_markers,
            txn_markers.TxnMarkerServices(node.partitions, node.metrics, security, node.on_offsets_marker),
        ),
        ApiKey.MIRROR_APPEND: partial(
            mirror.handle_mirror_append, mirror.MirrorServices(node.partitions, node.metrics, security)
        ),
        ApiKey.TRUNCATE_PARTITIONS: partial(
            truncate.handle_truncate_partitions,
            truncate.TruncateServices(node.partitions, node.admin, node.controller, node.metrics, security),
        ),
        ApiKey.PARTITION_STATES: partial(
            controller.handle_partition_states, controller.PartitionStatesServices(node.states, security)
        ),
        ApiKey.METADATA: partial(metadata.handle_metadata, meta),
        ApiKey.API_VERSIONS: partial(metadata.handle_api_versions, meta),
        ApiKey.DESCRIBE_CLUSTER: partial(metadata.handle_describe_cluster, meta),
        ApiKey.CONTROLLED_SHUTDOWN: partial(
            controller.handle_controlled_shutdown,
            controller.ControllerServices(node.controller, node.metadata, security),
        ),
        ApiKey.DESCRIBE_PRODUCERS: partial(
            producers.handle_describe_producers, producers.ProducersServices(node.partitions, security)
        ),
        ApiKey.ELECT_LEADERS: partial(
            controller.handle_elect_leaders,
            controller.ControllerServices(node.controller, node.metadata, security),
        ),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: partial(
            reassign.handle_alter_partition_reassignments, reassign.ReassignServices(node.controller, security)
        ),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: partial(
            reassign.handle_list_partition_reassignments, reassign.ReassignServices(node.controller, security)
        ),
        ApiKey.CREATE_TOPICS: partial(topics.handle_create_topics, topic),
        ApiKey.DELETE_TOPICS: partial(topics.handle_delete_topics, topic),
        ApiKey.CREATE_PARTITIONS: partial(topics.handle_create_partitions, topic),
        ApiKey.DESCRIBE_CONFIGS: partial(configs.handle_describe_configs, config),
        ApiKey.DESCRIBE_LOG_DIRS: partial(
            log_dirs.handle_describe_log_dirs, log_dirs.LogDirServices(node.log_dirs, security)
        ),
        ApiKey.ALTER_REPLICA_LOG_DIRS: partial(
            alter_log_dirs.handle_alter_replica_log_dirs, alter_log_dirs.AlterLogDirServices(node.log_dirs, security)
        ),
        ApiKey.ALTER_CONFIGS: partial(configs.handle_alter_configs, config),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: partial(configs.handle_incremental_alter_configs, config),
        ApiKey.INIT_PRODUCER_ID: partial(
            producer_id.handle_init_producer_id,
            producer_id.ProducerIdServices(node.producer_ids, node.transactions, security),
        ),
        ApiKey.FIND_COORDINATOR: partial(groups.handle_find_coordinator, group),
        ApiKey.JOIN_GROUP: partial(groups.handle_join_group, group),
        ApiKey.SYNC_GROUP: partial(groups.handle_sync_group, group),
        ApiKey.HEARTBEAT: partial(groups.handle_heartbeat, group),
        ApiKey.LEAVE_GROUP: partial(groups.handle_leave_group, group),
        ApiKey.OFFSET_COMMIT: partial(groups.handle_offset_commit, group),
        ApiKey.OFFSET_FETCH: partial(groups.handle_offset_fetch, group),
        ApiKey.DESCRIBE_GROUPS: partial(groups.handle_describe_groups, group),
        ApiKey.LIST_GROUPS: partial(groups.handle_list_groups, group),
        ApiKey.DELETE_GROUPS: partial(groups.handle_delete_groups, group),
        ApiKey.OFFSET_DELETE: partial(groups.handle_offset_delete, group),
        ApiKey.TXN_OFFSET_COMMIT: partial(groups.handle_txn_offset_commit, group),
        ApiKey.ADD_PARTITIONS_TO_TXN: partial(txn.handle_add_partitions_to_txn, transaction),
        ApiKey.ADD_OFFSETS_TO_TXN: partial(txn.handle_add_offsets_to_txn, transaction),
        ApiKey.END_TXN: partial(txn.handle_end_txn, transaction),
        ApiKey.DESCRIBE_TRANSACTIONS: partial(txn.handle_describe_transactions, transaction),
        ApiKey.LIST_TRANSACTIONS: partial(txn.handle_list_transactions, transaction),
        ApiKey.DESCRIBE_ACLS: partial(acls.handle_describe_acls, acl),
        ApiKey.CREATE_ACLS: partial(acls.handle_create_acls, acl),
        ApiKey.DELETE_ACLS: partial(acls.handle_delete_acls, acl),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: partial(scram.handle_describe_user_scram_credentials, credentials),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: partial(scram.handle_alter_user_scram_credentials, credentials),
        ApiKey.DESCRIBE_CLIENT_QUOTAS: partial(quotas.handle_describe_client_quotas, client_quotas),
        ApiKey.ALTER_CLIENT_QUOTAS: partial(quotas.handle_alter_client_quotas, client_quotas),
        ApiKey.SASL_HANDSHAKE: partial(sasl.handle_sasl_handshake, handshake),
        ApiKey.SASL_AUTHENTICATE: partial(sasl.handle_sasl_authenticate, handshake),
    }
    assert sorted(table) == sorted(SERVED_APIS), "SERVED_APIS and the dispatch table disagree"
    return table
