"""Retrying idempotent ZooKeeper reads through a connection loss (kazoo's ``KazooRetry``).

Only reads are retried: a write whose reply was lost may have happened, so the write paths
re-read to learn the outcome instead. Blocking, like the call it wraps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, TypeVarTuple, Unpack

from kazoo.retry import KazooRetry  # type: ignore[import-untyped]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

# Copied per call: a KazooRetry counts its own attempts.
_READ_RETRY = KazooRetry(max_tries=5, delay=0.05, max_delay=1.0)


def retried(fn: Callable[[Unpack[Ts]], T], *args: Unpack[Ts]) -> T:  # noqa: UP044
    """``fn(*args)``, called again after a connection loss or operation timeout (five tries in all)."""
    return _READ_RETRY.copy()(fn, *args)  # type: ignore[no-any-return]
