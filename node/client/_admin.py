"""Topic administration over the Kafka protocol (what ``strait topics`` uses)."""

from __future__ import annotations

from dataclasses import dataclass, field

from node.protocol import ApiKey

from ._connection import ClientError, NodeConnection

TOPIC_RESOURCE = 2
EARLIEST, LATEST = -2, -1


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    log_start_offset: int = -1
    high_watermark: int = -1


@dataclass(frozen=True)
class TopicDescription:
    name: str
    partitions: list[PartitionDescription]
    configs: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # name -> (value, source)


_SOURCES = {1: "topic", 2: "dynamic-broker", 3: "dynamic-default", 4: "server.properties", 5: "default"}


class AdminClient:
    """Admin requests sent to one node (every strait node serves them)."""

    def __init__(self, conn: NodeConnection) -> None:
        self.conn = conn

    @classmethod
    async def connect(cls, bootstrap: str, *, timeout: float = 10.0) -> AdminClient:
        last: ClientError | None = None
        for address in bootstrap.split(","):
            try:
                return cls(await NodeConnection.open(address.strip(), client_id="strait-admin", timeout=timeout))
            except ClientError as exc:
                last = exc
        raise last or ClientError(f"no broker address in {bootstrap!r}")

    async def aclose(self) -> None:
        await self.conn.aclose()

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def create_topic(
        self, name: str, partitions: int = -1, replication_factor: int = -1, configs: dict[str, str] | None = None
    ) -> None:
        v = self.conn.version(ApiKey.CREATE_TOPICS, 4)
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": val} for k, val in (configs or {}).items()],
                }
            ],
            "timeout_ms": 30_000,
            "validate_only": False,
        }
        resp = await self.conn.request(ApiKey.CREATE_TOPICS, v, body)
        result = resp.topics[0]
        if result.error_code:
            raise ClientError.from_code(result.error_code, f"creating topic {name!r}", result.error_message)

    async def delete_topic(self, name: str) -> None:
        v = self.conn.version(ApiKey.DELETE_TOPICS, 3)
        resp = await self.conn.request(ApiKey.DELETE_TOPICS, v, {"topic_names": [name], "timeout_ms": 30_000})
        result = resp.responses[0]
        if result.error_code:
            raise ClientError.from_code(result.error_code, f"deleting topic {name!r}")

    async def list_topics(self) -> list[str]:
        v = self.conn.version(ApiKey.METADATA, 8)
        resp = await self.conn.request(ApiKey.METADATA, v, {"topics": None, "allow_auto_topic_creation": False})
        return sorted(t.name for t in resp.topics if t.error_code == 0)

    async def describe_topic(self, name: str) -> TopicDescription:
        v = self.conn.version(ApiKey.METADATA, 8)
        resp = await self.conn.request(
            ApiKey.METADATA, v, {"topics": [{"name": name}], "allow_auto_topic_creation": False}
        )
        topic = resp.topics[0]
        if topic.error_code:
            raise ClientError.from_code(topic.error_code, f"describing topic {name!r}")
        offsets = await self._offsets(name, [p.partition_index for p in topic.partitions])
        partitions = [
            PartitionDescription(
                p.partition_index,
                p.leader_id,
                list(p.replica_nodes),
                list(p.isr_nodes),
                *offsets.get(p.partition_index, (-1, -1)),
            )
            for p in sorted(topic.partitions, key=lambda p: p.partition_index)
        ]
        v = self.conn.version(ApiKey.DESCRIBE_CONFIGS, 1)
        resp = await self.conn.request(
            ApiKey.DESCRIBE_CONFIGS,
            v,
            {
                "resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": name, "configuration_keys": None}],
                "include_synonyms": False,
            },
        )
        result = resp.results[0]
        if result.error_code:
            raise ClientError.from_code(result.error_code, f"describing configs of {name!r}", result.error_message)
        configs = {c.name: (c.value, _SOURCES.get(c.config_source, "?")) for c in result.configs}
        return TopicDescription(name, partitions, configs)

    async def list_offsets(
        self, topic: str, partitions: list[int], timestamp: int, *, strict: bool = True
    ) -> dict[int, int]:
        """Each partition's offset at a ListOffsets target: EARLIEST (-2), LATEST (-1) or a time in ms.

        A partition error raises ClientError, or gives -1 when ``strict`` is False.
        """
        v = self.conn.version(ApiKey.LIST_OFFSETS, 1)
        body = {
            "replica_id": -1,
            "topics": [
                {"name": topic, "partitions": [{"partition_index": p, "timestamp": timestamp} for p in partitions]}
            ],
        }
        resp = await self.conn.request(ApiKey.LIST_OFFSETS, v, body)
        out = dict.fromkeys(partitions, -1)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code == 0:
                    out[p.partition_index] = p.offset
                elif strict:
                    raise ClientError.from_code(p.error_code, f"ListOffsets {topic}-{p.partition_index}")
        return out

    async def _offsets(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        starts = await self.list_offsets(topic, partitions, EARLIEST, strict=False)
        ends = await self.list_offsets(topic, partitions, LATEST, strict=False)
        return {p: (starts[p], ends[p]) for p in partitions}
