"""strait's storage engine: Kafka's on-disk log format (segments, indexes, log dirs, recovery).

``storage`` imports nothing else of strait's. Batches are stored exactly as produced.
"""

from ._checkpoint import read_offsets as read_offsets
from ._cleaner import CleanResult as CleanResult
from ._config import LogConfig as LogConfig
from ._epochs import EpochEntry as EpochEntry
from ._epochs import LeaderEpochCache as LeaderEpochCache
from ._errors import CorruptBatchError as CorruptBatchError
from ._errors import CorruptIndexError as CorruptIndexError
from ._errors import FaultInjected as FaultInjected
from ._errors import InconsistentMetaPropertiesError as InconsistentMetaPropertiesError
from ._errors import InvalidOffsetError as InvalidOffsetError
from ._errors import LogDirNotFoundError as LogDirNotFoundError
from ._errors import LogDirOfflineError as LogDirOfflineError
from ._errors import OffsetOutOfRangeError as OffsetOutOfRangeError
from ._errors import RecordFormatError as RecordFormatError
from ._errors import RecordTooLargeError as RecordTooLargeError
from ._errors import ReplicaNotHereError as ReplicaNotHereError
from ._errors import StorageError as StorageError
from ._faults import FaultPoints as FaultPoints
from ._files import HIGH_WATERMARK_CHECKPOINT as HIGH_WATERMARK_CHECKPOINT
from ._files import LOG_START_OFFSET_CHECKPOINT as LOG_START_OFFSET_CHECKPOINT
from ._files import META_PROPERTIES_FILE as META_PROPERTIES_FILE
from ._files import TopicPartition as TopicPartition
from ._files import file_name as file_name
from ._files import parse_partition_dir as parse_partition_dir
from ._files import parse_segment_file as parse_segment_file
from ._inspect import BatchInfo as BatchInfo
from ._inspect import index_entries as index_entries
from ._inspect import list_batches as list_batches
from ._inspect import read_batch as read_batch
from ._inspect import segment_files as segment_files
from ._inspect import verify as verify
from ._log import AppendInfo as AppendInfo
from ._log import PartitionLog as PartitionLog
from ._log_manager import DirUsage as DirUsage
from ._log_manager import LogManager as LogManager
from ._log_manager import ReplicaUsage as ReplicaUsage
from ._log_manager import wall_clock_ms as wall_clock_ms
from ._log_move import ReplicaMove as ReplicaMove
from ._recovery import LoadReport as LoadReport
from ._recovery import create_log as create_log
from ._recovery import load_log as load_log
from ._segment import FileSlice as FileSlice
from ._segment import LogSegment as LogSegment
from ._txn_index import AbortedTxn as AbortedTxn
from .records import LeaderEpoch as LeaderEpoch
from .records import Offset as Offset
