"""Drive a ``GroupCoordinator`` the way the broker does, under ``trio.testing.MockClock``.

Requests are encoded with ``node.protocol`` and decoded again, so the coordinator sees exactly the
Structs the broker would give it; every response body is encoded for its version and decoded, so a
field name or type the schema does not have fails the test.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import trio
import trio.testing

from node.groups import (
    Assignment,
    GroupConfig,
    GroupCoordinator,
    GroupSnapshot,
    OffsetStoreError,
    Subscription,
    encode_assignment,
    encode_subscription,
)
from node.protocol import (
    ApiKey,
    Struct,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_request_header,
    request_header,
)

WALL_BASE_MS = 1_700_000_000_000
REBALANCE_IN_PROGRESS = 27
CONFIG = GroupConfig(offsets_partitions=4)
SESSION_MS = 10_000
# Every test fails after this much mock time: a wait that never ends fails at once instead of hanging.
DEADLINE_S = 24 * 3600
REBALANCE_MS = 30_000


def wall_ms() -> int:
    """Wall-clock milliseconds that advance with the (mock) trio clock."""
    return WALL_BASE_MS + round(trio.current_time() * 1000)


def subscription(*topics: str) -> bytes:
    return encode_subscription(Subscription(tuple(topics)))


class MemoryStore:
    """An OffsetStore in memory. ``unavailable`` partitions raise; ``gate`` (when set) holds every append."""

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        self.unavailable: set[int] = set()
        self.gate: trio.Event | None = None
        self.appends = 0
        self.transactional: list[tuple[int, tuple[int, int], list[tuple[bytes, bytes | None]]]] = []

    async def append(
        self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer: tuple[int, int] | None = None
    ) -> None:
        await trio.lowlevel.checkpoint()
        if self.gate is not None:
            await self.gate.wait()
        if partition in self.unavailable:
            raise OffsetStoreError(f"__consumer_offsets-{partition} is not served here")
        self.appends += 1
        self.records[partition].extend(records)
        if producer is not None:
            self.transactional.append((partition, producer, list(records)))


def request(api_key: ApiKey, version: int, **fields: Any) -> Struct:
    """A request Struct as the broker's decoder produces it (fields absent from the version hold defaults)."""
    frame = encode_request(request_header(api_key, version, 1, "test-client"), fields)[4:]
    header, offset = read_request_header(frame)
    return decode_request(header, frame, offset)


def response(api_key: ApiKey, version: int, body: dict[str, Any]) -> Struct:
    """The coordinator's response body after a trip through the wire encoding of ``version``."""
    encoded = encode_response(request_header(api_key, version, 9, "test-client"), body)
    data = b"".join(bytes(part) for part in encoded.parts if isinstance(part, bytes | bytearray))
    correlation_id, decoded = decode_response(api_key, version, data[4:])
    assert correlation_id == 9
    return decoded


@dataclass
class Env:
    coordinator: GroupCoordinator
    store: MemoryStore
    nursery: trio.Nursery


def run(
    test: Callable[[Env], Awaitable[None]],
    *,
    config: GroupConfig = CONFIG,
    store: MemoryStore | None = None,
    load: bool = True,
) -> None:
    """Run ``test`` against a running coordinator with every partition loaded, on a mock clock."""

    async def main() -> None:
        the_store = store if store is not None else MemoryStore()
        coordinator = GroupCoordinator(config, the_store, wall_clock_ms=wall_ms)
        if load:
            for p in range(config.offsets_partitions):
                coordinator.load_partition(p, [])
        async with trio.open_nursery() as nursery:
            await nursery.start(coordinator.run)
            await test(Env(coordinator, the_store, nursery))
            nursery.cancel_scope.cancel()

    run_trio(main)


def run_trio(main: Callable[[], Awaitable[None]]) -> None:
    """``trio.run`` on a MockClock that jumps whenever every task waits, with a deadline in mock time."""

    async def bounded() -> None:
        with trio.fail_after(DEADLINE_S):
            await main()

    trio.run(bounded, clock=trio.testing.MockClock(autojump_threshold=0))


