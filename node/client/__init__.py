"""strait's own trio Kafka client, used by every package that talks to nodes (``strait topics``
and ``strait groups``, the mirror, failover).

By concern:

- ``_connection``: one connection (``NodeConnection``), its SASL authentication (``SaslCredentials``)
  and ``ClientError``;
- ``_site``: routing. ``SiteClient`` keeps a site's metadata and a connection per broker and
  sends requests to leaders, the controller or every broker; ``NodeRoute`` sends everything to
  one node;
- ``_admin``: topic and config verbs (``AdminClient``, ``ensure_topic``);
- ``_truncate``: truncation to a cut (``AdminClient.truncate_partitions``, strait's API 1001);
- ``_groups``: consumer-group verbs (``GroupAdmin``);
- ``_data``: produce, fetch and list offsets of a partition, and record-set helpers;
- ``_fetch_session``: the fetcher's side of an incremental fetch session (KIP-227), for followers;
- ``_mirror``: MirrorAppend (strait's API 1000);
- ``_txn_markers``: WriteTxnMarkers (Kafka's API 27), for the transaction coordinator;
- ``_producers``: a partition's producers and open transactions (DescribeProducers, API 61), and
  aborting one whose coordinator cannot (WriteTxnMarkers), as Kafka's admin client does;
- ``_reconnect``: the reconnect-with-backoff loop of long-running copiers;
- ``_security``: Kafka client properties (``security.protocol``, ``ssl.*``, ``sasl.*``) read into
  ``ClientSecurity``, which builds a ``SiteClient``'s TLS context and SASL credentials.
"""

from ._admin import AdminClient as AdminClient
from ._admin import PartitionDescription as PartitionDescription
from ._admin import TopicDescription as TopicDescription
from ._admin import ensure_topic as ensure_topic
from ._connection import ClientError as ClientError
from ._connection import NodeConnection as NodeConnection
from ._connection import SaslCredentials as SaslCredentials
from ._connection import send_all_nonblocking as send_all_nonblocking
from ._data import EARLIEST as EARLIEST
from ._data import LATEST as LATEST
from ._data import READ_COMMITTED as READ_COMMITTED
from ._data import READ_UNCOMMITTED as READ_UNCOMMITTED
from ._data import FetchedPartition as FetchedPartition
from ._data import ProduceRecord as ProduceRecord
from ._data import build_records as build_records
from ._data import complete_batches as complete_batches
from ._data import fetch_partition as fetch_partition
from ._data import list_offset as list_offset
from ._data import list_offsets as list_offsets
from ._data import produce_batch as produce_batch
from ._data import produce_records as produce_records
from ._fetch_session import FetcherSession as FetcherSession
from ._fetch_session import SessionFetch as SessionFetch
from ._groups import GroupAdmin as GroupAdmin
from ._groups import GroupDescription as GroupDescription
from ._groups import GroupMember as GroupMember
from ._mirror import MirrorAppendResult as MirrorAppendResult
from ._mirror import mirror_append as mirror_append
from ._producers import ProducerState as ProducerState
from ._producers import TxnAbort as TxnAbort
from ._producers import abort_transactions as abort_transactions
from ._producers import describe_producers as describe_producers
from ._reconnect import RECONNECT_ON as RECONNECT_ON
from ._reconnect import aclose_quietly as aclose_quietly
from ._reconnect import run_reconnecting as run_reconnecting
from ._security import SECURITY_KEYS as SECURITY_KEYS
from ._security import ClientSecurity as ClientSecurity
from ._security import SecurityConfigError as SecurityConfigError
from ._security import parse_client_security as parse_client_security
from ._security import read_client_properties as read_client_properties
from ._site import NodeRoute as NodeRoute
from ._site import PartitionMeta as PartitionMeta
from ._site import Route as Route
from ._site import SiteClient as SiteClient
from ._site import TopicMeta as TopicMeta
from ._truncate import TruncationResult as TruncationResult
from ._txn_markers import TxnMarker as TxnMarker
from ._txn_markers import write_txn_markers as write_txn_markers
