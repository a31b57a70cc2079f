"""Transaction markers (KIP-98): the control batches that end a transaction.

A marker is a batch with the control (0x20) and transactional (0x10) attribute bits, the
producer id and epoch of the transaction it ends, base sequence -1 and exactly one record::

    key    version int16 (0) | type int16 (0 = ABORT, 1 = COMMIT)
    value  version int16 (0) | coordinator_epoch int32

Kafka has other control types (2 = LEADER_CHANGE, and snapshot records in KRaft logs); they
are control batches but no transaction markers, and ``read_control_marker`` answers None for
them.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ._batch import RecordBatch
from ._errors import RecordFormatError

CONTROL_KEY = struct.Struct(">hh")  # version, type
CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator epoch
CONTROL_VERSION = 0
CONTROL_ABORT = 0
CONTROL_COMMIT = 1


class ControlMarker(NamedTuple):
    """What a transaction marker says: how the transaction ended, and the coordinator's epoch."""

    commit: bool
    coordinator_epoch: int


def read_control_marker(batch: bytes | bytearray | memoryview) -> ControlMarker | None:
    """The marker in one control batch (``batch`` holds the whole batch; no CRC check).

    Returns None when the batch is a control batch of another type. Raises RecordFormatError
    when it is not a control batch, has no record, or its key or value is not Kafka's layout.
    """
    parsed = RecordBatch(batch, validate=False)
    header = parsed.header
    if not header.is_control:
        raise RecordFormatError(f"the batch at offset {header.base_offset} is not a control batch")
    record = next(iter(parsed.records()), None)
    if record is None or record.key is None or len(record.key) < CONTROL_KEY.size:
        raise RecordFormatError(f"the control batch at offset {header.base_offset} has no control record key")
    _version, kind = CONTROL_KEY.unpack_from(record.key)
    if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        return None
    value = record.value
    if value is None or len(value) < CONTROL_VALUE.size:
        raise RecordFormatError(
            f"the transaction marker at offset {header.base_offset} has no coordinator epoch in its value"
        )
    _version, coordinator_epoch = CONTROL_VALUE.unpack_from(value)
    return ControlMarker(kind == CONTROL_COMMIT, coordinator_epoch)