async def gather(*calls: Callable[[], Awaitable[Any]]) -> list[Any]:
    """Run the calls concurrently; their results in order."""
    results: list[Any] = [None] * len(calls)

    async def one(i: int, call: Callable[[], Awaitable[Any]]) -> None:
        results[i] = await call()

    async with trio.open_nursery() as nursery:
        for i, call in enumerate(calls):
            nursery.start_soon(one, i, call)
    return results


class Client:
    """One client's view of the coordinator: builds requests, returns decoded responses."""

    def __init__(self, coordinator: GroupCoordinator, client_id: str = "consumer-1", host: str = "/127.0.0.1") -> None:
        self.coordinator = coordinator
        self.client_id = client_id
        self.host = host

    async def join(
        self,
        group: str,
        member_id: str = "",
        *,
        version: int = 5,
        topics: Sequence[str] = ("t",),
        protocols: Sequence[tuple[str, bytes]] | None = None,
        instance_id: str | None = None,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        protocol_type: str = "consumer",
    ) -> Struct:
        if protocols is None:
            protocols = [("range", subscription(*topics))]
        req = request(
            ApiKey.JOIN_GROUP,
            version,
            group_id=group,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocols=[{"name": n, "metadata": m} for n, m in protocols],
        )
        body = await self.coordinator.join_group(req, version, self.client_id, self.host)
        return response(ApiKey.JOIN_GROUP, version, body)

    async def join_member(self, group: str, **kwargs: Any) -> Struct:
        """JoinGroup v4+ as a real client does it: get a member id (MEMBER_ID_REQUIRED), then join with it."""
        first = await self.join(group, **kwargs)
        if first.error_code != 79:
            return first
        return await self.join(group, first.member_id, **kwargs)

    async def sync(
        self,
        group: str,
        generation: int,
        member_id: str,
        assignments: dict[str, bytes] | None = None,
        *,
        version: int = 3,
        instance_id: str | None = None,
    ) -> Struct:
        req = request(
            ApiKey.SYNC_GROUP,
            version,
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            assignments=[{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
        )
        return response(ApiKey.SYNC_GROUP, version, await self.coordinator.sync_group(req, version))

    async def heartbeat(
        self, group: str, generation: int, member_id: str, *, version: int = 3, instance_id: str | None = None
    ) -> int:
        req = request(
            ApiKey.HEARTBEAT,
            version,
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance_id,
        )
        code: int = response(ApiKey.HEARTBEAT, version, await self.coordinator.heartbeat(req, version)).error_code
        return code

    async def leave(self, group: str, members: Sequence[tuple[str, str | None]], *, version: int = 3) -> Struct:
        if version >= 3:
            req = request(
                ApiKey.LEAVE_GROUP,
                version,
                group_id=group,
                members=[{"member_id": m, "group_instance_id": i} for m, i in members],
            )
        else:
            req = request(ApiKey.LEAVE_GROUP, version, group_id=group, member_id=members[0][0])
        return response(ApiKey.LEAVE_GROUP, version, await self.coordinator.leave_group(req, version))

    async def commit(
        self,
        group: str,
        offsets: dict[tuple[str, int], tuple[int, str | None]],
        *,
        generation: int = -1,
        member_id: str = "",
        instance_id: str | None = None,
        version: int = 7,
        leader_epoch: int = -1,
        retention_ms: int = -1,
    ) -> dict[tuple[str, int], int]:
        topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for (topic, partition), (offset, metadata) in offsets.items():
            topics[topic].append(
                {
                    "partition_index": partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": leader_epoch,
                    "committed_metadata": metadata,
                }
            )
        req = request(
            ApiKey.OFFSET_COMMIT,
            version,
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=instance_id,
            retention_time_ms=retention_ms,
            topics=[{"name": t, "partitions": ps} for t, ps in topics.items()],
        )
        body = response(ApiKey.OFFSET_COMMIT, version, await self.coordinator.offset_commit(req, version))
        return {(t.name, p.partition_index): p.error_code for t in body.topics for p in t.partitions}

    async def fetch(
        self, group: str, partitions: Sequence[tuple[str, int]] | None = None, *, version: int = 5
    ) -> Struct:
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for topic, p in partitions:
                by_topic[topic].append(p)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        req = request(ApiKey.OFFSET_FETCH, version, group_id=group, topics=topics)
        return response(ApiKey.OFFSET_FETCH, version, await self.coordinator.offset_fetch(req, version))

    async def describe(self, *groups: str, version: int = 4) -> Struct:
        req = request(ApiKey.DESCRIBE_GROUPS, version, groups=list(groups), include_authorized_operations=True)
        return response(ApiKey.DESCRIBE_GROUPS, version, await self.coordinator.describe_groups(req, version))

    async def list_groups(self, *, version: int = 2) -> Struct:
        req = request(ApiKey.LIST_GROUPS, version)
        return response(ApiKey.LIST_GROUPS, version, await self.coordinator.list_groups(req, version))


def snapshot(env: Env, group: str) -> GroupSnapshot:
    """The operator's view of a group that must exist."""
    snap = env.coordinator.describe(group)
    assert snap is not None, f"group {group!r} does not exist"
    return snap


def committed(fetched: Struct) -> dict[tuple[str, int], tuple[int, str | None]]:
    """(topic, partition) -> (offset, metadata) from an OffsetFetch response."""
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata) for t in fetched.topics for p in t.partitions}


