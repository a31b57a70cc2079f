"""The admin API's read-only view of a running broker (``node.admin_http.AdminView``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from storage import LogDirOfflineError, TopicPartition

if TYPE_CHECKING:
    from node.broker import Broker


class BrokerView:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def health(self) -> dict[str, object]:
        b = self._broker
        status = b.status
        offline: list[str] = []
        if b._cluster is not None:
            offline = [str(p) for p in b.cluster.logs.offline_dirs()]
            if status == "ok" and offline:
                status = "degraded"
        return {
            "status": status,
            "broker_id": b.config.broker_id,
            "cluster_id": b.cluster_id,
            "offline_log_dirs": offline,
        }

    def topics(self) -> list[dict[str, object]]:
        b = self._broker
        if b._cluster is None:
            return []
        cluster = b.cluster
        out: list[dict[str, object]] = []
        for name in sorted(cluster.topics):
            topic = cluster.topics[name]
            partitions: list[dict[str, object]] = []
            for p in sorted(topic.assignment):
                state = topic.states.get(p)
                entry: dict[str, object] = {
                    "partition": p,
                    "leader": cluster.leader_of(topic, p),
                    "replicas": list(topic.assignment[p]),
                    "isr": list(state.isr) if state is not None else list(topic.assignment[p]),
                    "leader_epoch": state.leader_epoch if state is not None else -1,
                    "role": None,
                    "online": False,
                }
                local = cluster.partitions.get(TopicPartition(name, p))
                if local is not None:
                    plog = local.log
                    try:
                        entry.update(
                            log_start_offset=plog.log_start_offset,
                            high_watermark=plog.high_watermark,
                            log_end_offset=plog.log_end_offset,
                            size_bytes=plog.size_bytes,
                            log_dir=str(plog.dir.parent),
                            online=not plog.is_offline,
                            role=local.role,
                        )
                    except LogDirOfflineError:
                        entry["online"] = False
                partitions.append(entry)
            out.append({"name": name, "topic_id": topic.topic_id, "partitions": partitions, "configs": topic.overrides})
        return out

    def log_dirs(self) -> list[dict[str, object]]:
        b = self._broker
        if b._cluster is None:
            return []
        out: list[dict[str, object]] = []
        for d in b.cluster.logs.dirs:
            size = 0
            if d.online:
                for plog in list(d.logs.values()):
                    try:
                        size += plog.size_bytes
                    except LogDirOfflineError:
                        continue
            out.append({"path": str(d.path), "online": d.online, "bytes": size, "partitions": len(d.logs)})
        return out

    def groups(self) -> list[dict[str, object]]:
        b = self._broker
        if b._cluster is None:
            return []
        out: list[dict[str, object]] = []
        for group_id in b.groups.group_ids():
            snap = b.groups.describe(group_id)
            if snap is None:
                continue
            offsets: list[dict[str, object]] = []
            for (topic, partition), (committed, _metadata) in sorted(snap.offsets.items()):
                local = b.cluster.partitions.get(TopicPartition(topic, partition))
                end = local.log.high_watermark if local is not None else None
                offsets.append(
                    {
                        "topic": topic,
                        "partition": partition,
                        "committed": committed,
                        "log_end": end,
                        "lag": max(0, end - committed) if end is not None else None,
                    }
                )
            out.append(
                {
                    "group_id": snap.group_id,
                    "state": snap.state,
                    "protocol_type": snap.protocol_type,
                    "protocol": snap.protocol,
                    "generation": snap.generation,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "assignment": None if m.assignment is None else [f"{t}-{p}" for t, p in m.assignment],
                        }
                        for m in snap.members
                    ],
                    "offsets": offsets,
                }
            )
        return out
