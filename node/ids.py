"""``NodeId``: a broker's id in its cluster (Kafka's ``broker.id``, ``replica_id``, a leader).

An ``int`` at run time (``NewType`` costs nothing); the distinct type lets mypy tell a node id
from a partition index, an epoch or an offset. An id is typed where it is born (the config,
a znode, a protocol field) and keeps its type across modules. ``NO_NODE`` (-1) means "no
node" where Kafka says so (no leader). Offsets and leader epochs have their own types in
``storage``.
"""

from __future__ import annotations

from typing import Final, NewType

NodeId = NewType("NodeId", int)

#: Kafka's "no node": a partition without a leader.
NO_NODE: Final = NodeId(-1)
