"""Cluster-unique producer ids: each broker claims blocks of ids in ZooKeeper (Kafka's scheme).

``/latest_producer_id_block`` holds the last claimed block as
``{"version": 1, "broker": <id>, "block_start": "<first>", "block_end": "<last>"}``; a
broker claims the next block with a versioned write (retrying on a lost race) and hands out
ids from it. Ids are never reused, across restarts and brokers.

Ids are also unique across *sites*. A mirror copies batches with their producer ids, so a
promoted site holds the producer state of the other site's producers; if it handed out the
same ids to its own new producers, their first writes would fail with
OUT_OF_ORDER_SEQUENCE_NUMBER (or, worse, be taken for retries). Each site therefore allocates
from its own range, starting at :func:`site_floor` of its cluster id: 2^40 ids a site, at one of
2^20 places chosen by the cluster id's CRC-32, far below Kafka's int64 limit.
"""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable

import trio

from node.ids import NodeId

BLOCK_SIZE = 1000
SITE_RANGE_BITS = 40  # ids per site: 2^40
SITE_SLOTS = 1 << 20

ClaimBlock = Callable[[NodeId, int, int], Awaitable[tuple[int, int]]]  # (broker_id, size, floor) -> (first, last)


def site_floor(cluster_id: str) -> int:
    """The first producer id of the site whose cluster id this is (0 for no cluster id)."""
    if not cluster_id:
        return 0
    return (zlib.crc32(cluster_id.encode()) % SITE_SLOTS) << SITE_RANGE_BITS


class ProducerIdAllocator:
    def __init__(self, broker_id: NodeId, claim_block: ClaimBlock, *, block_size: int = BLOCK_SIZE) -> None:
        self.broker_id = broker_id
        self._claim = claim_block
        self._block_size = block_size
        self._next = 0
        self._last = -1
        self._lock = trio.Lock()
        self.floor = 0  # the site's first id (site_floor of the cluster id), set once it is known

    async def next_id(self) -> int:
        async with self._lock:
            if self._next > self._last:
                self._next, self._last = await self._claim(self.broker_id, self._block_size, self.floor)
            pid = self._next
            self._next += 1
            return pid
