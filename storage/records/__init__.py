"""Kafka RecordBatch v2: parse, validate, build, (de)compress. Used by the broker, mirror and tools.

Also the types of the numbers a batch carries, ``Offset`` and ``LeaderEpoch`` (``_offsets``),
which ``storage`` re-exports and the broker, client and mirror use across their modules.

A leaf: it imports nothing of ``storage`` outside itself (its errors are in ``_errors``).
"""

from ._batch import ATTR_CONTROL as ATTR_CONTROL
from ._batch import ATTR_TRANSACTIONAL as ATTR_TRANSACTIONAL
from ._batch import CRC_START as CRC_START
from ._batch import HEADER_SIZE as HEADER_SIZE
from ._batch import LOG_OVERHEAD as LOG_OVERHEAD
from ._batch import PREFIX as PREFIX
from ._batch import BatchHeader as BatchHeader
from ._batch import Record as Record
from ._batch import RecordBatch as RecordBatch
from ._batch import check_batch as check_batch
from ._batch import crc_of as crc_of
from ._batch import iter_batches as iter_batches
from ._batch import read_header as read_header
from ._batch import recompress as recompress
from ._batch import set_base_offset as set_base_offset
from ._batch import set_partition_leader_epoch as set_partition_leader_epoch
from ._builder import BatchBuilder as BatchBuilder
from ._builder import build_batch as build_batch
from ._builder import build_control_batch as build_control_batch
from ._codecs import Compression as Compression
from ._codecs import compress as compress
from ._codecs import decompress as decompress
from ._control import CONTROL_ABORT as CONTROL_ABORT
from ._control import CONTROL_COMMIT as CONTROL_COMMIT
from ._control import ControlMarker as ControlMarker
from ._control import read_control_marker as read_control_marker
from ._errors import CorruptBatchError as CorruptBatchError
from ._errors import RecordFormatError as RecordFormatError
from ._errors import UnsupportedCompressionError as UnsupportedCompressionError
from ._offsets import NO_OFFSET as NO_OFFSET
from ._offsets import LeaderEpoch as LeaderEpoch
from ._offsets import Offset as Offset
