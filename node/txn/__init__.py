"""The transaction coordinator: Kafka's transactions (KIP-98, with KIP-360's epoch bumps) and ``__transaction_state``.

``TransactionCoordinator`` answers InitProducerId (with a transactional id), AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions for the transactional ids whose
``__transaction_state`` partition this node leads, keeps their state in that partition in Kafka's
record format, and writes the transaction markers on the partition leaders through a
``MarkerWriter``. The partition side (transactional batches, markers, the last stable offset) is
the partitions' own.

``node.txn`` imports only the standard library, trio, ``node.protocol`` and ``node.groups`` (its
partitioning formula and record primitives).
"""

from ._config import TxnConfig as TxnConfig
from ._coordinator import MAX_EPOCH as MAX_EPOCH
from ._coordinator import InitResult as InitResult
from ._coordinator import ProducerIds as ProducerIds
from ._coordinator import TransactionCoordinator as TransactionCoordinator
from ._coordinator import TxnDescription as TxnDescription
from ._coordinator import TxnLogStore as TxnLogStore
from ._errors import MarkerWriteError as MarkerWriteError
from ._errors import TxnError as TxnError
from ._errors import TxnStoreError as TxnStoreError
from ._errors import TxnStoreTimeout as TxnStoreTimeout
from ._markers import NO_LEADER as NO_LEADER
from ._markers import MarkerWriter as MarkerWriter
from ._markers import TxnMarker as TxnMarker
from ._records import TxnLogValue as TxnLogValue
from ._records import TxnRecordError as TxnRecordError
from ._records import TxnState as TxnState
from ._records import decode_key as decode_key
from ._records import decode_value as decode_value
from ._records import encode_key as encode_key
from ._records import encode_value as encode_value
