"""One broker node: ZooKeeper registration, the log dirs, the Kafka listeners and the admin API.

``Broker.run`` is the whole life of a node. Startup: connect to ZooKeeper, read (or create)
the cluster id, load every log dir (recovering after an unclean stop), reconcile with the
topics in ZooKeeper, bind every listener (``listeners``), register ``/brokers/ids/<id>`` with
each advertised endpoint (host/port: the inter-broker listener's), serve each listener, start
the admin HTTP API, then report ready (the bootstrap is the first listener's address).
Shutdown (cancellation): stop accepting, deregister, then flush and close every log, write
checkpoints and the clean-shutdown marker, within a deadline.

Requests are dispatched by API key through ``node.handlers.dispatch_table``, which binds each
handler to the parts of this node it uses (the cluster state, the group and transaction
coordinators, the controller, the replica manager, ...); an unexpected exception in a handler is logged here and
closes that connection only.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import trio

from node.admin_http import create_app, serve_admin
from node.adminkit import AdminTls
from node.broker_view import BrokerView
from node.client import ClientError, NodeConnection
from node.cluster import ClusterState
from node.config import NodeConfig
from node.controller import Controller
from node.coordination import BrokerIdInUse, BrokerRegistration, ZkQuotaStore, ZkSecurityStore, ZkState
from node.groups import GroupConfig, GroupCoordinator
from node.handlers import Handler, NodeServices, SecurityServices, dispatch_table, served_ranges
from node.metrics import NodeMetrics
from node.offsets_topic import OffsetsTopicStore, sync_coordinator
from node.proc import atomic_write
from node.producer_ids import ProducerIdAllocator, site_floor
from node.protocol import ApiKey
from node.quotas import QuotaManager, QuotaSettings
from node.replica_manager import ReplicaManager
from node.request import CloseConnection, Request
from node.sasl import ServerSasl
from node.security._scram import ScramCredential
from node.server import KafkaServer, ServerLimits, api_name, bind_listener
from node.stall import StallWatch
from node.tls import ServerTls, inter_broker_context, inter_broker_sasl
from node.txn import TransactionCoordinator, TxnConfig
from node.txn_topic import ClusterMarkerWriter, TxnTopicStore
from node.txn_topic import sync_coordinator as sync_txn_coordinator
from storage import LogManager, wall_clock_ms

log = logging.getLogger("strait.node")

SHUTDOWN_DEADLINE_S = 30.0


@dataclass(frozen=True, slots=True)
class ReadyInfo:
    broker_id: int
    bootstrap: str  # host:port the first listener advertises
    admin_url: str
    cluster_id: str
    listeners: Mapping[str, str] = field(default_factory=dict)  # every listener's name -> advertised host:port

    def to_json(self) -> str:
        return json.dumps(
            {
                "broker_id": self.broker_id,
                "bootstrap": self.bootstrap,
                "admin_url": self.admin_url,
                "cluster_id": self.cluster_id,
                "listeners": dict(self.listeners),
                "pid": os.getpid(),
            }
        )


class Broker:
    def __init__(self, config: NodeConfig) -> None:
        self.security: ZkSecurityStore | None = None  # the site's SCRAM credentials and ACLs, once started
        self.config = config
        self.metrics = NodeMetrics()
        # Client quotas: enforced by every listener's server, kept in ZooKeeper (docs/quotas.md).
        self.quotas = QuotaManager(QuotaSettings(config.quota_window_num, float(config.quota_window_size_seconds)))
        self.metrics.attach_quotas(self.quotas)
        self.quota_store: ZkQuotaStore | None = None
        self.zk = ZkState(
            config.zookeeper_connect,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            connection_timeout_ms=config.zookeeper_connection_timeout_ms,
            clock_ms=wall_clock_ms,
            digest=config.read_zookeeper_digest(),
            set_acl=config.zookeeper_set_acl,
        )
        self.api_ranges: Mapping[int, tuple[int, int]] = served_ranges()
        self._dispatch: Mapping[int, Handler] = {}
        self.cluster_id = ""
        self._cluster: ClusterState | None = None
        self.producer_ids = ProducerIdAllocator(config.broker_id, self.zk.claim_producer_id_block)
        self.groups = GroupCoordinator(
            GroupConfig(
                offsets_partitions=config.offsets_topic_num_partitions,
                initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                min_session_timeout_ms=config.group_min_session_timeout_ms,
                max_session_timeout_ms=config.group_max_session_timeout_ms,
                offsets_retention_ms=config.offsets_retention_ms,
            ),
            OffsetsTopicStore(lambda: self.cluster),
            wall_clock_ms=wall_clock_ms,
        )
        self._markers = ClusterMarkerWriter(config, lambda: self.cluster)
        self.transactions = TransactionCoordinator(
            TxnConfig(
                state_partitions=config.transaction_state_log_num_partitions,
                max_timeout_ms=config.transaction_max_timeout_ms,
                id_expiration_ms=config.transactional_id_expiration_ms,
                abort_timed_out_interval_ms=config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                remove_expired_interval_ms=config.transaction_remove_expired_transaction_cleanup_interval_ms,
            ),
            TxnTopicStore(lambda: self.cluster),
            self.producer_ids,
            self._markers,
            wall_clock_ms=wall_clock_ms,
        )
        # Made once the cluster state exists (``run``): they work on it, not on the broker.
        self.replicas: ReplicaManager | None = None
        self.controller: Controller | None = None
        self.status = "starting"

    @property
    def cluster(self) -> ClusterState:
        if self._cluster is None:
            raise RuntimeError("the broker has not started")
        return self._cluster

    # -- the RequestHandler the server calls ----------------------------------------------

    async def handle(self, request: Request) -> Any:
        header = request.header
        handler = self._dispatch[header.api_key]
        try:
            return await handler(request)
        except (CloseConnection, trio.Cancelled):
            raise
        except Exception:
            log.exception(
                "%s v%d from %s (correlation id %d) failed",
                api_name(header.api_key),
                header.api_version,
                request.connection.peer,
                header.correlation_id,
            )
            raise CloseConnection("internal error while handling the request") from None

    def _scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.security.scram_credential(mechanism, user) if self.security is not None else None

    # -- life -----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[ReadyInfo] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the node until cancelled; ``task_status.started(ReadyInfo)`` once it serves."""
        config = self.config
        # Before anything starts: a keystore that does not load stops the node here, named. Each
        # listener has its own TLS context (its own files, reloaded on their own) and SASL settings.
        tls = {x.name: ServerTls(config, x.name) for x in config.listeners if config.security_of(x.name).uses_tls}
        # SCRAM credentials come from the site's store (ZooKeeper), PLAIN users from the config.
        sasl = {
            x.name: ServerSasl(config, x.name, scram_lookup=self._scram_credential)
            for x in config.listeners
            if config.security_of(x.name).uses_sasl
        }
        await self.zk.start()
        logs: LogManager | None = None
        try:
            self.security = ZkSecurityStore(
                self.zk,
                super_users=config.super_users,
                allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
            )
            await self.security.start()
            self.quota_store = ZkQuotaStore(self.zk, self.quotas.update)
            await self.quota_store.start()
            self.cluster_id = await self.zk.cluster_id()
            self.producer_ids.floor = site_floor(self.cluster_id)
            logs = LogManager(
                config.log_dirs,
                config.log_config(),
                broker_id=config.broker_id,
                cluster_id=self.cluster_id,
                move_bytes_per_second=config.replica_alter_log_dirs_io_max_bytes_per_second,
            )
            reports = await trio.to_thread.run_sync(logs.startup)
            for report in reports:
                if report.bytes_dropped or report.first_error:
                    log.warning("recovered %s: %s", report.tp, report)
            self._cluster = ClusterState(config, self.zk, logs)
            cluster = self._cluster
            stall = StallWatch(config.zookeeper_session_timeout_ms / 3000, lambda _seconds: self.zk.post("stalled"))
            cluster.stall = stall
            stall.start()
            replicas = self.replicas = ReplicaManager(config, cluster, self.zk, self.metrics)
            controller = self.controller = Controller(config, cluster, self.zk)
            cluster.on_refresh.append(lambda: sync_coordinator(cluster, self.groups))
            cluster.on_refresh.append(lambda: sync_txn_coordinator(cluster, self.transactions))
            cluster.on_refresh.append(controller.poke)
            cluster.on_roles_changed.append(replicas.roles_changed)
            self._dispatch = dispatch_table(
                NodeServices(
                    config=config,
                    cluster_id=self.cluster_id,
                    partitions=cluster,
                    metadata=cluster,
                    admin=cluster,
                    groups=self.groups,
                    transactions=self.transactions,
                    controller=controller,
                    followers=replicas,
                    producer_ids=self.producer_ids,
                    metrics=self.metrics,
                    log_dirs=logs,
                    states=cluster,
                    on_offsets_marker=self.groups.complete_txn_offsets,
                    security=SecurityServices(self.security, authorizer_enabled=bool(config.authorizer_class_name)),
                    quota_store=self.quota_store,
                ),
                self.api_ranges,
            )
            await cluster.refresh()
            with ExitStack() as sockets:
                bound = {}
                for listener_cfg in config.listeners:
                    sock = await bind_listener(listener_cfg.host, listener_cfg.port)
                    bound[listener_cfg.name] = sockets.enter_context(sock)
                advertised = config.advertised_for({name: sock.getsockname()[1] for name, sock in bound.items()})
                inter_broker = next(a for a in advertised if a.name == config.inter_broker_listener_name)
                await self._register(
                    BrokerRegistration(
                        broker_id=config.broker_id,
                        host=inter_broker.host,
                        port=inter_broker.port,
                        endpoints=tuple(str(a) for a in advertised),
                        rack=config.broker_rack,
                        security_protocols={a.name: config.security_protocol(a.name) for a in advertised},
                    )
                )
                cluster.registered = True
                await cluster.refresh()
                await replicas.settle_startup_claims()
                limits = ServerLimits(
                    config.socket_request_max_bytes,
                    config.connections_max_idle_ms / 1000,
                    config.socket_send_buffer_bytes,
                    config.socket_receive_buffer_bytes,
                )
                servers = [
                    (
                        KafkaServer(
                            self,
                            self.metrics,
                            limits,
                            listener_name=name,
                            security_protocol=config.security_protocol(name),
                            tls=tls.get(name),
                            sasl=sasl.get(name),
                            quotas=self.quotas,
                        ),
                        sock,
                    )
                    for name, sock in bound.items()
                ]
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.groups.run)
                    await nursery.start(self.transactions.run)
                    await nursery.start(replicas.run)
                    await nursery.start(controller.run)
                    nursery.start_soon(self._follow_zookeeper)
                    nursery.start_soon(self._watch_log_dirs, logs)
                    await self._await_controller()
                    for server, sock in servers:
                        await nursery.start(server.serve, sock)
                    addresses = {a.name: a.address for a in advertised}
                    admin_host, admin_port = config.admin_listener
                    admin_tls = (
                        AdminTls(config.ssl_keystore_location, config.ssl_key_password)
                        if config.admin_ssl_enabled and config.ssl_keystore_location is not None
                        else None
                    )
                    actual_admin = await nursery.start(
                        partial(serve_admin, tls=admin_tls),
                        create_app(
                            BrokerView(
                                config=config,
                                cluster_id=self.cluster_id,
                                cluster=cluster,
                                controller=controller,
                                replicas=replicas,
                                groups=self.groups,
                                status=lambda: self.status,
                                listeners=addresses,
                            ),
                            self.metrics,
                        ),
                        admin_host,
                        admin_port,
                    )
                    nursery.start_soon(self._maintenance, logs)
                    nursery.start_soon(self._cleaner)
                    self.status = "ok"
                    info = ReadyInfo(
                        config.broker_id,
                        advertised[0].address,
                        f"{'https' if admin_tls else 'http'}://{admin_host}:{actual_admin}",
                        self.cluster_id,
                        addresses,
                    )
                    log.info(
                        "broker %d serving on %s (admin %s, cluster %s, inter-broker listener %s)",
                        config.broker_id,
                        ", ".join(str(a) for a in advertised),
                        info.admin_url,
                        self.cluster_id,
                        inter_broker.name,
                    )
                    task_status.started(info)
        finally:
            self.status = "stopping"
            if self._cluster is not None and self._cluster.stall is not None:
                self._cluster.stall.stop()
            if self.security is not None:
                self.security.close()
            if self.quota_store is not None:
                self.quota_store.close()
            with trio.CancelScope(shield=True), trio.move_on_after(SHUTDOWN_DEADLINE_S):
                await self._markers.aclose()
                await self.zk.close()
                if logs is not None:
                    await trio.to_thread.run_sync(logs.shutdown)
                log.info("broker %d stopped cleanly", config.broker_id)

    async def _register(self, registration: BrokerRegistration) -> None:
        """Register, waiting out the ZooKeeper session of a previous incarnation of this broker.

        After a kill -9 the old ephemeral ``/brokers/ids/<id>`` lives until its session
        expires; Kafka fails startup then, strait waits up to 1.5 session timeouts (a live
        broker with the same id keeps its session, so this still ends in BrokerIdInUse).
        """
        deadline = trio.current_time() + 1.5 * self.config.zookeeper_session_timeout_ms / 1000
        warned = False
        while True:
            try:
                await self.zk.register_broker(registration)
                return
            except BrokerIdInUse:
                if trio.current_time() >= deadline:
                    raise
                if not warned:
                    log.warning(
                        "broker id %d is still registered by another ZooKeeper session; waiting for it to "
                        "expire (zookeeper.session.timeout.ms=%d)",
                        registration.broker_id,
                        self.config.zookeeper_session_timeout_ms,
                    )
                    warned = True
                await trio.sleep(0.25)

    async def controlled_shutdown(self) -> bool:
        """Before stopping: have the controller move this broker's leaderships to other ISR members.

        First this broker stops fetching as a follower (``ReplicaManager.stop_following``), so
        the new leaders do not add it back to the ISRs the controller takes it out of. Then up to
        ``controlled.shutdown.max.retries`` attempts, ``controlled.shutdown.retry.backoff.ms``
        apart. Returns True when this broker leads nothing that another replica could lead.
        """
        config = self.config
        if self.replicas is not None:
            self.replicas.stop_following()  # a stopping node replicates nothing more
        if not config.controlled_shutdown_enable or self._cluster is None or not self.cluster.registered:
            return True
        cluster = self.cluster
        me = config.broker_id
        for attempt in range(config.controlled_shutdown_max_retries + 1):
            if attempt:
                await trio.sleep(config.controlled_shutdown_retry_backoff_ms / 1000)
            if not any(p.is_leader or me in p.isr for p in cluster.partitions.values() if len(p.replicas) > 1):
                return True
            try:
                remaining = await self._ask_controller_to_move_leaders()
            except Exception as exc:
                log.warning("controlled shutdown attempt %d failed: %s", attempt + 1, exc)
                continue
            await cluster.refresh()
            if remaining is not None:
                log.info(
                    "controlled shutdown: leaderships moved away; %d partition(s) have no other in-sync replica",
                    len(remaining),
                )
                return True
        log.warning("controlled shutdown did not complete; stopping anyway")
        return False

    async def _ask_controller_to_move_leaders(self) -> list[tuple[str, int]] | None:
        cluster = self.cluster
        me = self.config.broker_id
        if self.controller is not None and self.controller.active:
            return await self.controller.controlled_shutdown(me)
        if cluster.controller is None:
            return None
        reg = cluster.brokers.get(cluster.controller[0])
        if reg is None:
            return None
        async with await NodeConnection.open(
            f"{reg.host}:{reg.port}",
            client_id=f"strait-broker-{me}",
            ssl_context=inter_broker_context(self.config),
            sasl=inter_broker_sasl(self.config),
        ) as conn:
            body = await conn.request(ApiKey.CONTROLLED_SHUTDOWN, 2, {"broker_id": me, "broker_epoch": -1}, timeout=30)
        if body.error_code:
            raise ClientError.from_code(body.error_code, "ControlledShutdown")
        return [(p.topic_name, p.partition_index) for p in body.remaining_partitions]

    async def _watch_log_dirs(self, logs: LogManager) -> None:
        """Publish the replicas of failed log dirs so the controller moves their leadership away."""
        published: frozenset[tuple[str, int]] = frozenset()
        while True:
            offline = frozenset((tp.topic, tp.partition) for tp in logs.offline_partitions())
            if offline != published:
                try:
                    await self.zk.set_offline_replicas(self.config.broker_id, sorted(offline))
                    published = offline
                    log.error("log dirs offline %s: %d replica(s) offline", logs.offline_dirs(), len(offline))
                    await self.cluster.refresh()
                except Exception as exc:
                    log.warning("publishing offline replicas failed: %s", exc)
            await trio.sleep(1)

    async def _await_controller(self) -> None:
        """Serve only once a controller is known (as Kafka starts its controller before taking
        requests): admin clients send CreateTopics to Metadata's controller id and may wait
        minutes before asking again when it is -1. Bounded by the ZooKeeper session timeout."""
        with trio.move_on_after(self.config.zookeeper_session_timeout_ms / 1000):
            while self.cluster.controller is None:
                await trio.sleep(0.02)
        if self.cluster.controller is None:
            log.warning("no controller elected yet; serving anyway")

    async def _follow_zookeeper(self) -> None:
        """Re-read ZooKeeper whenever a watch fires (events are coalesced hints)."""
        events = self.zk.events()
        async for event in events:
            try:
                await self.cluster.refresh()
            except Exception:
                log.exception("refreshing cluster state after %r failed; retrying in 1 s", event)
                await trio.sleep(1)
                self.zk.post(event)

    async def _maintenance(self, logs: LogManager) -> None:
        interval = min(self.config.log_retention_check_interval_ms, self.config.log_flush_scheduler_interval_ms)
        interval_s = max(interval, 100) / 1000
        while True:
            await trio.sleep(interval_s)
            try:
                await trio.to_thread.run_sync(logs.maintenance)
            except Exception:
                log.exception("log maintenance failed")

    async def _cleaner(self) -> None:
        """Compact the logs whose cleanup.policy includes compact, every log.cleaner.backoff.ms."""
        while True:
            await trio.sleep(self.config.log_cleaner_backoff_ms / 1000)
            for tp, partition in list(self.cluster.partitions.items()):
                plog = partition.log
                if not plog.config.compacts or plog.is_offline:
                    continue
                try:
                    result = await trio.to_thread.run_sync(plog.compact, wall_clock_ms())
                except Exception:
                    log.exception("compacting %s failed", tp)
                    continue
                if result.cleaned:
                    log.info(
                        "compacted %s: %d -> %d bytes, %d records and %d tombstones removed",
                        tp,
                        result.bytes_before,
                        result.bytes_after,
                        result.records_removed,
                        result.tombstones_removed,
                    )


def write_ready_file(path: Path, info: ReadyInfo) -> None:
    """Atomically publish the node's addresses (tests and tools wait for this file).

    Raises:
        OSError: the file cannot be written (see :func:`node.proc.atomic_write`).
    """
    atomic_write(path, info.to_json() + "\n")