@dataclass
class Joined:
    client: Client
    member_id: str
    generation: int
    assignment: bytes
    instance_id: str | None = None


def assignment_for(i: int) -> bytes:
    return encode_assignment(Assignment((("t", (i,)),)))


async def stable_group(env: Env, n: int, group: str = "g", *, static: bool = False) -> list[Joined]:
    """``n`` members join together; the leader assigns partition i to the i-th member id (sorted)."""
    clients = [Client(env.coordinator, f"c{i}") for i in range(n)]
    instances = [f"instance-{i}" if static else None for i in range(n)]
    joins = await gather(
        *[lambda c=c, i=i: c.join_member(group, instance_id=i) for c, i in zip(clients, instances, strict=True)]
    )
    assert [j.error_code for j in joins] == [0] * n
    leader = joins[0].leader
    ids = sorted(j.member_id for j in joins)
    plan = {member_id: assignment_for(i) for i, member_id in enumerate(ids)}

    async def sync(c: Client, j: Struct, instance: str | None) -> Struct:
        return await c.sync(
            group, j.generation_id, j.member_id, plan if j.member_id == leader else {}, instance_id=instance
        )

    syncs = await gather(
        *[lambda c=c, j=j, i=i: sync(c, j, i) for c, j, i in zip(clients, joins, instances, strict=True)]
    )
    assert [s.error_code for s in syncs] == [0] * n
    return [
        Joined(c, j.member_id, j.generation_id, s.assignment, i)
        for c, j, s, i in zip(clients, joins, syncs, instances, strict=True)
    ]


async def heartbeat_until_rebalance(m: Joined, group: str = "g", every_s: float = 3) -> float:
    """Heartbeat every ``every_s``; the time the answer was REBALANCE_IN_PROGRESS."""
    while True:
        code = await m.client.heartbeat(group, m.generation, m.member_id)
        if code == REBALANCE_IN_PROGRESS:
            return trio.current_time()
        assert code == 0
        await trio.sleep(every_s)


async def keep_alive(m: Joined, seconds: float, group: str = "g", every_s: float = 3) -> None:
    """Heartbeat for ``seconds``, asserting each answer is NONE."""
    deadline = trio.current_time() + seconds
    while trio.current_time() < deadline:
        assert await m.client.heartbeat(group, m.generation, m.member_id) == 0
        await trio.sleep(every_s)
