"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-219): entities, Kafka's precedence, sampled rates
and throttle times. Pure: no I/O, no trio; the clock is injected.

The quotas themselves live in ZooKeeper (``node.coordination``'s quota store keeps every node's
copy), the server (``node.server``) records each request here and mutes a connection that is over
its quota, and the handlers of DescribeClientQuotas / AlterClientQuotas (``node.handlers.quotas``)
read and change them. See docs/quotas.md.
"""

from ._entity import CLIENT_ID as CLIENT_ID
from ._entity import CONSUMER_BYTE_RATE as CONSUMER_BYTE_RATE
from ._entity import CONTROLLER_MUTATION_RATE as CONTROLLER_MUTATION_RATE
from ._entity import DEFAULT_NAME as DEFAULT_NAME
from ._entity import MATCH_DEFAULT as MATCH_DEFAULT
from ._entity import MATCH_EXACT as MATCH_EXACT
from ._entity import MATCH_SPECIFIED as MATCH_SPECIFIED
from ._entity import PRODUCER_BYTE_RATE as PRODUCER_BYTE_RATE
from ._entity import QUOTA_KEYS as QUOTA_KEYS
from ._entity import REQUEST_PERCENTAGE as REQUEST_PERCENTAGE
from ._entity import USER as USER
from ._entity import FilterComponent as FilterComponent
from ._entity import QuotaEntity as QuotaEntity
from ._entity import QuotaError as QuotaError
from ._entity import Quotas as Quotas
from ._entity import check_filter as check_filter
from ._entity import check_value as check_value
from ._entity import describe_entity as describe_entity
from ._entity import entity as entity
from ._entity import matches as matches
from ._entity import resolve as resolve
from ._entity import value_of as value_of
from ._entity import value_text as value_text
from ._manager import QuotaKind as QuotaKind
from ._manager import QuotaManager as QuotaManager
from ._manager import QuotaSettings as QuotaSettings
from ._manager import Usage as Usage
from ._rate import SampledRate as SampledRate
