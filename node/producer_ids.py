"""Cluster-unique producer ids: each broker claims blocks of ids in ZooKeeper (Kafka's scheme).

``/latest_producer_id_block`` holds the last claimed block as
``{"version": 1, "broker": <id>, "block_start": "<first>", "block_end": "<last>"}``; a
broker claims the next block with a versioned write (retrying on a lost race) and hands out
ids from it. Ids are never reused, across restarts and brokers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from node.ids import NodeId

BLOCK_SIZE = 1000

ClaimBlock = Callable[[NodeId, int], Awaitable[tuple[int, int]]]  # (broker_id, size) -> (first, last)


class ProducerIdAllocator:
    def __init__(self, broker_id: NodeId, claim_block: ClaimBlock, *, block_size: int = BLOCK_SIZE) -> None:
        self.broker_id = broker_id
        self._claim = claim_block
        self._block_size = block_size
        self._next = 0
        self._last = -1
        self._lock = trio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next > self._last:
                self._next, self._last = await self._claim(self.broker_id, self._block_size)
            pid = self._next
            self._next += 1
            return pid
