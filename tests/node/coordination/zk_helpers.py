"""Helpers for the ZooKeeper tests: a deadline runner, a raw kazoo session, hint waiting,
broker registrations and session expiry. Each test is a plain function running ``trio.run``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio
from kazoo.client import KazooClient  # type: ignore[import-untyped]

from chaos.nemesis import partitioned
from chaos.proxy import ProxyServer
from node.coordination import BrokerRegistration, ZkState

DEADLINE = 15.0  # for anything that waits on ZooKeeper


def run(main: Callable[[], Awaitable[None]]) -> None:
    async def with_deadline() -> None:
        with trio.fail_after(DEADLINE * 2):
            await main()

    trio.run(with_deadline)


class Raw:
    """A plain kazoo session to check what landed in ZooKeeper; its calls run in worker threads."""

    def __init__(self, connect: str) -> None:
        self.client = KazooClient(hosts=connect)

    async def json(self, path: str) -> Any:
        data, _ = await trio.to_thread.run_sync(self.client.get, path)
        return json.loads(data)

    async def exists(self, path: str) -> bool:
        return await trio.to_thread.run_sync(self.client.exists, path) is not None

    async def children(self, path: str) -> list[str]:
        return sorted(await trio.to_thread.run_sync(self.client.get_children, path))

    async def data(self, path: str) -> bytes:
        data, _ = await trio.to_thread.run_sync(self.client.get, path)
        return bytes(data)

    async def set(self, path: str, data: bytes) -> None:
        await trio.to_thread.run_sync(self.client.set, path, data)

    async def create(self, path: str, data: bytes) -> None:
        await trio.to_thread.run_sync(lambda: self.client.create(path, data, makepath=True))

    async def owner(self, path: str) -> int:
        _, stat = await trio.to_thread.run_sync(self.client.get, path)
        return int(stat.ephemeralOwner)

    def stop(self) -> None:
        self.client.stop()
        self.client.close()


@asynccontextmanager
async def raw_session(connect: str) -> AsyncIterator[Raw]:
    raw = Raw(connect)
    await trio.to_thread.run_sync(raw.client.start, DEADLINE)
    try:
        yield raw
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(raw.stop)


async def next_hint(events: trio.MemoryReceiveChannel[str], wanted: str) -> list[str]:
    """Read hints until ``wanted`` arrives; returns everything read (fails after the deadline)."""
    seen = []
    with trio.fail_after(DEADLINE):
        async for hint in events:
            seen.append(hint)
            if hint == wanted:
                return seen
    raise AssertionError(f"the channel ended before {wanted!r}; saw {seen}")


def reg(broker_id: int, port: int = 9092, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(broker_id, "127.0.0.1", port, (f"PLAINTEXT://127.0.0.1:{port}",), rack)


def expire_session(connect: str, session: tuple[int, bytes]) -> None:
    """Expire ``session`` now: attach to it with its id and password, then close it (blocking)."""
    thief = KazooClient(hosts=connect, client_id=session)
    thief.start(timeout=DEADLINE)
    thief.stop()
    thief.close()


@asynccontextmanager
async def behind_proxy(zookeeper: str, zk_connect: str) -> AsyncIterator[tuple[ZkState, ProxyServer]]:
    """A started ZkState whose connection to ``zookeeper`` runs through the chaos proxy named
    ``"zookeeper"`` (cut it with ``chaos.nemesis.partitioned``)."""
    chroot = zk_connect[len(zookeeper) :]
    proxy = ProxyServer()
    async with trio.open_nursery() as nursery:
        await nursery.start(proxy.run)
        info = await proxy.create_proxy("zookeeper", zookeeper)
        async with ZkState(f"{info.listen}{chroot}") as zk:
            yield zk, proxy
        nursery.cancel_scope.cancel()


async def expire(zk: ZkState, proxy: ProxyServer, zookeeper: str) -> int:
    """Expire ``zk``'s session while it is cut off (so it cannot win the session back), then
    let it reconnect; returns the expired session's id. Wait for the ``"session"`` hint next."""
    old_session = zk._client.client_id  # private: the test needs the session's password
    async with partitioned(proxy, ["zookeeper"]):
        await trio.to_thread.run_sync(expire_session, zookeeper, old_session)
    return int(old_session[0])
