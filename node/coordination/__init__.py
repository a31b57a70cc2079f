"""Coordination through ZooKeeper: Kafka's classic znode layout over kazoo, for trio; and an
embedded ZooKeeper server for local clusters and tests.

``node.coordination`` imports only the stdlib, kazoo, trio, ``node.ids``, ``node.zkkit`` and
the pure ``node.security`` (whose SCRAM credentials and ACLs :class:`ZkSecurityStore` keeps) and
the pure ``node.quotas`` (whose client quotas :class:`ZkQuotaStore` keeps).
"""

from ._embedded import EmbeddedZooKeeper as EmbeddedZooKeeper
from ._embedded import check_zookeeper_jars as check_zookeeper_jars
from ._embedded import find_zookeeper_jars as find_zookeeper_jars
from ._embedded import server_status as server_status
from ._errors import BrokerIdInUse as BrokerIdInUse
from ._errors import CoordinationError as CoordinationError
from ._errors import MalformedZnode as MalformedZnode
from ._errors import ReassignmentInProgress as ReassignmentInProgress
from ._errors import StaleState as StaleState
from ._errors import TopicExists as TopicExists
from ._errors import UnknownTopic as UnknownTopic
from ._errors import ZooKeeperError as ZooKeeperError
from ._layout import BrokerRegistration as BrokerRegistration
from ._layout import PartitionState as PartitionState
from ._layout import Reassignment as Reassignment
from ._layout import TopicAssignment as TopicAssignment
from ._layout import Truncation as Truncation
from ._layout import decode_partition_state as decode_partition_state
from ._layout import encode_partition_state as encode_partition_state
from ._layout import uuid_of as uuid_of
from ._layout import validate_topic_name as validate_topic_name
from ._partition_states import StateWrites as StateWrites
from ._quota_store import QuotaStoreError as QuotaStoreError
from ._quota_store import ZkQuotaStore as ZkQuotaStore
from ._reassignment import AlterOutcome as AlterOutcome
from ._security_store import ZkSecurityStore as ZkSecurityStore
from ._session import ZkSession as ZkSession
from ._snapshot import ClusterSnapshot as ClusterSnapshot
from ._topics import NewTopic as NewTopic
from ._zk_state import ZkState as ZkState
