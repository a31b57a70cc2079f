"""The numbers that place a record: its offset in a partition and the leader epoch it was written in.

Both are plain ``int`` at run time (``NewType`` costs nothing); the distinct types let mypy
catch an epoch passed where an offset belongs, or a count of records where either does.
A value gets its type where it is born (a batch header, a checkpoint file, a protocol
field) and keeps it across module boundaries. Arithmetic gives back a plain ``int``: wrap
the result (``Offset(base + delta)``) where it is an offset again.
"""

from __future__ import annotations

from typing import NewType

#: A record's position in its partition's log (Kafka's ``offset``); -1 where Kafka means "none".
Offset = NewType("Offset", int)
#: A partition leader's generation (Kafka's ``leaderEpoch``); -1 where Kafka means "none".
LeaderEpoch = NewType("LeaderEpoch", int)


#: Where a new partition's log starts.
FIRST_OFFSET = Offset(0)
#: Kafka's -1 where an offset is unknown, not found or not asked for.
NO_OFFSET = Offset(-1)
