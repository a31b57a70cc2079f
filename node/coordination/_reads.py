"""Reading znodes: idempotent reads retried through a connection loss, and pipelined reads.

Only reads are retried (kazoo's ``KazooRetry``): a write whose reply was lost may have
happened, so the write paths re-read to learn the outcome instead. :func:`read_many` sends
every request before awaiting any answer, so reading N znodes costs one round trip.
Blocking, like the calls they make: run them in a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar, TypeVarTuple, Unpack

from kazoo.exceptions import NoNodeError  # type: ignore[import-untyped]
from kazoo.retry import KazooRetry  # type: ignore[import-untyped]

K = TypeVar("K")
T = TypeVar("T")
Ts = TypeVarTuple("Ts")

# Copied per call: a KazooRetry counts its own attempts.
_READ_RETRY = KazooRetry(max_tries=5, delay=0.05, max_delay=1.0)


def retried(fn: Callable[[Unpack[Ts]], T], *args: Unpack[Ts]) -> T:  # noqa: UP044
    """``fn(*args)``, called again after a connection loss or operation timeout (five tries in all)."""
    return _READ_RETRY.copy()(fn, *args)  # type: ignore[no-any-return]


def read_many(client: Any, paths: Iterable[tuple[K, str]]) -> list[tuple[K, bytes, Any]]:
    """``(key, data, stat)`` for each ``(key, path)`` in order, read pipelined; a znode that is
    gone by the time it is read is left out."""
    pending = [(key, client.get_async(path)) for key, path in paths]
    found = []
    for key, result in pending:
        try:
            data, stat = result.get()
        except NoNodeError:
            continue
        found.append((key, data, stat))
    return found
