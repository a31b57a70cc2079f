"""The transaction coordinator's typed errors; each names the partition involved.

Inside ``node.txn`` failures are these exceptions; ``TransactionCoordinator`` turns them into Kafka
error codes at the response boundary.
"""

from __future__ import annotations


class TxnError(Exception):
    """Base of every error raised by ``node.txn``."""


class TxnStoreError(TxnError):
    """Raised by a ``TxnLogStore`` whose ``__transaction_state`` partition is not (or no longer) led here.

    The request that needed the write gets NOT_COORDINATOR: the client asks FindCoordinator again.
    """


class TxnStoreTimeout(TxnStoreError):
    """A write to ``__transaction_state`` was not durable within the write timeout (COORDINATOR_NOT_AVAILABLE)."""

    def __init__(self, partition: int, timeout_ms: int) -> None:
        super().__init__(f"__transaction_state-{partition}: the write was not durable within {timeout_ms} ms")
        self.partition = partition
        self.timeout_ms = timeout_ms


class MarkerWriteError(TxnError):
    """Markers could not be sent to a partition leader (no connection, no answer); they are sent again."""
