"""The consumer group coordinator: Kafka's classic group protocol and ``__consumer_offsets``.

``GroupCoordinator`` answers JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, DescribeGroups, ListGroups, DeleteGroups and OffsetDelete for the groups whose
``__consumer_offsets`` partition this node leads, and makes every change durable through an
``OffsetStore`` before it answers. The records it writes are byte-compatible with Kafka's.
Assignors run in the clients; the coordinator relays their bytes untouched.

``node.groups`` imports only the standard library, trio, ``node.protocol`` and ``storage.records``.
"""

from ._config import GroupConfig as GroupConfig
from ._consumer_protocol import Assignment as Assignment
from ._consumer_protocol import Subscription as Subscription
from ._consumer_protocol import decode_assignment as decode_assignment
from ._consumer_protocol import decode_subscription as decode_subscription
from ._consumer_protocol import encode_assignment as encode_assignment
from ._consumer_protocol import encode_subscription as encode_subscription
from ._coordinator import GroupCoordinator as GroupCoordinator
from ._coordinator import LogEntry as LogEntry
from ._errors import GroupBusy as GroupBusy
from ._errors import GroupError as GroupError
from ._errors import NotCoordinatorError as NotCoordinatorError
from ._errors import OffsetStoreError as OffsetStoreError
from ._errors import OffsetStoreTimeout as OffsetStoreTimeout
from ._errors import RecordFormatError as RecordFormatError
from ._group import GroupSnapshot as GroupSnapshot
from ._group import GroupState as GroupState
from ._group import MemberSnapshot as MemberSnapshot
from ._offsets import OffsetStore as OffsetStore
from ._records import GroupMetadataKey as GroupMetadataKey
from ._records import GroupMetadataValue as GroupMetadataValue
from ._records import MemberMetadataValue as MemberMetadataValue
from ._records import OffsetCommitKey as OffsetCommitKey
from ._records import OffsetCommitValue as OffsetCommitValue
from ._records import Reader as Reader
from ._records import decode_group_metadata_value as decode_group_metadata_value
from ._records import decode_key as decode_key
from ._records import decode_offset_commit_value as decode_offset_commit_value
from ._records import encode_group_metadata_value as encode_group_metadata_value
from ._records import encode_key as encode_key
from ._records import encode_offset_commit_value as encode_offset_commit_value
from ._records import java_string_hash as java_string_hash
from ._records import partition_for as partition_for
from ._records import put_string as put_string
from ._txn_offsets import TxnEnd as TxnEnd
from ._txn_offsets import TxnRecord as TxnRecord
