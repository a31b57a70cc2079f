"""Reading the results of a kazoo transaction (ZooKeeper ``multi``)."""

from __future__ import annotations

from typing import Any

from kazoo.exceptions import RolledBackError, RuntimeInconsistency  # type: ignore[import-untyped]


def failure(results: list[Any]) -> tuple[int, Exception] | None:
    """The index and error of the operation that failed a transaction, or None if it committed.

    ZooKeeper reports the operations before the failed one as rolled back and those after it as
    runtime inconsistencies; neither is the cause.
    """
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(result, (RolledBackError, RuntimeInconsistency)):
            return index, result
    return None
