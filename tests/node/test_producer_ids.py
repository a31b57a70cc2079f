"""Producer ids are unique across sites: each site allocates from its own range."""

from __future__ import annotations

import trio

from node.ids import NodeId
from node.producer_ids import SITE_RANGE_BITS, ProducerIdAllocator, site_floor


def test_each_site_has_its_own_range_far_below_the_int64_limit() -> None:
    east, west = site_floor("K2mPqXo0RZ-east-cluster-id"), site_floor("v7Hn1bYtQ8-west-cluster-id")
    assert east != west
    assert east == site_floor("K2mPqXo0RZ-east-cluster-id")  # the same site always gets the same range
    assert east % (1 << SITE_RANGE_BITS) == 0 and west % (1 << SITE_RANGE_BITS) == 0
    assert max(east, west) + (1 << SITE_RANGE_BITS) < 2**63
    assert site_floor("") == 0


def test_the_allocator_claims_its_blocks_above_the_site_floor() -> None:
    claims: list[tuple[int, int, int]] = []

    async def claim(broker_id: NodeId, size: int, floor: int) -> tuple[int, int]:
        claims.append((broker_id, size, floor))
        first = max(floor, claims[-2][2] + 2 if len(claims) > 1 else floor)
        return first, first + size - 1

    async def main() -> None:
        allocator = ProducerIdAllocator(NodeId(3), claim, block_size=2)
        allocator.floor = site_floor("west")
        ids = [await allocator.next_id() for _ in range(3)]
        assert ids[0] == site_floor("west") and ids[1] == ids[0] + 1
        assert claims[0] == (3, 2, site_floor("west")) and len(claims) == 2

    trio.run(main)
