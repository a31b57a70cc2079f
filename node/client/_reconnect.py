"""The reconnect loop of a long-running client task (the mirror's copiers): step, and after an
error start over on fresh connections after a pause."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import NoReturn

import trio

from ._connection import ClientError, NodeConnection

#: What ends in a reconnect: a Kafka error or an I/O failure. Anything else is a bug and propagates.
RECONNECT_ON = (ClientError, OSError, trio.BrokenResourceError)


async def run_reconnecting(
    step: Callable[[], Awaitable[object]],
    *,
    reset: Callable[[], Awaitable[None]],
    on_error: Callable[[Exception], None],
    backoff_s: float,
) -> NoReturn:
    """Call ``step()`` again and again until cancelled.

    After a ClientError, OSError or BrokenResourceError from ``step``: ``on_error(exc)`` (count
    it, log it), ``reset()`` (drop the connections, so the next step opens fresh ones, following
    moved leaders), then sleep ``backoff_s`` seconds. Any other exception propagates. ``reset()``
    also runs, shielded from cancellation, whenever the loop ends. Cancellable.
    """
    try:
        while True:
            try:
                await step()
            except RECONNECT_ON as exc:
                on_error(exc)
                await reset()
                await trio.sleep(backoff_s)
    finally:
        with trio.CancelScope(shield=True):
            await reset()


async def aclose_quietly(*conns: NodeConnection | None) -> None:
    """Close each connection given, ignoring errors (they were likely broken already)."""
    for conn in conns:
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.aclose()
