"""Producer id blocks: ``/latest_producer_id_block``, persistent, Kafka's scheme.

The znode holds the last block claimed by any broker,
``{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}`` (empty before the first
claim). The next block starts after it and is written with compare-and-set on the znode
version, retried on a lost race, so ids are never handed out twice, across brokers and
restarts. Blocking (kazoo calls): run :func:`claim_block` in one worker thread.
"""

from __future__ import annotations

from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError  # type: ignore[import-untyped]

from node.ids import NodeId

from ._errors import CoordinationError
from ._layout import PRODUCER_ID_BLOCK, decode_producer_id_block_end, encode_producer_id_block
from ._reads import retried

_CLAIM_ATTEMPTS = 50  # every broker claims from the same znode
_MAX_PRODUCER_ID = 2**63 - 1


def claim_block(client: Any, broker_id: NodeId, size: int, floor: int = 0) -> tuple[int, int]:
    """Claim the next ``size`` producer ids for ``broker_id``, none below ``floor`` (the site's
    own range: see :func:`node.producer_ids.site_floor`); returns ``(first, last)``, inclusive.

    Raises:
        ValueError: ``size`` is not positive or ``broker_id`` is negative.
        CoordinationError: the id space is exhausted, or the race kept being lost.
    """
    if size <= 0 or broker_id < 0:
        raise ValueError(f"cannot claim {size} producer ids for broker {broker_id}")
    for _ in range(_CLAIM_ATTEMPTS):
        try:
            data, stat = retried(client.get, PRODUCER_ID_BLOCK)
        except NoNodeError:
            data, stat = None, None
        previous_end = decode_producer_id_block_end(data)
        first = max(floor, 0 if previous_end is None else previous_end + 1)
        last = first + size - 1
        if last > _MAX_PRODUCER_ID:
            raise CoordinationError(f"producer ids are exhausted: the last block claimed ends at {previous_end}")
        block = encode_producer_id_block(broker_id, first, last)
        try:
            if stat is None:
                client.create(PRODUCER_ID_BLOCK, block)
            else:
                client.set(PRODUCER_ID_BLOCK, block, version=stat.version)
            return first, last
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue  # another broker claimed a block first: claim the one after it
    raise CoordinationError(f"could not claim producer ids: {PRODUCER_ID_BLOCK} kept changing")
